package agent_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/firstmate/firstmate/agent"
)

// notices are the texts of the Notice events a recorder got.
func (r *recorder) notices() []string {
	var out []string
	for _, ev := range r.all() {
		if n, ok := ev.(agent.Notice); ok {
			out = append(out, n.Text)
		}
	}
	return out
}

func echoCalls(prefix string, n int, text string) []agent.ToolCall {
	cs := make([]agent.ToolCall, n)
	for i := range cs {
		cs[i] = call(fmt.Sprintf("%s%d", prefix, i), "echo", fmt.Sprintf(`{"text":%q}`, text))
	}
	return cs
}

// A reply asking for more calls than a step may make runs the first ones
// only; every call still gets a result (the history stays valid), the
// others' saying why they did not run, and the person is told once.
func TestRunCapsToolCallsPerStep(t *testing.T) {
	m := &scriptModel{replies: []func(*agent.Request) (*agent.Response, error){
		calls(echoCalls("a", 5, "hi")...),
		calls(echoCalls("b", 4, "hi")...),
		text("done"),
	}}
	rec := &recorder{}
	l := &agent.Loop{Model: m, Limits: agent.Limits{CallsPerStep: 3}}
	out, err := l.Run(t.Context(), &agent.Turn{Input: userMsg("go"), Tools: testTools(t), Thread: rec})
	if err != nil {
		t.Fatal(err)
	}
	if err := agent.ValidateHistory(out.Messages); err != nil {
		t.Fatal(err)
	}
	if out.ToolCalls != 6 {
		t.Errorf("%d tool calls ran, want 3 a step", out.ToolCalls)
	}
	started := 0
	for _, ev := range rec.all() {
		if _, ok := ev.(agent.ToolStarted); ok {
			started++
		}
	}
	if started != 6 {
		t.Errorf("%d ToolStarted events, want 6", started)
	}
	// The second call saw the first step's five results.
	results := m.seen[1][2:]
	for i, r := range results {
		notRun := strings.Contains(r.Content, "not run: a step may make at most 3 tool calls and this one asked for 5")
		if (i >= 3) != notRun || (i < 3 && r.Content != "hi") {
			t.Errorf("result %d = %q", i, r.Content)
		}
	}
	if n := rec.notices(); len(n) != 1 || !strings.Contains(n[0], "2 of 5 tool calls were not run: a step may make at most 3") {
		t.Errorf("notices %q, want one about the first step's calls", n)
	}
}

// A step's and a turn's results have a budget of bytes; a result that
// does not fit what is left is replaced by an error saying the call ran
// and why its result is not shown, never cut silently.
func TestRunResultBudgets(t *testing.T) {
	forty := strings.Repeat("x", 40)
	m := &scriptModel{replies: []func(*agent.Request) (*agent.Response, error){
		calls(echoCalls("a", 3, forty)...), // 40, 80, then 120 > the step's 100
		calls(echoCalls("b", 3, forty)...), // a new step: 120, then 160 > the turn's 150
		text("done"),
	}}
	rec := &recorder{}
	l := &agent.Loop{Model: m, Limits: agent.Limits{StepResultBytes: 100, TurnResultBytes: 150}}
	out, err := l.Run(t.Context(), &agent.Turn{Input: userMsg("go"), Tools: testTools(t), Thread: rec})
	if err != nil {
		t.Fatal(err)
	}
	if err := agent.ValidateHistory(out.Messages); err != nil {
		t.Fatal(err)
	}
	if out.ToolCalls != 6 {
		t.Errorf("%d calls ran, want all 6: only results are held back", out.ToolCalls)
	}
	var got []string
	for _, msg := range out.Messages {
		if msg.Role == agent.RoleTool {
			got = append(got, msg.Content)
		}
	}
	step := "error: this call ran, but its result (40 B) is not shown: this step's results passed 100 B; read less at once"
	turn := "error: this call ran, but its result (40 B) is not shown: this turn's results passed 150 B; answer with what you have"
	want := []string{forty, forty, step, forty, turn, turn}
	for i := range want {
		if i >= len(got) || !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("result %d = %q, want %q…", i, got[i], want[i])
		}
	}
	n := rec.notices()
	if len(n) != 2 || !strings.Contains(n[0], "a step's results may hold at most 100 B") || !strings.Contains(n[1], "a turn's results may hold at most 150 B") {
		t.Errorf("notices %q, want one for each budget", n)
	}
}

