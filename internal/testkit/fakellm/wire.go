package fakellm

import "encoding/json"

// The wire types below are written from the OpenAI API reference, not taken
// from go-openai, so that the fake checks what the client really sends
// instead of agreeing with it by construction.

// Request is one recorded POST /v1/chat/completions.
type Request struct {
	Model         string          `json:"model"`
	Messages      []Message       `json:"messages"`
	Tools         []Tool          `json:"tools,omitempty"`
	ToolChoice    json.RawMessage `json:"tool_choice,omitempty"`
	Stream        bool            `json:"stream"`
	StreamOptions *StreamOptions  `json:"stream_options,omitempty"`
	Temperature   *float64        `json:"temperature,omitempty"`
	MaxTokens     int             `json:"max_tokens,omitempty"`
	// MaxCompletionTokens is what reasoning models take instead of MaxTokens.
	MaxCompletionTokens int      `json:"max_completion_tokens,omitempty"`
	Stop                []string `json:"stop,omitempty"`

	// Header is the request's HTTP header, for tests that check it.
	Header map[string][]string `json:"-"`
	// Body is the request body as it arrived.
	Body json.RawMessage `json:"-"`
}

// StreamOptions is the request's stream_options.
type StreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// Message is one chat message on the wire.
type Message struct {
	Role       string         `json:"role"`
	Content    *string        `json:"content,omitempty"`
	Name       string         `json:"name,omitempty"`
	ToolCalls  []WireToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
}

// Text returns the message's content, "" when it had none.
func (m Message) Text() string {
	if m.Content == nil {
		return ""
	}
	return *m.Content
}

// WireToolCall is a tool call inside an assistant message or a stream delta.
type WireToolCall struct {
	Index    *int         `json:"index,omitempty"`
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"`
	Function WireFunction `json:"function"`
}

// WireFunction is the function part of a tool call.
type WireFunction struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments,omitempty"`
}

// Tool is a tool offered in a request.
type Tool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters,omitempty"`
	} `json:"function"`
}

// Usage is the token count of one completion.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// LastMessage returns the request's last message, or a zero Message.
func (r *Request) LastMessage() Message {
	if len(r.Messages) == 0 {
		return Message{}
	}
	return r.Messages[len(r.Messages)-1]
}

// ToolNames lists the names of the offered tools in the order sent.
func (r *Request) ToolNames() []string {
	names := make([]string, len(r.Tools))
	for i, t := range r.Tools {
		names[i] = t.Function.Name
	}
	return names
}

// Streaming and non-streaming response shapes.

type chunk struct {
	ID      string        `json:"id"`
	Object  string        `json:"object"`
	Created int64         `json:"created"`
	Model   string        `json:"model"`
	Choices []chunkChoice `json:"choices"`
	Usage   *Usage        `json:"usage,omitempty"`
}

type chunkChoice struct {
	Index        int     `json:"index"`
	Delta        delta   `json:"delta"`
	FinishReason *string `json:"finish_reason"`
}

type delta struct {
	Role      string         `json:"role,omitempty"`
	Content   *string        `json:"content,omitempty"`
	ToolCalls []WireToolCall `json:"tool_calls,omitempty"`
}

type completion struct {
	ID      string             `json:"id"`
	Object  string             `json:"object"`
	Created int64              `json:"created"`
	Model   string             `json:"model"`
	Choices []completionChoice `json:"choices"`
	Usage   Usage              `json:"usage"`
}

type completionChoice struct {
	Index        int     `json:"index"`
	Message      Message `json:"message"`
	FinishReason string  `json:"finish_reason"`
}

type apiError struct {
	Error apiErrorBody `json:"error"`
}

type apiErrorBody struct {
	Message string `json:"message"`
	Type    string `json:"type"`
	Code    any    `json:"code"`
}

type modelList struct {
	Object string      `json:"object"`
	Data   []modelInfo `json:"data"`
}

type modelInfo struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}
