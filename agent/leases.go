package agent

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// renewAtOnce bounds the lease renewals in flight at once.
const renewAtOnce = 32

// leases keeps the leases of the turns this process runs: one goroutine
// renews them all every LeaseTTL/3, rather than a goroutine and a timer
// for each turn, which a replica holding thousands of turns that wait on
// the model would pay for in stacks.
type leases struct {
	mu   sync.Mutex
	held map[*hold]struct{}
}

// hold is one turn's claim on its session's lease.
type hold struct {
	ctx      context.Context
	key      SessionKey
	cancel   context.CancelCauseFunc // with ErrLeaseLost when it is lost
	renewed  *atomic.Int64           // when it was last made good, Unix ns
	log      *slog.Logger
	inflight sync.WaitGroup // a renewal under way
	done     chan struct{}
}

// keepLease renews the session lease until ctx ends; losing it cancels the
// turn with ErrLeaseLost. The returned channel closes when it has stopped:
// no renewal of it runs after that.
func keepLease(ctx context.Context, d *Dispatcher, key SessionKey, cancel context.CancelCauseFunc, renewed *atomic.Int64, log *slog.Logger) <-chan struct{} {
	h := &hold{ctx: ctx, key: key, cancel: cancel, renewed: renewed, log: log, done: make(chan struct{})}
	l := &d.leases
	l.mu.Lock()
	if l.held == nil {
		l.held = map[*hold]struct{}{}
	}
	l.held[h] = struct{}{}
	l.mu.Unlock()
	context.AfterFunc(ctx, func() {
		l.mu.Lock()
		delete(l.held, h)
		if len(l.held) == 0 {
			l.held = nil // let go of what a burst grew
		}
		l.mu.Unlock()
		h.inflight.Wait()
		close(h.done)
	})
	return h.done
}

// renewLeases renews every held lease each LeaseTTL/3 until ctx ends.
func (d *Dispatcher) renewLeases(ctx context.Context) {
	t := time.NewTicker(d.cfg.LeaseTTL / 3)
	defer t.Stop()
	sem := make(chan struct{}, renewAtOnce)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		d.leases.mu.Lock()
		holds := make([]*hold, 0, len(d.leases.held))
		for h := range d.leases.held {
			h.inflight.Add(1) // before it can be let go: its done waits for this
			holds = append(holds, h)
		}
		d.leases.mu.Unlock()
		var wg sync.WaitGroup
		for _, h := range holds {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem; h.inflight.Done() }()
				d.renew(h)
			})
		}
		wg.Wait()
	}
}

// renew renews one lease; a lost one cancels its turn.
func (d *Dispatcher) renew(h *hold) {
	if h.ctx.Err() != nil {
		return
	}
	asked := time.Now()
	err := d.cfg.Store.Renew(h.ctx, h.key, d.owner, d.cfg.LeaseTTL)
	switch {
	case err == nil:
		h.renewed.Store(asked.UnixNano())
	case errors.Is(err, ErrLeaseLost):
		h.cancel(ErrLeaseLost)
	case h.ctx.Err() == nil:
		h.log.Warn("renew lease", "err", err) // tried again next time
	}
}
