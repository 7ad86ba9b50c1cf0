package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/firstmate/firstmate/internal/testkit/fakemcp"
	"github.com/firstmate/firstmate/tools"
	"github.com/firstmate/firstmate/tools/mcp"
	"github.com/firstmate/firstmate/tools/sandbox"
)

// A stdio server runs in the sandbox, in its own workspace, with only the
// variables it is given; its tools are listed as SERVER__TOOL, sorted, and
// called through the set.
func TestStdioListAndCall(t *testing.T) {
	t.Setenv("FIRSTMATE_TEST_HOST_ONLY", "host value")
	s := stdioServer(t, "notes")
	s.Env = map[string]string{"NOTES_TOKEN": "tok-123"}
	e := newEnv(t, mcp.Config{}, s)
	names := e.set.Names()
	for _, want := range []string{"notes__add_tool", "notes__crash", "notes__echo", "notes__env", "notes__read_file", "notes__whereami"} {
		if !slices.Contains(names, want) {
			t.Errorf("%s is not offered: %v", want, names)
		}
	}
	if !slices.IsSorted(names) {
		t.Errorf("not sorted: %v", names)
	}
	res := e.must("notes__echo", map[string]any{"text": "hello"})
	if res.Text != "hello" || res.Summary != "hello" {
		t.Errorf("echo: %+v", res)
	}
	contains(t, "whereami", e.must("notes__whereami", nil).Text, "dir=/workspace", "host=sandbox")
	if got := e.must("notes__env", map[string]any{"name": "NOTES_TOKEN"}).Text; got != "tok-123" {
		t.Errorf("NOTES_TOKEN = %q", got)
	}
	if got := e.must("notes__env", map[string]any{"name": "FIRSTMATE_TEST_HOST_ONLY"}).Text; got != "(unset)" {
		t.Errorf("the host's environment reached the server: %q", got)
	}
	// The server wrote into a workspace of its own, not the channel's.
	e.must("notes__write", map[string]any{"name": "own.txt", "text": "x"})
	if _, err := os.Stat(filepath.Join(e.ws.Dir(), "own.txt")); err == nil {
		t.Error("an own-workspace server wrote into the channel's workspace")
	}
}

// An HTTP server is reached through the guard (loopback allowed here),
// with the configured headers.
func TestHTTPListAndCall(t *testing.T) {
	url := httpServer(t, "secret-token")
	e := newEnv(t, mcp.Config{AllowNetworks: loopback},
		mcp.Server{Name: "wiki", URL: url, Headers: map[string]string{"Authorization": "Bearer secret-token"}})
	if !slices.Contains(e.set.Names(), "wiki__echo") {
		t.Fatalf("tools: %v", e.set.Names())
	}
	if res := e.must("wiki__echo", map[string]any{"text": "over http"}); res.Text != "over http" {
		t.Errorf("echo: %+v", res)
	}
	res, err := e.call(e.ws, "wiki__fail", nil)
	if !mcp.IsToolError(err) {
		t.Fatalf("fail: %v", err)
	}
	contains(t, "fail", res.Text, "error: wiki__fail failed: the thing failed: no such note")
}

// An HTTP server on loopback is refused unless the operator allowed the
// network, with a message that says how.
func TestHTTPRefusedOnLoopback(t *testing.T) {
	url := httpServer(t, "")
	e, statuses := startEnv(t, mcp.Config{}, mcp.Server{Name: "wiki", URL: url})
	st := statuses[0]
	if st.Started || st.Err == nil {
		t.Fatalf("started on loopback: %+v", st)
	}
	contains(t, "error", st.Err.Error(), "127.0.0.1 is a loopback address", "web.fetch.allow_networks")
	if len(e.set.Names()) != 0 {
		t.Errorf("offered %v", e.set.Names())
	}
}

