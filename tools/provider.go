package tools

import (
	"maps"
	"slices"
	"sync"
	"sync/atomic"
)

// Provider is a source of tools that come and go while firstmate runs:
// the tools of MCP servers, which are learned when a server starts and
// change when it says so.
type Provider interface {
	// Tools returns the provider's tools as they are now, in any order.
	Tools() []Tool
	// Changed returns a channel that is closed when Tools changes next.
	// A set reads it before Tools, so a change in between is not missed.
	Changed() <-chan struct{}
}

// UnavailableProvider is a Provider that also names tools it cannot
// offer, with their power and why (an MCP tool whose input schema is not
// valid). A call of one fails with that reason, and policy may name it.
type UnavailableProvider interface {
	Provider
	Unavailable() map[string]Missing
}

// StartingProvider is a Provider whose first tools come a while after
// firstmate starts: an MCP server lists its tools once it has started. A
// turn that began in that window would be offered none of them, so
// [Set.Current] (what a turn reads at its start) first waits for Starting.
// The provider bounds that wait: it closes the channel once its first
// tools are known, or once it gave up waiting for them (a few seconds), and
// returns nil from then on, so that a set costs nothing more once its
// providers have started.
type StartingProvider interface {
	Provider
	// Starting returns a channel closed once the provider's first tools
	// are known or it stopped waiting for them; nil when nothing is to be
	// waited for (any more).
	Starting() <-chan struct{}
}

// WithProvider adds p's tools to the set. The set offers them as they are
// at each [Set.Current]: a new *Set each time they changed, the same one
// otherwise, so that what a model sees stays byte-for-byte stable (and
// sorted) between changes. A provider's tool whose name is taken by a
// tool of the set, or of an earlier provider, is left out.
func WithProvider(p Provider) SetOption {
	return func(s *Set) { s.providers = append(s.providers, p) }
}

// live makes the sets of a set built with providers: the base set's tools
// and the providers' tools as they are now.
type live struct {
	base *Set
	mu   sync.Mutex // one build at a time
	cur  atomic.Pointer[liveView]
}

// liveView is one set made by live, and the channels that say when it is
// out of date.
type liveView struct {
	set     *Set
	changed []<-chan struct{}
}

func (v *liveView) stale() bool {
	for _, c := range v.changed {
		select {
		case <-c:
			return true
		default:
		}
	}
	return false
}

// current returns the set with the providers' tools as they are now,
// once the providers that are still starting have listed their first
// tools (or given up waiting for them): what [Set.Current] returns, which
// a turn reads at its start.
func (l *live) current() *Set {
	for _, p := range l.base.providers {
		if sp, ok := p.(StartingProvider); ok {
			if c := sp.Starting(); c != nil {
				<-c // bounded by the provider
			}
		}
	}
	return l.now()
}

// now returns the set with the providers' tools as they are now, without
// waiting for any: what the set's own methods (Tools, Names, Known…)
// show, which firstmate reads at start, before any server could answer.
func (l *live) now() *Set {
	if v := l.cur.Load(); v != nil && !v.stale() {
		return v.set
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if v := l.cur.Load(); v != nil && !v.stale() {
		return v.set
	}
	v := l.build()
	l.cur.Store(v)
	return v.set
}

func (l *live) build() *liveView {
	b := l.base
	v := &liveView{changed: make([]<-chan struct{}, len(b.providers))}
	for i, p := range b.providers {
		v.changed[i] = p.Changed()
	}
	s := &Set{
		tools:     slices.Clone(b.tools),
		byName:    maps.Clone(b.byName),
		maxResult: b.maxResult,
		redact:    b.redact,
		missing:   maps.Clone(b.missing),
		pending:   b.pending,
		held:      b.held,
		live:      l,
	}
	if s.missing == nil {
		s.missing = map[string]Missing{}
	}
	for _, p := range b.providers {
		for _, t := range p.Tools() {
			if _, taken := s.byName[t.Name()]; taken {
				continue
			}
			s.byName[t.Name()] = t
			s.tools = append(s.tools, t)
			delete(s.missing, t.Name())
		}
		if u, ok := p.(UnavailableProvider); ok {
			for name, why := range u.Unavailable() {
				if _, offered := s.byName[name]; !offered {
					if _, known := s.missing[name]; !known {
						s.missing[name] = why
					}
				}
			}
		}
	}
	sortTools(s.tools)
	v.set = s
	return v
}

// view is the set whose tools s's methods show: s itself, or, for a set
// built with providers, the set with their tools as they are now.
func (s *Set) view() *Set {
	if s.live != nil && s.live.base == s {
		return s.live.now()
	}
	return s
}
