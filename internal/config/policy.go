package config

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/agent/govern"
)

// The tools section as the agent's policy: each list entry is a rule, by
// the same names admins use in chat (see govern.ParseRuleName).

// toolPrefix marks a tool's name where the bare word is also a group's.
const toolPrefix = "tool:"

// ruleName is the rule a tools list entry names, read the way
// govern.ParseRuleName reads it but without the list of tools: a bare word
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
func (c *Config) PolicyDefaults() govern.Defaults { return c.Tools.policyDefaults() }

func (t Tools) policyDefaults() govern.Defaults {
	d := govern.Defaults{Default: t.Default, Rules: map[string]agent.ToolMode{}}
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

// PolicyWarnings lists, for the tools ts, the ways around what the tools
// lists restrict: a tool left more open than another of its group
// ("tools.deny[0]: shell is deny, but start is allow (both exec): …"),
// or a power that reaches what another's rule keeps out (commands read
// the files read=deny hides).
func (c *Config) PolicyWarnings(ts govern.Tools) []string {
	p := govern.NewPolicy(agent.SessionKey{Platform: "config", Chat: "defaults"}, c.PolicyDefaults(), agent.ChannelSettings{}, ts)
	var w []string
	for _, leak := range p.Leaks() {
		// A leak starts with the restricted tool's name; the entry that
		// restricts it is where to look.
		key := "tools"
		if tool, _, ok := strings.Cut(leak, " is "); ok {
			rule := tool
			if g, ok := strings.CutSuffix(tool, " (group)"); ok {
				rule = agent.GroupRule(g)
			}
			key = cmp.Or(c.Tools.keyOf(rule), key)
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
