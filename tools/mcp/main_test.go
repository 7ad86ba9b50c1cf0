package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/firstmate/firstmate/internal/testkit/fakemcp"
	"github.com/firstmate/firstmate/tools"
	"github.com/firstmate/firstmate/tools/mcp"
	"github.com/firstmate/firstmate/tools/sandbox"
)

// The test binary is its own sandbox helper (/proc/self/exe).
func TestMain(m *testing.M) {
	sandbox.MaybeHelper()
	code := m.Run()
	if fake.dir != "" {
		os.RemoveAll(fake.dir)
	}
	os.Exit(code)
}

// fake is cmd/fakemcp, built once per test run (without the race detector:
// it runs in the sandbox as a server would ship) into a directory only its
// own mode opens to the sandbox's user, which servers get as a read-only
// path.
var fake struct {
	once      sync.Once
	dir, path string
	err       error
}

func fakeServer(t *testing.T) (bin, dir string) {
	t.Helper()
	fake.once.Do(func() {
		fake.dir, fake.err = os.MkdirTemp("", "firstmate-fakemcp-")
		if fake.err != nil {
			return
		}
		os.Chmod(fake.dir, 0o755)
		fake.path = filepath.Join(fake.dir, "fakemcp")
		cmd := exec.Command("go", "build", "-o", fake.path, "github.com/firstmate/firstmate/cmd/fakemcp")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			fake.err = fmt.Errorf("go build ./cmd/fakemcp: %v\n%s", err, out)
		}
	})
	if fake.err != nil {
		t.Fatal(fake.err)
	}
	return fake.path, fake.dir
}

// probed is the sandbox of this host, probed once; tests of stdio servers
// skip where there is none.
var probed struct {
	once sync.Once
	sb   *sandbox.Sandbox
	err  error
}

func testSandbox(t *testing.T) *sandbox.Sandbox {
	t.Helper()
	probed.once.Do(func() {
		sb := sandbox.New(sandbox.Config{})
		if _, err := sb.Probe(context.Background()); err != nil {
			probed.err = err
			return
		}
		probed.sb = sb
	})
	var u *sandbox.Unavailable
	if errors.As(probed.err, &u) {
		t.Skipf("no sandbox here: %v", probed.err)
	}
	if probed.err != nil {
		t.Fatalf("the sandbox probe failed: %v", probed.err)
	}
	return probed.sb
}

// stdioServer is the fake server on stdio, run in the sandbox.
func stdioServer(t *testing.T, name string) mcp.Server {
	bin, dir := fakeServer(t)
	return mcp.Server{Name: name, Command: []string{bin}, Paths: []string{dir}}
}

// httpServer serves the fake server over streamable HTTP on loopback; if
// token is set, requests must carry it as a bearer token.
func httpServer(t *testing.T, token string) string {
	t.Helper()
	var srv *httptest.Server
	// A crash drops every connection in the middle of the call.
	h := fakemcp.Handler(fakemcp.Options{Crash: func() { srv.CloseClientConnections() }})
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if token != "" && r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/"
}

var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}

type env struct {
	t   *testing.T
	hub *mcp.Hub
	set *tools.Set
	ws  *tools.Workspace
	sb  *sandbox.Sandbox
}

// newEnv starts a hub of the servers (and the sandbox when one is on
// stdio) and waits until each has listed its tools.
func newEnv(t *testing.T, cfg mcp.Config, servers ...mcp.Server) *env {
	t.Helper()
	e, statuses := startEnv(t, cfg, servers...)
	for _, st := range statuses {
		if !st.Started {
			t.Fatalf("%s did not start: %v", st.Name, st.Err)
		}
	}
	return e
}

// startEnv starts a hub of the servers and waits until each has tried to
// start once.
func startEnv(t *testing.T, cfg mcp.Config, servers ...mcp.Server) (*env, []mcp.Status) {
	t.Helper()
	e := &env{t: t}
	for _, s := range servers {
		if s.Stdio() && cfg.Sandbox == nil {
			e.sb = testSandbox(t)
		}
	}
	cfg.Servers = servers
	cfg.Dir = t.TempDir()
	if cfg.Sandbox == nil {
		cfg.Sandbox = func(context.Context) (*sandbox.Sandbox, error) {
			if e.sb == nil {
				return nil, errors.New("no sandbox in this test")
			}
			return e.sb, nil
		}
	}
	if e.sb != nil {
		if uid, gid := e.sb.Owner(); uid >= 0 {
			cfg.WorkspaceOptions = []tools.WorkspaceOption{tools.WithOwner(tools.Owner{UID: uid, GID: gid})}
		}
	}
	e.hub = mcp.New(cfg)
	e.hub.Start(t.Context())
	t.Cleanup(e.hub.Close)
	e.set = tools.NewSet(nil, tools.WithProvider(e.hub), tools.WithMaxResult(8<<10))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	statuses := e.hub.Statuses(ctx)
	e.ws = e.open("C1")
	return e, statuses
}

func (e *env) open(channel string) *tools.Workspace {
	var opts []tools.WorkspaceOption
	if e.sb != nil {
		if uid, gid := e.sb.Owner(); uid >= 0 {
			opts = append(opts, tools.WithOwner(tools.Owner{UID: uid, GID: gid}))
		}
	}
	ws, err := tools.OpenWorkspace(e.t.TempDir(), channel, opts...)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { ws.Close() })
	return ws
}

func (e *env) call(ws *tools.Workspace, name string, args any) (tools.Result, error) {
	e.t.Helper()
	raw, _ := json.Marshal(args)
	return e.set.Call(e.t.Context(), ws, name, raw)
}

func (e *env) must(name string, args any) tools.Result {
	e.t.Helper()
	res, err := e.call(e.ws, name, args)
	if err != nil {
		e.t.Fatalf("%s %v: %v\n%s", name, args, err, res.Text)
	}
	return res
}

func contains(t *testing.T, what, got string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("%s %q does not contain %q", what, got, w)
		}
	}
}
