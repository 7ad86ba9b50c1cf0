package openai

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/firstmate/firstmate/agent"
)

var testTools = []agent.ToolSpec{
	{Name: "jobs", Description: "List background jobs.", Schema: json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`)},
	{Name: "ls", Description: "List a directory.", Params: []string{"path"},
		Schema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"The directory."}}}`)},
	{Name: "read", Description: "Read a file.", Params: []string{"path", "offset", "limit"},
		Schema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"offset":{"type":"integer"},"limit":{"type":"integer"}},"required":["path"]}`)},
	{Name: "set", Description: "Set options.", Params: []string{"options", "scope"},
		Schema: json.RawMessage(`{"type":"object","properties":{"options":{"type":"object"},"scope":{"type":"string"}}}`)},
	{Name: "write", Description: "Write a file.", Params: []string{"path", "content"},
		Schema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}},"required":["path","content"]}`)},
}

type wantCall struct {
	name string
	args string // compact JSON; empty when err is set
	err  string // substring of the error
}

func TestParseToolCalls(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		prose string
		calls []wantCall
	}{
		{"no calls", "Just an answer.\n", "Just an answer.\n", nil},
		{"positional", `[TOOL] read("notes.md", 1, 20) [/TOOL]`, "",
			[]wantCall{{name: "read", args: `{"path":"notes.md","offset":1,"limit":20}`}}},
		{"fewer positional than params", `[TOOL] read("notes.md") [/TOOL]`, "",
			[]wantCall{{name: "read", args: `{"path":"notes.md"}`}}},
		{"keywords", `[TOOL] read(path="a.txt", limit=5) [/TOOL]`, "",
			[]wantCall{{name: "read", args: `{"path":"a.txt","limit":5}`}}},
		{"keywords with colon and quoted names", `[TOOL] read("path": "a.txt", 'limit': 5) [/TOOL]`, "",
			[]wantCall{{name: "read", args: `{"path":"a.txt","limit":5}`}}},
		{"positional then keyword", `[TOOL] read("a.txt", limit=5) [/TOOL]`, "",
			[]wantCall{{name: "read", args: `{"path":"a.txt","limit":5}`}}},
		{"json object form", `[TOOL] write({"path": "a.txt", "content": "x"}) [/TOOL]`, "",
			[]wantCall{{name: "write", args: `{"path":"a.txt","content":"x"}`}}},
		{"object without parentheses", `[TOOL] write {"path": "a.txt", "content": "x"} [/TOOL]`, "",
			[]wantCall{{name: "write", args: `{"path":"a.txt","content":"x"}`}}},
		{"envelope form", `[TOOL] {"name": "read", "arguments": {"path": "a"}} [/TOOL]`, "",
			[]wantCall{{name: "read", args: `{"path":"a"}`}}},
		{"envelope with string arguments", `[TOOL] {"name": "read", "arguments": "{\"path\": \"a\"}"} [/TOOL]`, "",
			[]wantCall{{name: "read", args: `{"path":"a"}`}}},
		{"envelope without name", `[TOOL] {"arguments": {}} [/TOOL]`, "",
			[]wantCall{{err: "expected a tool name"}}},
		{"lone object for an object-typed first param", `[TOOL] set({"depth": 2}) [/TOOL]`, "",
			[]wantCall{{name: "set", args: `{"options":{"depth":2}}`}}},
		{"object form for a tool whose first param is an object", `[TOOL] set({"options": {"depth": 2}, "scope": "all"}) [/TOOL]`, "",
			[]wantCall{{name: "set", args: `{"options":{"depth":2},"scope":"all"}`}}},
		{"empty args", `[TOOL] jobs() [/TOOL]`, "", []wantCall{{name: "jobs", args: `{}`}}},
		{"no parentheses", `[TOOL] jobs [/TOOL]`, "", []wantCall{{name: "jobs", args: `{}`}}},
		{"no spaces", `[TOOL]ls(".")[/TOOL]`, "", []wantCall{{name: "ls", args: `{"path":"."}`}}},
		{"lower case markers", `[tool] ls(".") [/tool]`, "", []wantCall{{name: "ls", args: `{"path":"."}`}}},
		{"missing close at end", `Looking. [TOOL] ls(".")`, "Looking.", []wantCall{{name: "ls", args: `{"path":"."}`}}},
		{"missing close before next call", `[TOOL] ls(".") [TOOL] jobs() [/TOOL]`, "",
			[]wantCall{{name: "ls", args: `{"path":"."}`}, {name: "jobs", args: `{}`}}},
		{"trailing comma", `[TOOL] read("a", 1,) [/TOOL]`, "", []wantCall{{name: "read", args: `{"path":"a","offset":1}`}}},
		{"escapes", `[TOOL] write("a", "l1\nl2\t\"q\" \\ \/ \u00e9 \ud83d\ude00") [/TOOL]`, "",
			[]wantCall{{name: "write", args: `{"path":"a","content":"l1\nl2\t\"q\" \\ / é 😀"}`}}},
		{"unknown escapes kept", `[TOOL] write("C:\Users\d", "\d+ \x \u12") [/TOOL]`, "",
			[]wantCall{{name: "write", args: `{"path":"C:\\Users\\d","content":"\\d+ \\x \\u12"}`}}},
		{"lone surrogate", `[TOOL] write("a", "\ud800x") [/TOOL]`, "",
			[]wantCall{{name: "write", args: `{"path":"a","content":"` + "\uFFFD" + `x"}`}}},
		{"single quotes", `[TOOL] write('a.txt', 'it\'s "fine"') [/TOOL]`, "",
			[]wantCall{{name: "write", args: `{"path":"a.txt","content":"it's \"fine\""}`}}},
		{"commas and parentheses in quotes", `[TOOL] write("a,b).txt", "f(x, y) [/TOOL]") [/TOOL]`, "",
			[]wantCall{{name: "write", args: `{"path":"a,b).txt","content":"f(x, y) [/TOOL]"}`}}},
		{"raw newline in string", "[TOOL] write(\"a\", \"one\ntwo\n\") [/TOOL]", "",
			[]wantCall{{name: "write", args: `{"path":"a","content":"one\ntwo\n"}`}}},
		{"multi-line arguments", "[TOOL] read(\n  \"a\",\n  1,\n  20\n)\n[/TOOL]", "",
			[]wantCall{{name: "read", args: `{"path":"a","offset":1,"limit":20}`}}},
		{"triple quotes are raw", "[TOOL] write(\"hello.py\", \"\"\"\nprint(\"hi\\n\")\n\"\"\") [/TOOL]", "",
			[]wantCall{{name: "write", args: `{"path":"hello.py","content":"print(\"hi\\n\")\n"}`}}},
		{"triple single quotes", "[TOOL] write('a', '''x'y''') [/TOOL]", "",
			[]wantCall{{name: "write", args: `{"path":"a","content":"x'y"}`}}},
		{"triple quotes ending in a quote", `[TOOL] write("a", """say "hi"""") [/TOOL]`, "",
			[]wantCall{{name: "write", args: `{"path":"a","content":"say \"hi\""}`}}},
		{"empty strings", `[TOOL] write("", "") [/TOOL]`, "", []wantCall{{name: "write", args: `{"path":"","content":""}`}}},
		{"html characters not escaped", `[TOOL] write("a", "<b> & </b>") [/TOOL]`, "",
			[]wantCall{{name: "write", args: `{"path":"a","content":"<b> & </b>"}`}}},
		{"numbers", `[TOOL] read("a", -0, +20) [/TOOL]`, "", []wantCall{{name: "read", args: `{"path":"a","offset":-0,"limit":20}`}}},
		{"float and exponent", `[TOOL] read("a", 1.5e3, 2E-2) [/TOOL]`, "", []wantCall{{name: "read", args: `{"path":"a","offset":1.5e3,"limit":2E-2}`}}},
		{"literals", `[TOOL] write(true, null) [/TOOL]`, "", []wantCall{{name: "write", args: `{"path":true,"content":null}`}}},
		{"python literals", `[TOOL] write(True, None) [/TOOL]`, "", []wantCall{{name: "write", args: `{"path":true,"content":null}`}}},
		{"arrays and nested objects", `[TOOL] set({"a": [1, "two", {"b": false}], c: []}, scope='x',) [/TOOL]`, "",
			[]wantCall{{name: "set", args: `{"options":{"a":[1,"two",{"b":false}],"c":[]},"scope":"x"}`}}},
		{"object with trailing comma and bare keys", `[TOOL] write({path: "a", content: "b",}) [/TOOL]`, "",
			[]wantCall{{name: "write", args: `{"path":"a","content":"b"}`}}},
		{"several calls and prose", "I'll look first.\n[TOOL] ls(\".\") [/TOOL]\nThen read it.\n[TOOL] read(\"a\") [/TOOL]\nDone.",
			"I'll look first.\n\nThen read it.\n\nDone.",
			[]wantCall{{name: "ls", args: `{"path":"."}`}, {name: "read", args: `{"path":"a"}`}}},
		{"code fence around call", "```\n[TOOL] ls(\".\") [/TOOL]\n```", "```\n\n```", []wantCall{{name: "ls", args: `{"path":"."}`}}},

		// Malformed calls: reported, never fatal, and the rest still read.
		{"unknown tool", `[TOOL] rm("x") [/TOOL]`, "", []wantCall{{name: "rm", err: "there is no tool named rm; the tools are: jobs, ls, read, set, write"}}},
		{"no name", `[TOOL] ("x") [/TOOL]`, "", []wantCall{{err: "expected a tool name after [TOOL]"}}},
		{"unterminated string", "[TOOL] write(\"a\", \"abc) [/TOOL]\nmore text\n[TOOL] ls(\".\") [/TOOL]",
			"more text", []wantCall{{name: "write", err: "the string at line 1, column 19 runs over a [TOOL] marker, so its closing quote is probably missing"}, {name: "ls", args: `{"path":"."}`}}},
		{"unterminated string position", "[TOOL] write(\n\"a\", \"abc)", "", []wantCall{{name: "write", err: "(line 2, column 6 of the call)"}}},
		{"unterminated triple", `[TOOL] write("a", """abc) [/TOOL]`, "", []wantCall{{name: "write", err: `the """ string that starts here is never closed`}}},
		{"unquoted value", `[TOOL] read(notes.md) [/TOOL]`, "", []wantCall{{name: "read", err: `notes.md is not quoted`}}},
		{"bad number", `[TOOL] read("a", 007) [/TOOL]`, "", []wantCall{{name: "read", err: `"007" is not a number`}}},
		{"number with letters", `[TOOL] read("a", 20abc) [/TOOL]`, "", []wantCall{{name: "read", err: `"20abc" is not a number`}}},
		{"lone minus", `[TOOL] read("a", -) [/TOOL]`, "", []wantCall{{name: "read", err: `"-" is not a number`}}},
		{"too many positional", `[TOOL] ls(".", "x") [/TOOL]`, "", []wantCall{{name: "ls", err: "ls takes at most 1 arguments (path), but got 2"}}},
		{"positional to no-arg tool", `[TOOL] jobs(1) [/TOOL]`, "", []wantCall{{name: "jobs", err: "jobs takes no arguments"}}},
		{"duplicate argument", `[TOOL] read("a", path="b") [/TOOL]`, "", []wantCall{{name: "read", err: "argument path is given twice"}}},
		{"positional after keyword", `[TOOL] read(path="a", 1) [/TOOL]`, "", []wantCall{{name: "read", err: "argument 2 has no name but follows a named one"}}},
		{"missing comma", `[TOOL] read("a" 1) [/TOOL]`, "", []wantCall{{name: "read", err: `expected , or ) after argument 1, found "1) [/TOOL]"`}}},
		{"unclosed argument list", `[TOOL] read("a", 1`, "", []wantCall{{name: "read", err: "the argument list is never closed"}}},
		{"close marker inside args", `[TOOL] read("a", [/TOOL] and then`, "and then", []wantCall{{name: "read", err: "expected a value, found [/TOOL]"}}},
		{"junk after call", `[TOOL] ls(".") extra [/TOOL] after`, "after", []wantCall{{name: "ls", err: `expected [/TOOL] after the call, found "extra [/TOOL…"`}}},
		{"no parenthesis", `[TOOL] ls "." [/TOOL]`, "", []wantCall{{name: "ls", err: "expected ( after the tool name ls"}}},
		{"unclosed object", `[TOOL] write({"path": "a"`, "", []wantCall{{name: "write", err: "the { here is never closed"}}},
		{"unclosed array", `[TOOL] set({"a": [1, 2}) [/TOOL]`, "", []wantCall{{name: "set", err: "expected , or ] in the list"}}},
		{"object key not quoted properly", `[TOOL] write({1: "a"}) [/TOOL]`, "", []wantCall{{name: "write", err: "expected a key in double quotes"}}},
		{"object missing colon", `[TOOL] write({"path" "a"}) [/TOOL]`, "", []wantCall{{name: "write", err: `expected : after the key "path"`}}},
		{"empty marker", `[TOOL]`, "", []wantCall{{err: "found the end of the reply"}}},
		{"malformed then good in one reply", "[TOOL] read(\"a\" [TOOL] ls(\".\") [/TOOL]", "",
			[]wantCall{{name: "read", err: "expected , or )"}, {name: "ls", args: `{"path":"."}`}}},
		{"deep nesting", "[TOOL] set(" + strings.Repeat("[", 100) + ") [/TOOL]", "", []wantCall{{name: "set", err: "nested more than 64 deep"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prose, calls := parseToolCalls(tt.in, testTools)
			if prose != tt.prose {
				t.Errorf("prose = %q, want %q", prose, tt.prose)
			}
			if len(calls) != len(tt.calls) {
				t.Fatalf("got %d calls, want %d: %+v", len(calls), len(tt.calls), calls)
			}
			for i, want := range tt.calls {
				got := calls[i]
				if got.Name != want.name {
					t.Errorf("call %d: name = %q, want %q", i, got.Name, want.name)
				}
				if want.err != "" {
					if got.Err == nil || !strings.Contains(got.Err.Error(), want.err) {
						t.Errorf("call %d: err = %v, want it to contain %q", i, got.Err, want.err)
					}
					continue
				}
				if got.Err != nil {
					t.Errorf("call %d: unexpected error %v", i, got.Err)
					continue
				}
				if string(got.Args) != want.args {
					t.Errorf("call %d: args = %s, want %s", i, got.Args, want.args)
				}
				if !strings.Contains(tt.in, got.Raw) || !strings.HasPrefix(strings.ToUpper(got.Raw), callOpen) {
					t.Errorf("call %d: raw %q is not the call's text", i, got.Raw)
				}
			}
		})
	}
}

