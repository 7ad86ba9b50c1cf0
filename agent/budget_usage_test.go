package agent_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/agent/govern"
)

// usageReads counts the store's reads of a channel's token count and its
// adds to it (a commit's are not among them).
type usageReads struct {
	testStore
	reads, adds atomic.Int32
}

func (s *usageReads) Usage(ctx context.Context, ch agent.SessionKey, day string) (int64, error) {
	s.reads.Add(1)
	return s.testStore.Usage(ctx, ch, day)
}

func (s *usageReads) AddUsage(ctx context.Context, ch agent.SessionKey, day string, n int64) (int64, error) {
	s.adds.Add(1)
	return s.testStore.AddUsage(ctx, ch, day, n)
}

// A turn reads the channel's count once; before each later model call it
// adds what the last call spent and uses the total the add returned, and
// the budget still stops the call that would go past it. The last call's
// tokens go with the commit.
func TestBudgetReadOnceATurn(t *testing.T) {
	var calls atomic.Int32
	m := &funcModel{f: func(_ context.Context, req *agent.Request) (*agent.Response, error) {
		r := answerWith("ok")
		if calls.Add(1)%3 != 0 { // two tool calls, then the answer
			r = &agent.Response{Message: agent.Message{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{call("c", "read", `{"text":"x"}`)}}}
		}
		r.Usage = agent.Usage{PromptTokens: 40, CompletionTokens: 10}
		return r, nil
	}}
	st := &usageReads{testStore: openStore(t)}
	cfg := hcfg{Tools: govTools(), Budgets: govern.Budgets{ChannelTokensPerDay: 1000}}
	cfg.Loop = &agent.Loop{Model: m}
	cfg.Admins = func(platform, id string) bool { return id == "U9" }
	h := startHarness(t, st, cfg)
	ch := agent.SessionKey{Platform: "test", Chat: "B1"}
	h.submit(t, agent.Inbound{Key: ch, MessageID: "m1", User: agent.User{ID: "U9"}, Text: "hi", Addressed: true})
	h.idle(t, ch)
	if answers, failures, _ := h.p.final(ch); len(answers) != 1 || len(failures) != 0 {
		t.Fatalf("answers %q failures %q", answers, failures)
	}
	if n, r, a := calls.Load(), st.reads.Load(), st.adds.Load(); n != 3 || r != 1 || a != 2 {
		t.Fatalf("%d model calls, %d reads of the count, %d adds; want 3, 1 and 2", n, r, a)
	}
	if used, _ := st.Usage(t.Context(), ch, today()); used != 150 {
		t.Errorf("counted %d tokens, want 150", used)
	}

	// At 150 of 240: the turn's first call reads the count (150) and runs,
	// the second is allowed at 200 and makes it 250; the third is stopped
	// on the total the second count returned, without another read.
	st.reads.Store(0)
	calls.Store(0)
	cfg2 := cfg
	cfg2.Budgets.ChannelTokensPerDay = 240
	h.stop()
	h = startHarness(t, st, cfg2)
	h.submit(t, agent.Inbound{Key: ch, MessageID: "m2", User: agent.User{ID: "U9"}, Text: "again", Addressed: true})
	h.idle(t, ch)
	_, failures, _ := h.p.final(ch)
	if len(failures) != 1 || !strings.Contains(failures[0], "250 of 240") {
		t.Fatalf("failures %q, want the budget to stop the third call", failures)
	}
	if n, r := calls.Load(), st.reads.Load(); n != 2 || r != 1 {
		t.Fatalf("%d model calls, %d reads of the count; want 2 and 1", n, r)
	}
	if used, _ := st.Usage(t.Context(), ch, today()); used != 250 {
		t.Errorf("counted %d tokens after the stopped turn, want 250", used)
	}

	// With no budget there is nothing to check: the turn's tokens are all
	// counted by its commit, with no round trip of their own.
	st.reads.Store(0)
	st.adds.Store(0)
	calls.Store(0)
	cfg3 := cfg
	cfg3.Budgets.ChannelTokensPerDay = 0
	h.stop()
	h = startHarness(t, st, cfg3)
	h.submit(t, agent.Inbound{Key: ch, MessageID: "m3", User: agent.User{ID: "U9"}, Text: "and again", Addressed: true})
	h.idle(t, ch)
	if n, r, a := calls.Load(), st.reads.Load(), st.adds.Load(); n != 3 || r != 0 || a != 0 {
		t.Fatalf("%d model calls, %d reads of the count, %d adds; want 3, 0 and 0", n, r, a)
	}
	if used, _ := st.Usage(t.Context(), ch, today()); used != 400 {
		t.Errorf("counted %d tokens, want 400", used)
	}
}

func today() string { return time.Now().UTC().Format(time.DateOnly) }

// usageAdds records the tokens of each add to a channel's count, and can
// make the next commit, or the next renewal of a lease, fail as if another
// replica had taken the session.
type usageAdds struct {
	testStore
	loseAtCommit, loseAtRenew atomic.Bool
	adds                      chan int64
}

func (s *usageAdds) AddUsage(ctx context.Context, ch agent.SessionKey, day string, n int64) (int64, error) {
	s.adds <- n
	return s.testStore.AddUsage(ctx, ch, day, n)
}

