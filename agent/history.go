package agent

import (
	"fmt"
)

// ValidateHistory checks the invariant every model API relies on: each
// assistant tool call is answered by exactly one tool result with its ID,
// after the call and before the next user or assistant message, and no
// tool result stands without its call.
func ValidateHistory(msgs []Message) error {
	open := map[string]bool{} // calls of the last assistant message awaiting results
	for i, m := range msgs {
		switch m.Role {
		case RoleTool:
			if !open[m.ToolCallID] {
				return fmt.Errorf("message %d: tool result %q has no open call", i, m.ToolCallID)
			}
			delete(open, m.ToolCallID)
		case RoleAssistant, RoleUser:
			if len(open) > 0 {
				return fmt.Errorf("message %d: %d tool call(s) without a result before it", i, len(open))
			}
			for _, c := range m.ToolCalls {
				if m.Role != RoleAssistant {
					return fmt.Errorf("message %d: tool calls on a %s message", i, m.Role)
				}
				if c.ID == "" || open[c.ID] {
					return fmt.Errorf("message %d: tool call ID %q empty or repeated", i, c.ID)
				}
				open[c.ID] = true
			}
		default:
			return fmt.Errorf("message %d: unknown role %q", i, m.Role)
		}
	}
	if len(open) > 0 {
		return fmt.Errorf("history ends with %d tool call(s) without a result", len(open))
	}
	return nil
}

// RepairHistory returns msgs made valid: tool results without a call are
// dropped and calls without a result get one saying the result was lost.
// History written by this package is always valid; this guards against a
// store that was edited by hand or a version that wrote something else.
func RepairHistory(msgs []Message) []Message {
	if ValidateHistory(msgs) == nil {
		return msgs
	}
	out := make([]Message, 0, len(msgs)+2)
	var open []ToolCall
	closeOpen := func() {
		for _, c := range open {
			out = append(out, Message{Role: RoleTool, ToolCallID: c.ID, ToolName: c.Name, Content: "error: result lost"})
		}
		open = nil
	}
	for _, m := range msgs {
		switch m.Role {
		case RoleTool:
			idx := -1
			for i, c := range open {
				if c.ID == m.ToolCallID {
					idx = i
					break
				}
			}
			if idx < 0 {
				continue
			}
			open = append(open[:idx], open[idx+1:]...)
			out = append(out, m)
		case RoleAssistant, RoleUser:
			closeOpen()
			if m.Role == RoleUser {
				m.ToolCalls = nil
			}
			seen := map[string]bool{}
			calls := m.ToolCalls[:0:0]
			for _, c := range m.ToolCalls {
				if c.ID != "" && !seen[c.ID] {
					seen[c.ID] = true
					calls = append(calls, c)
				}
			}
			m.ToolCalls = calls
			open = append(open, calls...)
			out = append(out, m)
		}
	}
	closeOpen()
	return out
}

// TrimHistory drops whole turns from the oldest end until the history's
// estimated size fits budget tokens. A turn starts at a user message, so a
// tool call is never separated from its result. The newest turn is always
// kept, even if it alone is over budget. budget <= 0 means no limit.
func TrimHistory(msgs []Message, budget int) []Message {
	if budget <= 0 {
		return msgs
	}
	total := 0
	for i := range msgs {
		total += EstimateTokens(&msgs[i])
	}
	start := 0
	for total > budget {
		next := nextTurn(msgs, start)
		if next >= len(msgs) {
			break // only the newest turn is left
		}
		for i := start; i < next; i++ {
			total -= EstimateTokens(&msgs[i])
		}
		start = next
	}
	// History must begin at a turn: a leading tool result or assistant
	// message (from a store trimmed elsewhere) would orphan its call.
	if start < len(msgs) && msgs[start].Role != RoleUser {
		if n := nextTurn(msgs, start); n < len(msgs) {
			start = n
		}
	}
	return msgs[start:]
}

// nextTurn returns the index of the first user message after i.
func nextTurn(msgs []Message, i int) int {
	for j := i + 1; j < len(msgs); j++ {
		if msgs[j].Role == RoleUser {
			return j
		}
	}
	return len(msgs)
}

// EstimateTokens is a cheap, conservative token estimate for budgeting
// (about four bytes a token, plus per-message overhead). It only has to
// be monotonic and in the right range; the provider's count is the truth.
func EstimateTokens(m *Message) int {
	n := 4 + len(m.Content)/4
	for _, c := range m.ToolCalls {
		n += 8 + (len(c.Name)+len(c.Args))/4
	}
	return n
}

// estimateUsage estimates a model call's usage, for a server that sent
// none: the request's system prompt, messages and tools, and the reply, at
// EstimateTokens' rate.
func estimateUsage(req *Request, reply *Message) Usage {
	return Usage{PromptTokens: EstimateRequestTokens(req), CompletionTokens: EstimateTokens(reply), Estimated: true}
}

// EstimateRequestTokens estimates the prompt tokens of req: its system
// prompt, messages and tool specs.
func EstimateRequestTokens(req *Request) int {
	prompt := 4 + len(req.System)/4
	for i := range req.Messages {
		prompt += EstimateTokens(&req.Messages[i])
	}
	for _, s := range req.Tools {
		prompt += 8 + (len(s.Name)+len(s.Description)+len(s.Schema))/4
	}
	return prompt
}
