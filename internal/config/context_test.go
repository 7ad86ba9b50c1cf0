package config

import (
	"testing"

	"github.com/firstmate/firstmate/agent"
)

func TestContextBudget(t *testing.T) {
	for _, tc := range []struct {
		model  string
		tokens int // llm.context_tokens
		want   int
	}{
		{"gpt-4o-mini", 0, 64_000},
		{"openai/GPT-4o", 0, 64_000},        // a provider's prefix, any case
		{"gpt-4", 0, 4_096},                 // the longest prefix wins: not gpt-4o's
		{"gpt-4.1-nano", 0, 128_000},        // half a million-token window is capped
		{"claude-sonnet-4-5", 0, 100_000},   // half the window
		{"qwen3:8b", 0, 32_000},             // not known: the default
		{"", 0, agent.DefaultContextTokens}, // no model
		{"gpt-4o", 9_000, 9_000},            // written: as written
		{"gpt-4o", NoContextBudget, -1},     // none, explicitly
	} {
		l := LLM{Model: tc.model, ContextTokens: tc.tokens}
		if got := l.ContextBudget(); got != tc.want {
			t.Errorf("%q with context_tokens %d: budget %d, want %d", tc.model, tc.tokens, got, tc.want)
		}
	}
}

// The defaults give a turn limits; an operator's values reach the agent.
func TestLimits(t *testing.T) {
	c := mustLoad(t, "", env{}.withHome())
	if got, want := c.Limits(), (agent.Limits{CallsPerStep: 32, StepResultBytes: 256 << 10, TurnResultBytes: 1 << 20, ContextTokens: 32_000}); got != want {
		t.Errorf("default limits %+v, want %+v", got, want)
	}
	c = mustLoad(t, writeConfig(t, "llm:\n  model: gpt-4o\n  context_tokens: -1\nagent:\n  max_calls_per_step: 4\n  step_results_kb: 8\n  turn_results_kb: 16\n"), env{}.withHome())
	if got, want := c.Limits(), (agent.Limits{CallsPerStep: 4, StepResultBytes: 8 << 10, TurnResultBytes: 16 << 10, ContextTokens: -1}); got != want {
		t.Errorf("limits %+v, want %+v", got, want)
	}
}