func (s *usageAdds) Commit(ctx context.Context, key agent.SessionKey, owner string, consumed int, turn []agent.Message, out *agent.Outbound) error {
	if s.loseAtCommit.CompareAndSwap(true, false) {
		return agent.ErrLeaseLost
	}
	return s.testStore.Commit(ctx, key, owner, consumed, turn, out)
}

func (s *usageAdds) Renew(ctx context.Context, key agent.SessionKey, owner string, ttl time.Duration) error {
	if s.loseAtRenew.CompareAndSwap(true, false) {
		return agent.ErrLeaseLost
	}
	return s.testStore.Renew(ctx, key, owner, ttl)
}

// A turn that ends without a commit still counts the tokens it spent: all
// of them when the commit fails, and those of its finished model calls
// when it loses its lease mid-turn (a channel with no budget counts only
// at the end of a turn, so these adds are the only count).
func TestUsageCountedWithoutCommit(t *testing.T) {
	ch := agent.SessionKey{Platform: "test", Chat: "B1"}
	firstAdd := func(t *testing.T, st *usageAdds) int64 {
		t.Helper()
		select {
		case n := <-st.adds:
			return n
		case <-time.After(10 * time.Second):
			t.Fatal("no tokens were counted")
			return 0
		}
	}

	t.Run("commit fails", func(t *testing.T) {
		var calls atomic.Int32
		m := &funcModel{f: func(_ context.Context, req *agent.Request) (*agent.Response, error) {
			r := answerWith("ok")
			if calls.Add(1)%3 != 0 {
				r = &agent.Response{Message: agent.Message{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{call("c", "read", `{"text":"x"}`)}}}
			}
			r.Usage = agent.Usage{PromptTokens: 40, CompletionTokens: 10}
			return r, nil
		}}
		st := &usageAdds{testStore: openStore(t), adds: make(chan int64, 16)}
		st.loseAtCommit.Store(true)
		cfg := hcfg{Tools: govTools(), Loop: &agent.Loop{Model: m}}
		cfg.Admins = func(platform, id string) bool { return id == "U9" }
		h := startHarness(t, st, cfg)
		h.submit(t, agent.Inbound{Key: ch, MessageID: "m1", User: agent.User{ID: "U9"}, Text: "hi", Addressed: true})
		if n := firstAdd(t, st); n != 150 {
			t.Errorf("the failed commit's turn counted %d tokens, want 150 (three calls of 50)", n)
		}
		h.stop()
	})

	t.Run("lease lost mid-turn", func(t *testing.T) {
		var calls atomic.Int32
		st := &usageAdds{testStore: openStore(t), adds: make(chan int64, 16)}
		m := &funcModel{f: func(ctx context.Context, req *agent.Request) (*agent.Response, error) {
			if calls.Add(1) == 1 {
				r := &agent.Response{Message: agent.Message{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{call("c", "read", `{"text":"x"}`)}}}
				r.Usage = agent.Usage{PromptTokens: 40, CompletionTokens: 10}
				return r, nil
			}
			// The second call is still out when the renewal finds the lease
			// gone; its tokens are never known.
			st.loseAtRenew.Store(true)
			<-ctx.Done()
			return nil, context.Cause(ctx)
		}}
		cfg := hcfg{Tools: govTools(), Loop: &agent.Loop{Model: m}, LeaseTTL: 600 * time.Millisecond}
		cfg.Admins = func(platform, id string) bool { return id == "U9" }
		h := startHarness(t, st, cfg)
		h.submit(t, agent.Inbound{Key: ch, MessageID: "m1", User: agent.User{ID: "U9"}, Text: "hi", Addressed: true})
		if n := firstAdd(t, st); n != 50 {
			t.Errorf("the turn that lost its lease counted %d tokens, want 50 (its first call)", n)
		}
		h.stop()
	})
}

// A channel's token budget holds against a server that sends no usage:
// its calls are counted from estimates, and once the day's budget is
// spent the next turn is refused before it calls the model.
func TestBudgetHoldsWithoutUsageFigures(t *testing.T) {
	m := &funcModel{f: func(_ context.Context, req *agent.Request) (*agent.Response, error) {
		return answerWith("an answer of some length, as answers are"), nil // no usage
	}}
	h := govHarness(t, m, hcfg{Tools: govTools(), Budgets: govern.Budgets{ChannelTokensPerDay: 300}})
	ch := agent.SessionKey{Platform: "test", Chat: "B1"}
	for i := range 8 {
		h.submit(t, agent.Inbound{Key: ch, MessageID: fmt.Sprintf("m%d", i), User: agent.User{ID: "U9"}, Text: "tell me about the sea", Addressed: true})
		h.idle(t, ch)
	}
	answers, failures, _ := h.p.final(ch)
	t.Logf("%d of 8 turns answered under a budget of 300 tokens", len(answers))
	if len(failures) == 0 || !strings.Contains(failures[0], "used its model budget for today") {
		t.Fatalf("%d answers, failures %q: the budget never stopped a turn", len(answers), failures)
	}
	if len(answers) == 8 || int(m.calls.Load()) != len(answers) {
		t.Errorf("%d answers from %d model calls in 8 turns", len(answers), m.calls.Load())
	}
	if used, _ := h.store.Usage(t.Context(), ch, today()); used < 300 {
		t.Errorf("counted %d tokens, want at least the budget", used)
	}
}
