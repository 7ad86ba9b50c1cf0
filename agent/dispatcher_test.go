package agent_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/agent/govern"
	"github.com/firstmate/firstmate/agent/schedules"
	"github.com/firstmate/firstmate/store/local"
	"github.com/firstmate/firstmate/tools"
)

// platform records, per session, every event its threads were sent, and
// how many threads were closed.
type platform struct {
	mu     sync.Mutex
	events map[agent.SessionKey][]agent.Event
	closed atomic.Int32
}

func (p *platform) Thread(key agent.SessionKey, _ agent.Inbound) agent.Thread {
	return &recThread{p: p, key: key}
}

type recThread struct {
	p   *platform
	key agent.SessionKey
}

func (r *recThread) Emit(_ context.Context, ev agent.Event) error {
	r.p.mu.Lock()
	defer r.p.mu.Unlock()
	if r.p.events == nil {
		r.p.events = map[agent.SessionKey][]agent.Event{}
	}
	r.p.events[r.key] = append(r.p.events[r.key], ev)
	return nil
}

func (r *recThread) Close() error {
	r.p.closed.Add(1)
	return nil
}

// final returns the texts of the Answer, Failed and Notice events of key.
func (p *platform) final(key agent.SessionKey) (answers, failures, notices []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, ev := range p.events[key] {
		switch ev := ev.(type) {
		case agent.Answer:
			answers = append(answers, ev.Text)
		case agent.Failed:
			failures = append(failures, ev.Message)
		case agent.Notice:
			notices = append(notices, ev.Text)
		}
	}
	return
}

// funcModel answers with f; it counts calls and concurrent calls per
// session (the first user message's text names the session in tests).
type funcModel struct {
	f        func(ctx context.Context, req *agent.Request) (*agent.Response, error)
	calls    atomic.Int32
	inFlight atomic.Int32
	maxPar   atomic.Int32
}

func (m *funcModel) Complete(ctx context.Context, req *agent.Request) (*agent.Response, error) {
	m.calls.Add(1)
	n := m.inFlight.Add(1)
	defer m.inFlight.Add(-1)
	for {
		old := m.maxPar.Load()
		if n <= old || m.maxPar.CompareAndSwap(old, n) {
			break
		}
	}
	return m.f(ctx, req)
}

func answerWith(text string) *agent.Response {
	return &agent.Response{Message: agent.Message{Role: agent.RoleAssistant, Content: text}}
}

// lastUser is the content of the request's newest user message.
func lastUser(req *agent.Request) string {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == agent.RoleUser {
			return req.Messages[i].Content
		}
	}
	return ""
}

// testStore is every role of a store the harness needs (store/local's, or
// one of the faulty wrappers of these tests).
type testStore interface {
	agent.Sessions
	govern.Store
	schedules.Store
	Boot(ctx context.Context, replica string) (int64, error)
}

type harness struct {
	d     *agent.Dispatcher
	gate  *govern.Gate
	p     *platform
	store testStore
	stop  func()
}

// hcfg is what a test sets of a harness: the dispatcher's settings, the
// gate's, and a scheduler.
type hcfg struct {
	Loop                 *agent.Loop
	Tools                *tools.Set
	MaxTurns             int
	LeaseTTL, ReadyEvery time.Duration
	Grace                time.Duration
	Observer             agent.Observer
	// Replica, if set, names the lease owner with the store's boot count,
	// as a replica of serve does.
	Replica string
	Limits  agent.InputLimits
	// Platform serves every session's threads (default: a recording one);
	// WorkspaceDir holds the channels' workspaces (default: a temp dir).
	Platform     agent.Platform
	WorkspaceDir string

	Policy          govern.Defaults
	Access          map[string]govern.Access
	Admins          func(platform, id string) bool
	Budgets         govern.Budgets
	ApprovalTimeout time.Duration
	Skills          govern.SkillCatalog
	Jobs            tools.JobBoard

	Scheduler *schedules.Scheduler
}

func newHarness(t *testing.T, m agent.Model, workers int) *harness {
	t.Helper()
	return startHarness(t, openStore(t), hcfg{Loop: &agent.Loop{Model: m}, MaxTurns: workers})
}

