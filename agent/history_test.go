package agent_test

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/firstmate/firstmate/agent"
)

func asst(content string, cs ...agent.ToolCall) agent.Message {
	return agent.Message{Role: agent.RoleAssistant, Content: content, ToolCalls: cs}
}

func result(id string) agent.Message {
	return agent.Message{Role: agent.RoleTool, ToolCallID: id, Content: "r"}
}

func TestValidateHistory(t *testing.T) {
	c := func(id string) agent.ToolCall { return call(id, "noop", "{}") }
	tests := []struct {
		name string
		msgs []agent.Message
		ok   bool
	}{
		{"empty", nil, true},
		{"plain", []agent.Message{userMsg("a"), asst("b")}, true},
		{"call and result", []agent.Message{userMsg("a"), asst("", c("1"), c("2")), result("1"), result("2"), asst("done")}, true},
		{"missing result", []agent.Message{userMsg("a"), asst("", c("1"), c("2")), result("1"), asst("done")}, false},
		{"dangling at end", []agent.Message{userMsg("a"), asst("", c("1"))}, false},
		{"orphan result", []agent.Message{userMsg("a"), result("1")}, false},
		{"duplicate result", []agent.Message{userMsg("a"), asst("", c("1")), result("1"), result("1")}, false},
		{"repeated id", []agent.Message{userMsg("a"), asst("", c("1"), c("1")), result("1"), result("1")}, false},
		{"result after user", []agent.Message{userMsg("a"), asst("", c("1")), userMsg("b"), result("1")}, false},
	}
	for _, tt := range tests {
		err := agent.ValidateHistory(tt.msgs)
		if (err == nil) != tt.ok {
			t.Errorf("%s: err = %v", tt.name, err)
		}
		if rep := agent.RepairHistory(tt.msgs); agent.ValidateHistory(rep) != nil {
			t.Errorf("%s: repaired history still invalid: %v", tt.name, agent.ValidateHistory(rep))
		}
	}
}

// randomHistory builds n turns, each a user message followed by a random
// number of tool-call rounds and an answer.
func randomHistory(r *rand.Rand, n int) []agent.Message {
	var msgs []agent.Message
	id := 0
	for range n {
		msgs = append(msgs, userMsg(strings.Repeat("u", r.IntN(400))))
		for range r.IntN(3) {
			var cs []agent.ToolCall
			for range 1 + r.IntN(3) {
				id++
				cs = append(cs, call("c"+strconv.Itoa(id), "noop", "{}"))
			}
			msgs = append(msgs, asst("", cs...))
			for _, c := range cs {
				msgs = append(msgs, agent.Message{Role: agent.RoleTool, ToolCallID: c.ID, Content: strings.Repeat("r", r.IntN(2000))})
			}
		}
		msgs = append(msgs, asst(strings.Repeat("a", r.IntN(400))))
	}
	return msgs
}

func TestTrimHistoryKeepsWholeTurns(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 500 {
		msgs := randomHistory(r, 1+r.IntN(12))
		if err := agent.ValidateHistory(msgs); err != nil {
			t.Fatal(err)
		}
		budget := r.IntN(3000)
		got := agent.TrimHistory(msgs, budget)
		if err := agent.ValidateHistory(got); err != nil {
			t.Fatalf("case %d budget %d: trimmed history invalid: %v", i, budget, err)
		}
		if len(got) == 0 || got[0].Role != agent.RoleUser {
			t.Fatalf("case %d: trimmed history does not start at a turn", i)
		}
		// It is a suffix of the original.
		if &got[len(got)-1] != &msgs[len(msgs)-1] {
			t.Fatalf("case %d: not a suffix", i)
		}
		total := 0
		for j := range got {
			total += agent.EstimateTokens(&got[j])
		}
		turns := 0
		for _, m := range got {
			if m.Role == agent.RoleUser {
				turns++
			}
		}
		if budget > 0 && total > budget && turns > 1 {
			t.Fatalf("case %d: %d tokens over budget %d with %d turns kept", i, total, budget, turns)
		}
	}
}
