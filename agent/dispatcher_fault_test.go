package agent_test

import (
	"context"
	"errors"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/store/local"
)

// faultyStore is a real store with faults injected into some methods.
type faultyStore struct {
	testStore
	commitFails atomic.Int32 // how many Commits fail before they work; -1 forever
	renewLost   atomic.Bool
}

var errStoreDown = errors.New("store down")

func (f *faultyStore) Commit(ctx context.Context, key agent.SessionKey, owner string, consumed int, turn []agent.Message, out *agent.Outbound) error {
	if n := f.commitFails.Load(); n != 0 {
		if n > 0 {
			f.commitFails.Add(-1)
		}
		return errStoreDown
	}
	return f.testStore.Commit(ctx, key, owner, consumed, turn, out)
}

func (f *faultyStore) Renew(ctx context.Context, key agent.SessionKey, owner string, ttl time.Duration) error {
	if f.renewLost.Load() {
		return agent.ErrLeaseLost
	}
	return f.testStore.Renew(ctx, key, owner, ttl)
}

func echoModel() *funcModel {
	return &funcModel{f: func(_ context.Context, req *agent.Request) (*agent.Response, error) {
		return answerWith("seen " + lastUser(req)), nil
	}}
}

func TestCommitRetriedOnce(t *testing.T) {
	st := &faultyStore{testStore: openStore(t)}
	st.commitFails.Store(1)
	m := echoModel()
	h := startHarness(t, st, hcfg{Loop: &agent.Loop{Model: m}})
	h.submit(t, inbound(keyA, "m1", "hello"))
	h.idle(t, keyA)
	answers, _, _ := h.p.final(keyA)
	if len(answers) != 1 || m.calls.Load() != 1 {
		t.Fatalf("answers %q, model calls %d; want one of each", answers, m.calls.Load())
	}
	if hist, _ := st.History(t.Context(), keyA); len(hist) != 2 {
		t.Fatalf("history %+v", hist)
	}
}

// A commit that keeps failing is retried while the lease lasts; then
// nothing is shown (showing an answer that is not saved would answer the
// message twice), the message is kept and the lease given up.
func TestCommitFailingForeverShowsNothing(t *testing.T) {
	st := &faultyStore{testStore: openStore(t)}
	st.commitFails.Store(-1)
	m := echoModel()
	h := startHarness(t, st, hcfg{Loop: &agent.Loop{Model: m}, LeaseTTL: 600 * time.Millisecond, ReadyEvery: time.Hour})
	h.submit(t, inbound(keyA, "m1", "hello"))
	h.idle(t, keyA)
	time.Sleep(50 * time.Millisecond)
	answers, failures, _ := h.p.final(keyA)
	if len(answers)+len(failures) != 0 || m.calls.Load() != 1 {
		t.Fatalf("answers %q failures %q, model calls %d; want nothing shown after one call", answers, failures, m.calls.Load())
	}
	// The message is kept, and the lease was given up so the next message
	// (or the next start) can take the session at once.
	if n, _ := st.Pending(t.Context(), keyA); n != 1 {
		t.Fatalf("pending = %d, want the message kept", n)
	}
	if _, err := st.Claim(t.Context(), keyA, "someone-else", time.Second); err != nil {
		t.Fatalf("lease not given up: %v", err)
	}
}

func TestPendingMessagesPickedUpAtStart(t *testing.T) {
	st := openStore(t)
	// A previous process recorded these and died before answering.
	for _, in := range []agent.Inbound{inbound(keyA, "m1", "one"), inbound(keyB, "m2", "two"), inbound(keyA, "m3", "three")} {
		if _, err := st.Enqueue(t.Context(), in); err != nil {
			t.Fatal(err)
		}
	}
	m := echoModel()
	h := startHarness(t, st, hcfg{Loop: &agent.Loop{Model: m}})
	waitFor(t, func() bool { return m.calls.Load() == 2 })
	h.idle(t, keyA)
	h.idle(t, keyB)
	a, _, _ := h.p.final(keyA)
	b, _, _ := h.p.final(keyB)
	if len(a) != 1 || a[0] != "seen [ann] one\n\n[ann] three" || len(b) != 1 {
		t.Fatalf("answers A %q B %q", a, b)
	}
}

