package tools

import (
	"context"
	"sync"
)

// Pending is a check of the host that some tools depend on and that is
// still running (the shell's sandbox probe, tens of milliseconds), so that
// firstmate can serve before it ends. A set built [WithPending] offers those
// tools as if the check will pass; a call of one waits for the check and
// then runs as the final set runs it: for real, or failing as unavailable
// with the check's cause. Calls of the other tools never wait. Once the
// check has ended, [Set.Current] returns the final set, which offers the
// tools or not, like any set.
type Pending struct {
	done  chan struct{}
	once  sync.Once
	final *Set // written once, before done is closed
}

// NewPending returns a check that has not ended.
func NewPending() *Pending { return &Pending{done: make(chan struct{})} }

// Settle ends the check: final, which must not be nil, is the set to offer
// from now on, and calls that wait run in it. Only the first Settle counts.
func (p *Pending) Settle(final *Set) {
	if final == nil {
		panic("tools: Settle with a nil set")
	}
	p.once.Do(func() {
		p.final = final
		close(p.done)
	})
}

// Wait waits for the check to end and returns the final set, or the cause
// of ctx's end if that comes first.
func (p *Pending) Wait(ctx context.Context) (*Set, error) {
	select {
	case <-p.done:
		return p.final, nil
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// settled returns the final set, or nil while the check runs.
func (p *Pending) settled() *Set {
	select {
	case <-p.done:
		return p.final
	default:
		return nil
	}
}

// WithPending makes the named tools of the set depend on p: their calls
// wait for p, then run in p's final set, and Current returns that set once
// p has ended.
func WithPending(p *Pending, names ...string) SetOption {
	return func(s *Set) {
		s.pending = p
		if s.held == nil {
			s.held = map[string]bool{}
		}
		for _, n := range names {
			s.held[n] = true
		}
	}
}

// Current returns the set to offer now: s, or, once the check s depends on
// has ended, the set that replaced it; for a set built [WithProvider], the
// set with the providers' tools as they are now (the same *Set until they
// change), after waiting for the providers still listing their first
// tools (bounded by each: see [StartingProvider]). A turn reads it once,
// at its start, so the tools the model sees do not change within a turn.
func (s *Set) Current() *Set { return s.current(true) }

// Now is [Set.Current] without the wait for providers still starting: what
// a command shows or checks, which must answer at once.
func (s *Set) Now() *Set { return s.current(false) }

func (s *Set) current(wait bool) *Set {
	if s == nil {
		return s
	}
	if s.pending != nil {
		if final := s.pending.settled(); final != nil {
			return final.current(wait)
		}
	}
	switch {
	case s.live == nil:
		return s
	case wait:
		return s.live.current()
	default:
		return s.live.now()
	}
}
