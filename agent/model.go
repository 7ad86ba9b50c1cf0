package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Model is an LLM that answers a conversation, optionally with tool calls.
type Model interface {
	Complete(ctx context.Context, req *Request) (*Response, error)
}

// Request is one model call.
type Request struct {
	System   string
	Messages []Message
	Tools    []ToolSpec // sorted by name; empty means answer in text
	// OnText, if set, receives the answer's text as it streams.
	OnText func(delta string)
	// OnQueued, if set, hears how many calls wait before this one while
	// the model's limits hold it back (see agent/modellimit).
	OnQueued func(ahead int)
}

// ToolSpec describes a tool to the model.
type ToolSpec struct {
	Name        string
	Description string
	Schema      json.RawMessage // JSON Schema of the arguments object
	Params      []string        // argument names in declared order (for positional calls)
}

// Response is the model's reply: text, tool calls or both.
type Response struct {
	Message Message // RoleAssistant
	Usage   Usage
}

// Usage counts the tokens of one model call.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	// Estimated is set when the server sent no figures and the loop
	// estimated them from the request and the reply (see EstimateTokens).
	Estimated bool `json:"estimated,omitempty"`
}

// ErrModelUnavailable is wrapped by [ModelError] when the model could not
// be reached or kept failing after retries.
var ErrModelUnavailable = errors.New("model unavailable")

var (
	// ErrModelTooLarge is matched (errors.Is) by a model call whose
	// response passed the size a Model allows it.
	ErrModelTooLarge = errors.New("the model's response is too large")
	// ErrModelStalled is matched by a model call whose stream paused for
	// longer than a Model allows once its output had begun.
	ErrModelStalled = errors.New("the model's stream stalled")
)

// ModelError is a model call that failed after its retries. It carries what
// a person should be told apart from the detail that is logged.
type ModelError struct {
	Status     int           // HTTP status, 0 for a network error
	RetryAfter time.Duration // what the server asked for, if it did
	Attempts   int
	Err        error
}

func (e *ModelError) Error() string {
	if e.Status != 0 {
		return fmt.Sprintf("model call failed with HTTP %d after %d attempts: %v", e.Status, e.Attempts, e.Err)
	}
	return fmt.Sprintf("model call failed after %d attempts: %v", e.Attempts, e.Err)
}

func (e *ModelError) Unwrap() []error { return []error{ErrModelUnavailable, e.Err} }

// RateLimited reports whether the server refused for rate or quota.
func (e *ModelError) RateLimited() bool { return e.Status == 429 }
