// Package dispatch runs a real Dispatcher with its gate, as cmd/firstmate
// wires them, for the tests of the packages that drive one (an adapter, a
// store): the gate's policy and admins are the test's, everything else
// the defaults.
package dispatch

import (
	"context"
	"path/filepath"
	"sync"
	"time"

	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/agent/govern"
	"github.com/firstmate/firstmate/agent/schedules"
	"github.com/firstmate/firstmate/internal/testkit"
	"github.com/firstmate/firstmate/store/local"
	"github.com/firstmate/firstmate/tools"
)

// TB is what Start needs of a test.
type TB interface {
	testkit.TB
	TempDir() string
	Fatal(args ...any)
}

// Store is what a dispatcher, its gate and a scheduler keep.
type Store interface {
	agent.Sessions
	govern.Store
	schedules.Store
}

// Config is a test's dispatcher. Model and Platforms are required.
type Config struct {
	Store     Store // nil: an embedded store in a temporary directory
	Model     agent.Model
	Platforms map[string]agent.Platform
	Tools     *tools.Set
	Policy    govern.Defaults
	Admins    func(platform string, u agent.User) bool
	MaxTurns  int
	// Owner names the replica (its lease owner); ReadyEvery is how often
	// it looks for sessions nobody holds.
	Owner      string
	ReadyEvery time.Duration
	// Scheduler, if set, runs beside the dispatcher, bound to it and the
	// gate, its claims made as Owner.
	Scheduler *schedules.Scheduler
}

// Start runs a dispatcher until the test ends.
func Start(t TB, c Config) *agent.Dispatcher {
	t.Helper()
	dir := t.TempDir()
	st := c.Store
	if st == nil {
		ls, err := local.Open(filepath.Join(dir, "firstmate.db"), agent.Retention{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ls.Close() })
		st = ls
	}
	ws := tools.Workspaces{Dir: filepath.Join(dir, "workspaces")}
	gate := govern.New(govern.Config{Store: st, Tools: c.Tools, Policy: c.Policy, Admins: c.Admins, Platforms: c.Platforms, Workspaces: ws})
	dc := agent.DispatcherConfig{Store: st, Gate: gate, Loop: &agent.Loop{Model: c.Model}, Tools: c.Tools,
		Platforms: c.Platforms, Workspaces: ws, MaxTurns: c.MaxTurns, Owner: c.Owner, ReadyEvery: c.ReadyEvery}
	if c.Scheduler != nil {
		dc.Later = c.Scheduler
	}
	d := agent.NewDispatcher(dc)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		var wg sync.WaitGroup
		if c.Scheduler != nil {
			c.Scheduler.Bind(gate, d)
			owner := c.Owner
			if owner == "" {
				owner = "test"
			}
			wg.Go(func() { c.Scheduler.Run(ctx, owner, nil) })
		}
		d.Run(ctx)
		wg.Wait()
		close(done)
	}()
	t.Cleanup(func() { cancel(); <-done })
	return d
}