func openStore(t *testing.T) *local.Store {
	st, err := local.Open(filepath.Join(t.TempDir(), "firstmate.db"), agent.Retention{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// build makes the gate and the dispatcher of c over st, as cmd/firstmate
// wires them, with p as every platform's (and the scheduler bound).
func build(t *testing.T, st testStore, c hcfg, p agent.Platform) (*agent.Dispatcher, *govern.Gate) {
	t.Helper()
	if c.Tools == nil {
		c.Tools = testTools(t)
	}
	platforms := map[string]agent.Platform{"test": p}
	for name := range c.Access {
		platforms[name] = p
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = 3 * time.Second
	}
	if cat, ok := c.Loop.Skills.(govern.SkillCatalog); ok && c.Skills == nil {
		c.Skills = cat
	}
	var admins func(string, agent.User) bool
	if c.Admins != nil {
		admins = func(platform string, u agent.User) bool { return c.Admins(platform, u.ID) }
	}
	ws := tools.Workspaces{Dir: c.WorkspaceDir}
	if ws.Dir == "" {
		ws.Dir = t.TempDir()
	}
	var d *agent.Dispatcher
	gate := govern.New(govern.Config{Store: st, Tools: c.Tools, Policy: c.Policy, Access: c.Access, Admins: admins, Budgets: c.Budgets,
		ApprovalTimeout: c.ApprovalTimeout, Platforms: platforms, Skills: c.Skills, Workspaces: ws, Jobs: c.Jobs, Observer: c.Observer,
		Tell: func(ctx context.Context, key agent.SessionKey, text string) { d.Tell(ctx, key, text) }})
	owner := ""
	if c.Replica != "" {
		boot, err := st.Boot(t.Context(), c.Replica)
		if err != nil {
			t.Fatal(err)
		}
		owner = agent.Owner(c.Replica, boot)
	}
	dc := agent.DispatcherConfig{Store: st, Gate: gate, Loop: c.Loop, Tools: c.Tools, Platforms: platforms, Workspaces: ws,
		MaxTurns: c.MaxTurns, LeaseTTL: c.LeaseTTL, ReadyEvery: c.ReadyEvery, Grace: c.Grace, Owner: owner, Limits: c.Limits, Observer: c.Observer}
	if c.Scheduler != nil {
		dc.Later = c.Scheduler
	}
	d = agent.NewDispatcher(dc)
	if c.Scheduler != nil {
		c.Scheduler.Bind(gate, d)
	}
	return d, gate
}

// startHarness runs a dispatcher on st with c (and its scheduler, if it
// has one), until the test ends or h.stop is called.
func startHarness(t *testing.T, st testStore, c hcfg) *harness {
	t.Helper()
	p := &platform{}
	var pl agent.Platform = p
	if c.Platform != nil {
		pl = c.Platform
	}
	d, gate := build(t, st, c, pl)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		var wg sync.WaitGroup
		if c.Scheduler != nil {
			wg.Go(func() { c.Scheduler.Run(ctx, "test-replica", nil) })
		}
		d.Run(ctx)
		wg.Wait()
		close(done)
	}()
	h := &harness{d: d, gate: gate, p: p, store: st}
	var once sync.Once
	h.stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(h.stop)
	return h
}

func inbound(key agent.SessionKey, id, text string) agent.Inbound {
	return agent.Inbound{Key: key, MessageID: id, User: agent.User{ID: "U1", Name: "ann"}, Text: text, Addressed: true}
}

func (h *harness) submit(t *testing.T, in agent.Inbound) {
	t.Helper()
	if err := h.d.Submit(t.Context(), in); err != nil {
		t.Fatal(err)
	}
}

func (h *harness) idle(t *testing.T, key agent.SessionKey) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := h.d.WaitIdle(ctx, key); err != nil {
		t.Fatal(err)
	}
}

var keyA = agent.SessionKey{Platform: "test", Chat: "C1", Thread: "t1"}
var keyB = agent.SessionKey{Platform: "test", Chat: "C1", Thread: "t2"}
var keyC = agent.SessionKey{Platform: "test", Chat: "C1", Thread: "t3"}

func TestDispatcherDedupAndHistory(t *testing.T) {
	m := &funcModel{f: func(_ context.Context, req *agent.Request) (*agent.Response, error) {
		return answerWith("seen " + lastUser(req)), nil
	}}
	h := newHarness(t, m, 2)
	h.submit(t, inbound(keyA, "m1", "hello"))
	h.submit(t, inbound(keyA, "m1", "hello")) // a platform retry
	h.idle(t, keyA)
	h.submit(t, inbound(keyA, "m1", "hello")) // a late retry, after the turn
	h.submit(t, inbound(keyA, "m2", "again"))
	h.idle(t, keyA)
	answers, failures, _ := h.p.final(keyA)
	if len(answers) != 2 || len(failures) != 0 || m.calls.Load() != 2 {
		t.Fatalf("answers %q failures %q model calls %d; want 2 answers", answers, failures, m.calls.Load())
	}
	hist, err := h.store.History(t.Context(), keyA)
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != 4 || hist[0].Content != "[ann] hello" || hist[3].Content != "seen [ann] again" {
		t.Fatalf("history = %+v", hist)
	}
}

func TestDispatcherIgnoresUnaddressed(t *testing.T) {
	m := &funcModel{f: func(context.Context, *agent.Request) (*agent.Response, error) { return answerWith("x"), nil }}
	h := newHarness(t, m, 1)
	in := inbound(keyA, "m1", "chatter between people")
	in.Addressed = false
	h.submit(t, in)
	h.idle(t, keyA)
	if n, _ := h.store.Pending(t.Context(), keyA); n != 0 || m.calls.Load() != 0 {
		t.Fatalf("unaddressed message was queued (%d) or answered (%d)", n, m.calls.Load())
	}
}

func TestDispatcherCollectsMessagesDuringTurn(t *testing.T) {
	release := make(chan struct{})
	var inputs []string
	var mu sync.Mutex
	m := &funcModel{f: func(ctx context.Context, req *agent.Request) (*agent.Response, error) {
		mu.Lock()
		inputs = append(inputs, lastUser(req))
		first := len(inputs) == 1
		mu.Unlock()
		if first {
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return answerWith("ok"), nil
	}}
	h := newHarness(t, m, 4)
	h.submit(t, inbound(keyA, "m1", "first"))
	waitFor(t, func() bool { return m.calls.Load() == 1 })
	h.submit(t, inbound(keyA, "m2", "second"))
	h.submit(t, inbound(keyA, "m3", "third"))
	h.submit(t, inbound(keyA, "m2", "second")) // duplicate while waiting
	close(release)
	h.idle(t, keyA)
	if len(inputs) != 2 {
		t.Fatalf("model saw %d turns: %q", len(inputs), inputs)
	}
	if inputs[0] != "[ann] first" || inputs[1] != "[ann] second\n\n[ann] third" {
		t.Fatalf("inputs = %q", inputs)
	}
	if m.maxPar.Load() != 1 {
		t.Fatalf("%d concurrent model calls in one session", m.maxPar.Load())
	}
	answers, _, _ := h.p.final(keyA)
	if len(answers) != 2 {
		t.Fatalf("answers = %q", answers)
	}
}

func TestDispatcherRunsSessionsInParallel(t *testing.T) {
	gate := make(chan struct{})
	m := &funcModel{f: func(ctx context.Context, req *agent.Request) (*agent.Response, error) {
		select {
		case <-gate:
			return answerWith("ok"), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}}
	h := newHarness(t, m, 2)
	h.submit(t, inbound(keyA, "m1", "a"))
	h.submit(t, inbound(keyB, "m2", "b"))
	waitFor(t, func() bool { return m.inFlight.Load() == 2 }) // both sessions reached the model at once
	close(gate)
	h.idle(t, keyA)
	h.idle(t, keyB)
	if m.calls.Load() != 2 {
		t.Fatalf("calls = %d", m.calls.Load())
	}
}

// On a busy dispatcher a session whose next message came during its turn
// goes behind the sessions already waiting for a worker, rather than
// taking the worker again at once: with one worker, A's first turn, then
// B's, then A's second.
func TestDispatcherFairShare(t *testing.T) {
	var mu sync.Mutex
	var order []string
	first := make(chan struct{})
	release := make(chan struct{})
	m := &funcModel{f: func(ctx context.Context, req *agent.Request) (*agent.Response, error) {
		text := strings.TrimPrefix(lastUser(req), "[ann] ")
		mu.Lock()
		order = append(order, text)
		n := len(order)
		mu.Unlock()
		if n == 1 {
			close(first)
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return answerWith("ok " + text), nil
	}}
	h := newHarness(t, m, 1)
	h.submit(t, inbound(keyA, "a1", "A1"))
	<-first
	// A1's turn runs; A2 comes for the same session, B1 for another.
	h.submit(t, inbound(keyA, "a2", "A2"))
	h.submit(t, inbound(keyB, "b1", "B1"))
	close(release)
	h.idle(t, keyA)
	h.idle(t, keyB)
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(order, []string{"A1", "B1", "A2"}) {
		t.Fatalf("turns ran in the order %q, want A1, B1, A2", order)
	}
}

// A session queued again with its lease kept (see TestDispatcherFairShare)
// lets the lease go when shutdown begins: another replica takes it at
// once, not when the lease runs out, nor after the running turns' grace.
func TestDispatcherFairShareShutdown(t *testing.T) {
	started := make(chan string, 4)
	m := &funcModel{f: func(ctx context.Context, req *agent.Request) (*agent.Response, error) {
		text := strings.TrimPrefix(lastUser(req), "[ann] ")
		started <- text
		if text == "A1" {
			return answerWith("ok"), nil
		}
		<-ctx.Done() // B1 runs until the shutdown cuts it short
		return nil, context.Cause(ctx)
	}}
	st := openStore(t)
	gate := make(chan struct{})
	slow := &funcModel{f: func(ctx context.Context, req *agent.Request) (*agent.Response, error) {
		if strings.HasSuffix(lastUser(req), "A1") {
			<-gate
		}
		return m.f(ctx, req)
	}}
	h := startHarness(t, st, hcfg{Loop: &agent.Loop{Model: slow}, MaxTurns: 1, LeaseTTL: time.Hour, Grace: 3 * time.Second})
	h.submit(t, inbound(keyA, "a1", "A1"))
	waitFor(t, func() bool { return slow.inFlight.Load() == 1 })
	h.submit(t, inbound(keyA, "a2", "A2"))
	h.submit(t, inbound(keyB, "b1", "B1"))
	// While A1's answer is shown its worker is parked, and another takes
	// B1; C1 is still waiting when A1's worker is done, so A goes behind
	// it whichever worker took B1.
	h.submit(t, inbound(keyC, "c1", "C1"))
	close(gate)
	for _, want := range []string{"A1", "B1"} {
		if got := <-started; got != want {
			t.Fatalf("turn %q started, want %q", got, want)
		}
	}
	stopped := make(chan struct{})
	go func() { h.stop(); close(stopped) }()
	// A waits with A2, its lease (an hour long) let go while B1 still runs
	// in its grace.
	deadline := time.Now().Add(2 * time.Second)
	for {
		_, err := st.Claim(t.Context(), keyA, agent.Owner("other", 1), time.Second)
		if err == nil {
			break
		}
		if !errors.Is(err, agent.ErrLeaseHeld) || time.Now().After(deadline) {
			t.Fatalf("another replica could not take the queued session: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case <-stopped:
		t.Fatal("the dispatcher stopped before B1's grace was over")
	default:
	}
}

// By default a replica holds every conversation that waits on the model
// at once: 300 people writing together are 300 model calls in flight, not
// 8 at a time with the rest queued behind them; and no goroutine is left
// once they are done.
func TestDispatcherTurnsInFlightAreNotWorkers(t *testing.T) {
	const people = 300
	gate := make(chan struct{})
	m := &funcModel{f: func(ctx context.Context, req *agent.Request) (*agent.Response, error) {
		select {
		case <-gate:
			return answerWith("ok"), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}}
	before := runtime.NumGoroutine()
	h := newHarness(t, m, 0) // the default
	var keys []agent.SessionKey
	for i := range people {
		k := agent.SessionKey{Platform: "test", Chat: fmt.Sprintf("D%d", i)}
		keys = append(keys, k)
		h.submit(t, inbound(k, "m", "x"))
	}
	waitFor(t, func() bool { return m.inFlight.Load() == people })
	close(gate)
	for _, k := range keys {
		h.idle(t, k)
	}
	if m.calls.Load() != people {
		t.Fatalf("calls %d", m.calls.Load())
	}
	// The workers end with their sessions; what is left is the
	// dispatcher's own (the ready watcher) and the harness's.
	waitFor(t, func() bool { return runtime.NumGoroutine() < before+people/10 })
}

func TestDispatcherBoundedWorkers(t *testing.T) {
	gate := make(chan struct{})
	m := &funcModel{f: func(ctx context.Context, req *agent.Request) (*agent.Response, error) {
		select {
		case <-gate:
			return answerWith("ok"), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}}
	h := newHarness(t, m, 2)
	var keys []agent.SessionKey
	for i := range 5 {
		k := agent.SessionKey{Platform: "test", Chat: "C", Thread: string(rune('a' + i))}
		keys = append(keys, k)
		h.submit(t, inbound(k, "m"+k.Thread, "x"))
	}
	waitFor(t, func() bool { return m.inFlight.Load() == 2 })
	time.Sleep(50 * time.Millisecond) // a third worker would show up here
	if n := m.inFlight.Load(); n != 2 {
		t.Fatalf("%d turns at once with 2 workers", n)
	}
	close(gate)
	for _, k := range keys {
		h.idle(t, k)
	}
	if m.calls.Load() != 5 || m.maxPar.Load() != 2 {
		t.Fatalf("calls %d, max parallel %d", m.calls.Load(), m.maxPar.Load())
	}
}

func TestDispatcherCommands(t *testing.T) {
	m := &funcModel{f: func(ctx context.Context, req *agent.Request) (*agent.Response, error) {
		if lastUser(req) == "[ann] wait" {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return answerWith("ok"), nil
	}}
	h := newHarness(t, m, 2)
	h.submit(t, inbound(keyA, "m1", "remember this"))
	h.idle(t, keyA)

	h.submit(t, inbound(keyA, "m2", "wait"))
	waitFor(t, func() bool { return m.inFlight.Load() == 1 })
	h.submit(t, inbound(keyA, "c1", "status"))
	h.submit(t, inbound(keyA, "c2", "/STOP"))
	h.submit(t, inbound(keyA, "c2", "/STOP")) // retried delivery: one reply
	h.idle(t, keyA)
	h.submit(t, inbound(keyA, "c3", "stop"))
	h.submit(t, inbound(keyA, "c4", "reset"))
	h.submit(t, inbound(keyA, "c5", "help"))
	h.submit(t, inbound(keyA, "m3", "stop the build please")) // a sentence, not a command
	h.idle(t, keyA)
	h.stop() // waits for command replies in flight

	answers, failures, notices := h.p.final(keyA)
	if len(failures) != 1 || failures[0] != "Stopped." {
		t.Errorf("failures = %q", failures)
	}
	if len(answers) != 2 {
		t.Errorf("answers = %q; the sentence starting with stop must be a message", answers)
	}
	want := []string{"Working on a turn", "Stopping.", "Nothing is running", "forgotten", "Commands"}
	for _, n := range notices {
		if strings.Contains(n, "Working on a turn") && strings.Contains(n, "waiting") {
			t.Errorf("status counts the running turn's own message as waiting: %q", n)
		}
	}
	if len(notices) != len(want) {
		t.Fatalf("notices = %q", notices)
	}
	for _, w := range want {
		found := false
		for _, n := range notices {
			found = found || strings.Contains(n, w)
		}
		if !found {
			t.Errorf("no notice containing %q in %q", w, notices)
		}
	}
}

func TestDispatcherResetClearsHistory(t *testing.T) {
	var seen atomic.Int32
	m := &funcModel{f: func(_ context.Context, req *agent.Request) (*agent.Response, error) {
		seen.Store(int32(len(req.Messages)))
		return answerWith("ok"), nil
	}}
	h := newHarness(t, m, 1)
	h.submit(t, inbound(keyA, "m1", "one"))
	h.idle(t, keyA)
	h.submit(t, inbound(keyA, "m2", "two"))
	h.idle(t, keyA)
	if seen.Load() != 3 {
		t.Fatalf("second turn saw %d messages, want 3", seen.Load())
	}
	h.submit(t, inbound(keyA, "c1", "reset"))
	h.submit(t, inbound(keyA, "m3", "three"))
	h.idle(t, keyA)
	if seen.Load() != 1 {
		t.Fatalf("after reset the model saw %d messages, want 1", seen.Load())
	}
}

func TestDispatcherModelFailureIsToldAndKept(t *testing.T) {
	m := &funcModel{f: func(context.Context, *agent.Request) (*agent.Response, error) {
		return nil, &agent.ModelError{Status: 429, Attempts: 5, RetryAfter: 20 * time.Second, Err: errors.New("slow down")}
	}}
	h := newHarness(t, m, 1)
	h.submit(t, inbound(keyA, "m1", "hi"))
	h.idle(t, keyA)
	_, failures, _ := h.p.final(keyA)
	if len(failures) != 1 || !strings.Contains(failures[0], "rate-limited") || !strings.Contains(failures[0], "20s") {
		t.Fatalf("failures = %q", failures)
	}
	hist, _ := h.store.History(t.Context(), keyA)
	if len(hist) != 1 || hist[0].Role != agent.RoleUser {
		t.Fatalf("history = %+v; the person's message must be kept", hist)
	}
	if n, _ := h.store.Pending(t.Context(), keyA); n != 0 {
		t.Fatalf("mailbox still has %d entries", n)
	}
}

func TestDispatcherRejectsBadInbound(t *testing.T) {
	m := &funcModel{f: func(context.Context, *agent.Request) (*agent.Response, error) { return answerWith("x"), nil }}
	h := newHarness(t, m, 1)
	if err := h.d.Submit(t.Context(), agent.Inbound{Key: agent.SessionKey{Platform: "test"}, MessageID: "1", Addressed: true}); err == nil {
		t.Error("a key without a chat was accepted")
	}
	if err := h.d.Submit(t.Context(), agent.Inbound{Key: keyA, Addressed: true}); err == nil {
		t.Error("a message without an ID was accepted")
	}
}

// readerPlatform can read a thread's earlier messages.
type readerPlatform struct {
	platform
	earlier string
	reads   atomic.Int32
}

func (p *readerPlatform) EarlierMessages(context.Context, agent.SessionKey, agent.Inbound) (string, error) {
	p.reads.Add(1)
	return p.earlier, nil
}

func TestFollowUpsAndThreadContext(t *testing.T) {
	var inputs []string
	var mu sync.Mutex
	m := &funcModel{f: func(_ context.Context, req *agent.Request) (*agent.Response, error) {
		mu.Lock()
		inputs = append(inputs, lastUser(req))
		mu.Unlock()
		return answerWith("ok"), nil
	}}
	st := openStore(t)
	p := &readerPlatform{earlier: "[bob] the build broke at step 3"}
	d := startHarness(t, st, hcfg{Loop: &agent.Loop{Model: m}, Platform: p}).d
	submit := func(in agent.Inbound) {
		t.Helper()
		if err := d.Submit(t.Context(), in); err != nil {
			t.Fatal(err)
		}
		if err := d.WaitIdle(t.Context(), in.Key); err != nil {
			t.Fatal(err)
		}
	}

	// People talk in a thread the bot is not part of: ignored.
	chatter := inbound(keyA, "m1", "lunch?")
	chatter.Addressed, chatter.FollowUp = false, true
	submit(chatter)
	if m.calls.Load() != 0 {
		t.Fatal("a follow-up in a thread the bot is not part of was answered")
	}
	// Mentioned in that thread: the earlier messages come with the turn.
	submit(inbound(keyA, "m2", "what broke?"))
	// A follow-up without a mention is now for the bot; no context again.
	follow := inbound(keyA, "m3", "and how do I fix it?")
	follow.Addressed, follow.FollowUp = false, true
	submit(follow)
	mu.Lock()
	defer mu.Unlock()
	if len(inputs) != 2 {
		t.Fatalf("inputs %q", inputs)
	}
	if !strings.Contains(inputs[0], "[bob] the build broke at step 3") || !strings.HasSuffix(inputs[0], "[ann] what broke?") {
		t.Errorf("first turn input %q", inputs[0])
	}
	if inputs[1] != "[ann] and how do I fix it?" || p.reads.Load() != 1 {
		t.Errorf("second turn input %q, thread read %d times", inputs[1], p.reads.Load())
	}
}

// dlPlatform saves files whose URL is "ok" and refuses the others.
type dlPlatform struct{ platform }

func (p *dlPlatform) Download(_ context.Context, f agent.File, ws *tools.Workspace) (string, error) {
	if f.URL != "ok" {
		return "", errors.New("file is 30 MB, over the 20 MB limit")
	}
	path := "uploads/" + f.Name
	_, err := ws.WriteFile(path, []byte("data of "+f.Name), 1<<20)
	return path, err
}

func TestFilesDownloadedAtTurnStart(t *testing.T) {
	var input string
	m := &funcModel{f: func(_ context.Context, req *agent.Request) (*agent.Response, error) {
		input = lastUser(req)
		return answerWith("ok"), nil
	}}
	st := openStore(t)
	dir := t.TempDir()
	d := startHarness(t, st, hcfg{Loop: &agent.Loop{Model: m}, WorkspaceDir: dir, Platform: &dlPlatform{}}).d
	in := inbound(keyA, "m1", "look at these")
	in.Files = []agent.File{{Name: "a.csv", URL: "ok", MIME: "text/csv", Size: 10}, {Name: "big.iso", URL: "big"}}
	if err := d.Submit(t.Context(), in); err != nil {
		t.Fatal(err)
	}
	if err := d.WaitIdle(t.Context(), keyA); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(input, "[attached file: uploads/a.csv (text/csv, 10 bytes) in the workspace]") ||
		!strings.Contains(input, `[attached file "big.iso" could not be saved: file is 30 MB, over the 20 MB limit]`) {
		t.Fatalf("input %q", input)
	}
	data, err := os.ReadFile(filepath.Join(tools.WorkspacePath(dir, keyA.Channel().String()), "uploads", "a.csv"))
	if err != nil || string(data) != "data of a.csv" {
		t.Fatalf("saved file: %q %v", data, err)
	}
}

func TestHugeInputIsCutWithANote(t *testing.T) {
	var input string
	m := &funcModel{f: func(_ context.Context, req *agent.Request) (*agent.Response, error) {
		input = lastUser(req)
		return answerWith("ok"), nil
	}}
	h := newHarness(t, m, 1)
	huge := strings.Repeat("é", 100<<10) // 200 KiB of two-byte runes
	h.submit(t, inbound(keyA, "m1", huge))
	h.idle(t, keyA)
	if len(input) > 70<<10 || !strings.Contains(input, "[message cut:") || !utf8.ValidString(input) {
		t.Fatalf("the model got %d bytes (valid UTF-8: %v), ending %q", len(input), utf8.ValidString(input), input[max(0, len(input)-80):])
	}
	if answers, _, _ := h.p.final(keyA); len(answers) != 1 {
		t.Fatalf("answers %q", answers)
	}
}

// A command for admins only answers others with a refusal and does
// nothing; help lists every command of the registry.
func TestCommandsForAdminsOnly(t *testing.T) {
	h := startHarness(t, openStore(t), hcfg{Loop: &agent.Loop{Model: &funcModel{f: func(context.Context, *agent.Request) (*agent.Response, error) { return answerWith("no"), nil }}},
		MaxTurns: 1, Admins: func(_, id string) bool { return id == "U9" }})
	h.submit(t, inbound(keyA, "c1", "/pair K7QP-M2XD"))
	h.submit(t, inbound(keyA, "c3", "help"))
	h.stop()
	_, _, notices := h.p.final(keyA) // replies are sent in the background: in any order
	slices.Sort(notices)
	if len(notices) != 2 || notices[1] != "Only an admin can approve a pairing code." {
		t.Fatalf("notices %q", notices)
	}
	help := notices[0]
	for _, c := range agent.Commands() {
		if !strings.Contains(help, "• "+c.Name) || !strings.Contains(help, c.Summary) {
			t.Errorf("help lacks %s: %q", c.Name, help)
		}
	}
	if !strings.Contains(help, "• pair CODE: approve a pairing code someone was given (admins)") {
		t.Errorf("help does not say pair is for admins: %q", help)
	}
}

// A model reply cut for its size, or a stream that stalled, is told as
// what it is, not as a model that could not be reached.
func TestDispatcherModelLimitIsTold(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("passed the 1 MiB limit: %w", agent.ErrModelTooLarge), "grew past the size"},
		{fmt.Errorf("no data for 1m: %w", agent.ErrModelStalled), "stopped sending its answer partway"},
	} {
		m := &funcModel{f: func(context.Context, *agent.Request) (*agent.Response, error) {
			return nil, &agent.ModelError{Attempts: 1, Err: tc.err}
		}}
		h := newHarness(t, m, 1)
		h.submit(t, inbound(keyA, "m1", "hi"))
		h.idle(t, keyA)
		if _, failures, _ := h.p.final(keyA); len(failures) != 1 || !strings.Contains(failures[0], tc.want) {
			t.Errorf("%v: failures = %q; want %q", tc.err, failures, tc.want)
		}
	}
}
