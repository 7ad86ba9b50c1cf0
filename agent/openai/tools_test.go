package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	goai "github.com/sashabaranov/go-openai"

	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/internal/testkit/fakellm"
)

// The body sent on every attempt of a call is the body go-openai would
// have encoded with the tools, byte for byte, "tools" first.
func TestToolsInTheBodyAsGoOpenAIWould(t *testing.T) {
	srv := fakellm.New(t, fakellm.WithReplies(fakellm.Error(500, "boom"), fakellm.Text("ok")))
	m, _ := newModel(t, srv)
	req := userReq("hi")
	req.Tools = []agent.ToolSpec{testTools[4], testTools[0], testTools[1]}
	// Whitespace in a schema is compacted, as encoding/json always did.
	req.Tools[1].Schema = json.RawMessage("{ \"type\": \"object\",\n \"properties\": {} }")
	if _, err := m.Complete(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2 (a 500, then the retry)", len(reqs))
	}
	creq, _, err := (&Model{cfg: m.cfg, tools: newToolSets()}).chatRequest(req)
	if err != nil {
		t.Fatal(err)
	}
	want := goOpenAIBody(t, creq, req.Tools)
	for i, r := range reqs {
		if !bytes.Equal(r.Body, want) {
			t.Errorf("attempt %d body:\n%s\nwant (as go-openai encodes it):\n%s", i+1, r.Body, want)
		}
		if !strings.Contains(string(r.Body), `"parameters":{"type":"object","properties":{}}`) {
			t.Errorf("attempt %d: the schema was not compacted: %s", i+1, r.Body)
		}
	}
}

// goOpenAIBody is creq with tools as go-openai encodes it, with the
// "tools" field moved first.
func goOpenAIBody(t *testing.T, creq goai.ChatCompletionRequest, tools []agent.ToolSpec) []byte {
	t.Helper()
	rest, err := json.Marshal(creq)
	if err != nil {
		t.Fatal(err)
	}
	if len(tools) == 0 {
		return rest
	}
	var list []goai.Tool
	for _, tl := range slices.SortedFunc(slices.Values(tools), byName) {
		list = append(list, goai.Tool{Type: goai.ToolTypeFunction, Function: &goai.FunctionDefinition{
			Name: tl.Name, Description: tl.Description, Parameters: schemaOf(tl)}})
	}
	encoded, err := json.Marshal(list)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Appendf(nil, `{"tools":%s,%s`, encoded, rest[1:])
}

// Model's own encoding of a request is go-openai's, byte for byte, for
// every kind of request chatRequest makes: both tool protocols, with and
// without tools, temperature and token limits (plain and reasoning
// models), a history of calls and results (malformed ones too), and text
// that encoders treat specially (HTML, line and paragraph separators,
// invalid UTF-8, control characters, quotes, non-ASCII).
func TestBodyAsGoOpenAIWould(t *testing.T) {
	odd := "<b>&amp;</b> \u2028\u2029 \xff\xfe \x00\x01\x1f\x7f \"q\" \\ \t\r\n é 😀 \ud7ff\ue000 </script>"
	history := []agent.Message{
		{Role: agent.RoleUser, Content: "list " + odd},
		{Role: agent.RoleAssistant, Content: "Looking " + odd, ToolCalls: []agent.ToolCall{
			{ID: "call_1", Name: "ls", Args: json.RawMessage(`{"path":"` + strings.ReplaceAll(odd, `"`, `'`) + `"}`)},
			{ID: "call_2", Name: "", Args: json.RawMessage(`{broken`)},
			{ID: "call_3", Name: "read", Args: nil},
		}},
		{Role: agent.RoleTool, ToolCallID: "call_1", ToolName: "ls", Content: "a.txt\n" + odd},
		{Role: agent.RoleTool, ToolCallID: "call_2", Content: "whatever"},
		{Role: agent.RoleTool, ToolCallID: "call_3", ToolName: "read", Content: ""},
		{Role: agent.RoleAssistant, Content: ""},
		{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{{ID: "call_4", Name: "jobs", Args: json.RawMessage(`{}`)}}},
		{Role: agent.RoleTool, ToolCallID: "call_4", ToolName: "jobs", Content: "none"},
		{Role: agent.RoleUser, Content: ""},
		{Role: agent.RoleAssistant, Content: strings.Repeat("long answer ", 2000)},
		{Role: agent.RoleUser, Content: "and now?"},
	}
	half, zero := 0.7, 0.0
	for _, model := range []string{"fake-model", "o3-mini", "gpt-5"} {
		for _, proto := range []ToolProtocol{ToolsNative, ToolsText} {
			for _, temp := range []*float64{nil, &zero, &half} {
				for _, maxTokens := range []int{0, 1000} {
					for _, tools := range [][]agent.ToolSpec{nil, testTools} {
						for _, system := range []string{"", "You are firstmate. " + odd} {
							cfg := Config{BaseURL: "http://127.0.0.1:1", Model: model, ToolProtocol: proto, Temperature: temp, MaxTokens: maxTokens}
							cfg, err := cfg.withDefaults()
							if err != nil {
								t.Fatal(err)
							}
							m := &Model{cfg: cfg, tools: newToolSets()}
							req := &agent.Request{System: system, Messages: history, Tools: tools}
							creq, encoded, err := m.chatRequest(req)
							if err != nil {
								t.Fatal(err)
							}
							got, err := encodeBody(&creq, encoded)
							if err != nil {
								t.Fatal(err)
							}
							var want []byte
							if proto == ToolsNative {
								want = goOpenAIBody(t, creq, tools)
							} else {
								want = goOpenAIBody(t, creq, nil)
							}
							if !bytes.Equal(got, want) {
								t.Fatalf("%s %v temperature %v max %d, %d tools, system %q:\n got %s\nwant %s",
									model, proto, temp, maxTokens, len(tools), system, got, want)
							}
						}
					}
				}
			}
		}
	}
}

