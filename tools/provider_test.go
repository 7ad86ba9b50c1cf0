package tools

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
)

// fakeProvider is a Provider whose tools a test sets.
type fakeProvider struct {
	mu          sync.Mutex
	tools       []Tool
	unavailable map[string]string
	changed     chan struct{}
}

func newFakeProvider() *fakeProvider { return &fakeProvider{changed: make(chan struct{})} }

func (p *fakeProvider) Tools() []Tool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.tools
}

func (p *fakeProvider) Changed() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.changed
}

func (p *fakeProvider) Unavailable() map[string]Missing {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]Missing{}
	for n, why := range p.unavailable {
		out[n] = Missing{Power: MCPPower("srv"), Reason: why}
	}
	return out
}

func (p *fakeProvider) set(unavailable map[string]string, ts ...Tool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tools, p.unavailable = ts, unavailable
	close(p.changed)
	p.changed = make(chan struct{})
}

func named(name string) Tool {
	return New(name, MCPPower("srv"), "says "+name, func(context.Context, *Workspace, struct{}) (Result, error) {
		return Result{Text: name}, nil
	})
}

// A set with a provider offers the provider's tools as they are now,
// merged and sorted with its own; Current is the same *Set until they
// change, and a set taken earlier keeps what it had.
func TestSetProvider(t *testing.T) {
	p := newFakeProvider()
	s := NewSet([]Tool{named("read"), named("write")}, WithProvider(p))
	first := s.Current()
	if got := first.Names(); !slices.Equal(got, []string{"read", "write"}) {
		t.Fatalf("names %v", got)
	}
	if s.Current() != first {
		t.Fatal("Current changed without a change")
	}
	p.set(map[string]string{"notes__bad": "its schema is not valid"}, named("notes__echo"), named("wiki__a"), named("read"))
	second := s.Current()
	if second == first {
		t.Fatal("Current did not change")
	}
	if got := second.Names(); !slices.Equal(got, []string{"notes__echo", "read", "wiki__a", "write"}) {
		t.Fatalf("names %v (a provider's tool may not take a name the set has)", got)
	}
	if got := s.Names(); !slices.Equal(got, second.Names()) {
		t.Errorf("the set itself shows %v", got)
	}
	if s.Current() != second {
		t.Error("Current changed again without a change")
	}
	if got := first.Names(); !slices.Equal(got, []string{"read", "write"}) {
		t.Errorf("an earlier set changed: %v", got)
	}
	if first.Current() != second {
		t.Error("an earlier set's Current is not the newest")
	}
	res, err := s.Call(context.Background(), nil, "notes__echo", nil)
	if err != nil || res.Text != "notes__echo" {
		t.Errorf("call: %+v, %v", res, err)
	}
	if _, err := second.Call(context.Background(), nil, "notes__bad", nil); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "its schema is not valid") {
		t.Errorf("unavailable: %v", err)
	}
	if !slices.Contains(s.Known(), "notes__bad") {
		t.Errorf("known %v", s.Known())
	}
	if _, err := first.Call(context.Background(), nil, "notes__echo", nil); !errors.Is(err, ErrUnknownTool) {
		t.Errorf("a set taken before the change ran a later tool: %v", err)
	}
	p.set(nil)
	if got := s.Current().Names(); !slices.Equal(got, []string{"read", "write"}) {
		t.Errorf("after the tools went: %v", got)
	}
}

// A set that waits for a check and has a provider: until the check ends
// its held tools wait; after, Current is the final set with the
// provider's tools.
func TestSetProviderWithPending(t *testing.T) {
	p := newFakeProvider()
	p.set(nil, named("notes__echo"))
	pend := NewPending()
	early := NewSet([]Tool{named("shell")}, WithProvider(p), WithPending(pend, "shell"))
	if got := early.Current().Names(); !slices.Equal(got, []string{"notes__echo", "shell"}) {
		t.Fatalf("before the check: %v", got)
	}
	pend.Settle(NewSet(nil, WithProvider(p), WithUnavailable("shell", PowerExec, "no sandbox")))
	final := early.Current()
	if got := final.Names(); !slices.Equal(got, []string{"notes__echo"}) {
		t.Fatalf("after the check: %v", got)
	}
	if _, err := early.Call(context.Background(), nil, "shell", nil); !errors.Is(err, ErrUnavailable) {
		t.Errorf("held call: %v", err)
	}
}