// A call the parser rejected becomes a tool call whose arguments carry the
// problem and what was written, and its result tells the model about it.
func TestMalformedCallRoundTrip(t *testing.T) {
	_, calls := parseToolCalls(`[TOOL] read(notes.md) [/TOOL]`, testTools)
	c := calls[0].toolCall(false)
	if c.Name != "read" || !strings.HasPrefix(c.ID, "call_") {
		t.Fatalf("call = %+v", c)
	}
	problem, raw, ok := parseErrorOf(c.Args)
	if !ok || !strings.Contains(problem, "notes.md is not quoted") || raw != `[TOOL] read(notes.md) [/TOOL]` {
		t.Fatalf("parseErrorOf(%s) = %q, %q, %v", c.Args, problem, raw, ok)
	}
	hist := []agent.Message{
		{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{c}},
		{Role: agent.RoleTool, ToolCallID: c.ID, ToolName: "read", Content: "error: invalid arguments for read: unexpected _parse_error"},
	}
	msgs := textMessages("", hist, testTools)
	if got := msgs[1].Content; got != `[TOOL] read(notes.md) [/TOOL]` {
		t.Errorf("assistant rendered as %q", got)
	}
	res := msgs[2].Content
	if !strings.Contains(res, "could not be read") || !strings.Contains(res, "notes.md is not quoted") || strings.Contains(res, "unexpected _parse_error") {
		t.Errorf("result = %q", res)
	}
	if cut := calls[0].toolCall(true); !strings.Contains(string(cut.Args), "cut off at the length limit") {
		t.Errorf("cut call args = %s", cut.Args)
	}
}

