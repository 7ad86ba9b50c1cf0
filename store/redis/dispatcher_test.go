package redis

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/internal/testkit/dispatch"
	"github.com/firstmate/firstmate/tools"
)

// instantModel calls the noop tool once, then answers.
type instantModel struct{}

func (instantModel) Complete(_ context.Context, req *agent.Request) (*agent.Response, error) {
	if req.Messages[len(req.Messages)-1].Role == agent.RoleTool {
		return &agent.Response{Message: agent.Message{Role: agent.RoleAssistant, Content: "done"}}, nil
	}
	return &agent.Response{Message: agent.Message{Role: agent.RoleAssistant,
		ToolCalls: []agent.ToolCall{{ID: "c1", Name: "noop", Args: json.RawMessage(`{}`)}}}}, nil
}

type answers struct {
	mu sync.Mutex
	n  int
}

func (a *answers) Thread(agent.SessionKey, agent.Inbound) agent.Thread { return a }
func (a *answers) Emit(_ context.Context, ev agent.Event) error {
	if _, ok := ev.(agent.Answer); ok {
		a.mu.Lock()
		a.n++
		a.mu.Unlock()
	}
	return nil
}

type noArgs struct{}

// startScan reports when a Dispatcher's start-up look for sessions with
// messages waiting has ended: its SCAN, which pages through every key of
// the server (other tests' too) and so takes a round trip per page, is
// not part of a turn.
type startScan struct {
	once sync.Once
	done chan struct{}
}

func (h *startScan) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (h *startScan) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		err := next(ctx, cmd)
		if sc, ok := cmd.(*goredis.ScanCmd); ok && err == nil {
			if _, cursor := sc.Val(); cursor == 0 {
				h.once.Do(func() { close(h.done) })
			}
		}
		return err
	}
}

func (h *startScan) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return next
}

// dispatcherOn runs a real Dispatcher on s until the test ends; it returns
// once the Dispatcher has started up.
func dispatcherOn(tb testing.TB, s *Store) (*agent.Dispatcher, *answers) {
	set := tools.NewSet([]tools.Tool{tools.New("noop", tools.PowerRead, "does nothing", func(context.Context, *tools.Workspace, noArgs) (tools.Result, error) {
		return tools.Result{Text: "ok"}, nil
	})})
	a := &answers{}
	scanned := &startScan{done: make(chan struct{})}
	s.client.AddHook(scanned)
	// The look for sessions nobody holds is not part of a turn: kept out
	// of the counts, which a tick landing mid-turn on a slow host would
	// otherwise add to.
	d := dispatch.Start(tb, dispatch.Config{Store: s, Model: instantModel{}, Tools: set, Platforms: map[string]agent.Platform{"slack": a},
		MaxTurns: 2, ReadyEvery: time.Hour})
	select {
	case <-scanned.done:
	case <-time.After(time.Minute):
		tb.Fatal("the dispatcher did not look for waiting sessions at start")
	}
	return d, a
}

// TestDispatcherTurnRoundTrips counts the Redis round trips of one whole
// dispatcher turn (Submit, then the worker's claim, commit, delivery and
// release) on a session with 50 messages of history. The budget is 7:
// Enqueue (its ready touch pipelined with it), Claim, the channel's
// settings, the tool call's audit entry, Commit with the answer in the
// outbox (the touch pipelined again), Delivered and Release. On a Cluster
// the two touches are round trips of their own (TestClusterConformance).
func TestDispatcherTurnRoundTrips(t *testing.T) {
	s, c := newStore(t, agent.Retention{})
	ctx := t.Context()
	key := agent.SessionKey{Platform: "slack", Team: "T1", Chat: "C1", Thread: "1700.01"}
	// 50 messages of history: 12 turns of 4 and one of 2.
	if _, err := s.Claim(ctx, key, "seed", time.Minute); err != nil {
		t.Fatal(err)
	}
	for i := range 13 {
		turn := turnOf
		if i == 12 {
			turn = turnOf[:1]
			turn = append(turn, agent.Message{Role: agent.RoleAssistant, Content: "ok"})
		}
		if err := s.Commit(ctx, key, "seed", 0, turn, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Release(ctx, key, "seed", ""); err != nil {
		t.Fatal(err)
	}
	if h, _ := s.History(ctx, key); len(h) != 50 {
		t.Fatalf("seeded %d messages, want 50", len(h))
	}
	d, a := dispatcherOn(t, s)
	// Warm the script cache and the pool on another session.
	warm := key
	warm.Thread = "warm"
	if err := d.Submit(ctx, agent.Inbound{Key: warm, MessageID: "w", Text: "hi", Addressed: true}); err != nil {
		t.Fatal(err)
	}
	if err := d.WaitIdle(ctx, warm); err != nil {
		t.Fatal(err)
	}

	hook := &countHook{}
	c.AddHook(hook)
	if err := d.Submit(ctx, agent.Inbound{Key: key, MessageID: "m1", Text: "hi", Addressed: true}); err != nil {
		t.Fatal(err)
	}
	if err := d.WaitIdle(ctx, key); err != nil {
		t.Fatal(err)
	}
	n := hook.n.Load()
	if a.n != 2 {
		t.Fatalf("%d answers, want 2", a.n)
	}
	if h, _ := s.History(ctx, key); len(h) != 54 {
		t.Fatalf("history has %d messages after the turn, want 54", len(h))
	}
	t.Logf("one dispatcher turn with a tool call on a 50-message session: %d Redis round trips", n)
	if n > 7 {
		t.Fatalf("%d round trips, budget 7: %s", n, hook.trips())
	}
}

// BenchmarkDispatcherTurn measures a whole dispatcher turn on Redis: Submit
// to answer, one tool call, instant model.
func BenchmarkDispatcherTurn(b *testing.B) {
	s, c := newStore(b, agent.Retention{MaxTurns: 12})
	hook := &countHook{}
	c.AddHook(hook)
	d, _ := dispatcherOn(b, s)
	ctx := b.Context()
	key := agent.SessionKey{Platform: "slack", Team: "T1", Chat: "C1", Thread: "1700.01"}
	i := 0
	for b.Loop() {
		i++
		if err := d.Submit(ctx, agent.Inbound{Key: key, MessageID: fmt.Sprint(i), Text: "hi", Addressed: true}); err != nil {
			b.Fatal(err)
		}
		if err := d.WaitIdle(ctx, key); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(hook.n.Load())/float64(b.N), "roundtrips/op")
}
