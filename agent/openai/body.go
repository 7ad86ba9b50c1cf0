package openai

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"

	goai "github.com/sashabaranov/go-openai"
	fastjson "github.com/segmentio/encoding/json"
)

// A request's body is encoded here, once an attempt (it is let go once
// sent: see setBody), and recordingDoer sends it in place of the body
// go-openai encoded from a request without messages. go-openai encodes with encoding/json, and each
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
	// Encoded straight after the tools into the one buffer that is sent,
	// sized by the last body's fields and a little more. It is let go
	// once sent (setBody), so room to spare costs little; a pool of
	// scratch buffers would hold one for each call of a burst (1,000
	// people at once: 13 MB) for two collections after it.
	const head = `{"tools":`
	b := make([]byte, 0, len(head)+len(tools)+int(lastRest.Load())*9/8+512)
	mark := 0
	if len(tools) > 0 {
		b = append(append(b, head...), tools...)
		mark = len(b)
	}
	b, err := fastjson.Append(b, &w, fastjson.EscapeHTML|fastjson.SortMapKeys)
	if err != nil {
		return nil, fmt.Errorf("openai: encoding the request: %w", err)
	}
	lastRest.Store(int64(len(b) - mark))
	if mark > 0 {
		b[mark] = ',' // the brace that opened the rest of the fields
	}
	return b, nil
}

// lastRest is the size of the last body encoded, less its tools: a guess
// at the next one's.
var lastRest atomic.Int64

// setBody makes body the request's body, and lets go of its bytes once
// they are all read (on their way to the server), or when the returned
// sent is called once the reply has begun: a call that waits seconds on
// the model holds no copy of its request. Should net/http need the body
// again (GetBody: the connection failed before a byte of it was written,
// which a body the size of a write buffer may find out only after it was
// read), encode makes it anew.
func setBody(req *http.Request, body []byte, encode func() ([]byte, error)) (sent func()) {
	if req.Body != nil {
		req.Body.Close() // go-openai's, of a request without messages
	}
	h := &heldBody{b: body, encode: encode}
	req.Body, _ = h.open()
	req.ContentLength = int64(len(body))
	req.GetBody = h.open
	return h.letGo
}

// heldBody is a request's body until it has been sent.
type heldBody struct {
	mu     sync.Mutex
	b      []byte
	encode func() ([]byte, error) // the body again, once let go
}

func (h *heldBody) open() (io.ReadCloser, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.b == nil {
		if h.encode == nil {
			return nil, errors.New("openai: the request's body was let go once sent")
		}
		b, err := h.encode()
		if err != nil {
			return nil, err
		}
		h.b = b
	}
	return &sendOnce{h: h, b: h.b}, nil
}

func (h *heldBody) letGo() {
	h.mu.Lock()
	h.b = nil
	h.mu.Unlock()
}

// sendOnce is one send of a request's body; its bytes go with its end,
// and the whole body's once it was read to the end.
type sendOnce struct {
	h  *heldBody
	mu sync.Mutex
	b  []byte
}

func (s *sendOnce) Read(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := copy(p, s.b)
	if s.b = s.b[n:]; len(s.b) > 0 {
		return n, nil
	}
	if s.b != nil {
		s.b = nil
		s.h.letGo() // all of it is on its way
	}
	return n, io.EOF
}

func (s *sendOnce) Close() error {
	s.mu.Lock()
	s.b = nil
	s.mu.Unlock()
	return nil
}
