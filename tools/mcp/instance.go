package mcp

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Restart backoff: the first restart after a crash comes soon; each start
// that fails, or a process that dies young, doubles the wait up to
// maxBackoff; one that lived stableAfter starts the count anew.
const (
	minBackoff  = 250 * time.Millisecond
	maxBackoff  = time.Minute
	stableAfter = time.Minute
	// startTimeout bounds starting a server and listing its tools, at least.
	startTimeout = 30 * time.Second
)

// instance is one running server: a process (of an own server, or of one
// channel's workspace) or an HTTP session. Its goroutine (run) starts it,
// restarts it with backoff when it dies, and refreshes the tools when the
// server says they changed.
type instance struct {
	srv  *server
	dir  string        // the workspace a process runs in; "" for its own (or HTTP)
	once bool          // ends once it has listed the tools (a per-channel server's first start)
	idle time.Duration // ends when unused this long; 0: never

	// Guarded by srv.mu.
	inflight int
	lastUsed time.Time
	retired  bool // no new call may use it

	refresh chan struct{} // the server said its tools changed

	mu       sync.Mutex
	conn     *conn         // the live connection; nil while there is none
	changed  chan struct{} // closed and replaced when the fields below change
	starting bool
	down     error     // why there is no connection: how the last start failed, or how the last connection ended
	retryAt  time.Time // when the next start begins, while down
	ended    bool      // it will not start again
}

func newInstance(s *server, dir string, once bool, idle time.Duration) *instance {
	return &instance{srv: s, dir: dir, once: once, idle: idle, lastUsed: time.Now(),
		refresh: make(chan struct{}, 1), changed: make(chan struct{})}
}

// set changes the state under the lock and wakes the calls that wait.
func (in *instance) set(f func()) {
	in.mu.Lock()
	defer in.mu.Unlock()
	f()
	close(in.changed)
	in.changed = make(chan struct{})
}

// connection returns the live connection, waiting while one starts, or
// while a restart is due before ctx's deadline; otherwise it fails at
// once with why the server is down.
func (in *instance) connection(ctx context.Context) (*conn, error) {
	name := in.srv.cfg.Name
	for {
		in.mu.Lock()
		c, down, retryAt, starting, ended, wake := in.conn, in.down, in.retryAt, in.starting, in.ended, in.changed
		in.mu.Unlock()
		if c != nil {
			select {
			case <-c.done: // dead; run is about to say so
				c = nil
			default:
				return c, nil
			}
		}
		switch {
		case ended:
			return nil, fmt.Errorf("the MCP server %s is %w: firstmate is stopping", name, ErrDown)
		case !starting && down != nil && retryAt.IsZero():
			return nil, fmt.Errorf("the MCP server %s is %w: %v", name, ErrDown, down)
		case !starting && down != nil:
			if deadline, ok := ctx.Deadline(); ok && retryAt.After(deadline) {
				return nil, fmt.Errorf("the MCP server %s is %w: %v; it is restarted in %s",
					name, ErrDown, down, time.Until(retryAt).Round(time.Second))
			}
		}
		select {
		case <-wake:
		case <-ctx.Done():
			if down != nil {
				return nil, fmt.Errorf("the MCP server %s is %w: %v (%w)", name, ErrDown, down, context.Cause(ctx))
			}
			return nil, context.Cause(ctx)
		}
	}
}

// run starts the server and keeps it running until ctx ends (or, for a
// first start, until it listed its tools; for a channel's, until unused).
func (in *instance) run(ctx context.Context) {
	s := in.srv
	defer in.set(func() { in.ended, in.conn = true, nil })
	var backoff time.Duration
	for {
		in.set(func() { in.starting = true })
		began := time.Now()
		c, err := in.start(ctx)
		if in.once || in.dir == "" {
			s.startEnded(err)
		}
		if err == nil {
			in.set(func() { in.conn, in.starting, in.down = c, false, nil })
			if in.once {
				c.close()
				return
			}
			err = in.serve(ctx, c)
			if errors.Is(err, errIdle) || ctx.Err() != nil {
				return
			}
			s.log.Warn("MCP server stopped; restarting it", "cause", s.hub.scrub(err.Error()))
		} else if ctx.Err() == nil {
			s.log.Warn("MCP server did not start", "err", s.hub.scrub(err.Error()))
		}
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, errNoSandbox) {
			// Decided for the life of the process: no retry.
			in.set(func() { in.conn, in.starting, in.down, in.retryAt = nil, false, err, time.Time{} })
			<-ctx.Done()
			return
		}
		if in.idle > 0 {
			if retired, _ := s.retireIfIdle(in); retired {
				return // a channel that no longer calls it
			}
		}
		if time.Since(began) >= stableAfter {
			backoff = 0
		}
		backoff = min(max(2*backoff, minBackoff), maxBackoff)
		in.set(func() { in.conn, in.starting, in.down, in.retryAt = nil, false, err, time.Now().Add(backoff) })
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
}

// errIdle ends a channel's process that was not used for a while.
var errIdle = errors.New("unused")

// errNoSandbox is wrapped when stdio servers cannot run: the host's
// sandbox probe failed, which holds for the life of the process.
var errNoSandbox = errors.New("stdio servers run in the sandbox, which is unavailable")

// start starts the server and lists its tools.
func (in *instance) start(ctx context.Context) (*conn, error) {
	s := in.srv
	sctx, cancel := context.WithTimeout(ctx, max(startTimeout, s.timeout))
	defer cancel()
	var c *conn
	var err error
	if s.cfg.Stdio() {
		c, err = in.startStdio(ctx, sctx)
	} else {
		c, err = in.startHTTP(sctx)
	}
	if err != nil {
		return nil, err
	}
	list, err := listTools(sctx, c)
	if err != nil {
		c.close()
		return nil, fmt.Errorf("listing its tools failed: %w", err)
	}
	s.setListing(list)
	return c, nil
}

// serve watches a live connection until it ends, and returns how it did.
func (in *instance) serve(ctx context.Context, c *conn) error {
	s := in.srv
	var idle <-chan time.Time
	var timer *time.Timer
	if in.idle > 0 {
		timer = time.NewTimer(in.idle)
		defer timer.Stop()
		idle = timer.C
	}
	for {
		select {
		case <-c.done:
			return c.cause
		case <-ctx.Done():
			c.close()
			return ctx.Err()
		case <-in.refresh:
			lctx, cancel := context.WithTimeout(ctx, s.timeout)
			list, err := listTools(lctx, c)
			cancel()
			if err != nil {
				s.log.Warn("MCP server tools could not be listed again", "err", s.hub.scrub(err.Error()))
				continue
			}
			s.setListing(list)
		case <-idle:
			retired, left := s.retireIfIdle(in)
			if retired {
				c.close()
				return errIdle
			}
			timer.Reset(left)
		}
	}
}

// toolsChanged is the client's handler of notifications/tools/list_changed.
func (in *instance) toolsChanged() {
	select {
	case in.refresh <- struct{}{}:
	default: // a refresh is due already
	}
}
