package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/firstmate/firstmate/internal/redact"
	"github.com/firstmate/firstmate/tools"
	"github.com/firstmate/firstmate/tools/sandbox"
	"github.com/firstmate/firstmate/tools/web"
)

// implementation is how firstmate introduces itself to servers.
var implementation = &sdk.Implementation{Name: "firstmate", Version: "1"}

// conn is one live connection to a server: a session, and for stdio the
// process.
type conn struct {
	sess   *sdk.ClientSession
	proc   *sandbox.Process // stdio only
	stdin  io.Closer        // stdio only
	stderr *tail            // stdio only
	// done is closed when the connection has ended; cause then says how.
	done  chan struct{}
	cause error
	once  sync.Once
}

// watch waits, on a goroutine of its own, for the connection to end, then
// records how. The goroutine ends with the connection, which close ends.
func (c *conn) watch(describe func() error) {
	go func() {
		c.sess.Wait()
		c.cause = describe()
		close(c.done)
	}()
}

// close ends the connection and waits until it has ended: a process gets
// EOF on its stdin and a moment to exit before it is killed.
func (c *conn) close() {
	c.once.Do(func() {
		if c.proc != nil {
			c.stdin.Close()
			t := time.NewTimer(2 * time.Second)
			select {
			case <-c.done:
			case <-t.C:
				c.proc.Kill()
			}
			t.Stop()
		}
		c.sess.Close()
		<-c.done
	})
}

func (in *instance) client() *sdk.Client {
	return sdk.NewClient(implementation, &sdk.ClientOptions{
		Logger:                 in.srv.log,
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) { in.toolsChanged() },
	})
}

// startStdio starts the server's command in the sandbox, in its workspace,
// and connects to it. The process lives until ctx ends or close; sctx
// bounds the start.
func (in *instance) startStdio(ctx, sctx context.Context) (*conn, error) {
	s := in.srv
	sb, err := s.hub.cfg.Sandbox(sctx)
	if err != nil {
		if sctx.Err() != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %w", errNoSandbox, err)
	}
	dir := in.dir
	if dir == "" {
		ws, err := tools.OpenWorkspace(s.hub.cfg.Dir, s.cfg.Name, s.hub.cfg.WorkspaceOptions...)
		if err != nil {
			return nil, fmt.Errorf("its workspace: %w", err)
		}
		dir = ws.Dir()
		ws.Close()
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	stderr := &tail{max: 4 << 10}
	env := make([]string, 0, len(s.cfg.Env))
	for _, k := range slices.Sorted(maps.Keys(s.cfg.Env)) {
		env = append(env, k+"="+s.cfg.Env[k])
	}
	proc, err := sb.Start(ctx, sandbox.Command{Dir: dir, Script: script(s.cfg.Command), Stdin: inR, Stderr: stderr,
		Env: env, Paths: s.cfg.Paths, Daemon: true}, outW)
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, err
	}
	c := &conn{proc: proc, stdin: inW, stderr: stderr, done: make(chan struct{})}
	exited := make(chan struct{})
	var res sandbox.Result
	var werr error
	go func() { // ends when the process does (close kills it)
		res, werr = proc.Wait()
		close(exited)
	}()
	describe := func() error {
		select {
		case <-exited:
		case <-time.After(2 * time.Second):
			proc.Kill()
			<-exited
		}
		return exitCause(res, werr, stderr.lastLine())
	}
	sess, err := in.client().Connect(sctx, &sdk.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		inW.Close()
		outR.Close()
		select {
		case <-exited:
		case <-time.After(time.Second):
			proc.Kill()
			<-exited
		}
		if sctx.Err() != nil && ctx.Err() == nil {
			return nil, fmt.Errorf("it did not answer within %s (%w)", max(startTimeout, s.timeout), ErrTimeout)
		}
		return nil, fmt.Errorf("it ended before it answered (%v)", exitCause(res, werr, stderr.lastLine()))
	}
	c.sess = sess
	c.watch(describe)
	return c, nil
}

// exitCause describes how a server's process ended.
func exitCause(res sandbox.Result, err error, lastErr string) error {
	var msg string
	switch {
	case err != nil:
		msg = err.Error()
	case res.Signal != "":
		msg = "killed by " + res.Signal
	default:
		msg = "exit code " + strconv.Itoa(res.ExitCode)
	}
	if lastErr != "" {
		msg += `; its last error output: "` + lastErr + `"`
	}
	return errors.New(msg)
}

// script runs argv from sh -c, each word quoted.
func script(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return "exec " + strings.Join(q, " ")
}

// startHTTP connects to the server's endpoint.
func (in *instance) startHTTP(sctx context.Context) (*conn, error) {
	s := in.srv
	t := &sdk.StreamableClientTransport{Endpoint: s.cfg.URL, HTTPClient: s.http}
	sess, err := in.client().Connect(sctx, t, nil)
	if err != nil {
		msg := s.hub.scrub(err.Error())
		if errors.Is(err, web.ErrRefused) {
			msg += "; an intranet server's network must be listed in web.fetch.allow_networks"
		}
		return nil, fmt.Errorf("connecting to %s failed: %s", redact.URL(s.cfg.URL), msg)
	}
	c := &conn{sess: sess, done: make(chan struct{})}
	c.watch(func() error { return errors.New("the connection ended") })
	return c, nil
}

// httpClient reaches the server through fetch's guard, on the URL's port,
// with the configured headers.
func (s *server) httpClient() *http.Client {
	var ports []uint16
	if u, err := url.Parse(s.cfg.URL); err == nil {
		p := u.Port()
		if p == "" {
			p = map[string]string{"http": "80", "https": "443"}[u.Scheme]
		}
		if n, err := strconv.ParseUint(p, 10, 16); err == nil {
			ports = []uint16{uint16(n)}
		}
	}
	c := web.GuardedClient(s.hub.cfg.AllowNetworks, ports)
	if len(s.cfg.Headers) > 0 {
		c.Transport = &headerTransport{base: c.Transport, headers: s.cfg.Headers}
	}
	return c
}

// headerTransport adds the configured headers to every request.
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
}

func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	for k, v := range t.headers {
		req.Header.Set(k, v)
	}
	return t.base.RoundTrip(req)
}

// listTools lists every tool of the server, page by page.
func listTools(ctx context.Context, c *conn) ([]*sdk.Tool, error) {
	var list []*sdk.Tool
	for t, err := range c.sess.Tools(ctx, nil) {
		if err != nil {
			return nil, err
		}
		list = append(list, t)
	}
	slices.SortFunc(list, func(a, b *sdk.Tool) int { return strings.Compare(a.Name, b.Name) })
	return list, nil
}

// tail keeps the last bytes a process wrote to stderr.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

// lastLine is the last line of error output, cut to 300 bytes.
func (t *tail) lastLine() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := strings.TrimSpace(string(t.buf))
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return tools.Cap(s, 300)
}
