package config

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/firstmate/firstmate/agent"
)

// The tools section as the agent's policy: each list entry is a rule, by
// the same names admins use in chat (see agent.ParseRuleName).

// toolPrefix marks a tool's name where the bare word is also a group's.
const toolPrefix = "tool:"

// ruleName is the rule a tools list entry names, read the way
// agent.ParseRuleName reads it but without the list of tools: a bare word
// that is a group always means the group, and "mcp:SERVER" can only be a
// group (a tool of an MCP server is "SERVER__NAME"). "" for an empty entry.
// ValidateTools checks the names against the tools that exist.
func ruleName(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	if _, ok := agent.IsGroupRule(s); ok {
		return s
	}
	switch {
	case s == agent.DefaultRule || s == "*":
		return agent.DefaultRule
	case strings.HasPrefix(s, toolPrefix):
		return s[len(toolPrefix):]
	case slices.Contains(agent.Groups(), s) || strings.HasPrefix(s, "mcp:"):
		return agent.GroupRule(s)
	}
	return s
}

// PolicyDefaults returns the tool policy every channel starts from, for
// agent.DispatcherConfig.Policy: tools.default, and a rule for each entry
// of the lists ("exec" and "group:exec" are the rule "group:exec";
// "tool:read" is "read").
func (c *Config) PolicyDefaults() agent.PolicyDefaults { return c.Tools.policyDefaults() }

func (t Tools) policyDefaults() agent.PolicyDefaults {
	d := agent.PolicyDefaults{Default: t.Default, Rules: map[string]agent.ToolMode{}}
	// allow, ask, then deny: should a rule be listed twice (Validate
	// refuses that), the stricter mode wins.
	for _, l := range t.lists() {
		for _, name := range l.names {
			if r := ruleName(name); r != "" && r != agent.DefaultRule {
				d.Rules[r] = l.mode
			}
		}
	}
	return d
}

// PolicyWarnings lists, for the tools known, each tool that the tools
// lists leave more open than another of its group they restrict
// ("tools.deny[0]: shell is deny, but start is allow (both exec): …"):
// denying shell alone while start runs commands is no policy.
func (c *Config) PolicyWarnings(known []string) []string {
	p := agent.NewPolicy(agent.SessionKey{Platform: "config", Chat: "defaults"}, c.PolicyDefaults(), agent.ChannelSettings{})
	var w []string
	for _, leak := range p.Leaks(known) {
		// A leak starts with the restricted tool's name; the entry that
		// restricts it is where to look.
		key := "tools"
		if tool, _, ok := strings.Cut(leak, " is "); ok {
			key = cmp.Or(c.Tools.keyOf(tool), key)
		}
		w = append(w, c.problem(key, "%s", leak).Error())
	}
	return w
}

// keyOf returns the key of the list entry whose rule is rule, or "".
func (t *Tools) keyOf(rule string) string {
	for _, l := range t.lists() {
		for i, name := range l.names {
			if ruleName(name) == rule {
				return fmt.Sprintf("tools.%s[%d]", l.mode, i)
			}
		}
	}
	return ""
}
