package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/firstmate/firstmate/agent"
)

// The text protocol's markers. Calls are read case-insensitively.
const (
	callOpen    = "[TOOL]"
	callClose   = "[/TOOL]"
	resultOpen  = "[TOOL_RESULT"
	resultClose = "[/TOOL_RESULT]"
)

// toolPrompt describes the tools and the call syntax for the system prompt.
// It depends only on the tools, in their sorted order, so it is byte-stable.
func toolPrompt(tools []agent.ToolSpec) string {
	var b strings.Builder
	b.WriteString(`# Tools

You can use the tools listed below. To call one, write a line of this form:

[TOOL] tool_name(arguments) [/TOOL]

Give the arguments in the order listed, or by name, or as one JSON object. For example (these tool names are only examples):
[TOOL] read("notes.md", 1, 20) [/TOOL]
[TOOL] read(path="notes.md", limit=20) [/TOOL]
[TOOL] write({"path": "a.txt", "content": "first line\nsecond line\n"}) [/TOOL]

Strings go in double quotes, with JSON escapes: \n for a new line, \" for a quote, \\ for a backslash. Numbers, true, false, null, [lists] and {objects} are written as in JSON. Long or multi-line text can go in triple quotes, where everything is taken exactly as written:
[TOOL] write("hello.py", """
print("hello\n")
""") [/TOOL]

You may make several calls in one reply. Then stop and wait: the results come back in the next message, each like
[TOOL_RESULT tool_name call_id]
…
[/TOOL_RESULT]
Never write [TOOL_RESULT] yourself. When you need no tool, answer normally, without [TOOL].

## Available tools
`)
	for _, t := range tools {
		fmt.Fprintf(&b, "\n### %s\n", t.Name)
		if d := strings.TrimSpace(t.Description); d != "" {
			b.WriteString(d)
			b.WriteByte('\n')
		}
		params := paramsOf(t)
		if len(params) == 0 {
			b.WriteString("No arguments.\n")
			continue
		}
		s := parseSchema(t.Schema)
		b.WriteString("Arguments, in order:\n")
		for i, p := range params {
			prop := s.Properties[p]
			need := "optional"
			if slices.Contains(s.Required, p) {
				need = "required"
			}
			fmt.Fprintf(&b, "%d. %s (%s, %s)", i+1, p, prop.typeName(), need)
			if d := strings.TrimSpace(prop.Description); d != "" {
				b.WriteString(": " + d)
			}
			if len(prop.Enum) > 0 {
				enc, _ := json.Marshal(prop.Enum)
				fmt.Fprintf(&b, " One of %s.", enc)
			}
			b.WriteByte('\n')
		}
	}
	return b.String()
}

type schema struct {
	Properties map[string]property `json:"properties"`
	Required   []string            `json:"required"`
}

type property struct {
	Type        any       `json:"type"` // a name or a list of names
	Description string    `json:"description"`
	Enum        []any     `json:"enum"`
	Items       *property `json:"items"`
}

func (p property) typeName() string {
	var names []string
	switch t := p.Type.(type) {
	case string:
		names = []string{t}
	case []any:
		for _, n := range t {
			if s, ok := n.(string); ok && s != "null" {
				names = append(names, s)
			}
		}
	}
	if len(names) == 0 {
		return "any"
	}
	name := strings.Join(names, " or ")
	if name == "array" && p.Items != nil {
		name = "list of " + p.Items.typeName()
	}
	return name
}

func parseSchema(raw json.RawMessage) schema {
	var s schema
	_ = json.Unmarshal(raw, &s) // a schema we cannot read describes no arguments
	return s
}

// paramsOf is a tool's argument names in declared order; when a spec does
// not declare the order, the schema's properties sorted by name stand in,
// so that the prompt and positional calls still agree.
func paramsOf(t agent.ToolSpec) []string {
	if len(t.Params) > 0 {
		return t.Params
	}
	s := parseSchema(t.Schema)
	names := make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// renderAssistant writes an assistant message as the model would have in
// the text protocol: its prose, then its calls in the JSON-object form.
func renderAssistant(m agent.Message) string {
	var b strings.Builder
	b.WriteString(m.Content)
	for _, c := range m.ToolCalls {
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		if _, raw, bad := parseErrorOf(c.Args); bad && raw != "" {
			b.WriteString(raw) // show the model what it wrote
			continue
		}
		args := "{}"
		var buf bytes.Buffer
		if len(c.Args) > 0 && json.Compact(&buf, c.Args) == nil && buf.String() != "{}" {
			args = buf.String()
		}
		if args == "{}" {
			fmt.Fprintf(&b, "%s %s() %s", callOpen, c.Name, callClose)
		} else {
			fmt.Fprintf(&b, "%s %s(%s) %s", callOpen, c.Name, args, callClose)
		}
	}
	return b.String()
}

func renderResult(name, id, content string) string {
	return fmt.Sprintf("%s %s %s]\n%s\n%s", resultOpen, name, id, content, resultClose)
}

// toolCall turns a parsed call into the agent's form, with a fresh ID.
func (p parsedCall) toolCall(cut bool) agent.ToolCall {
	c := agent.ToolCall{ID: newCallID(), Name: p.Name, Args: p.Args}
	if p.Err != nil {
		problem := p.Err.Error()
		if cut {
			problem += cutNote
		}
		c.Args = errorArgs(problem, p.Raw)
	}
	return c
}

// cutInventedResults drops everything from a [TOOL_RESULT the model wrote
// itself: a result it invents is fiction, and so is what follows it. The
// request's stop sequence does the same on servers that honour it.
func cutInventedResults(s string) string {
	if i := indexFold(s, resultOpen); i >= 0 {
		return s[:i]
	}
	return s
}

// proseFilter streams the text of a text-protocol reply up to its first
// [TOOL] (or invented [TOOL_RESULT) marker, and nothing after it: the call
// syntax is not for people, and prose after a call is in the final message
// anyway. A tail that could be the start of a marker is held back until
// the next delta settles it.
type proseFilter struct {
	emit    func(string)
	pending string
	stopped bool
}

var filterMarkers = []string{callOpen, resultOpen}

func (f *proseFilter) write(s string) {
	if f.stopped {
		return
	}
	buf := f.pending + s
	cut := -1
	for _, m := range filterMarkers {
		if i := indexFold(buf, m); i >= 0 && (cut < 0 || i < cut) {
			cut = i
		}
	}
	if cut >= 0 {
		f.emit(buf[:cut])
		f.pending, f.stopped = "", true
		return
	}
	keep := 0
	for _, m := range filterMarkers {
		for n := min(len(m)-1, len(buf)); n > keep; n-- {
			if hasPrefixFold(m, buf[len(buf)-n:]) {
				keep = n
				break
			}
		}
	}
	f.emit(buf[:len(buf)-keep])
	f.pending = buf[len(buf)-keep:]
}

// flush emits what was held back once the reply is complete.
func (f *proseFilter) flush() {
	if !f.stopped {
		f.emit(f.pending)
	}
	f.pending = ""
}
