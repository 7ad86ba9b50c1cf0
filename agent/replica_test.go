package agent_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/firstmate/firstmate/agent"
)

// countingObserver counts what the dispatcher reports.
type countingObserver struct {
	takenOver, delivered, answered, handedOver atomic.Int32
}

func (o *countingObserver) TurnDone(_, outcome string, _ time.Duration) {
	switch outcome {
	case agent.OutcomeAnswered:
		o.answered.Add(1)
	case agent.OutcomeHandedOver:
		o.handedOver.Add(1)
	}
}
func (o *countingObserver) ModelCall(time.Duration, agent.Usage, error) {}
func (o *countingObserver) ToolCall(string, string, time.Duration)      {}
func (o *countingObserver) TakenOver()                                  { o.takenOver.Add(1) }
func (o *countingObserver) Delivered(ok bool) {
	if ok {
		o.delivered.Add(1)
	}
}

// A replica died holding a session with messages waiting: another takes
// it over once the lease expires, with no new message and no restart.
func TestDeadHoldersSessionIsTakenOver(t *testing.T) {
	st := openStore(t)
	obs := &countingObserver{}
	m := echoModel()
	h := startHarness(t, st, hcfg{Loop: &agent.Loop{Model: m}, ReadyEvery: 50 * time.Millisecond, Observer: obs})
	// The dead replica claimed the session, then its messages arrived
	// (recorded by its adapter), and it died.
	if _, err := st.Claim(t.Context(), keyA, agent.Owner("dead", 1), 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Enqueue(t.Context(), inbound(keyA, "m1", "stranded")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { a, _, _ := h.p.final(keyA); return len(a) == 1 })
	if a, _, _ := h.p.final(keyA); a[0] != "seen [ann] stranded" {
		t.Fatalf("answers %q", a)
	}
	if obs.takenOver.Load() != 1 || obs.answered.Load() != 1 {
		t.Errorf("taken over %d, answered %d", obs.takenOver.Load(), obs.answered.Load())
	}
}

// A replica that restarts takes back its own sessions at once: the lease
// of its earlier life does not have to expire.
func TestRestartedReplicaTakesItsLeasesBack(t *testing.T) {
	st := openStore(t)
	boot, err := st.Boot(t.Context(), "r1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Claim(t.Context(), keyA, agent.Owner("r1", boot), time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Enqueue(t.Context(), inbound(keyA, "m1", "before the crash")); err != nil {
		t.Fatal(err)
	}
	m := echoModel()
	h := startHarness(t, st, hcfg{Loop: &agent.Loop{Model: m}, Replica: "r1"})
	waitFor(t, func() bool { a, _, _ := h.p.final(keyA); return len(a) == 1 })
	// Another replica's lease is respected.
	if _, err := st.Claim(t.Context(), keyB, agent.Owner("r2", 1), time.Hour); err != nil {
		t.Fatal(err)
	}
	h.submit(t, inbound(keyB, "m2", "held by r2"))
	time.Sleep(200 * time.Millisecond)
	if a, _, _ := h.p.final(keyB); len(a) != 0 || m.calls.Load() != 1 {
		t.Fatalf("r2's session answered by r1: %q", a)
	}
}

// An answer committed but never shown (the holder died between the commit
// and the platform call) is shown by the next holder, once.
func TestCommittedAnswerIsShownByTheNextHolder(t *testing.T) {
	st := openStore(t)
	dead := agent.Owner("dead", 1)
	trigger := inbound(keyA, "m1", "question")
	if _, err := st.Enqueue(t.Context(), trigger); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Claim(t.Context(), keyA, dead, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	turn := []agent.Message{{Role: agent.RoleUser, Content: "question"}, {Role: agent.RoleAssistant, Content: "the answer"}}
	if err := st.Commit(t.Context(), keyA, dead, 1, turn, &agent.Outbound{ID: "o1", Trigger: trigger, Answer: "the answer"}); err != nil {
		t.Fatal(err)
	}
	obs := &countingObserver{}
	m := echoModel()
	h := startHarness(t, st, hcfg{Loop: &agent.Loop{Model: m}, ReadyEvery: 50 * time.Millisecond, Observer: obs})
	waitFor(t, func() bool { a, _, _ := h.p.final(keyA); return len(a) == 1 })
	// The holder marks it shown and lets the session go; once it has, a
	// claim finds nothing left to show or answer, so no second showing
	// can come (the lease held for the check keeps the holder out).
	h.idle(t, keyA)
	c, err := st.Claim(t.Context(), keyA, "check", time.Minute)
	if err != nil || len(c.Outbox) != 0 || len(c.Mailbox) != 0 {
		t.Fatalf("after showing: %+v %v", c, err)
	}
	if a, _, _ := h.p.final(keyA); len(a) != 1 || a[0] != "the answer" || m.calls.Load() != 0 {
		t.Fatalf("answers %q, model calls %d", a, m.calls.Load())
	}
	if obs.delivered.Load() != 1 {
		t.Errorf("delivered %d", obs.delivered.Load())
	}
}

// A failing store delays the commit; nothing is shown until it works, and
// then the answer is shown once.
func TestCommitRetriedWhileTheLeaseLasts(t *testing.T) {
	st := &faultyStore{testStore: openStore(t)}
	st.commitFails.Store(3)
	m := echoModel()
	h := startHarness(t, st, hcfg{Loop: &agent.Loop{Model: m}})
	h.submit(t, inbound(keyA, "m1", "hello"))
	h.idle(t, keyA)
	if a, f, _ := h.p.final(keyA); len(a) != 1 || len(f) != 0 || m.calls.Load() != 1 {
		t.Fatalf("answers %q failures %q model calls %d", a, f, m.calls.Load())
	}
	if n, _ := st.Pending(t.Context(), keyA); n != 0 {
		t.Fatalf("%d pending after the commit went through", n)
	}
}
