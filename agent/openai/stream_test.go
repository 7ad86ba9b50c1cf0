package openai

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"

	goai "github.com/sashabaranov/go-openai"
	fastjson "github.com/segmentio/encoding/json"

	"github.com/firstmate/firstmate/agent"
)

// streamChunk reads what go-openai's own decoding of a chunk gives, for
// the fields Model uses, on events as servers send them: each event alone,
// and all of them in turn through one streamChunk, as Model reads a reply
// (in both orders, so that what one event had cannot stay for the next).
func TestStreamChunkAsGoOpenAI(t *testing.T) {
	events := []string{
		`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`,
		`{"id":"c1","choices":[{"index":0,"delta":{"content":"Hel\"lo \u00e9\n"},"logprobs":null,"finish_reason":null}],"system_fingerprint":"fp","obfuscation":"x"}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"ls","arguments":""}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"{\"path\":"}}]}}]}`,
		`{"choices":[{"delta":{"tool_calls":[{"id":"x","function":{"name":"a","arguments":"{}"}}]}}]}`,
		`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
		`{"choices":[{"index":1,"delta":{"content":"second choice"},"finish_reason":"length"},{"index":0,"delta":{"content":"first","refusal":"r","reasoning_content":"why","tool_calls":[{"index":0,"id":"c","function":{"name":"n","arguments":"{}"}}]},"finish_reason":"stop"}]}`,
		`{"choices":[{"index":0,"delta":{"reasoning_content":"thinking","refusal":"no"}}]}`,
		`{"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":34,"total_tokens":46,"prompt_tokens_details":{"cached_tokens":2}}}`,
		`{"choices":[{"delta":{}}]}`,
		`{"choices":null,"usage":null}`,
		`{}`,
	}
	for _, e := range events {
		compareChunk(t, e, decodeEvents(t, e)[0])
	}
	backward := slices.Clone(events)
	slices.Reverse(backward)
	for _, order := range [][]string{events, backward} {
		for i, got := range decodeEvents(t, order...) {
			compareChunk(t, order[i], got)
		}
	}
}

// compareChunk checks got, read from event, against go-openai's reading.
func compareChunk(t *testing.T, event string, got streamChunk) {
	t.Helper()
	var want goai.ChatCompletionStreamResponse
	if err := json.Unmarshal([]byte(event), &want); err != nil {
		t.Fatalf("encoding/json: %s: %v", event, err)
	}
	if len(got.Choices) != len(want.Choices) {
		t.Fatalf("%s: %d choices, want %d", event, len(got.Choices), len(want.Choices))
	}
	for i, w := range want.Choices {
		g := got.Choices[i]
		if g.Index != w.Index || g.Delta.Content != w.Delta.Content || g.Delta.Refusal != w.Delta.Refusal ||
			g.Delta.ReasoningContent != w.Delta.ReasoningContent || g.FinishReason != w.FinishReason ||
			!reflect.DeepEqual(g.Delta.ToolCalls, w.Delta.ToolCalls) {
			t.Errorf("%s: choice %d = %+v, want %+v", event, i, g, w)
		}
	}
	switch {
	case (got.Usage == nil) != (want.Usage == nil):
		t.Errorf("%s: usage %+v, want %+v", event, got.Usage, want.Usage)
	case got.Usage != nil && (got.Usage.PromptTokens != want.Usage.PromptTokens || got.Usage.CompletionTokens != want.Usage.CompletionTokens):
		t.Errorf("%s: usage %+v, want %+v", event, *got.Usage, *want.Usage)
	}
}

// decodeEvents streams events from a server and reads them in turn with
// one streamChunk, returning a copy of what it held after each.
func decodeEvents(t *testing.T, events ...string) []streamChunk {
	t.Helper()
	var body strings.Builder
	for _, e := range events {
		body.WriteString("data: " + e + "\n\n")
	}
	body.WriteString("data: [DONE]\n\n")
	stream := streamOf(t, body.String())
	var c streamChunk
	var out []streamChunk
	for _, e := range events {
		if err := c.recv(stream); err != nil {
			t.Fatalf("%s: %v", e, err)
		}
		cp := c
		cp.Choices = slices.Clone(c.Choices)
		out = append(out, cp)
	}
	return out
}

func streamOf(t *testing.T, body string) *goai.ChatCompletionStream {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, body)
	}))
	t.Cleanup(srv.Close)
	cc := goai.DefaultConfig("k")
	cc.BaseURL = srv.URL + "/v1"
	stream, err := goai.NewClientWithConfig(cc).CreateChatCompletionStream(context.Background(), goai.ChatCompletionRequest{Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stream.Close() })
	return stream
}

// An event that is not a chunk's JSON fails the attempt with a clear
// error, as go-openai's decoding did.
func TestStreamEventNotJSON(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\ndata: {not json\n\n")
	}))
	defer srv.Close()
	m, err := New(Config{Model: "m", BaseURL: srv.URL + "/v1", MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Complete(context.Background(), &agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: "hi"}}})
	if err == nil || !strings.Contains(err.Error(), "not the JSON of a chunk") {
		t.Fatalf("Complete = %v, want an error about the event", err)
	}
}

// The decoding of one content event: go-openai's (encoding/json into its
// response type) against streamChunk's.
func BenchmarkStreamChunk(b *testing.B) {
	event := []byte(`{"id":"chatcmpl-42","object":"chat.completion.chunk","created":1700000000,"model":"m","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":" the"},"logprobs":null,"finish_reason":null}]}`)
	b.Run("go-openai", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var r goai.ChatCompletionStreamResponse
			if err := json.Unmarshal(event, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("streamChunk", func(b *testing.B) {
		b.ReportAllocs()
		var c streamChunk // one for the reply, as in Model.attempt
		for b.Loop() {
			c.reset()
			if err := fastjson.Unmarshal(event, &c); err != nil {
				b.Fatal(err)
			}
		}
	})
}
