package redis

import (
	"testing"

	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/agent/govern"
)

// TestMessageBudgetRoundTrips counts the Redis round trips of the gate's
// look at each incoming message with a person's message limit set: one,
// whether the message is counted, delivered again, or over the limit. The
// notice past the limit writes an audit entry besides, once a minute.
func TestMessageBudgetRoundTrips(t *testing.T) {
	s, c := newStore(t, agent.Retention{})
	ctx := t.Context()
	gate := govern.New(govern.Config{Store: s, Budgets: govern.Budgets{UserMessagesPerMinute: 2},
		Access: map[string]govern.Access{"slack": {Mode: govern.AccessOpen}}})
	key := agent.SessionKey{Platform: "slack", Team: "T1", Chat: "C1"}
	receive := func(id string) agent.Admission {
		t.Helper()
		a, err := gate.Receive(ctx, agent.Inbound{Key: key, MessageID: id, User: agent.User{ID: "U1"}, Text: "hi", Addressed: true})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	// Warm the script cache and the pool with another person.
	if _, err := gate.Receive(ctx, agent.Inbound{Key: key, MessageID: "w", User: agent.User{ID: "U2"}, Text: "hi", Addressed: true}); err != nil {
		t.Fatal(err)
	}
	hook := &countHook{}
	c.AddHook(hook)
	for _, step := range []struct {
		what   string
		id     string
		ok     bool
		told   bool
		budget int64
	}{
		{"first message", "1", true, false, 1},
		{"the same message again", "1", true, false, 1},
		{"second message", "2", true, false, 1},
		{"third message, past the limit", "3", false, true, 2}, // and its audit entry
		{"fourth message, past the limit", "4", false, false, 1},
	} {
		hook.reset()
		a := receive(step.id)
		n := hook.n.Load()
		if a.OK != step.ok || (a.Tell != "") != step.told {
			t.Fatalf("%s: %+v, want OK %v, told %v", step.what, a, step.ok, step.told)
		}
		t.Logf("%s: %d Redis round trips: %s", step.what, n, hook.trips())
		if n != step.budget {
			t.Errorf("%s: %d round trips, want %d: %s", step.what, n, step.budget, hook.trips())
		}
	}
}
