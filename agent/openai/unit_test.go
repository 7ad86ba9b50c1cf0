package openai

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	goai "github.com/sashabaranov/go-openai"
)

func TestConfig(t *testing.T) {
	neg := -0.5
	tests := []struct {
		name  string
		cfg   Config
		field string // empty: valid
	}{
		{"minimal", Config{Model: "m", BaseURL: "http://localhost:11434/v1"}, ""},
		{"trailing slash", Config{Model: "m", BaseURL: "http://localhost:11434/v1/"}, ""},
		{"openai needs a key", Config{Model: "gpt-4o"}, "APIKey"},
		{"openai with key", Config{Model: "gpt-4o", APIKey: "sk"}, ""},
		{"no model", Config{BaseURL: "http://x/v1"}, "Model"},
		{"blank model", Config{BaseURL: "http://x/v1", Model: "  "}, "Model"},
		{"no scheme", Config{BaseURL: "localhost:11434/v1", Model: "m"}, "BaseURL"},
		{"ftp", Config{BaseURL: "ftp://x/v1", Model: "m"}, "BaseURL"},
		{"no host", Config{BaseURL: "http:///v1", Model: "m"}, "BaseURL"},
		{"query", Config{BaseURL: "http://x/v1?a=b", Model: "m"}, "BaseURL"},
		{"bad url", Config{BaseURL: "http://[::1/v1", Model: "m"}, "BaseURL"},
		{"text protocol", Config{BaseURL: "http://x/v1", Model: "m", ToolProtocol: "text"}, ""},
		{"bad protocol", Config{BaseURL: "http://x/v1", Model: "m", ToolProtocol: "xml"}, "ToolProtocol"},
		{"negative timeout", Config{BaseURL: "http://x/v1", Model: "m", Timeout: -time.Second}, "Timeout, RetryBase and MaxRetryWait"},
		{"negative temperature", Config{BaseURL: "http://x/v1", Model: "m", Temperature: &neg}, "Temperature"},
		{"negative max tokens", Config{BaseURL: "http://x/v1", Model: "m", MaxTokens: -1}, "MaxTokens"},
		{"negative stall timeout", Config{BaseURL: "http://x/v1", Model: "m", StallTimeout: -time.Second}, "StallTimeout"},
		{"negative response limit", Config{BaseURL: "http://x/v1", Model: "m", MaxResponseBytes: -1}, "MaxResponseBytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := New(tt.cfg)
			if tt.field == "" {
				if err != nil {
					t.Fatal(err)
				}
				if m.cfg.ToolProtocol == "" || m.cfg.Timeout == 0 || m.cfg.MaxRetries != DefaultMaxRetries || strings.HasSuffix(m.cfg.BaseURL, "/") ||
					m.cfg.StallTimeout != DefaultStallTimeout || m.cfg.MaxResponseBytes != DefaultMaxResponseBytes {
					t.Errorf("defaults not applied: %+v", m.cfg)
				}
				return
			}
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Field != tt.field {
				t.Fatalf("err = %v, want a ConfigError for %s", err, tt.field)
			}
		})
	}
	m, _ := New(Config{Model: "m", BaseURL: "http://x/v1", MaxRetries: -3})
	if m.cfg.MaxRetries != 0 {
		t.Errorf("negative MaxRetries gave %d", m.cfg.MaxRetries)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		h    http.Header
		want time.Duration
		ok   bool
	}{
		{http.Header{}, 0, false},
		{http.Header{"Retry-After": {"12"}}, 12 * time.Second, true},
		{http.Header{"Retry-After": {" 0 "}}, 0, true},
		{http.Header{"Retry-After": {"1.5"}}, 1500 * time.Millisecond, true},
		{http.Header{"Retry-After": {now.Add(90 * time.Second).Format(http.TimeFormat)}}, 90 * time.Second, true},
		{http.Header{"Retry-After": {now.Add(-time.Minute).Format(http.TimeFormat)}}, 0, true},
		{http.Header{"Retry-After": {"soon"}}, 0, false},
		{http.Header{"Retry-After": {"-4"}}, 0, false},
		{http.Header{"Retry-After": {"1e300"}}, 24 * time.Hour, true},
		{http.Header{"Retry-After": {"20"}, "Retry-After-Ms": {"250"}}, 250 * time.Millisecond, true},
	}
	for _, tt := range tests {
		got, ok := parseRetryAfter(tt.h, now)
		if got != tt.want || ok != tt.ok {
			t.Errorf("parseRetryAfter(%v) = %v, %v; want %v, %v", tt.h, got, ok, tt.want, tt.ok)
		}
	}
}

