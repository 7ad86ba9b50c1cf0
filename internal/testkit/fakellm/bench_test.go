//go:build unix

package fakellm_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/firstmate/firstmate/internal/cputime"
	"github.com/firstmate/firstmate/internal/testkit/fakellm"
)

// benchBody is a request as firstmate sends one in the middle of a turn:
// 21 tools with JSON-schema parameters, a system prompt of about 2 KB, the
// person's message, the model's tool call and its result.
func benchBody(stream bool) []byte {
	tools := make([]any, 21)
	for i := range tools {
		tools[i] = map[string]any{
			"type": "function",
			"function": map[string]any{
				"name": fmt.Sprintf("tool_%02d", i),
				"description": "Do the thing number " + fmt.Sprint(i) + " in the workspace. " +
					strings.Repeat("It works on files and directories, relative to the workspace; read the error when it fails. ", 3),
				"parameters": map[string]any{
					"type": "object",
					"properties": map[string]any{
						"path":      map[string]any{"type": "string", "description": "the file or directory, relative to the workspace"},
						"recursive": map[string]any{"type": "boolean", "description": "also everything inside a directory"},
						"limit":     map[string]any{"type": "integer", "description": "at most this many entries; 0 for all of them"},
					},
					"required":             []string{"path"},
					"additionalProperties": false,
				},
			},
		}
	}
	system := strings.Repeat("You are firstmate, an assistant that people talk to in a chat.\nUse tools when they help; do not guess at file contents you can read. ", 15)
	req := map[string]any{
		"model": "fake-model",
		"messages": []any{
			map[string]any{"role": "system", "content": system},
			map[string]any{"role": "user", "content": "[U0LOAD000023] q-000023-00000 what is in the workspace?"},
			map[string]any{"role": "assistant", "tool_calls": []any{map[string]any{"id": "call_fake_185", "type": "function",
				"function": map[string]any{"name": "tool_07", "arguments": `{"path":"."}`}}}},
			map[string]any{"role": "tool", "tool_call_id": "call_fake_185", "content": "/workspace/\n  (empty)"},
		},
		"tools":  tools,
		"stream": stream,
	}
	if stream {
		req["stream_options"] = map[string]any{"include_usage": true}
	}
	b, err := json.Marshal(req)
	if err != nil {
		panic(err)
	}
	return b
}

// discard is a ResponseWriter that keeps nothing, so that a benchmark
// measures the server and not a recorder's buffer.
type discard struct{ h http.Header }

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(b []byte) (int, error) { return len(b), nil }
func (d *discard) WriteHeader(int)             {}
func (d *discard) Flush()                      {}

// benchChat serves body to a server that answers reply, b.N times.
func benchChat(b *testing.B, body []byte, reply fakellm.Reply) {
	srv := fakellm.New(b, fakellm.WithoutRecording(), fakellm.WithHandler(func(*fakellm.Request) fakellm.Reply { return reply }))
	w := &discard{h: http.Header{}}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	cpu := cputime.Start()
	for b.Loop() {
		r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader(body))
		clear(w.h)
		srv.ServeHTTP(w, r)
	}
	cpu.Report(b)
}

// The load generator's turn: a streamed tool call, then a streamed answer.
func BenchmarkChat(b *testing.B) {
	answer := fakellm.Text("**Done.** The workspace is empty. ans-000023-00000 ans-000023-00001")
	calls := fakellm.Calls(fakellm.Call("ls", `{"path":"."}`))
	b.Run("stream-text", func(b *testing.B) { benchChat(b, benchBody(true), answer) })
	b.Run("stream-calls", func(b *testing.B) { benchChat(b, benchBody(true), calls) })
	b.Run("complete", func(b *testing.B) { benchChat(b, benchBody(false), answer) })
}