// A message of parts (which Model never makes) is refused, not sent
// without its parts.
func TestBodyRefusesMultiContent(t *testing.T) {
	creq := goai.ChatCompletionRequest{Model: "m", Messages: []goai.ChatCompletionMessage{
		{Role: "user", MultiContent: []goai.ChatMessagePart{{Type: goai.ChatMessagePartTypeText, Text: "hi"}}}}}
	if _, err := encodeBody(&creq, nil); err == nil {
		t.Error("a message of parts was encoded")
	}
}

// A tool set is encoded once; a set that differs in any byte (a changed
// description or schema under the same names) is encoded anew, never
// served from the cache.
func TestToolSetsEncodeOnceAndNeverStale(t *testing.T) {
	c := newToolSets()
	set := []agent.ToolSpec{testTools[0], testTools[1]}
	a, err := c.encode(set)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.encode([]agent.ToolSpec{testTools[0], testTools[1]})
	if err != nil {
		t.Fatal(err)
	}
	if &a[0] != &b[0] {
		t.Error("the same tool set was encoded twice")
	}

	changed := []agent.ToolSpec{testTools[0], testTools[1]}
	changed[1].Schema = json.RawMessage(`{"type":"object","properties":{"path":{"type":"integer"}}}`)
	c2, err := c.encode(changed)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(c2, []byte(`"integer"`)) || bytes.Equal(a, c2) {
		t.Errorf("a changed schema was served stale: %s", c2)
	}
	described := []agent.ToolSpec{testTools[0], testTools[1]}
	described[0].Description = "Something else."
	if d, _ := c.encode(described); !bytes.Contains(d, []byte("Something else.")) {
		t.Errorf("a changed description was served stale: %s", d)
	}

	// Mutating the caller's schema after the call changes nothing cached.
	own := []agent.ToolSpec{{Name: "x", Schema: json.RawMessage(`{"type":"object"}`)}}
	first, _ := c.encode(own)
	copy(own[0].Schema, `{"type":"string"}`)
	again, _ := c.encode([]agent.ToolSpec{{Name: "x", Schema: json.RawMessage(`{"type":"object"}`)}})
	if !bytes.Equal(first, again) || !bytes.Contains(again, []byte(`{"type":"object"}`)) {
		t.Errorf("cache followed a mutated caller slice: %s then %s", first, again)
	}
}

// The cache stays bounded however many distinct tool sets pass through.
func TestToolSetsBounded(t *testing.T) {
	c := newToolSets()
	for i := range 5 * maxToolSets {
		if _, err := c.encode([]agent.ToolSpec{{Name: fmt.Sprintf("t%d", i)}}); err != nil {
			t.Fatal(err)
		}
		if n := len(c.sets); n > maxToolSets {
			t.Fatalf("%d tool sets kept, at most %d", n, maxToolSets)
		}
	}
}

// An invalid schema is refused before any request, cached or not.
func TestToolSetsInvalidSchemaNotCached(t *testing.T) {
	c := newToolSets()
	bad := []agent.ToolSpec{{Name: "bad", Schema: json.RawMessage(`{"type":`)}}
	for range 2 {
		if _, err := c.encode(bad); err == nil || !strings.Contains(err.Error(), "bad") {
			t.Fatalf("err = %v", err)
		}
	}
	if len(c.sets) != 0 {
		t.Errorf("an invalid set was cached")
	}
}

// BenchmarkChatRequestTools compares a request of 21 tools encoded as
// go-openai does (every schema checked and compacted on every request)
// with the tool set encoded once and put into the body.
func BenchmarkChatRequestTools(b *testing.B) {
	m, err := New(Config{BaseURL: "http://127.0.0.1:1", Model: "fake-model"})
	if err != nil {
		b.Fatal(err)
	}
	req := userReq("hi")
	for i := range 21 {
		req.Tools = append(req.Tools, agent.ToolSpec{Name: fmt.Sprintf("tool%02d", i), Description: strings.Repeat("Does a thing. ", 20),
			Schema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"` + strings.Repeat("a path ", 40) + `"},"n":{"type":"integer"}},"required":["path"]}`)})
	}
	b.Run("each-request", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			creq, _, err := m.chatRequest(req)
			if err != nil {
				b.Fatal(err)
			}
			for _, t := range req.Tools {
				if !json.Valid(t.Schema) {
					b.Fatal("invalid")
				}
				creq.Tools = append(creq.Tools, goai.Tool{Type: goai.ToolTypeFunction, Function: &goai.FunctionDefinition{
					Name: t.Name, Description: t.Description, Parameters: schemaOf(t)}})
			}
			if _, err := json.Marshal(creq); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoded-once", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			creq, tools, err := m.chatRequest(req)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := encodeBody(&creq, tools); err != nil {
				b.Fatal(err)
			}
		}
	})
}
