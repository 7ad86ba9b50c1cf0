// Package mcp offers the tools of MCP (Model Context Protocol) servers
// that the operator configured, as firstmate tools: a server's tool "search"
// is the tool "SERVER__search", in the policy group "mcp:SERVER".
//
// A server is a command on stdio, which runs in the same sandbox as the
// shell (in a workspace of its own, or one process per channel workspace),
// or a streamable-HTTP endpoint, reached through the same guard as fetch.
// The [Hub] is a [tools.Provider]: each server is started once in the
// background when the hub starts, to learn its tools; the list is kept,
// and refreshed when the server says it changed. A server that dies is
// restarted with backoff; its tools stay offered and, while it is down or
// slow, fail with a result that says so, never holding a turn longer than
// the call's timeout.
//
// Until a server has listed its tools, they are not offered. So that a
// turn that starts right after boot still sees them, the hub is a
// [tools.StartingProvider]: a turn's set waits until every server has
// listed its tools, or failed to start once, for at most
// [Config.StartWait] from when they could start; after that nothing waits
// for them again (a server that failed offers no tools until one of its
// restarts lists them). /readyz says the same through [Hub.Ready].
package mcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/firstmate/firstmate/tools"
	"github.com/firstmate/firstmate/tools/sandbox"
)

// DefaultTimeout bounds one tool call when the server's configuration does
// not say.
const DefaultTimeout = 60 * time.Second

// DefaultStartWait is how long turns wait for servers that have not
// listed their tools yet, when the configuration does not say: a
// few seconds, which a server that starts well needs (a process in the
// sandbox, or an HTTP session, and one tools/list).
const DefaultStartWait = 5 * time.Second

// Workspace says where a stdio server's process runs.
type Workspace string

const (
	// WorkspaceOwn runs one process, in a workspace of the server's own.
	WorkspaceOwn Workspace = "own"
	// WorkspaceChannel runs one process per channel, in the channel's
	// workspace (the one the shell and the file tools use), started at the
	// channel's first call and stopped when unused for a while.
	WorkspaceChannel Workspace = "channel"
)

// Server is one configured MCP server: Command for stdio, URL for
// streamable HTTP.
type Server struct {
	// Name is the prefix of its tools' names and its policy group's:
	// lower-case letters, digits, "-" and single "_" (config checks it).
	Name string

	// Command is the server's argv, run in the sandbox with only PATH,
	// HOME, LANG and Env in its environment.
	Command []string
	// Paths are host files and directories the server reads, mounted
	// read-only in the sandbox at the same paths.
	Paths []string
	// Env are variables given to the server.
	Env map[string]string
	// Workspace is own (the default) or channel.
	Workspace Workspace

	// URL is the endpoint of a streamable-HTTP server.
	URL string
	// Headers are sent with every request (a token); their values are
	// secrets.
	Headers map[string]string

	// Timeout bounds one call; 0 is DefaultTimeout.
	Timeout time.Duration
}

// Stdio reports whether the server is a command (rather than a URL).
func (s Server) Stdio() bool { return len(s.Command) > 0 }

// Config configures a Hub.
type Config struct {
	Servers []Server
	// Sandbox returns the sandbox stdio servers run in, waiting for the
	// host's probe if it still runs, or why there is none.
	Sandbox func(ctx context.Context) (*sandbox.Sandbox, error)
	// Dir holds the own workspaces of stdio servers, one directory each.
	Dir string
	// WorkspaceOptions open those workspaces (the owner commands run as).
	WorkspaceOptions []tools.WorkspaceOption
	// AllowNetworks are the internal networks HTTP servers may be on, as
	// for fetch (web.fetch.allow_networks).
	AllowNetworks []netip.Prefix
	// Secrets are scrubbed from what is logged and from error messages
	// (the header values are added to them).
	Secrets []string
	Logger  *slog.Logger
	// StartWait is how long a turn waits, at most, for the servers that
	// have not listed their tools yet, counted from Start, or for stdio
	// servers from the end of the sandbox probe (see [Hub.Starting]); 0
	// is DefaultStartWait.
	StartWait time.Duration
}

