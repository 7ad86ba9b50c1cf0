package openai

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"

	goai "github.com/sashabaranov/go-openai"
	fastjson "github.com/segmentio/encoding/json"
)

// A request's body is encoded here, once for all the attempts of a call,
// and recordingDoer sends it in place of the body go-openai encoded from a
// request without messages. go-openai encodes with encoding/json, and each
// message through its MarshalJSON, whose output encoding/json checks and
// compacts again; with the tools (see tools.go) that was the largest cost
// of a turn. The bytes are the same as go-openai's, "tools" first
// (TestBodyAsGoOpenAIWould), encoded with segmentio's drop-in
// encoding/json, straight into the one buffer that is sent.

// wireRequest is the part of go-openai's ChatCompletionRequest that
// chatRequest sets: the same fields, tags and order, so the same JSON.
type wireRequest struct {
	Model               string              `json:"model"`
	Messages            []wireMessage       `json:"messages"`
	MaxTokens           int                 `json:"max_tokens,omitempty"`
	MaxCompletionTokens int                 `json:"max_completion_tokens,omitempty"`
	Temperature         float32             `json:"temperature,omitempty"`
	Stream              bool                `json:"stream"`
	Stop                []string            `json:"stop,omitempty"`
	StreamOptions       *goai.StreamOptions `json:"stream_options,omitempty"`
}

// wireMessage is goai.ChatCompletionMessage with the tags its MarshalJSON
// uses for a message of text (never MultiContent, which Model does not
// send).
type wireMessage struct {
	Role             string                 `json:"role"`
	Content          string                 `json:"content,omitempty"`
	Refusal          string                 `json:"refusal,omitempty"`
	MultiContent     []goai.ChatMessagePart `json:"-"`
	Name             string                 `json:"name,omitempty"`
	ReasoningContent string                 `json:"reasoning_content,omitempty"`
	FunctionCall     *goai.FunctionCall     `json:"function_call,omitempty"`
	ToolCalls        []goai.ToolCall        `json:"tool_calls,omitempty"`
	ToolCallID       string                 `json:"tool_call_id,omitempty"`
}

// encodeBody encodes creq with tools, the encoded "tools" array (nil for
// none), as its first field: {"tools":[…],"model":…}.
func encodeBody(creq *goai.ChatCompletionRequest, tools []byte) ([]byte, error) {
	w := wireRequest{
		Model:    creq.Model,
		Messages: make([]wireMessage, len(creq.Messages)),
		//lint:ignore SA1019 max_tokens is deprecated by OpenAI alone (see chatRequest).
		MaxTokens:           creq.MaxTokens,
		MaxCompletionTokens: creq.MaxCompletionTokens,
		Temperature:         creq.Temperature,
		Stream:              creq.Stream,
		Stop:                creq.Stop,
		StreamOptions:       creq.StreamOptions,
	}
	for i, m := range creq.Messages {
		if len(m.MultiContent) > 0 {
			return nil, errors.New("openai: a message of parts cannot be sent")
		}
		w.Messages[i] = wireMessage(m)
	}
	// Encoded into a scratch buffer, then copied into one of the exact
	// size: the body is kept for the attempts and is often larger than a
	// guess at it would be.
	scratch := scratchBuffers.Get().(*[]byte)
	defer scratchBuffers.Put(scratch)
	rest, err := fastjson.Append((*scratch)[:0], &w, fastjson.EscapeHTML|fastjson.SortMapKeys)
	if err != nil {
		return nil, fmt.Errorf("openai: encoding the request: %w", err)
	}
	if cap(rest) <= maxScratch {
		*scratch = rest
	}
	if len(tools) == 0 {
		return bytes.Clone(rest), nil
	}
	const head = `{"tools":`
	b := make([]byte, 0, len(head)+len(tools)+len(rest))
	b = append(append(append(b, head...), tools...), rest...)
	b[len(head)+len(tools)] = ',' // the brace that opened the rest of the fields
	return b, nil
}

// scratchBuffers hold encodings on their way to a body; one larger than
// maxScratch is not kept.
var scratchBuffers = sync.Pool{New: func() any { return new([]byte) }}

const maxScratch = 256 << 10

// setBody makes body the request's body, for every send of it. It is a
// *bytes.Reader, which net/http knows to be in memory: it writes the
// headers and the body together, where for another reader it flushes the
// headers first, in a write (a system call, a packet) of their own.
func setBody(req *http.Request, body []byte) {
	if req.Body != nil {
		req.Body.Close() // go-openai's, of a request without messages
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	req.ContentLength = int64(len(body))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
}
