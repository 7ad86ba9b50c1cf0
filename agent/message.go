package agent

import "encoding/json"

// Role is the author of a history message.
type Role string

const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Message is one entry of a session's history, in the shape chat-completion
// APIs share. The system prompt is not part of the history.
type Message struct {
	Role       Role       `json:"role"`
	Content    string     `json:"content,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`   // assistant only
	ToolCallID string     `json:"tool_call_id,omitempty"` // tool only
	ToolName   string     `json:"tool_name,omitempty"`    // tool only; the text protocol needs it
}

// ToolCall is the model's request to run one tool.
type ToolCall struct {
	ID   string          `json:"id"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"` // a JSON object, as the model sent it
}