func TestLeaseHeldElsewhereIsRetried(t *testing.T) {
	st := openStore(t)
	// Another worker holds the session and dies without releasing it.
	if _, err := st.Claim(t.Context(), keyA, "dead-worker", 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	m := echoModel()
	h := startHarness(t, st, hcfg{Loop: &agent.Loop{Model: m}, LeaseTTL: 150 * time.Millisecond})
	h.submit(t, inbound(keyA, "m1", "hello"))
	waitFor(t, func() bool { a, _, _ := h.p.final(keyA); return len(a) == 1 })
	if m.calls.Load() != 1 {
		t.Fatalf("model calls %d", m.calls.Load())
	}
}

func TestLeaseLostMidTurnNeitherAnswersNorCommits(t *testing.T) {
	st := &faultyStore{testStore: openStore(t)}
	m := &funcModel{f: func(ctx context.Context, req *agent.Request) (*agent.Response, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}}
	h := startHarness(t, st, hcfg{Loop: &agent.Loop{Model: m}, LeaseTTL: 60 * time.Millisecond})
	st.renewLost.Store(true)
	h.submit(t, inbound(keyA, "m1", "hello"))
	h.idle(t, keyA)
	answers, failures, _ := h.p.final(keyA)
	if len(answers)+len(failures) != 0 {
		t.Fatalf("a worker that lost its lease spoke: %q %q", answers, failures)
	}
	// Every turn's thread is closed once, also a turn that ended without
	// an answer. (The session can run twice here: the dispatcher's pickup
	// of waiting sessions at start may race the submit.)
	turns := 0
	h.p.mu.Lock()
	for _, ev := range h.p.events[keyA] {
		if _, ok := ev.(agent.TurnStarted); ok {
			turns++
		}
	}
	h.p.mu.Unlock()
	if n := h.p.closed.Load(); turns == 0 || int(n) != turns {
		t.Fatalf("%d turns, their threads closed %d times; want each once", turns, n)
	}
	if n, _ := st.Pending(t.Context(), keyA); n != 1 {
		t.Fatalf("pending = %d; the new owner must find the message", n)
	}
}

func TestStopQueuedSession(t *testing.T) {
	gate := make(chan struct{})
	m := &funcModel{f: func(ctx context.Context, req *agent.Request) (*agent.Response, error) {
		if lastUser(req) == "[ann] first" {
			<-gate
		}
		return answerWith("ok"), nil
	}}
	h := newHarness(t, m, 1)
	h.submit(t, inbound(keyA, "m1", "first"))
	waitFor(t, func() bool { return m.inFlight.Load() == 1 })
	h.submit(t, inbound(keyB, "m2", "second")) // queued behind A: one worker
	h.submit(t, inbound(keyB, "c1", "stop"))
	close(gate)
	h.idle(t, keyA)
	h.idle(t, keyB)
	h.stop()
	_, failures, notices := h.p.final(keyB)
	if len(failures) != 1 || failures[0] != "Stopped." || len(notices) != 1 || notices[0] != "Stopping." {
		t.Fatalf("failures %q notices %q", failures, notices)
	}
	if m.calls.Load() != 1 {
		t.Fatalf("the stopped turn reached the model (%d calls)", m.calls.Load())
	}
}

// A turn still running when the grace ends is handed back, not answered:
// its message stays for the next holder, the thread says so, and nobody is
// asked to resend.
func TestShutdownHandsOverAfterGraceAndRefusesNewMessages(t *testing.T) {
	st := openStore(t)
	m := &funcModel{f: func(ctx context.Context, req *agent.Request) (*agent.Response, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}}
	h := startHarness(t, st, hcfg{Loop: &agent.Loop{Model: m}, Grace: 50 * time.Millisecond})
	h.submit(t, inbound(keyA, "m1", "long job"))
	waitFor(t, func() bool { return m.inFlight.Load() == 1 })
	h.stop()
	answers, failures, notices := h.p.final(keyA)
	if len(answers)+len(failures) != 0 {
		t.Fatalf("answers %q failures %q; want the turn handed back, not answered", answers, failures)
	}
	if len(notices) != 1 || !strings.Contains(notices[0], "Interrupted by a restart") || !strings.Contains(notices[0], "nothing to send again") {
		t.Fatalf("notices %q; want one saying the turn was handed back", notices)
	}
	if err := h.d.Submit(t.Context(), inbound(keyA, "m2", "late")); !errors.Is(err, agent.ErrShutdown) {
		t.Fatalf("Submit after shutdown: %v", err)
	}
	if n, _ := st.Pending(t.Context(), keyA); n != 1 {
		t.Fatalf("%d pending; want the handed-back message kept and nothing recorded after shutdown", n)
	}
	if ready, err := st.Ready(t.Context(), 10); err != nil || len(ready) != 1 || ready[0] != keyA {
		t.Fatalf("ready %v %v; want the handed-back session", ready, err)
	}
	// The lease was given up: the next process takes the session at once.
	if _, err := st.Claim(t.Context(), keyA, "next-process", time.Second); err != nil {
		t.Fatalf("lease still held after shutdown: %v", err)
	}
}

func TestResetWhileRunningAsksForStop(t *testing.T) {
	gate := make(chan struct{})
	m := &funcModel{f: func(ctx context.Context, req *agent.Request) (*agent.Response, error) {
		<-gate
		return answerWith("ok"), nil
	}}
	h := newHarness(t, m, 1)
	h.submit(t, inbound(keyA, "m1", "work"))
	waitFor(t, func() bool { return m.inFlight.Load() == 1 })
	h.submit(t, inbound(keyA, "c1", "reset"))
	close(gate)
	h.idle(t, keyA)
	h.stop()
	_, _, notices := h.p.final(keyA)
	if len(notices) != 1 || !strings.Contains(notices[0], "Send stop first") {
		t.Fatalf("notices %q", notices)
	}
	if hist, _ := h.store.History(t.Context(), keyA); len(hist) != 2 {
		t.Fatalf("history %+v", hist)
	}
}

func TestNoGoroutineLeaks(t *testing.T) {
	before := runtime.NumGoroutine()
	func() {
		st, err := local.Open(filepath.Join(t.TempDir(), "db"), agent.Retention{})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		h := startHarness(t, st, hcfg{Loop: &agent.Loop{Model: echoModel()}, MaxTurns: 4})
		for i, k := range []agent.SessionKey{keyA, keyB} {
			h.submit(t, inbound(k, "m"+string(rune('0'+i)), "hi"))
			h.submit(t, inbound(k, "c"+string(rune('0'+i)), "status"))
		}
		h.idle(t, keyA)
		h.idle(t, keyB)
		h.stop()
	}()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines before, %d after:\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}
