package govern_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/agent/govern"
	"github.com/firstmate/firstmate/tools"
	"github.com/firstmate/firstmate/tools/skills"
)

// named is a set of tools with the names and powers given, each doing
// nothing.
func named(powers map[string]tools.Power) *tools.Set {
	var ts []tools.Tool
	for name, p := range powers {
		ts = append(ts, tools.New(name, p, name+" tool", func(context.Context, *tools.Workspace, struct{}) (tools.Result, error) {
			return tools.Result{Text: "ok"}, nil
		}))
	}
	return tools.NewSet(ts)
}

var builtins = map[string]tools.Power{
	"ls": tools.PowerRead, "read": tools.PowerRead, "grep": tools.PowerRead, "write": tools.PowerWrite,
	"shell": tools.PowerExec, "start": tools.PowerExec, "jobs": tools.PowerExec, "stop": tools.PowerExec,
	"fetch": tools.PowerWeb, "search": tools.PowerWeb, "srv__query": tools.MCPPower("srv"),
}

func TestPolicyMostSpecificRuleWins(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC)
	defaults := govern.Defaults{Default: agent.ToolAsk, Rules: map[string]agent.ToolMode{
		"group:exec": agent.ToolDeny, "fetch": agent.ToolAllow, "group:read": agent.ToolAllow,
	}}
	stored := agent.ChannelSettings{Version: 3, Tools: map[string]agent.Rule{
		"start":      {Mode: agent.ToolAsk, By: "slack:U1", At: at},
		"group:read": {Mode: agent.ToolDeny, By: "slack:U2", At: at},
	}}
	set := named(builtins)
	p := govern.NewPolicy(agent.SessionKey{Platform: "slack", Team: "T", Chat: "C", Thread: "1.2"}, defaults, stored, set)
	for _, tc := range []struct {
		tool  string
		mode  agent.ToolMode
		rule  string
		layer string
	}{
		{"shell", agent.ToolDeny, "group:exec", "config"},  // configured group
		{"start", agent.ToolAsk, "start", "channel"},       // the channel's tool rule beats the configured group
		{"grep", agent.ToolDeny, "group:read", "channel"},  // the channel's group rule replaces the configured one
		{"fetch", agent.ToolAllow, "fetch", "config"},      // configured tool rule
		{"search", agent.ToolAsk, "default", "config"},     // nothing names it: the default
		{"weather", agent.ToolAsk, "default", "config"},    // not a tool here
		{"srv__query", agent.ToolAsk, "default", "config"}, // an MCP tool's group has no rule
	} {
		why := p.Why(tc.tool)
		if why.Mode != tc.mode || why.Rule != tc.rule || why.Layer != tc.layer {
			t.Errorf("%s: %+v, want %s by %s (%s)", tc.tool, why, tc.mode, tc.rule, tc.layer)
		}
	}
	if why := p.Why("start"); why.By != "slack:U1" || !why.At.Equal(at) {
		t.Errorf("who set start: %+v", why)
	}
	if p.Channel.Thread != "" || p.Version != 3 {
		t.Errorf("policy of %+v version %d", p.Channel, p.Version)
	}
	if g := govern.GroupOf(set, "srv__query"); g != "mcp:srv" {
		t.Errorf("MCP tool group %q", g)
	}
}

// The core names no tool: a tool's group is the power it declares, so a
// new command-running tool is governed by exec without anyone listing it.
func TestGroupIsTheToolsPower(t *testing.T) {
	set := named(map[string]tools.Power{"run_python": tools.PowerExec, "notes__add": tools.MCPPower("notes")})
	p := govern.NewPolicy(agent.SessionKey{Platform: "x", Chat: "y"},
		govern.Defaults{Rules: map[string]agent.ToolMode{"group:exec": agent.ToolDeny, "group:mcp:notes": agent.ToolAsk}}, agent.ChannelSettings{}, set)
	if why := p.Why("run_python"); why.Mode != agent.ToolDeny || why.Rule != "group:exec" {
		t.Errorf("a new exec tool: %+v", why)
	}
	if why := p.Why("notes__add"); why.Mode != agent.ToolAsk || why.Rule != "group:mcp:notes" {
		t.Errorf("an MCP tool: %+v", why)
	}
}

