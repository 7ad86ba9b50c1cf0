package openai

import (
	"encoding/json"

	goai "github.com/sashabaranov/go-openai"

	"github.com/firstmate/firstmate/agent"
)

// nativeMessages converts a history to chat messages for a server with
// native tool calls: the system prompt first, then each message in order.
func nativeMessages(system string, msgs []agent.Message) []goai.ChatCompletionMessage {
	out := make([]goai.ChatCompletionMessage, 0, len(msgs)+1)
	if system != "" {
		out = append(out, goai.ChatCompletionMessage{Role: goai.ChatMessageRoleSystem, Content: system})
	}
	calls := map[string]agent.ToolCall{}
	for _, m := range msgs {
		switch m.Role {
		case agent.RoleUser:
			out = append(out, goai.ChatCompletionMessage{Role: goai.ChatMessageRoleUser, Content: orEmpty(m.Content, "(empty message)")})
		case agent.RoleAssistant:
			if m.Content == "" && len(m.ToolCalls) == 0 {
				continue // servers reject an assistant message with neither
			}
			cm := goai.ChatCompletionMessage{Role: goai.ChatMessageRoleAssistant, Content: m.Content}
			for _, c := range m.ToolCalls {
				calls[c.ID] = c
				name := c.Name
				if name == "" {
					name = "invalid_call" // a malformed call; the API needs some name
				}
				cm.ToolCalls = append(cm.ToolCalls, goai.ToolCall{ID: c.ID, Type: goai.ToolTypeFunction,
					Function: goai.FunctionCall{Name: name, Arguments: string(wireArgs(c.Args))}})
			}
			out = append(out, cm)
		case agent.RoleTool:
			out = append(out, goai.ChatCompletionMessage{Role: goai.ChatMessageRoleTool, ToolCallID: m.ToolCallID,
				Content: resultText(m, calls)})
		}
	}
	return out
}

// textMessages converts a history for the [TOOL] text protocol. There is no
// tool role, so calls are written into the assistant's text and results go
// back as user messages; consecutive messages of one role are merged,
// since many chat templates of such models insist on alternating roles.
func textMessages(system string, msgs []agent.Message, tools []agent.ToolSpec) []goai.ChatCompletionMessage {
	if len(tools) > 0 {
		if system != "" {
			system += "\n\n"
		}
		system += toolPrompt(tools)
	}
	out := make([]goai.ChatCompletionMessage, 0, len(msgs)+1)
	if system != "" {
		out = append(out, goai.ChatCompletionMessage{Role: goai.ChatMessageRoleSystem, Content: system})
	}
	add := func(role, content string) {
		if n := len(out); n > 0 && out[n-1].Role == role && role != goai.ChatMessageRoleSystem {
			out[n-1].Content += "\n\n" + content
			return
		}
		out = append(out, goai.ChatCompletionMessage{Role: role, Content: content})
	}
	calls := map[string]agent.ToolCall{}
	for _, m := range msgs {
		switch m.Role {
		case agent.RoleUser:
			add(goai.ChatMessageRoleUser, orEmpty(m.Content, "(empty message)"))
		case agent.RoleAssistant:
			for _, c := range m.ToolCalls {
				calls[c.ID] = c
			}
			if s := renderAssistant(m); s != "" {
				add(goai.ChatMessageRoleAssistant, s)
			}
		case agent.RoleTool:
			name := m.ToolName
			if name == "" {
				name = calls[m.ToolCallID].Name
			}
			add(goai.ChatMessageRoleUser, renderResult(name, m.ToolCallID, resultText(m, calls)))
		}
	}
	return out
}

// resultText is what the model reads for a tool result. For a call that
// could not be parsed, whatever the tool said (usually that it got strange
// arguments) is replaced by the parse error, which is what the model needs
// to write the call again.
func resultText(m agent.Message, calls map[string]agent.ToolCall) string {
	if c, ok := calls[m.ToolCallID]; ok {
		if problem, _, bad := parseErrorOf(c.Args); bad {
			return "error: the call could not be read, so nothing was run: " + problem +
				". Write the whole call again, correctly."
		}
	}
	return orEmpty(m.Content, "(no output)")
}

// wireArgs is a call's arguments as the API expects them: a JSON object.
func wireArgs(args json.RawMessage) json.RawMessage {
	switch {
	case len(args) == 0:
		return json.RawMessage("{}")
	case !json.Valid(args):
		return errorArgs("the arguments are not valid JSON", string(args))
	}
	return args
}

func orEmpty(s, placeholder string) string {
	if s == "" {
		return placeholder
	}
	return s
}
