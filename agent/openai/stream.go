package openai

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"strings"

	goai "github.com/sashabaranov/go-openai"
	fastjson "github.com/segmentio/encoding/json"

	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/tools"
)

// streamChunk is one event of a streamed reply: the part of go-openai's
// ChatCompletionStreamResponse that Model reads. go-openai's Recv decodes
// each event (a few words of text) into the whole response type with
// encoding/json, a tenth of a turn's CPU; recv takes the event's JSON from
// go-openai as it is (RecvRaw: the SSE lines, the [DONE] and the error
// events stay go-openai's) and decodes the fields read, with segmentio's
// drop-in encoding/json. One streamChunk reads all the events of a reply
// (reset): a tenth of the time and one allocation instead of 14
// (BenchmarkStreamChunk).
type streamChunk struct {
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Content          string          `json:"content"`
			Refusal          string          `json:"refusal"`
			ReasoningContent string          `json:"reasoning_content"`
			ToolCalls        []goai.ToolCall `json:"tool_calls"`
		} `json:"delta"`
		FinishReason goai.FinishReason `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

// recv reads the next event of stream into c, in place of the last one.
func (c *streamChunk) recv(stream *goai.ChatCompletionStream) error {
	raw, err := stream.RecvRaw()
	if err != nil {
		return err
	}
	c.reset()
	if err := fastjson.Unmarshal(raw, c); err != nil {
		return fmt.Errorf("an event of the stream is not the JSON of a chunk: %w", err)
	}
	return nil
}

// reset empties c and keeps the room of its Choices: segmentio makes room
// for ten choices at the first one (a kilobyte an event if each event had
// a new chunk). The room is zeroed, since the decoder writes into an
// element only the fields that the event has.
func (c *streamChunk) reset() {
	clear(c.Choices[:cap(c.Choices)])
	c.Choices = c.Choices[:0]
	c.Usage = nil
}

// callAccumulator reassembles streamed tool calls. OpenAI sends a call's
// ID and name in its first delta and then argument pieces that carry only
// the call's index. Compatible servers differ: some put every parallel call
// at index 0 and tell them apart only by a new ID, some send no index, some
// repeat the ID or the name on every delta, some send no ID at all. So a
// delta belongs to the call with its ID if there is one, else to the latest
// call at its index.
type callAccumulator struct {
	calls []*partialCall
}

type partialCall struct {
	index int // -1 when the server sent none
	id    string
	name  string
	args  strings.Builder
}

// add adds a delta and returns the call it belongs to, and whether that
// call is new.
func (a *callAccumulator) add(tc goai.ToolCall) (c *partialCall, added bool) {
	idx := -1
	if tc.Index != nil {
		idx = *tc.Index
	}
	c = a.find(idx, tc.ID, tc.Function.Name)
	if c == nil {
		c = &partialCall{index: idx}
		a.calls = append(a.calls, c)
		added = true
	}
	if c.id == "" {
		c.id = tc.ID
	}
	// A name on a later delta of the same call is repeated, or, from a
	// server that splits names, the next piece of it.
	if n := tc.Function.Name; n != "" && n != c.name {
		c.name += n
	}
	c.args.WriteString(tc.Function.Arguments)
	return c, added
}

func (a *callAccumulator) find(idx int, id, name string) *partialCall {
	if id != "" {
		for _, c := range a.calls {
			if c.id == id {
				return c
			}
		}
	}
	var last *partialCall
	for i := len(a.calls) - 1; i >= 0; i-- {
		if idx < 0 || a.calls[i].index == idx {
			last = a.calls[i]
			break
		}
	}
	switch {
	case last == nil:
		return nil
	case id != "" && last.id != "":
		return nil // a new ID at a used index: the next parallel call
	case id == "" && name != "" && last.name != "" && (name != last.name || complete(last.args.String())):
		// No ID, and another name, or the same name after finished
		// arguments: a server that sends each whole call at the same
		// index without IDs. (Servers send a name whole, in one delta.)
		return nil
	}
	return last
}

// complete reports whether s is already a whole JSON value.
func complete(s string) bool {
	s = strings.TrimSpace(s)
	return s != "" && json.Valid([]byte(s))
}

// finish returns the calls in the order they began. cut says the reply
// hit the token limit, which explains arguments that end half way.
func (a *callAccumulator) finish(cut bool) []agent.ToolCall {
	out := make([]agent.ToolCall, 0, len(a.calls))
	for _, c := range a.calls {
		id := c.id
		if id == "" {
			id = newCallID()
		}
		args, problem := normalizeArgs(c.args.String())
		if c.name == "" && problem == "" {
			problem = "the call has no tool name"
		}
		if problem != "" {
			if cut {
				problem += cutNote
			}
			args = errorArgs(problem, c.args.String())
		}
		out = append(out, agent.ToolCall{ID: id, Name: c.name, Args: args})
	}
	return out
}

const cutNote = " (the reply was cut off at the length limit; make the call smaller, e.g. write a big file in parts)"

// normalizeArgs makes a native call's arguments a JSON object, or says
// what is wrong with them.
func normalizeArgs(s string) (json.RawMessage, string) {
	s = strings.TrimSpace(s)
	if s == "" || s == "null" {
		return json.RawMessage("{}"), ""
	}
	if !json.Valid([]byte(s)) {
		return nil, "the arguments are not valid JSON"
	}
	if s[0] == '"' {
		// Some servers encode the arguments twice, as a JSON string.
		var inner string
		if json.Unmarshal([]byte(s), &inner) == nil {
			inner = strings.TrimSpace(inner)
			if strings.HasPrefix(inner, "{") && json.Valid([]byte(inner)) {
				s = inner
			}
		}
	}
	if s[0] != '{' {
		return nil, "the arguments must be a JSON object"
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, []byte(s)); err != nil {
		return nil, "the arguments are not valid JSON"
	}
	return buf.Bytes(), ""
}

func newCallID() string {
	return "call_" + strings.ToLower(rand.Text()[:20])
}

// A call that could not be read still becomes a ToolCall, so that the
// loop answers it and the model learns what was wrong. Its arguments are
// {"_parse_error": why, "_raw": what the model wrote}: no tool accepts them
// (tools reject unknown fields), and when the result goes back to the
// model it is replaced by the parse error (see resultText), whatever the
// tool said.
const (
	parseErrorKey = tools.ParseErrorKey
	rawKey        = "_raw"
)

type errorArgsBody struct {
	Error string `json:"_parse_error"`
	Raw   string `json:"_raw,omitempty"`
}

func errorArgs(problem, raw string) json.RawMessage {
	b, err := marshalNoEscape(errorArgsBody{Error: problem, Raw: raw})
	if err != nil {
		panic(fmt.Sprintf("openai: encoding a parse error: %v", err)) // strings always encode
	}
	return b
}

// parseErrorOf returns the parse error recorded in a call's arguments.
func parseErrorOf(args json.RawMessage) (problem, raw string, ok bool) {
	if !bytes.Contains(args, []byte(`"`+parseErrorKey+`"`)) {
		return "", "", false
	}
	var body errorArgsBody
	if json.Unmarshal(args, &body) != nil || body.Error == "" {
		return "", "", false
	}
	return body.Error, body.Raw, true
}

// marshalNoEscape encodes v without turning <, > and & into \u escapes,
// which would make code in arguments harder for the model to read back.
func marshalNoEscape(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}
