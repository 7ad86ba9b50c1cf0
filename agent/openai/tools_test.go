package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"

	goai "github.com/sashabaranov/go-openai"

	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/internal/fakellm"
)

// The body with the tools put in apart is the body go-openai would have
// encoded with them, field for field, on every attempt of a call.
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
	tools := slices.SortedFunc(slices.Values(req.Tools), byName)
	for _, tl := range tools {
		creq.Tools = append(creq.Tools, goai.Tool{Type: goai.ToolTypeFunction, Function: &goai.FunctionDefinition{
			Name: tl.Name, Description: tl.Description, Parameters: schemaOf(tl)}})
	}
	want, err := json.Marshal(creq)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range reqs {
		if n := bytes.Count(r.Body, []byte(`"tools":`)); n != 1 {
			t.Errorf("attempt %d: %d tools fields in %s", i+1, n, r.Body)
		}
		var got, exp map[string]any
		if err := json.Unmarshal(r.Body, &got); err != nil {
			t.Fatalf("attempt %d: body is not JSON: %v\n%s", i+1, err, r.Body)
		}
		if err := json.Unmarshal(want, &exp); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, exp) {
			t.Errorf("attempt %d body:\n%s\nwant (as go-openai encodes it):\n%s", i+1, r.Body, want)
		}
		if !strings.Contains(string(r.Body), `"parameters":{"type":"object","properties":{}}`) {
			t.Errorf("attempt %d: the schema was not compacted: %s", i+1, r.Body)
		}
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
			body, err := json.Marshal(creq)
			if err != nil {
				b.Fatal(err)
			}
			hr, _ := http.NewRequest("POST", "http://127.0.0.1:1", bytes.NewReader(body))
			if err := spliceTools(hr, tools); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// The splice keeps every byte of the body, whatever its shape, and refuses
// what is not a JSON object.
func TestSpliceTools(t *testing.T) {
	tools := []byte(`[{"type":"function","function":{"name":"ls"}}]`)
	for _, tt := range []struct{ body, want string }{
		{`{}`, `{"tools":[{"type":"function","function":{"name":"ls"}}]}`},
		{`{"model":"m","stream":true}`, `{"tools":[{"type":"function","function":{"name":"ls"}}],"model":"m","stream":true}`},
		{`[]`, ""},
		{`"x"`, ""},
	} {
		r, err := http.NewRequest("POST", "http://127.0.0.1:1", strings.NewReader(tt.body))
		if err != nil {
			t.Fatal(err)
		}
		err = spliceTools(r, tools)
		if tt.want == "" {
			if err == nil {
				t.Errorf("%s: spliced, want an error", tt.body)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tt.body, err)
		}
		got, _ := io.ReadAll(r.Body)
		again, _ := r.GetBody()
		twice, _ := io.ReadAll(again)
		if string(got) != tt.want || string(twice) != tt.want || r.ContentLength != int64(len(tt.want)) {
			t.Errorf("%s: body %s (again %s, length %d), want %s", tt.body, got, twice, r.ContentLength, tt.want)
		}
	}
	// A body shorter than it says is an error, not a truncated request.
	r, _ := http.NewRequest("POST", "http://127.0.0.1:1", strings.NewReader(`{"model":"m"}`))
	r.ContentLength = 100
	if err := spliceTools(r, tools); err == nil {
		t.Error("a short body was spliced")
	}
}