// Hub runs the configured servers and offers their tools. It is a
// [tools.Provider] (a [tools.UnavailableProvider] and a
// [tools.StartingProvider]).
type Hub struct {
	cfg     Config
	log     *slog.Logger
	redact  *strings.Replacer
	servers []*server // sorted by name

	updating    sync.Mutex // one update at a time, so that the last one wins
	mu          sync.Mutex
	tools       []tools.Tool
	unavailable map[string]tools.Missing
	changed     chan struct{}

	// started is set by Start; settled is closed once every server has
	// ended its first start (listed its tools, or failed), or StartWait
	// has passed (see settle), or the hub is closed.
	started atomic.Bool
	settled chan struct{}

	// ctx is the servers' lifetime: made by Start, cancelled by Close,
	// which waits for every goroutine (wg) to end.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

var _ tools.StartingProvider = (*Hub)(nil)
var _ tools.UnavailableProvider = (*Hub)(nil)

// New returns a hub for cfg's servers; Start starts them.
func New(cfg Config) *Hub {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.StartWait <= 0 {
		cfg.StartWait = DefaultStartWait
	}
	h := &Hub{cfg: cfg, log: log, changed: make(chan struct{}), unavailable: map[string]tools.Missing{}, settled: make(chan struct{})}
	secrets := slices.Clone(cfg.Secrets)
	for _, s := range cfg.Servers {
		for _, v := range s.Headers {
			secrets = append(secrets, v)
		}
	}
	var pairs []string
	slices.SortFunc(secrets, func(a, b string) int { return len(b) - len(a) })
	for _, v := range secrets {
		if len(v) >= 4 {
			pairs = append(pairs, v, "[redacted]")
		}
	}
	h.redact = strings.NewReplacer(pairs...)
	for _, s := range cfg.Servers {
		h.servers = append(h.servers, newServer(h, s))
	}
	slices.SortFunc(h.servers, func(a, b *server) int { return strings.Compare(a.cfg.Name, b.cfg.Name) })
	return h
}

// Start starts every server in the background, to learn its tools. Close
// stops them. Both do nothing on a nil Hub.
func (h *Hub) Start(ctx context.Context) {
	if h == nil {
		return
	}
	h.mu.Lock()
	if h.ctx != nil {
		h.mu.Unlock()
		return
	}
	h.ctx, h.cancel = context.WithCancel(ctx)
	hctx := h.ctx
	h.wg.Go(func() { h.settle(hctx) })
	h.started.Store(true)
	h.mu.Unlock()
	for _, s := range h.servers {
		s.start()
	}
}

// settle closes settled once every server's first start has ended, or
// StartWait has passed since they could start, or ctx ends. Stdio servers
// start once the host's sandbox probe has ended (tens of milliseconds,
// more on a busy host), so with one configured the wait counts from then.
func (h *Hub) settle(ctx context.Context) {
	defer close(h.settled)
	if h.cfg.Sandbox != nil && slices.ContainsFunc(h.servers, func(s *server) bool { return s.cfg.Stdio() }) {
		_, _ = h.cfg.Sandbox(ctx) // how it ended is each server's to say
	}
	t := time.NewTimer(h.cfg.StartWait)
	defer t.Stop()
	for _, s := range h.servers {
		select {
		case <-s.tried:
		case <-t.C:
			h.log.Warn("MCP servers have not listed their tools yet; turns no longer wait for them",
				"servers", strings.Join(h.starting(), ", "), "waited", h.cfg.StartWait)
			return
		case <-ctx.Done():
			return
		}
	}
}

// starting names the servers whose first start has not ended.
func (h *Hub) starting() []string {
	var names []string
	for _, s := range h.servers {
		select {
		case <-s.tried:
		default:
			names = append(names, s.cfg.Name)
		}
	}
	return names
}

// Starting implements [tools.StartingProvider]: until every server has
// listed its tools or failed to start once (for at most StartWait after
// they could start), a channel closed when that is over; nil after, and
// before Start.
func (h *Hub) Starting() <-chan struct{} {
	if h == nil || !h.started.Load() {
		return nil
	}
	select {
	case <-h.settled:
		return nil
	default:
		return h.settled
	}
}

// Ready reports, for /readyz, whether the servers' first listings have
// settled (see Starting); if not, which servers are still starting. A
// nil Hub is ready.
func (h *Hub) Ready() error {
	if h == nil {
		return nil
	}
	if !h.started.Load() {
		return errors.New("the MCP servers have not been started")
	}
	select {
	case <-h.settled:
		return nil
	default:
	}
	names := h.starting()
	if len(names) == 0 {
		return nil // settle is about to say so
	}
	return fmt.Errorf("MCP servers still listing their tools: %s", strings.Join(names, ", "))
}

// Close stops every server and waits for them.
func (h *Hub) Close() {
	if h == nil {
		return
	}
	h.mu.Lock()
	cancel := h.cancel
	h.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	h.wg.Wait()
}

// run runs fn on a goroutine that Close waits for, with the servers'
// lifetime; false if the hub is not running.
func (h *Hub) run(fn func(ctx context.Context)) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ctx == nil || h.ctx.Err() != nil {
		return false
	}
	ctx := h.ctx
	h.wg.Go(func() { fn(ctx) })
	return true
}

// Tools returns the servers' tools as they are now.
func (h *Hub) Tools() []tools.Tool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.tools
}

// Changed returns a channel closed when Tools or Unavailable change next.
func (h *Hub) Changed() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.changed
}

// Unavailable names the servers' tools that are not offered, and why.
func (h *Hub) Unavailable() map[string]tools.Missing {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.unavailable
}

// update gathers the servers' tools anew, after one's listing changed.
func (h *Hub) update() {
	h.updating.Lock()
	defer h.updating.Unlock()
	var all []tools.Tool
	unavailable := map[string]tools.Missing{}
	for _, s := range h.servers {
		ts, un := s.listing()
		all = append(all, ts...)
		for n, why := range un {
			unavailable[n] = tools.Missing{Power: tools.MCPPower(s.cfg.Name), Reason: why}
		}
	}
	slices.SortFunc(all, func(a, b tools.Tool) int { return strings.Compare(a.Name(), b.Name()) })
	h.mu.Lock()
	defer h.mu.Unlock()
	h.tools, h.unavailable = all, unavailable
	close(h.changed)
	h.changed = make(chan struct{})
}

// scrub removes the secrets from s.
func (h *Hub) scrub(s string) string { return h.redact.Replace(s) }
