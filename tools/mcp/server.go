package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/firstmate/firstmate/tools"
)

// channelIdle is how long a channel's process of a per-channel server
// lives unused.
const channelIdle = 10 * time.Minute

// codeRejected is the JSON-RPC code the SDK's HTTP transport gives a call
// it could not deliver, or whose answer it lost (jsonrpc2.ErrRejected).
const codeRejected = -32005

// ErrTimeout is wrapped by a call that did not end within its timeout.
var ErrTimeout = errors.New("timed out")

// ErrDown is wrapped by a call of a server that is not running.
var ErrDown = errors.New("not running")

// server is one configured server: its tools and its processes (or HTTP
// session).
type server struct {
	hub     *Hub
	cfg     Server
	log     *slog.Logger
	timeout time.Duration
	http    *http.Client // HTTP servers only

	mu          sync.Mutex
	tools       []tools.Tool
	unavailable map[string]string
	fingerprint string
	listed      bool                 // a listing was had
	listErr     error                // why the last attempt to list the tools failed; nil after one that worked
	tried       chan struct{}        // closed once the first start has ended, either way
	instances   map[string]*instance // by workspace directory; "" for the one of an own or HTTP server
}

func newServer(h *Hub, cfg Server) *server {
	s := &server{hub: h, cfg: cfg, log: h.log.With("mcp", cfg.Name), timeout: cfg.Timeout,
		tried: make(chan struct{}), instances: map[string]*instance{}}
	if s.timeout <= 0 {
		s.timeout = DefaultTimeout
	}
	if !cfg.Stdio() {
		s.http = s.httpClient()
	}
	return s
}

// perChannel reports whether a process runs per channel workspace.
func (s *server) perChannel() bool { return s.cfg.Stdio() && s.cfg.Workspace == WorkspaceChannel }

// start starts the server's first process (or session) to learn its tools:
// for a per-channel server, one that ends once it has listed them.
func (s *server) start() {
	if s.perChannel() {
		in := newInstance(s, "", true, 0)
		s.hub.run(in.run)
		return
	}
	s.mu.Lock()
	in := newInstance(s, "", false, 0)
	s.instances[""] = in
	s.mu.Unlock()
	s.hub.run(in.run)
}

// listing returns the tools and the unavailable ones, for the hub.
func (s *server) listing() ([]tools.Tool, map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tools, s.unavailable
}

// setListing records what a process listed; the hub is told when it
// differs from what was offered.
func (s *server) setListing(list []*sdk.Tool) {
	fp, _ := json.Marshal(list)
	ts, un := convert(s, list)
	s.mu.Lock()
	changed := string(fp) != s.fingerprint
	s.tools, s.unavailable, s.fingerprint = ts, un, string(fp)
	s.listed, s.listErr = true, nil
	s.mu.Unlock()
	if changed {
		s.log.Info("MCP server tools listed", "tools", len(ts), "unavailable", len(un))
		for name, why := range un {
			s.log.Warn("MCP tool not offered", "tool", name, "why", why)
		}
		s.hub.update()
	}
}

// startEnded records the end of an attempt to start: err is why it
// failed, nil if the tools were listed.
func (s *server) startEnded(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.listErr = err
	}
	select {
	case <-s.tried:
	default:
		close(s.tried)
	}
}

// acquire returns the instance a call in ws uses, counted as in use until
// release is called.
func (s *server) acquire(ws *tools.Workspace) (in *instance, release func(), err error) {
	key := ""
	if s.perChannel() {
		if ws == nil {
			return nil, nil, fmt.Errorf("the MCP server %s runs in the channel's workspace, and this call has none", s.cfg.Name)
		}
		key = ws.Dir()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	in = s.instances[key]
	if in == nil || in.retired {
		if !s.perChannel() {
			return nil, nil, fmt.Errorf("the MCP server %s is %w: firstmate is stopping", s.cfg.Name, ErrDown)
		}
		in = newInstance(s, key, false, channelIdle)
		if !s.hub.run(in.run) {
			return nil, nil, fmt.Errorf("the MCP server %s is %w: firstmate is stopping", s.cfg.Name, ErrDown)
		}
		s.instances[key] = in
	}
	in.inflight++
	in.lastUsed = time.Now()
	return in, func() {
		s.mu.Lock()
		in.inflight--
		in.lastUsed = time.Now()
		s.mu.Unlock()
	}, nil
}

// retireIfIdle removes in from the instances if no call has used it for
// its idle time, and reports whether it did; else it returns when to ask
// again.
func (s *server) retireIfIdle(in *instance) (bool, time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if in.inflight > 0 {
		return false, in.idle
	}
	if left := in.idle - time.Since(in.lastUsed); left > 0 {
		return false, left
	}
	in.retired = true
	if s.instances[in.dir] == in {
		delete(s.instances, in.dir)
	}
	return true, 0
}

// call runs one tool call, within the server's timeout.
func (s *server) call(ctx context.Context, ws *tools.Workspace, t *remoteTool, args map[string]any) (tools.Result, error) {
	cctx, cancel := context.WithTimeoutCause(ctx, s.timeout, ErrTimeout)
	defer cancel()
	in, release, err := s.acquire(ws)
	if err != nil {
		return tools.Result{Summary: s.cfg.Name + " is not running"}, err
	}
	defer release()
	c, err := in.connection(cctx)
	if err != nil {
		if ctx.Err() == nil && errors.Is(context.Cause(cctx), ErrTimeout) && !errors.Is(err, ErrDown) {
			err = fmt.Errorf("the MCP server %s did not start within %s, so %s was not run (%w)", s.cfg.Name, s.timeout, t.name, ErrTimeout)
		}
		return tools.Result{Summary: s.cfg.Name + " is not running"}, err
	}
	res, err := c.sess.CallTool(cctx, &sdk.CallToolParams{Name: t.remote, Arguments: args})
	if err != nil {
		err = s.callError(ctx, cctx, c, t, err)
		var summary string
		switch {
		case errors.Is(err, ErrTimeout):
			summary = "timed out after " + s.timeout.String()
		case errors.Is(err, ErrDown):
			summary = s.cfg.Name + " stopped during the call"
		}
		return tools.Result{Summary: summary}, err
	}
	return s.result(ws, t, res)
}

// callError says why a call failed: the turn ended, it timed out, the
// server died during it, or what the server answered.
func (s *server) callError(ctx, cctx context.Context, c *conn, t *remoteTool, err error) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	if errors.Is(context.Cause(cctx), ErrTimeout) {
		return fmt.Errorf("%s did not answer within %s and was cancelled; the server may still be working on it (%w)", t.name, s.timeout, ErrTimeout)
	}
	var wire *jsonrpc.Error
	if errors.As(err, &wire) && wire.Code != codeRejected {
		return fmt.Errorf("the MCP server %s answered the call with an error: %s", s.cfg.Name, s.hub.scrub(wire.Message))
	}
	if wire != nil { // the transport's own: the request did not get through
		return fmt.Errorf("the call to the MCP server %s failed on the way: %s", s.cfg.Name, s.hub.scrub(err.Error()))
	}
	// A broken connection: wait a moment for how it ended (the exit
	// status of a process) to be known.
	select {
	case <-c.done:
		return fmt.Errorf("the MCP server %s stopped during the call (%s), so %s may not have finished; it is restarted for the next call (%w)",
			s.cfg.Name, s.hub.scrub(c.cause.Error()), t.name, ErrDown)
	case <-time.After(2 * time.Second):
	}
	return fmt.Errorf("the call to the MCP server %s failed: %s", s.cfg.Name, s.hub.scrub(err.Error()))
}
