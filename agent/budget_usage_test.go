package agent_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/firstmate/firstmate/agent"
)

// usageReads counts the store's reads of a channel's token count.
type usageReads struct {
	agent.Store
	reads atomic.Int32
}

func (s *usageReads) Usage(ctx context.Context, ch agent.SessionKey, day string) (int64, error) {
	s.reads.Add(1)
	return s.Store.Usage(ctx, ch, day)
}

// A turn reads the channel's count once; before each later model call it
// uses the total its last count returned, and the budget still stops the
// call that would go past it.
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
	st := &usageReads{Store: openStore(t)}
	cfg := agent.DispatcherConfig{Tools: govTools(), Budgets: agent.Budgets{ChannelTokensPerDay: 1000}}
	cfg.Loop = &agent.Loop{Model: m}
	cfg.Admins = func(platform, id string) bool { return id == "U9" }
	h := startHarness(t, st, cfg)
	ch := agent.SessionKey{Platform: "test", Chat: "B1"}
	h.submit(t, agent.Inbound{Key: ch, MessageID: "m1", User: agent.User{ID: "U9"}, Text: "hi", Addressed: true})
	h.idle(t, ch)
	if answers, failures, _ := h.p.final(ch); len(answers) != 1 || len(failures) != 0 {
		t.Fatalf("answers %q failures %q", answers, failures)
	}
	if n, r := calls.Load(), st.reads.Load(); n != 3 || r != 1 {
		t.Fatalf("%d model calls, %d reads of the count; want 3 and 1", n, r)
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
}

func today() string { return time.Now().UTC().Format(time.DateOnly) }