// Names are sanitized; names that collide are refused, with why.
func TestNames(t *testing.T) {
	for _, c := range []struct{ server, tool, want string }{
		{"notes", "search", "notes__search"},
		{"notes", "readFile", "notes__read_file"},
		{"notes", "Get.Page", "notes__get_page"},
		{"notes", "HTTPGet", "notes__httpget"},
		{"notes", "a b/c:d", "notes__a_b_c_d"},
		{"notes", "naïve", "notes__na_ve"},
		{"notes", "v2-list", "notes__v2-list"},
		{"wiki", strings.Repeat("long", 20), "wiki__" + strings.Repeat("long", 12) + "l_"},
	} {
		got := mcp.ToolName(c.server, c.tool)
		if !strings.HasPrefix(got, c.want) || len(got) > mcp.MaxName {
			t.Errorf("ToolName(%q, %q) = %q, want %q", c.server, c.tool, got, c.want)
		}
	}
	if a, b := mcp.ToolName("w", strings.Repeat("x", 80)+"a"), mcp.ToolName("w", strings.Repeat("x", 80)+"b"); a == b {
		t.Errorf("two long names are one: %q", a)
	}

	e := newEnv(t, mcp.Config{AllowNetworks: loopback}, mcp.Server{Name: "wiki", URL: httpServer(t, "")})
	if res := e.must("wiki__read_file", nil); res.Text != "readFile" {
		t.Errorf("wiki__read_file called %q", res.Text)
	}
	why, ok := e.set.Unavailable("wiki__get_page")
	if !ok || slices.Contains(e.set.Names(), "wiki__get_page") {
		t.Fatalf("colliding names offered: %v", e.set.Names())
	}
	contains(t, "why", why, `"Get.Page" and "get_page"`, "become wiki__get_page")
	_, err := e.call(e.ws, "wiki__get_page", nil)
	if !errors.Is(err, tools.ErrUnavailable) {
		t.Errorf("call: %v", err)
	}
	if !slices.Contains(e.set.Known(), "wiki__get_page") {
		t.Error("policy cannot name an unavailable tool")
	}
}

