package fakellm

import (
	"encoding/json"
	"testing"
)

// A frame is "data: ", json.Marshal of its chunk, and a blank line.
func TestFramesAreMarshaledChunks(t *testing.T) {
	var (
		idx, zero  = 2, 0
		empty, odd = "", "<a & b>\u2028\"q\"\\ \xff\x01 é ⚓"
		stop       = "stop"
	)
	deltas := []delta{
		{Role: "assistant", Content: &empty},
		{Content: &odd},
		{ToolCalls: []WireToolCall{{Index: &idx, ID: "call_1", Type: "function", Function: WireFunction{Name: "ls<>"}}}},
		{ToolCalls: []WireToolCall{{Index: &zero, Function: WireFunction{Arguments: `{"a":"<\u00e9>"}`}}}},
		{},
	}
	for _, model := range []string{"fake-model", odd, ""} {
		f := newFrames("chatcmpl_fake_7", 1700000000, model)
		var want []chunk
		for i := range deltas {
			var finish *string
			if i == len(deltas)-1 {
				finish = &stop
			}
			f.add(&deltas[i], finish)
			want = append(want, chunk{ID: "chatcmpl_fake_7", Object: "chat.completion.chunk", Created: 1700000000, Model: model,
				Choices: []chunkChoice{{Delta: deltas[i], FinishReason: finish}}})
		}
		u := &Usage{PromptTokens: 3, CompletionTokens: 4, TotalTokens: 7}
		last := chunk{ID: "chatcmpl_fake_7", Object: "chat.completion.chunk", Created: 1700000000, Model: model, Choices: []chunkChoice{}, Usage: u}
		f.addChunk(&last)
		want = append(want, last)
		if f.len() != len(want) {
			t.Fatalf("%d frames, want %d", f.len(), len(want))
		}
		for i, c := range want {
			b, err := json.Marshal(c)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := string(f.frame(i)), "data: "+string(b)+"\n\n"; got != want {
				t.Errorf("model %q, frame %d:\n got %q\nwant %q", model, i, got, want)
			}
		}
	}
}