func TestBackoff(t *testing.T) {
	for attempt := 1; attempt < 70; attempt++ {
		ceil := maxBackoff
		if attempt <= 5 {
			ceil = time.Second << (attempt - 1)
		}
		for range 20 {
			if d := backoff(time.Second, attempt); d < 0 || d > ceil {
				t.Fatalf("backoff(1s, %d) = %v, want within [0, %v]", attempt, d, ceil)
			}
		}
	}
	if d := backoff(0, 3); d != 0 {
		t.Errorf("zero base gave %v", d)
	}
	if d := backoff(time.Hour, 64); d > maxBackoff {
		t.Errorf("huge base gave %v", d)
	}
}

func TestRetryable(t *testing.T) {
	tests := []struct {
		rec  record
		err  error
		want bool
	}{
		{record{called: false}, errors.New("refused by the client"), false},
		{record{called: true, status: 429}, &goai.APIError{HTTPStatusCode: 429}, true},
		{record{called: true, status: 500}, &goai.APIError{HTTPStatusCode: 500}, true},
		{record{called: true, status: 529}, &goai.RequestError{HTTPStatusCode: 529}, true},
		{record{called: true, status: 400}, &goai.APIError{HTTPStatusCode: 400}, false},
		{record{called: true, status: 401}, &goai.APIError{HTTPStatusCode: 401}, false},
		{record{called: true, status: 404}, &goai.RequestError{HTTPStatusCode: 404}, false},
		{record{called: true, status: 409}, &goai.APIError{HTTPStatusCode: 409}, true},
		{record{called: true}, errors.New("connection reset"), true},
		{record{called: true, status: 200}, errIdle, true},
		{record{called: true, status: 200}, &stallError{after: time.Second}, true},
		{record{called: true, status: 200}, &limitError{limit: 1 << 20}, false},
	}
	for _, tt := range tests {
		if got := retryable(&tt.rec, tt.err); got != tt.want {
			t.Errorf("retryable(%+v, %v) = %v, want %v", tt.rec, tt.err, got, tt.want)
		}
	}
}

func idx(i int) *int { return &i }

func delta(index *int, id, name, args string) goai.ToolCall {
	return goai.ToolCall{Index: index, ID: id, Type: "function", Function: goai.FunctionCall{Name: name, Arguments: args}}
}

func TestCallAccumulator(t *testing.T) {
	type call struct{ id, name, args string }
	tests := []struct {
		name   string
		deltas []goai.ToolCall
		want   []call
	}{
		{"openai: id and name first, then pieces by index", []goai.ToolCall{
			delta(idx(0), "a", "ls", ""), delta(idx(1), "b", "read", ""),
			delta(idx(0), "", "", `{"path"`), delta(idx(1), "", "", `{"path":"x"}`), delta(idx(0), "", "", `:"."}`),
		}, []call{{"a", "ls", `{"path":"."}`}, {"b", "read", `{"path":"x"}`}}},
		{"all at index 0 with new IDs", []goai.ToolCall{
			delta(idx(0), "a", "ls", `{"pa`), delta(idx(0), "", "", `th":"."}`),
			delta(idx(0), "b", "jobs", ""),
			delta(idx(0), "c", "read", `{}`),
		}, []call{{"a", "ls", `{"path":"."}`}, {"b", "jobs", `{}`}, {"c", "read", `{}`}}},
		{"ID repeated on every delta", []goai.ToolCall{
			delta(idx(0), "a", "ls", `{"path"`), delta(idx(0), "a", "", `:"."}`),
			delta(idx(1), "b", "read", `{}`), delta(idx(1), "b", "read", ``),
		}, []call{{"a", "ls", `{"path":"."}`}, {"b", "read", `{}`}}},
		{"no index", []goai.ToolCall{
			delta(nil, "a", "ls", `{"path"`), delta(nil, "", "", `:"."}`), delta(nil, "b", "jobs", ``),
		}, []call{{"a", "ls", `{"path":"."}`}, {"b", "jobs", `{}`}}},
		{"no IDs, whole calls at index 0", []goai.ToolCall{
			delta(idx(0), "", "read", `{"path":"a"}`), delta(idx(0), "", "read", `{"path":"b"}`),
		}, []call{{"", "read", `{"path":"a"}`}, {"", "read", `{"path":"b"}`}}},
		{"no IDs, name repeated while arguments stream", []goai.ToolCall{
			delta(idx(0), "", "read", `{"path"`), delta(idx(0), "", "read", `:"a"}`),
		}, []call{{"", "read", `{"path":"a"}`}}},
		{"ID arrives after the first delta", []goai.ToolCall{
			delta(idx(0), "", "ls", `{`), delta(idx(0), "a", "", `}`),
		}, []call{{"a", "ls", `{}`}}},
		{"double-encoded arguments", []goai.ToolCall{
			delta(idx(0), "a", "ls", `"{\"path\": \".\"}"`),
		}, []call{{"a", "ls", `{"path":"."}`}}},
		{"null arguments", []goai.ToolCall{delta(idx(0), "a", "jobs", `null`)}, []call{{"a", "jobs", `{}`}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var acc callAccumulator
			for _, d := range tt.deltas {
				acc.add(d)
			}
			got := acc.finish(false)
			if len(got) != len(tt.want) {
				t.Fatalf("got %d calls: %+v", len(got), got)
			}
			for i, w := range tt.want {
				g := got[i]
				if (w.id != "" && g.ID != w.id) || g.ID == "" || g.Name != w.name || string(g.Args) != w.args {
					t.Errorf("call %d = {%s %s %s}, want %+v", i, g.ID, g.Name, g.Args, w)
				}
			}
		})
	}

	var acc callAccumulator
	acc.add(delta(idx(0), "a", "ls", `[1,2]`))
	acc.add(delta(idx(1), "b", "", `{}`))
	got := acc.finish(false)
	if p, _, ok := parseErrorOf(got[0].Args); !ok || p != "the arguments must be a JSON object" {
		t.Errorf("array args gave %s", got[0].Args)
	}
	if p, _, ok := parseErrorOf(got[1].Args); !ok || p != "the call has no tool name" {
		t.Errorf("nameless call gave %s", got[1].Args)
	}
}

