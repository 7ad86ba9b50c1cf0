package modellimit

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/firstmate/firstmate/agent"
)

// blocking is a model whose calls wait until released, and that counts
// how many run at once.
type blocking struct {
	release        chan struct{}
	inFlight, most atomic.Int32
	calls          atomic.Int32
	mu             sync.Mutex
	order          []string
	err            error
}

func (b *blocking) Complete(ctx context.Context, req *agent.Request) (*agent.Response, error) {
	n := b.inFlight.Add(1)
	defer b.inFlight.Add(-1)
	for {
		m := b.most.Load()
		if n <= m || b.most.CompareAndSwap(m, n) {
			break
		}
	}
	b.calls.Add(1)
	b.mu.Lock()
	b.order = append(b.order, req.System)
	b.mu.Unlock()
	select {
	case <-b.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return &agent.Response{Usage: agent.Usage{PromptTokens: 10, CompletionTokens: 5}}, b.err
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// With two requests in flight at most, six calls run two at a time, in
// the order they came, and the ones that wait hear how many are ahead.
func TestMaxConcurrentIsFairAndTellsTheQueue(t *testing.T) {
	m := &blocking{release: make(chan struct{})}
	l := New(Config{MaxConcurrent: 2}, nil, nil)
	model := l.Model(m)
	var wg sync.WaitGroup
	var mu sync.Mutex
	heard := map[string][]int{}
	for i, name := range []string{"a", "b", "c", "d", "e", "f"} {
		wg.Go(func() {
			req := &agent.Request{System: name, OnQueued: func(n int) { mu.Lock(); heard[name] = append(heard[name], n); mu.Unlock() }}
			if _, err := model.Complete(t.Context(), req); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		})
		// One after the other, so the order they came in is known.
		waitFor(t, "queued", func() bool { l.mu.Lock(); defer l.mu.Unlock(); return len(l.queue)+l.inFlight >= i+1 })
	}
	waitFor(t, "two in flight", func() bool { return m.inFlight.Load() == 2 })
	time.Sleep(50 * time.Millisecond) // a third would show up here
	if n := m.inFlight.Load(); n != 2 {
		t.Fatalf("%d calls in flight, want 2", n)
	}
	// One call ends at a time, so one waiter is let in at a time and the
	// order they reach the model is the order they were let in.
	for k := 2; k < 6; k++ {
		m.release <- struct{}{}
		waitFor(t, "the next let in", func() bool { return m.calls.Load() == int32(k+1) })
	}
	m.release <- struct{}{}
	m.release <- struct{}{}
	wg.Wait()
	if m.most.Load() != 2 || m.calls.Load() != 6 {
		t.Errorf("at most %d at once, %d calls", m.most.Load(), m.calls.Load())
	}
	if got := m.order; len(got) != 6 || got[2] != "c" || got[3] != "d" || got[4] != "e" || got[5] != "f" {
		t.Errorf("served in the order %q", got)
	}
	mu.Lock()
	defer mu.Unlock()
	// a and b ran at once; f came while c, d and e waited: three ahead
	// of it, then none once it was next.
	if h := heard["f"]; len(h) == 0 || h[0] != 3 || h[len(h)-1] != 0 {
		t.Errorf("f heard %v", h)
	}
	if len(heard["a"]) != 0 {
		t.Errorf("a, which never waited, heard %v", heard["a"])
	}
}

// A server that asked to wait (Retry-After) holds every later call back
// for that long, limits or none.
func TestRetryAfterPausesEveryCall(t *testing.T) {
	m := &blocking{release: make(chan struct{}, 2), err: &agent.ModelError{Status: 429, RetryAfter: 300 * time.Millisecond, Err: errors.New("slow down")}}
	l := New(Config{}, nil, nil)
	model := l.Model(m)
	m.release <- struct{}{}
	if _, err := model.Complete(t.Context(), &agent.Request{}); err == nil {
		t.Fatal("the 429 was not passed on")
	}
	paused := time.Now()
	m.err = nil
	m.release <- struct{}{}
	if _, err := model.Complete(t.Context(), &agent.Request{}); err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(paused); waited < 250*time.Millisecond {
		t.Errorf("the next call waited %v of the 300ms asked", waited)
	}
}

// Two requests a minute: the third waits (and gives up with its context)
// without reaching the model.
func TestRequestsPerMinute(t *testing.T) {
	m := &blocking{release: make(chan struct{}, 3)}
	l := New(Config{RequestsPerMinute: 2}, nil, nil)
	model := l.Model(m)
	for range 2 {
		m.release <- struct{}{}
		if _, err := model.Complete(t.Context(), &agent.Request{}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	if _, err := model.Complete(ctx, &agent.Request{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("the third call: %v", err)
	}
	if n := m.calls.Load(); n != 2 {
		t.Errorf("%d calls reached the model, want 2", n)
	}
}

// fakeShared keeps the shared limits in memory, as Redis does for all
// replicas.
type fakeShared struct {
	mu     sync.Mutex
	slots  map[string]time.Time
	spent  map[string]int
	paused time.Time
}

func (f *fakeShared) TakeSlot(_ context.Context, id string, max int, ttl time.Duration) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now()
	for k, exp := range f.slots {
		if !exp.After(now) {
			delete(f.slots, k)
		}
	}
	if len(f.slots) >= max {
		return false, nil
	}
	f.slots[id] = now.Add(ttl)
	return true, nil
}

func (f *fakeShared) RenewSlots(_ context.Context, ids []string, ttl time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, id := range ids {
		if _, ok := f.slots[id]; ok {
			f.slots[id] = time.Now().Add(ttl)
		}
	}
	return nil
}

func (f *fakeShared) FreeSlot(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.slots, id)
	return nil
}

func (f *fakeShared) Allow(_ context.Context, name string, perMinute, n int) (time.Duration, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.spent[name]+n > perMinute {
		return time.Minute, nil
	}
	f.spent[name] += n
	return 0, nil
}

func (f *fakeShared) Pause(_ context.Context, until time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if until.After(f.paused) {
		f.paused = until
	}
	return nil
}

func (f *fakeShared) PausedUntil(context.Context) (time.Time, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.paused, nil
}

// Two replicas sharing one request in flight never have two, and the
// tokens both spend count against the one budget.
func TestSharedLimitsHoldAcrossReplicas(t *testing.T) {
	shared := &fakeShared{slots: map[string]time.Time{}, spent: map[string]int{}}
	m := &blocking{release: make(chan struct{})}
	cfg := Config{MaxConcurrent: 1, TokensPerMinute: 1000}
	a, b := New(cfg, shared, nil).Model(m), New(cfg, shared, nil).Model(m)
	var wg sync.WaitGroup
	for _, model := range []agent.Model{a, b, a, b} {
		wg.Go(func() {
			if _, err := model.Complete(t.Context(), &agent.Request{System: "hello there"}); err != nil {
				t.Error(err)
			}
		})
	}
	waitFor(t, "one in flight", func() bool { return m.inFlight.Load() == 1 })
	time.Sleep(100 * time.Millisecond)
	for range 4 {
		m.release <- struct{}{}
	}
	wg.Wait()
	if m.most.Load() != 1 || m.calls.Load() != 4 {
		t.Errorf("at most %d in flight across replicas, %d calls", m.most.Load(), m.calls.Load())
	}
	shared.mu.Lock()
	defer shared.mu.Unlock()
	// Each call is estimated at 6 tokens and used 15: 4 × 15 in all.
	if got := shared.spent["tokens"]; got != 60 {
		t.Errorf("tokens spent %d, want 60", got)
	}
	if len(shared.slots) != 0 {
		t.Errorf("slots left taken: %v", shared.slots)
	}
}