// What renderAssistant writes, parseToolCalls reads back to the same call.
func TestRenderParseRoundTrip(t *testing.T) {
	calls := []agent.ToolCall{
		{ID: "1", Name: "write", Args: json.RawMessage(`{"path": "a [/TOOL].txt", "content": "x\n\"y\" <&> '''"}`)},
		{ID: "2", Name: "jobs", Args: json.RawMessage(`{}`)},
		{ID: "3", Name: "read", Args: nil},
		{ID: "4", Name: "set", Args: json.RawMessage(`{"options":{"k":[1,2]}}`)},
	}
	text := renderAssistant(agent.Message{Role: agent.RoleAssistant, Content: "Working.", ToolCalls: calls})
	prose, parsed := parseToolCalls(text, testTools)
	if prose != "Working." || len(parsed) != len(calls) {
		t.Fatalf("parsed %q into %q, %+v", text, prose, parsed)
	}
	for i, p := range parsed {
		if p.Err != nil {
			t.Fatalf("call %d: %v", i, p.Err)
		}
		want := calls[i].Args
		if len(want) == 0 {
			want = json.RawMessage("{}")
		}
		var a, b any
		_ = json.Unmarshal(p.Args, &a)
		_ = json.Unmarshal(want, &b)
		if aj, bj := mustJSON(t, a), mustJSON(t, b); aj != bj {
			t.Errorf("call %d: args %s, want %s", i, aj, bj)
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func FuzzParseToolCalls(f *testing.F) {
	for _, s := range []string{
		`[TOOL] read("notes.md", 1, 20) [/TOOL]`,
		`[TOOL] write({"path": "a.txt", "content": "x"}) [/TOOL]`,
		`[TOOL] read(path='a', limit=+2e3,) [/TOOL] prose [TOOL] jobs [/TOOL]`,
		"[TOOL] write(\"a\", \"\"\"\nraw \\n text\n\"\"\") [/TOOL]",
		`[TOOL] {"name": "ls", "arguments": {"path": "."}} [/TOOL]`,
		`[TOOL] set({a: [1, {"b": null}], c: True}, "s") [/TOOL]`,
		`[tool] write("\ud83d\ude00 \u00e9 \d", '\'') [/tool]`,
		`[TOOL] read("a" [TOOL] ls(".")`,
		`[TOOL] write("""x""""`,
		"[TOOL] ls(\"\xff\xfe\") [/TOOL]",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		prose, calls := parseToolCalls(s, testTools)
		if len(prose) > len(s) {
			t.Fatalf("prose longer than the input")
		}
		for _, c := range calls {
			if c.Err != nil {
				if c.Args != nil {
					t.Fatalf("call with error has args %s", c.Args)
				}
				// The error must still make valid arguments for the loop.
				if a := c.toolCall(false).Args; !json.Valid(a) {
					t.Fatalf("error args not valid JSON: %s", a)
				}
				continue
			}
			if !json.Valid(c.Args) || !bytes.HasPrefix(c.Args, []byte("{")) {
				t.Fatalf("args %q from %q are not a JSON object", c.Args, s)
			}
			var m map[string]any
			if err := json.Unmarshal(c.Args, &m); err != nil {
				t.Fatalf("args %q: %v", c.Args, err)
			}
			if !strings.Contains(s, c.Raw) {
				t.Fatalf("raw %q not in input", c.Raw)
			}
		}
	})
}

// The examples the system prompt teaches parse the way it says.
func TestPromptExamplesParse(t *testing.T) {
	prompt := toolPrompt(testTools)
	_, calls := parseToolCalls(prompt, testTools)
	want := []wantCall{
		{name: "tool_name", err: "there is no tool named tool_name"},
		{name: "read", args: `{"path":"notes.md","offset":1,"limit":20}`},
		{name: "read", args: `{"path":"notes.md","limit":20}`},
		{name: "write", args: `{"path":"a.txt","content":"first line\nsecond line\n"}`},
		{name: "write", args: `{"path":"hello.py","content":"print(\"hello\\n\")\n"}`},
	}
	if len(calls) < len(want) {
		t.Fatalf("parsed %d calls from the prompt", len(calls))
	}
	for i, w := range want {
		c := calls[i]
		if c.Name != w.name || (w.err == "" && (c.Err != nil || string(c.Args) != w.args)) || (w.err != "" && (c.Err == nil || !strings.Contains(c.Err.Error(), w.err))) {
			t.Errorf("example %d = %s %s %v, want %+v", i, c.Name, c.Args, c.Err, w)
		}
	}
}