// Over the context budget, the oldest whole turns of the history go
// first; then the oldest tool results of what is sent are elided (in the
// request only), never the newest step's.
func TestRunContextBudgetWithinTurn(t *testing.T) {
	long := strings.Repeat("y", 400) // 104 tokens a message
	history := []agent.Message{
		userMsg("old question " + long), {Role: agent.RoleAssistant, Content: "old answer " + long},
		userMsg("recent question " + long), {Role: agent.RoleAssistant, Content: "recent answer " + long},
	}
	histTokens := 0
	for i := range history {
		histTokens += agent.EstimateTokens(&history[i])
	}
	m := &scriptModel{replies: []func(*agent.Request) (*agent.Response, error){
		calls(call("a", "echo", fmt.Sprintf(`{"text":%q}`, "first "+long))),
		calls(call("b", "echo", fmt.Sprintf(`{"text":%q}`, "second "+long))),
		text("done"),
	}}
	rec := &recorder{}
	// The first call fits; the second only without the oldest turn; the
	// third not even with only the recent turn, so the first result goes.
	budget := histTokens + 30
	l := &agent.Loop{Model: m, Limits: agent.Limits{ContextTokens: budget}}
	out, err := l.Run(t.Context(), &agent.Turn{History: history, Input: userMsg("go"), Tools: testTools(t), Thread: rec})
	if err != nil {
		t.Fatal(err)
	}
	has := func(msgs []agent.Message, s string) bool {
		for _, m := range msgs {
			if strings.HasPrefix(m.Content, s) {
				return true
			}
		}
		return false
	}
	if !has(m.seen[0], "old question") {
		t.Errorf("the first call, within the budget, lost the old turn")
	}
	if has(m.seen[1], "old question") || !has(m.seen[1], "recent question") || !has(m.seen[1], "first y") {
		t.Errorf("second call: the old turn should go, the recent turn and the result stay: %v", contents(m.seen[1]))
	}
	third := m.seen[2]
	if !has(third, "recent question") || !has(third, "[result of echo elided: 406 bytes; call again if needed]") ||
		has(third, "first y") || !has(third, "second y") {
		t.Errorf("third call: the first result should be elided, the newest kept: %v", contents(third))
	}
	// What is stored keeps the results whole.
	if !has(out.Messages, "first y") || !has(out.Messages, "second y") {
		t.Errorf("the turn's messages lost a result: %v", contents(out.Messages))
	}
	if n := rec.notices(); len(n) != 1 || !strings.Contains(n[0], fmt.Sprintf("context budget (%d tokens)", budget)) {
		t.Errorf("notices %q, want one about the context budget", n)
	}
}

// The newest step's results are sent whole even when they alone pass the
// budget: the model has not seen them yet.
func TestRunContextBudgetKeepsNewestStep(t *testing.T) {
	long := strings.Repeat("z", 400)
	m := &scriptModel{replies: []func(*agent.Request) (*agent.Response, error){
		calls(echoCalls("a", 2, long)...),
		calls(echoCalls("b", 2, long)...),
		text("done"),
	}}
	l := &agent.Loop{Model: m, Limits: agent.Limits{ContextTokens: 10}}
	if _, err := l.Run(t.Context(), &agent.Turn{Input: userMsg("go"), Tools: testTools(t)}); err != nil {
		t.Fatal(err)
	}
	count := func(msgs []agent.Message, s string) (n int) {
		for _, m := range msgs {
			if m.Role == agent.RoleTool && m.Content == s {
				n++
			}
		}
		return n
	}
	if n := count(m.seen[1], long); n != 2 {
		t.Errorf("second call got %d of the newest step's 2 results whole", n)
	}
	if n := count(m.seen[2], long); n != 2 {
		t.Errorf("third call got %d whole results, want the newest step's 2", n)
	}
	if err := agent.ValidateHistory(m.seen[2]); err != nil {
		t.Errorf("the request with elided results is not valid history: %v", err)
	}
}

func contents(msgs []agent.Message) []string {
	var out []string
	for _, m := range msgs {
		out = append(out, fmt.Sprintf("%s:%.20s", m.Role, m.Content))
	}
	return out
}