// The input schema goes to the model as the server wrote it; an invalid
// one makes the tool unavailable, with why; arguments are checked against
// it before the server is asked.
func TestSchema(t *testing.T) {
	e := newEnv(t, mcp.Config{AllowNetworks: loopback}, mcp.Server{Name: "wiki", URL: httpServer(t, "")})
	echo, ok := e.set.Get("wiki__echo")
	if !ok {
		t.Fatal("no echo")
	}
	var schema struct {
		Type       string                     `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	}
	if err := json.Unmarshal(echo.Schema(), &schema); err != nil {
		t.Fatal(err)
	}
	if schema.Type != "object" || !slices.Equal(schema.Required, []string{"text"}) || !strings.Contains(string(schema.Properties["text"]), `"string"`) {
		t.Errorf("schema %s", echo.Schema())
	}
	if !slices.Equal(echo.Params(), []string{"text"}) || echo.Description() != "Echo the text back." {
		t.Errorf("params %v, description %q", echo.Params(), echo.Description())
	}
	why, ok := e.set.Unavailable("wiki__bad_schema")
	if !ok {
		t.Fatalf("bad_schema is offered")
	}
	contains(t, "why", why, "input schema", `type "frobnicate" is not a JSON type`)
	res, err := e.call(e.ws, "wiki__echo", map[string]any{"text": 3})
	var ae *tools.ArgsError
	if !errors.As(err, &ae) {
		t.Fatalf("a bad argument: %v", err)
	}
	contains(t, "result", res.Text, "invalid arguments for wiki__echo", "The arguments schema is")
}

// A server that dies during a call: the call says so clearly, and the
// server is restarted for the next one.
func TestCrashRestarts(t *testing.T) {
	e := newEnv(t, mcp.Config{}, stdioServer(t, "notes"))
	began := time.Now()
	res, err := e.call(e.ws, "notes__crash", nil)
	if !errors.Is(err, mcp.ErrDown) {
		t.Fatalf("crash: %v\n%s", err, res.Text)
	}
	contains(t, "result", res.Text, "the MCP server notes stopped during the call", "exit code 3", "crashing as asked", "restarted for the next call")
	if took := time.Since(began); took > 10*time.Second {
		t.Errorf("the crash took %s to report", took)
	}
	if res := e.must("notes__echo", map[string]any{"text": "back"}); res.Text != "back" {
		t.Errorf("after the restart: %+v", res)
	}
}

// A dropped HTTP connection fails the call clearly; the next call works.
func TestHTTPCrash(t *testing.T) {
	e := newEnv(t, mcp.Config{AllowNetworks: loopback}, mcp.Server{Name: "wiki", URL: httpServer(t, "")})
	res, err := e.call(e.ws, "wiki__crash", nil)
	if err == nil {
		t.Fatalf("crash: %+v", res)
	}
	contains(t, "result", res.Text, "the call to the MCP server wiki failed on the way")
	if res := e.must("wiki__echo", map[string]any{"text": "still"}); res.Text != "still" {
		t.Errorf("after: %+v", res)
	}
}

// A slow call times out with a clear result, and does not hold the server.
func TestSlowCallTimesOut(t *testing.T) {
	s := stdioServer(t, "notes")
	s.Timeout = 500 * time.Millisecond
	e := newEnv(t, mcp.Config{}, s)
	began := time.Now()
	res, err := e.call(e.ws, "notes__sleep", map[string]any{"seconds": 30})
	if !errors.Is(err, mcp.ErrTimeout) {
		t.Fatalf("sleep: %v", err)
	}
	if took := time.Since(began); took > 5*time.Second {
		t.Errorf("the timeout took %s", took)
	}
	contains(t, "result", res.Text, "notes__sleep did not answer within 500ms and was cancelled")
	if res := e.must("notes__echo", map[string]any{"text": "quick"}); res.Text != "quick" {
		t.Errorf("after: %+v", res)
	}
}

// Huge output is capped by the set, with a note.
func TestHugeOutputCapped(t *testing.T) {
	e := newEnv(t, mcp.Config{}, stdioServer(t, "notes"))
	res := e.must("notes__huge", map[string]any{"bytes": 4 << 20})
	if len(res.Text) > 9<<10 {
		t.Errorf("%d bytes reached the model", len(res.Text))
	}
	contains(t, "result", res.Text, "[cut: ")
}

// notifications/tools/list_changed refreshes the list: a new set is
// offered, with the new tool.
func TestListChanged(t *testing.T) {
	e := newEnv(t, mcp.Config{}, stdioServer(t, "notes"))
	before := e.set.Current()
	if before != e.set.Current() {
		t.Fatal("the set changed without a change")
	}
	changed := e.hub.Changed()
	e.must("notes__add_tool", map[string]any{"name": "fresh"})
	select {
	case <-changed:
	case <-time.After(30 * time.Second):
		t.Fatal("the list did not change")
	}
	after := e.set.Current()
	if after == before || !slices.Contains(after.Names(), "notes__fresh") || slices.Contains(before.Names(), "notes__fresh") {
		t.Fatalf("before %v, after %v", before.Names(), after.Names())
	}
	if res := e.must("notes__fresh", map[string]any{"text": "new"}); res.Text != "new" {
		t.Errorf("fresh: %+v", res)
	}
}

// Images and binary resources are written into the workspace and named;
// links and text resources are described.
func TestImagesAndResources(t *testing.T) {
	e := newEnv(t, mcp.Config{AllowNetworks: loopback}, mcp.Server{Name: "wiki", URL: httpServer(t, "")})
	res := e.must("wiki__image", nil)
	contains(t, "image", res.Text, "a pixel:\n[image image/png, 67 B; saved in the workspace as mcp/wiki/image-", "(send_file can send it)")
	name := res.Text[strings.Index(res.Text, "mcp/wiki/"):]
	name = name[:strings.Index(name, " ")]
	data, err := os.ReadFile(filepath.Join(e.ws.Dir(), name))
	if err != nil || string(data) != string(fakemcp.PNG) {
		t.Errorf("the image in the workspace: %v", err)
	}
	if len(res.Files) != 0 {
		t.Errorf("attached %v without send_file", res.Files)
	}
	res = e.must("wiki__resource", nil)
	contains(t, "resource", res.Text,
		"[resource file:///notes/a.md, text/markdown]\n# A note",
		"[resource file:///notes/b.bin: application/octet-stream, 4 B; saved in the workspace as mcp/wiki/resource-",
		"[resource link c.pdf: https://example.com/c.pdf, application/pdf, 1.2 KiB]")
}

// A per-channel server runs one process in each channel's workspace,
// started at the channel's first call.
func TestChannelWorkspace(t *testing.T) {
	s := stdioServer(t, "notes")
	s.Workspace = mcp.WorkspaceChannel
	e := newEnv(t, mcp.Config{}, s)
	if !slices.Contains(e.set.Names(), "notes__write") {
		t.Fatalf("tools: %v", e.set.Names())
	}
	other := e.open("C2")
	for _, ws := range []*tools.Workspace{e.ws, other} {
		raw, _ := json.Marshal(map[string]any{"name": "note.txt", "text": ws.Dir()})
		if res, err := e.set.Call(t.Context(), ws, "notes__write", raw); err != nil {
			t.Fatalf("write: %v\n%s", err, res.Text)
		}
	}
	for _, ws := range []*tools.Workspace{e.ws, other} {
		data, err := os.ReadFile(filepath.Join(ws.Dir(), "note.txt"))
		if err != nil || string(data) != ws.Dir() {
			t.Errorf("%s: %q, %v", ws.Dir(), data, err)
		}
	}
}

// A server whose command fails says why, and offers nothing.
func TestServerDoesNotStart(t *testing.T) {
	_, dir := fakeServer(t)
	e, statuses := startEnv(t, mcp.Config{}, mcp.Server{Name: "broken", Command: []string{"/nonexistent/server"}, Paths: []string{dir}})
	st := statuses[0]
	if st.Started || st.Err == nil {
		t.Fatalf("%+v", st)
	}
	contains(t, "error", st.Err.Error(), "exit code 127", "/nonexistent/server")
	if len(e.set.Names()) != 0 {
		t.Errorf("offered %v", e.set.Names())
	}
}

// A server that dies and cannot start again makes its tools fail with
// why, soon, never holding the turn past the call's timeout; when it can
// start again, it does.
func TestDeadServerFailsFast(t *testing.T) {
	bin, dir := fakeServer(t)
	ctl := t.TempDir()
	os.Chmod(ctl, 0o755)
	start := filepath.Join(ctl, "start.sh")
	broken := filepath.Join(ctl, "broken")
	os.WriteFile(start, []byte("if [ -e "+broken+" ]; then echo 'cannot open the notes database' >&2; exit 1; fi\nexec "+bin+"\n"), 0o755)
	e := newEnv(t, mcp.Config{}, mcp.Server{Name: "notes", Command: []string{"/bin/sh", start}, Paths: []string{dir, ctl}, Timeout: time.Second})
	os.WriteFile(broken, nil, 0o644)
	if _, err := e.call(e.ws, "notes__crash", nil); !errors.Is(err, mcp.ErrDown) {
		t.Fatalf("crash: %v", err)
	}
	fast := false
	for range 10 {
		began := time.Now()
		res, err := e.call(e.ws, "notes__echo", map[string]any{"text": "x"})
		took := time.Since(began)
		if !errors.Is(err, mcp.ErrDown) {
			t.Fatalf("echo of a dead server: %v", err)
		}
		if took > 2*time.Second {
			t.Fatalf("the call took %s", took)
		}
		contains(t, "result", res.Text, "the MCP server notes is not running", "exit code 1", "cannot open the notes database")
		if took < 200*time.Millisecond && strings.Contains(res.Text, "it is restarted in") {
			fast = true
			break
		}
	}
	if !fast {
		t.Error("no call failed at once while the restart was far off")
	}
	os.Remove(broken)
	deadline := time.Now().Add(time.Minute)
	for {
		res, err := e.call(e.ws, "notes__echo", map[string]any{"text": "back"})
		if err == nil && res.Text == "back" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not restarted: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// An HTTP server that restarts forgets the session: the next calls work
// again on a new one.
func TestHTTPServerRestarts(t *testing.T) {
	var mu sync.Mutex
	h := fakemcp.Handler(fakemcp.Options{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		cur := h
		mu.Unlock()
		cur.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	e := newEnv(t, mcp.Config{AllowNetworks: loopback}, mcp.Server{Name: "wiki", URL: srv.URL + "/"})
	e.must("wiki__echo", map[string]any{"text": "one"})
	mu.Lock()
	h = fakemcp.Handler(fakemcp.Options{})
	mu.Unlock()
	srv.CloseClientConnections()
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := e.call(e.ws, "wiki__echo", map[string]any{"text": "two"})
		if err == nil && res.Text == "two" {
			break
		}
		t.Logf("after the restart: %v", err)
		if time.Now().After(deadline) {
			t.Fatalf("no new session: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Close ends the servers' processes.
func TestCloseEndsProcesses(t *testing.T) {
	e := newEnv(t, mcp.Config{}, stdioServer(t, "notes"))
	e.must("notes__echo", map[string]any{"text": "x"})
	bin, _ := fakeServer(t)
	if len(processesOf(bin)) == 0 {
		t.Fatal("the server's process is not found")
	}
	e.hub.Close()
	deadline := time.Now().Add(10 * time.Second)
	for len(processesOf(bin)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("processes left: %v", processesOf(bin))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := e.call(e.ws, "notes__echo", map[string]any{"text": "x"}); !errors.Is(err, mcp.ErrDown) {
		t.Errorf("a call after Close: %v", err)
	}
}

// processesOf lists the processes running bin.
func processesOf(bin string) []string {
	var out []string
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		cmdline, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err == nil && strings.HasPrefix(string(cmdline), bin+"\x00") {
			out = append(out, d.Name())
		}
	}
	return out
}

// Without a sandbox, stdio servers do not run, and say why.
func TestNoSandbox(t *testing.T) {
	why := errors.New("user namespaces are disabled")
	cfg := mcp.Config{Sandbox: func(context.Context) (*sandbox.Sandbox, error) { return nil, why }}
	_, statuses := startEnv(t, cfg, mcp.Server{Name: "notes", Command: []string{"/opt/notes"}})
	if st := statuses[0]; st.Started || st.Err == nil || !strings.Contains(st.Err.Error(), "stdio servers run in the sandbox, which is unavailable: user namespaces are disabled") {
		t.Fatalf("%+v", st)
	}
}
