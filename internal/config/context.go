package config

import (
	"strings"

	"github.com/firstmate/firstmate/agent"
)

// NoContextBudget, as llm.context_tokens, sends every turn the history
// keeps (agent.history_turns) and all of a turn's tool results with each
// model call, however large. Only for a model that takes more than the
// budget would allow and an operator who pays for it.
const NoContextBudget = -1

// maxDefaultContext caps a budget derived from a window: a million-token
// model would otherwise be sent up to 2 MB again on every call of a turn.
// An operator who wants more writes it.
const maxDefaultContext = 128_000

// contextWindows are the context windows, in tokens, of well-known
// families of models, by name prefix (the longest that matches wins; the
// name is compared in lower case, after any "provider/" part). Kept short
// on purpose: a model not listed gets agent.DefaultContextTokens, and an
// operator can always write llm.context_tokens.
var contextWindows = []struct {
	prefix string
	tokens int
}{
	{"gpt-3.5-turbo", 16_385},
	{"gpt-4", 8_192},
	{"gpt-4-turbo", 128_000},
	{"gpt-4o", 128_000},
	{"gpt-4.1", 1_047_576},
	{"gpt-5", 400_000},
	{"o1", 128_000},
	{"o3", 200_000},
	{"o4", 200_000},
	{"claude", 200_000},
	{"gemini", 1_048_576},
	{"llama3.1", 128_000},
	{"llama-3.1", 128_000},
}

// ContextWindow returns the context window of model in tokens, or 0 if
// it is not a model contextWindows knows.
func ContextWindow(model string) int {
	m := strings.ToLower(strings.TrimSpace(model))
	if i := strings.LastIndexByte(m, '/'); i >= 0 {
		m = m[i+1:]
	}
	best, tokens := 0, 0
	for _, w := range contextWindows {
		if strings.HasPrefix(m, w.prefix) && len(w.prefix) > best {
			best, tokens = len(w.prefix), w.tokens
		}
	}
	return tokens
}

// ContextBudget is the context budget a turn gets, in estimated tokens
// (about four bytes each), or -1 for none: ContextTokens when set, else
// half the model's window (room for the system prompt, the tools, the
// answer, and a tokenizer that counts more tokens than the estimate),
// at most 128,000, else agent.DefaultContextTokens.
func (l LLM) ContextBudget() int {
	switch {
	case l.ContextTokens > 0:
		return l.ContextTokens
	case l.ContextTokens == NoContextBudget:
		return -1
	}
	if w := ContextWindow(l.Model); w > 0 {
		return min(w/2, maxDefaultContext)
	}
	return agent.DefaultContextTokens
}
