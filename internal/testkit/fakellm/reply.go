package fakellm

import (
	"encoding/json"
	"fmt"
	"time"
)

// Reply is one scripted answer to a chat completion request.
//
// A zero Status answers 200 with Text and ToolCalls (both may be set),
// streamed or not as the client asked. A non-zero Status answers with an
// OpenAI-style error body instead. Fault makes the server misbehave.
type Reply struct {
	Text      string
	ToolCalls []ToolCall
	// FinishReason defaults to "tool_calls" when there are calls, else "stop".
	FinishReason string
	// Usage overrides the token counts, which are otherwise estimated from
	// the sizes of the request and the reply.
	Usage *Usage

	Status     int    // HTTP error status, e.g. 429 or 500
	Message    string // the error message for Status
	RetryAfter string // Retry-After header sent with Status, seconds or an HTTP date

	Fault Fault
	// FaultAfter is how many stream chunks are written before Fault
	// strikes; 0 means before any response at all.
	FaultAfter int

	// NoDone ends the stream without the final "data: [DONE]" line, as
	// some compatible servers do.
	NoDone bool
	// Delay waits before answering.
	Delay time.Duration
	// Every waits between two chunks of a streamed answer, as a model that
	// writes slowly does.
	Every time.Duration
}

// Fault is a way for the server to break.
type Fault int

const (
	// NoFault answers normally.
	NoFault Fault = iota
	// Drop closes the connection without finishing the response.
	Drop
	// Hang stops answering until the client gives up or the server closes.
	Hang
	// ErrorEvent sends an error as a stream event ("data: {"error": …}")
	// with Reply.Message, as servers do once the 200 status is out, and
	// ends the stream. Before any chunk it answers 500 instead.
	ErrorEvent
)

// ToolCall is a scripted tool call. ID is generated when empty.
type ToolCall struct {
	ID   string
	Name string
	Args string // the arguments exactly as the server sends them (usually JSON)
}

// Text is a reply with only text.
func Text(s string) Reply { return Reply{Text: s} }

// Calls is a reply with only tool calls.
func Calls(calls ...ToolCall) Reply { return Reply{ToolCalls: calls} }

// Call builds a tool call. args is sent as is when it is a string or
// []byte or json.RawMessage, and JSON-encoded otherwise.
func Call(name string, args any) ToolCall {
	var s string
	switch a := args.(type) {
	case nil:
		s = ""
	case string:
		s = a
	case []byte:
		s = string(a)
	case json.RawMessage:
		s = string(a)
	default:
		b, err := json.Marshal(a)
		if err != nil {
			panic(fmt.Sprintf("fakellm.Call(%s): %v", name, err))
		}
		s = string(b)
	}
	return ToolCall{Name: name, Args: s}
}

// Error is a reply with an HTTP error status.
func Error(status int, message string) Reply { return Reply{Status: status, Message: message} }

// RateLimited is a 429 reply with a Retry-After header (empty for none).
func RateLimited(retryAfter string) Reply {
	return Reply{Status: 429, Message: "Rate limit reached, slow down", RetryAfter: retryAfter}
}

// Dropped is a reply that closes the connection before answering.
func Dropped() Reply { return Reply{Fault: Drop} }

func (r Reply) kind() string {
	switch {
	case r.Fault == Drop:
		return fmt.Sprintf("drop after %d chunks", r.FaultAfter)
	case r.Fault == Hang:
		return fmt.Sprintf("hang after %d chunks", r.FaultAfter)
	case r.Fault == ErrorEvent:
		return fmt.Sprintf("error event after %d chunks", r.FaultAfter)
	case r.Status != 0:
		return fmt.Sprintf("HTTP %d", r.Status)
	case len(r.ToolCalls) > 0:
		return fmt.Sprintf("%d tool call(s)", len(r.ToolCalls))
	default:
		return "text"
	}
}
