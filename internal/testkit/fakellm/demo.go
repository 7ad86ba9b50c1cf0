package fakellm

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

const (
	// demoTextCalls is the demo's reply in firstmate's [TOOL] text protocol.
	demoTextCalls = "Let me look around and leave a note.\n" +
		`[TOOL] ls(".") [/TOOL]` + "\n" +
		`[TOOL] write({"path": "hello.txt", "content": "hello from firstmate\n"}) [/TOOL]`
)

// Demo is a handler that behaves like a tiny agent, for trying firstmate
// without a model: asked anything, it lists the workspace and writes
// hello.txt; given "$ command", it runs the command with the shell tool;
// given the tool results, it summarizes them. It speaks native
// tool calls when the request offers tools, and the [TOOL] text protocol
// when the system prompt describes it instead.
func Demo(req *Request) Reply {
	last := req.LastMessage()
	textProtocol := len(req.Tools) == 0 && len(req.Messages) > 0 &&
		req.Messages[0].Role == "system" && strings.Contains(req.Messages[0].Text(), "[TOOL]")
	command, isCommand := strings.CutPrefix(strings.TrimSpace(last.Text()), "$ ")
	isCommand = isCommand && last.Role == "user"
	switch {
	case isCommand && textProtocol:
		args, _ := json.Marshal(map[string]string{"command": command})
		return Text("Running it.\n[TOOL] shell(" + string(args) + ") [/TOOL]")
	case isCommand && slices.Contains(req.ToolNames(), "shell"):
		return Calls(Call("shell", map[string]string{"command": command}))
	case isCommand:
		return Text("The shell tool is not offered here, so I cannot run that. (This is fakellm's demo script, not a real model.)")
	case last.Role == "tool":
		return Text(demoSummary(toolResults(req)))
	case textProtocol && strings.Contains(last.Text(), "[TOOL_RESULT"):
		return Text(demoSummary(textResults(last.Text())))
	case textProtocol:
		return Text(demoTextCalls)
	}
	offered := req.ToolNames()
	var calls []ToolCall
	if slices.Contains(offered, "ls") {
		calls = append(calls, Call("ls", `{"path":"."}`))
	}
	if slices.Contains(offered, "write") {
		calls = append(calls, Call("write", `{"path":"hello.txt","content":"hello from firstmate\n"}`))
	}
	if len(calls) == 0 {
		return Text(fmt.Sprintf("This is fakellm's demo, not a real model. You said: %q. "+
			"Offer the ls and write tools and I will use them.", last.Text()))
	}
	return Calls(calls...)
}

type demoResult struct{ name, text string }

// toolResults returns the results that answer the last assistant message.
func toolResults(req *Request) []demoResult {
	names := map[string]string{}
	var out []demoResult
	for i := len(req.Messages) - 1; i >= 0 && req.Messages[i].Role == "tool"; i-- {
		out = append(out, demoResult{text: req.Messages[i].Text(), name: req.Messages[i].ToolCallID})
	}
	slices.Reverse(out)
	for _, m := range req.Messages {
		for _, c := range m.ToolCalls {
			names[c.ID] = c.Function.Name
		}
	}
	for i := range out {
		if n, ok := names[out[i].name]; ok {
			out[i].name = n
		}
	}
	return out
}

// textResults reads "[TOOL_RESULT name id]\n…\n[/TOOL_RESULT]" blocks.
func textResults(s string) []demoResult {
	var out []demoResult
	for {
		_, rest, ok := strings.Cut(s, "[TOOL_RESULT ")
		if !ok {
			return out
		}
		header, body, _ := strings.Cut(rest, "]")
		body, s, _ = strings.Cut(body, "[/TOOL_RESULT]")
		name, _, _ := strings.Cut(header, " ")
		out = append(out, demoResult{name: name, text: strings.TrimSpace(body)})
	}
}

func demoSummary(results []demoResult) string {
	var b strings.Builder
	b.WriteString("Done. Here is what the tools said:\n")
	wrote := false
	for _, r := range results {
		if r.name == "shell" {
			fmt.Fprintf(&b, "- shell:\n```\n%s\n```\n", strings.TrimSpace(r.text))
			continue
		}
		wrote = wrote || r.name == "write"
		line, _, _ := strings.Cut(strings.TrimSpace(r.text), "\n")
		if line == "" {
			line = "(no output)"
		}
		fmt.Fprintf(&b, "- %s: %s\n", r.name, line)
	}
	if wrote {
		b.WriteString("\nI left a note in hello.txt. ")
	} else {
		b.WriteString("\n")
	}
	b.WriteString("(This is fakellm's demo script, not a real model.)")
	return b.String()
}
