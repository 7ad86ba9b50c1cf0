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
package mcp

import (
	"context"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/firstmate/firstmate/tools"
	"github.com/firstmate/firstmate/tools/sandbox"
)

// DefaultTimeout bounds one tool call when the server's configuration does
// not say.
const DefaultTimeout = 60 * time.Second

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
}

// Hub runs the configured servers and offers their tools. It is a
// [tools.Provider] (and a [tools.UnavailableProvider]).
type Hub struct {
	cfg     Config
	log     *slog.Logger
	redact  *strings.Replacer
	servers []*server // sorted by name

	updating    sync.Mutex // one update at a time, so that the last one wins
	mu          sync.Mutex
	tools       []tools.Tool
	unavailable map[string]string
	changed     chan struct{}

	// ctx is the servers' lifetime: made by Start, cancelled by Close,
	// which waits for every goroutine (wg) to end.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New returns a hub for cfg's servers; Start starts them.
func New(cfg Config) *Hub {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &Hub{cfg: cfg, log: log, changed: make(chan struct{}), unavailable: map[string]string{}}
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
	h.mu.Unlock()
	for _, s := range h.servers {
		s.start()
	}
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
func (h *Hub) Unavailable() map[string]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.unavailable
}

// update gathers the servers' tools anew, after one's listing changed.
func (h *Hub) update() {
	h.updating.Lock()
	defer h.updating.Unlock()
	var all []tools.Tool
	unavailable := map[string]string{}
	for _, s := range h.servers {
		ts, un := s.listing()
		all = append(all, ts...)
		for n, why := range un {
			unavailable[n] = why
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