func TestParseRuleName(t *testing.T) {
	known := named(map[string]tools.Power{"read": tools.PowerRead, "grep": tools.PowerRead, "shell": tools.PowerExec, "start": tools.PowerExec, "srv__query": tools.MCPPower("srv")})
	for in, want := range map[string]string{
		"exec": "group:exec", "EXEC": "group:exec", "read": "group:read", "tool:read": "read",
		"group:read": "group:read", "shell": "shell", "default": "default", "*": "default", "mcp:srv": "group:mcp:srv",
	} {
		got, err := govern.ParseRuleName(in, known)
		if err != nil || got != want {
			t.Errorf("ParseRuleName(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "rm", "tool:exec", "group:shell", "mcp:other", "tool:"} {
		if got, err := govern.ParseRuleName(bad, known); err == nil {
			t.Errorf("ParseRuleName(%q) = %q, want an error", bad, got)
		}
	}
}

func TestPolicyLeaks(t *testing.T) {
	set := named(map[string]tools.Power{"shell": tools.PowerExec, "start": tools.PowerExec, "jobs": tools.PowerExec, "stop": tools.PowerExec,
		"read": tools.PowerRead, "grep": tools.PowerRead, "write": tools.PowerWrite})
	leaky := govern.NewPolicy(agent.SessionKey{Platform: "x", Chat: "y"}, govern.Defaults{Rules: map[string]agent.ToolMode{"shell": agent.ToolDeny}}, agent.ChannelSettings{}, set)
	leaks := leaky.Leaks()
	if len(leaks) != 3 || !strings.Contains(leaks[0], "shell is deny") || !strings.Contains(strings.Join(leaks, "\n"), "start is allow") {
		t.Errorf("leaks of deny shell: %q", leaks)
	}
	whole := govern.NewPolicy(agent.SessionKey{Platform: "x", Chat: "y"}, govern.Defaults{Rules: map[string]agent.ToolMode{"group:exec": agent.ToolDeny}}, agent.ChannelSettings{}, set)
	if leaks := whole.Leaks(); len(leaks) != 0 {
		t.Errorf("deny exec leaks %q", leaks)
	}
	// Commands read the workspace: read=deny with exec open is a way around.
	around := govern.NewPolicy(agent.SessionKey{Platform: "x", Chat: "y"}, govern.Defaults{Rules: map[string]agent.ToolMode{"group:read": agent.ToolDeny}}, agent.ChannelSettings{}, set)
	if leaks := around.Leaks(); len(leaks) != 1 || !strings.Contains(leaks[0], "read (group) is deny, but jobs is allow") || !strings.Contains(leaks[0], "exec=deny") {
		t.Errorf("deny read with exec allowed: %q", leaks)
	}
	// And the skill tool loads a SKILL.md anyone may write.
	set = named(map[string]tools.Power{"read": tools.PowerRead, "write": tools.PowerWrite, "skill": tools.PowerSkills})
	skill := govern.NewPolicy(agent.SessionKey{Platform: "x", Chat: "y"}, govern.Defaults{Rules: map[string]agent.ToolMode{"group:read": agent.ToolDeny}}, agent.ChannelSettings{}, set)
	if leaks := skill.Leaks(); len(leaks) != 1 || !strings.Contains(leaks[0], "skills/NAME/SKILL.md") {
		t.Errorf("deny read with write and skills allowed: %q", leaks)
	}
}

// rowsOf lists a view's groups and their rows as "group: row=mode/layer".
func rowsOf(v agent.PolicyView) map[string][]string {
	out := map[string][]string{}
	for _, g := range v.Groups {
		out[g.Name] = nil
		for _, t := range g.Tools {
			out[g.Name] = append(out[g.Name], t.Name+"="+string(t.Reason.Mode)+"/"+t.Reason.Layer)
		}
	}
	return out
}

// A screen's view has a row per skill (those given, and those a rule
// names) in the skills group, after the tool that loads them, and a
// group per MCP server.
func TestPolicyViewSkillsAndServers(t *testing.T) {
	set := named(map[string]tools.Power{"ls": tools.PowerRead, "notes__add": tools.MCPPower("notes"), "notes__search": tools.MCPPower("notes"), "skill": tools.PowerSkills})
	p := govern.NewPolicy(agent.SessionKey{Platform: "test", Chat: "C1"},
		govern.Defaults{Default: agent.ToolAsk, Rules: map[string]agent.ToolMode{"skill:audit": agent.ToolAllow}},
		agent.ChannelSettings{Version: 4, Tools: map[string]agent.Rule{"skill:gone": {Mode: agent.ToolDeny}, "group:skills": {Mode: agent.ToolAllow}, "group:mcp:notes": {Mode: agent.ToolDeny}}}, set)
	v := p.View([]string{"Deploy", "deploy", "bad name"}, true)
	rows := rowsOf(v)
	if want := []string{"skill=ask/config", "skill:audit=allow/config", "skill:deploy=allow/channel", "skill:gone=deny/channel"}; !slices.Equal(rows["skills"], want) {
		t.Errorf("skills %q, want %q", rows["skills"], want)
	}
	if want := []string{"notes__add=deny/channel", "notes__search=deny/channel"}; !slices.Equal(rows["mcp:notes"], want) {
		t.Errorf("mcp:notes %q, want %q", rows["mcp:notes"], want)
	}
	var order []string
	for _, g := range v.Groups {
		order = append(order, g.Name)
		if g.Name == "mcp:notes" && (g.Rule == nil || g.Rule.Layer != "channel" || g.Rule.Mode != agent.ToolDeny) {
			t.Errorf("the server's rule %+v", g.Rule)
		}
	}
	if want := []string{"read", "skills", "mcp:notes"}; !slices.Equal(order, want) || v.Version != 4 || !v.Editable {
		t.Errorf("groups %q (want %q), version %d", order, want, v.Version)
	}
	// No skill and no rule about one: no skills group.
	if _, ok := rowsOf(govern.NewPolicy(agent.SessionKey{Platform: "test", Chat: "C1"}, govern.Defaults{}, agent.ChannelSettings{}, named(map[string]tools.Power{"ls": tools.PowerRead})).View(nil, false))["skills"]; ok {
		t.Error("a skills group without skills")
	}
}

// The rule grammar: skill:NAME in chat, in the config and in stored
// settings; a skill's mode comes from its rule, then group:skills, then
// the default; the tool that loads skills from its own rule, then the
// default, so "skills=deny skill:deploy=allow" lets deploy alone load.
func TestSkillRuleGrammar(t *testing.T) {
	known := named(map[string]tools.Power{"read": tools.PowerRead, "shell": tools.PowerExec, "skill": tools.PowerSkills})
	for in, want := range map[string]string{
		"skill:Deploy": "skill:deploy", "SKILL:x_1": "skill:x_1", "skills": "group:skills", "group:skills": "group:skills", "skill": "skill",
	} {
		if got, err := govern.ParseRuleName(in, known); err != nil || got != want {
			t.Errorf("ParseRuleName(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"skill:", "skill:../x", "skill:a b", "skill:-x", "skill:" + strings.Repeat("x", 65)} {
		if got, err := govern.ParseRuleName(bad, known); err == nil {
			t.Errorf("ParseRuleName(%q) = %q", bad, got)
		}
	}
	// The policy's skill names are the skills package's.
	for _, name := range []string{"a", "deploy", "x_1", "-x", "a.b", "A", strings.Repeat("x", 64), strings.Repeat("x", 65)} {
		_, ok := agent.IsSkillRule(agent.SkillRule(name))
		if ok != (skills.ValidName(name) == nil) {
			t.Errorf("skill name %q: policy says %v, skills says %v", name, ok, skills.ValidName(name))
		}
	}
	p := govern.NewPolicy(agent.SessionKey{Platform: "t", Chat: "c"},
		govern.Defaults{Default: agent.ToolAsk, Rules: map[string]agent.ToolMode{"group:skills": agent.ToolDeny}},
		agent.ChannelSettings{Tools: map[string]agent.Rule{"skill:deploy": {Mode: agent.ToolAllow}}}, known)
	for rule, want := range map[string]agent.Reason{
		"skill:deploy": {Mode: agent.ToolAllow, Rule: "skill:deploy", Layer: "channel"},
		"skill:other":  {Mode: agent.ToolDeny, Rule: "group:skills", Layer: "config"},
		"skill":        {Mode: agent.ToolAsk, Rule: "default", Layer: "config"},
	} {
		if got := p.Why(rule); got != want {
			t.Errorf("Why(%s) = %+v, want %+v", rule, got, want)
		}
	}
}

// scopedTool is a tool whose calls need what their arguments say.
type scopedTool struct{ tools.Tool }

func (scopedTool) Needs(args json.RawMessage) []tools.Power {
	var a struct{ Needs []tools.Power }
	_ = json.Unmarshal(args, &a)
	return a.Needs
}

// A call's mode is the strictest of its tool's and of what it needs: a
// skill's other file needs read too, so read=deny is no way around.
func TestCallModeIsTheStrictestNeed(t *testing.T) {
	skill := scopedTool{tools.New("skill", tools.PowerSkills, "loads skills", func(context.Context, *tools.Workspace, struct {
		Needs []tools.Power
	}) (tools.Result, error) {
		return tools.Result{}, nil
	})}
	set := tools.NewSet([]tools.Tool{skill})
	p := govern.NewPolicy(agent.SessionKey{Platform: "t", Chat: "c"},
		govern.Defaults{Rules: map[string]agent.ToolMode{"group:read": agent.ToolDeny, "group:skills": agent.ToolDeny, "skill:deploy": agent.ToolAllow, "skill:ops": agent.ToolAsk}},
		agent.ChannelSettings{}, set)
	for needs, want := range map[string]struct {
		mode agent.ToolMode
		rule string
	}{
		`["skill:deploy"]`:        {agent.ToolAllow, "skill"},
		`["skill:deploy","read"]`: {agent.ToolDeny, "group:read"},
		`["skill:other"]`:         {agent.ToolDeny, "skill:other"},
		`["skill:ops"]`:           {agent.ToolAsk, "skill:ops"},
		`["skill:ops","skill:x"]`: {agent.ToolDeny, "skill:x"},
		`[]`:                      {agent.ToolAllow, "skill"},
	} {
		mode, rule := p.CallMode(set, agent.ToolCall{ID: "c", Name: "skill", Args: json.RawMessage(`{"Needs":` + needs + `}`)})
		if mode != want.mode || rule != want.rule {
			t.Errorf("needs %s: %s by %s, want %s by %s", needs, mode, rule, want.mode, want.rule)
		}
	}
}