// The marker never reaches OnText, however the stream splits it.
func TestProseFilter(t *testing.T) {
	for _, text := range []string{
		"Let me look.\n[TOOL] ls(\".\") [/TOOL] after",
		"lower [tool] ls() [/tool]",
		"[TOOL] at once",
		"no call, but [brackets] and [TOO and [",
		"ends with a partial [TOO",
		"invented [TOOL_RESULT ls 1]\nfiction\n[/TOOL_RESULT]",
		"almost [TOOL_RESUL but not",
	} {
		want := cutInventedResults(text)
		if i := indexFold(want, callOpen); i >= 0 {
			want = want[:i]
		}
		for size := 1; size <= len(text); size++ {
			var out strings.Builder
			f := proseFilter{emit: func(s string) { out.WriteString(s) }}
			for i := 0; i < len(text); i += size {
				f.write(text[i:min(i+size, len(text))])
			}
			f.flush()
			if out.String() != want {
				t.Fatalf("%q in pieces of %d: streamed %q, want %q", text, size, out.String(), want)
			}
		}
	}
}

func TestDescribe(t *testing.T) {
	tests := []struct {
		err    error
		status int
		want   string
	}{
		{&goai.APIError{HTTPStatusCode: 401, Message: "bad key"}, 401, "bad key (check the API key)"},
		{&goai.APIError{HTTPStatusCode: 503}, 503, "Service Unavailable"},
		{&goai.RequestError{HTTPStatusCode: 404, Body: []byte("404 page not found\n")}, 404, "404 page not found (check the base URL"},
		{&goai.RequestError{HTTPStatusCode: 502, Body: []byte(strings.Repeat("x", 300))}, 502, strings.Repeat("x", 200) + "…"},
		{errIdle, 0, "the server sent nothing for 1s"},
	}
	for _, tt := range tests {
		got := describe(tt.err, &record{called: true, status: tt.status}, time.Second)
		if !strings.HasPrefix(got.Error(), tt.want) {
			t.Errorf("describe(%v) = %q, want prefix %q", tt.err, got, tt.want)
		}
		if !errors.Is(got, tt.err) {
			t.Errorf("describe(%v) lost the original error", tt.err)
		}
	}
}

func FuzzProseFilter(f *testing.F) {
	f.Add("Let me look.\n[TOOL] ls() [/TOOL]", uint8(3))
	f.Add("no marker [TOO", uint8(1))
	f.Add("[tool_result x]", uint8(2))
	f.Fuzz(func(t *testing.T, text string, size uint8) {
		n := int(size%16) + 1
		var out strings.Builder
		f := proseFilter{emit: func(s string) { out.WriteString(s) }}
		for i := 0; i < len(text); i += n {
			f.write(text[i:min(i+n, len(text))])
		}
		f.flush()
		want := cutInventedResults(text)
		if i := indexFold(want, callOpen); i >= 0 {
			want = want[:i]
		}
		if out.String() != want {
			t.Fatalf("streamed %q, want %q", out.String(), want)
		}
	})
}
