package govern

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/tools"
)

// Tools are the tools a policy governs: their names, and each one's power,
// declared by the tool (a *tools.Set is one).
type Tools interface {
	Known() []string
	PowerOf(name string) (tools.Power, bool)
}

// Defaults is the configured policy every channel starts from: rules by
// rule name, and the mode of tools no rule names.
type Defaults struct {
	Default agent.ToolMode
	Rules   map[string]agent.ToolMode
}

// Policy is a channel's effective policy: the configured defaults overlaid
// by the channel's stored rules (a stored rule replaces the configured rule
// of the same name). For one tool, the most specific rule wins: the tool's
// own, then its power's (its group), then the default.
type Policy struct {
	Channel  agent.SessionKey
	Version  int64 // of the channel's stored settings; 0 if none
	defaults Defaults
	stored   map[string]agent.Rule
	tools    Tools
}

// NewPolicy resolves a channel's policy over ts, whose tools say their
// power (nil: no tool is known, and a tool's own rule or the default
// decides).
func NewPolicy(channel agent.SessionKey, defaults Defaults, s agent.ChannelSettings, ts Tools) *Policy {
	if defaults.Default == "" {
		defaults.Default = agent.ToolAllow
	}
	return &Policy{Channel: channel.Channel(), Version: s.Version, defaults: defaults, stored: s.Tools, tools: ts}
}

// GroupOf is the group a tool belongs to (its power), "skills" for a
// skill's rule skill:NAME, or "" for a tool not known.
func GroupOf(ts Tools, name string) string {
	if _, ok := agent.IsSkillRule(name); ok {
		return agent.GroupSkills
	}
	if ts == nil {
		return ""
	}
	if p, ok := ts.PowerOf(name); ok {
		return string(p)
	}
	return ""
}

// Mode is the mode of a tool, or of a skill by its rule, in the channel.
func (p *Policy) Mode(name string) agent.ToolMode { return p.Why(name).Mode }

// Why says which rule decides the mode of a tool or of a skill's rule.
func (p *Policy) Why(name string) agent.Reason {
	names := []string{name}
	switch g := GroupOf(p.tools, name); {
	case g == agent.GroupSkills && !isSkill(name):
		// The tool that loads skills: the skills group is the skills'
		// rule, which each call's need applies (see CallMode).
	case g != "":
		names = append(names, agent.GroupRule(g))
	}
	return p.first(append(names, agent.DefaultRule)...)
}

// whyPower says which rule decides a power a call needs: a skill's rule
// (then the skills group), or a group's.
func (p *Policy) whyPower(pw tools.Power) agent.Reason {
	if name, ok := pw.Skill(); ok {
		return p.Why(agent.SkillRule(name))
	}
	return p.first(agent.GroupRule(string(pw)), agent.DefaultRule)
}

// first is the reason of the first rule of names that is set, the
// channel's before the config's; the default always is.
func (p *Policy) first(names ...string) agent.Reason {
	for _, n := range names {
		if r, ok := p.stored[n]; ok {
			return agent.Reason{Mode: r.Mode, Rule: n, Layer: "channel", By: r.By, At: r.At}
		}
		if n == agent.DefaultRule {
			return agent.Reason{Mode: p.defaults.Default, Rule: n, Layer: "config"}
		}
		if m, ok := p.defaults.Rules[n]; ok {
			return agent.Reason{Mode: m, Rule: n, Layer: "config"}
		}
	}
	return agent.Reason{Mode: p.defaults.Default, Rule: agent.DefaultRule, Layer: "config"}
}

// CallMode is a call's mode and the rule that decides it: the strictest
// of the tool's own mode and of each power the call needs (a tool that is
// [tools.Scoped]: the skill tool needs skill:NAME, and read for another
// of the skill's files). Where a need is as strict as the tool, and not
// allow, the need's rule is named, so that an approval is asked for the
// skill and "always allow here" allows the skill.
func (p *Policy) CallMode(set *tools.Set, call agent.ToolCall) (agent.ToolMode, string) {
	why := p.Why(call.Name)
	if set == nil {
		return why.Mode, call.Name
	}
	tl, ok := set.Get(call.Name)
	if !ok {
		return why.Mode, call.Name
	}
	sc, ok := tl.(tools.Scoped)
	if !ok {
		return why.Mode, call.Name
	}
	mode, rule := why.Mode, call.Name
	for _, need := range sc.Needs(json.RawMessage(call.Args)) {
		r := p.whyPower(need)
		if s := strictness(r.Mode); s > strictness(mode) || (s == strictness(mode) && r.Mode != agent.ToolAllow && rule == call.Name) {
			mode, rule = r.Mode, needRule(need)
		}
	}
	return mode, rule
}

// Stored returns the channel's own rules.
func (p *Policy) Stored() map[string]agent.Rule { return maps.Clone(p.stored) }

// View describes the policy for a screen (a Slack modal, a Telegram
// keyboard): the built-in groups in [agent.Groups] order, then a group per
// MCP server (mcp:SERVER), each with its known tools. The skills group
// lists the tool that loads skills and one row per skill, named by its
// rule (skill:NAME): the skills given (those the channel has) and any a
// rule names, so a rule about a skill that is gone can still be seen and
// changed. A group with no row is left out. editable says whether the
// person it is for may change it.
func (p *Policy) View(skillNames []string, editable bool) agent.PolicyView {
	v := agent.PolicyView{Channel: p.Channel, Version: p.Version, Editable: editable, Default: p.first(agent.DefaultRule)}
	byGroup := map[string][]string{}
	var order []string
	for _, g := range agent.Groups() {
		byGroup[g] = nil
		order = append(order, g)
	}
	var known []string
	if p.tools != nil {
		known = p.tools.Known()
	}
	for _, t := range known {
		g := GroupOf(p.tools, t)
		if _, ok := byGroup[g]; !ok {
			order = append(order, g)
		}
		byGroup[g] = append(byGroup[g], t)
	}
	byGroup[agent.GroupSkills] = append(byGroup[agent.GroupSkills], p.skillRows(skillNames)...)
	for _, g := range order {
		gv := agent.GroupView{Name: g}
		if r, ok := p.stored[agent.GroupRule(g)]; ok {
			gv.Rule = &agent.Reason{Mode: r.Mode, Rule: agent.GroupRule(g), Layer: "channel", By: r.By, At: r.At}
		} else if m, ok := p.defaults.Rules[agent.GroupRule(g)]; ok {
			gv.Rule = &agent.Reason{Mode: m, Rule: agent.GroupRule(g), Layer: "config"}
		}
		for _, t := range byGroup[g] {
			gv.Tools = append(gv.Tools, agent.ToolView{Name: t, Reason: p.Why(t)})
		}
		if len(gv.Tools) > 0 {
			v.Groups = append(v.Groups, gv)
		}
	}
	return v
}

// skillRows are the rule names of the skills given and of those a rule
// names (here or in the config), sorted, each once.
func (p *Policy) skillRows(names []string) []string {
	var rows []string
	for _, n := range names {
		if r := agent.SkillRule(n); isSkill(r) {
			rows = append(rows, r)
		}
	}
	for r := range p.stored {
		if isSkill(r) {
			rows = append(rows, r)
		}
	}
	for r := range p.defaults.Rules {
		if isSkill(r) {
			rows = append(rows, r)
		}
	}
	slices.Sort(rows)
	return slices.Compact(rows)
}

func isSkill(rule string) bool {
	_, ok := agent.IsSkillRule(rule)
	return ok
}

// Leaks lists the ways around a restricting rule among the tools known:
// a tool left more open than another of its power that a rule restricts
// ("shell is deny, but start is allow (both exec)"), and powers that
// reach what another power's rule keeps out (commands read and write the
// workspace; a file copied into a skill's folder is loaded by the skill
// tool). A person setting a rule is shown these, and the config check and
// doctor warn with them.
func (p *Policy) Leaks() []string {
	var out []string
	byGroup := map[string][]string{}
	var known []string
	if p.tools != nil {
		known = p.tools.Known()
	}
	for _, t := range known {
		if g := GroupOf(p.tools, t); g != "" {
			byGroup[g] = append(byGroup[g], t)
		}
	}
	for _, g := range slices.Sorted(maps.Keys(byGroup)) {
		ts := byGroup[g]
		slices.Sort(ts)
		for _, t := range ts {
			why := p.Why(t)
			if why.Rule != t || why.Mode == agent.ToolAllow {
				continue // only a tool's own restricting rule can be undone by its group
			}
			for _, o := range ts {
				if o != t && strictness(p.Mode(o)) < strictness(why.Mode) {
					out = append(out, fmt.Sprintf("%s is %s, but %s is %s (both %s): set the group instead, %s=%s", t, why.Mode, o, p.Mode(o), g, g, why.Mode))
				}
			}
		}
	}
	// A group's own rule, where one restricts it, and the group's most
	// open tool.
	restricted := func(g string) (agent.ToolMode, bool) {
		r := p.first(agent.GroupRule(g), agent.DefaultRule)
		return r.Mode, r.Rule == agent.GroupRule(g) && r.Mode != agent.ToolAllow && len(byGroup[g]) > 0
	}
	open := func(g string) (string, agent.ToolMode) {
		best, mode := "", agent.ToolDeny
		for _, t := range slices.Sorted(slices.Values(byGroup[g])) {
			if m := p.Mode(t); best == "" || strictness(m) < strictness(mode) {
				best, mode = t, m
			}
		}
		return best, mode
	}
	for _, g := range []string{agent.GroupRead, agent.GroupWrite} {
		m, ok := restricted(g)
		if !ok {
			continue
		}
		if t, em := open(agent.GroupExec); t != "" && strictness(em) < strictness(m) {
			out = append(out, fmt.Sprintf("%s is %s, but %s is %s, and commands %s the workspace too: set exec=%s as well", agent.RuleLabel(agent.GroupRule(g)), m, t, em, verb(g), m))
		}
	}
	if m, ok := restricted(agent.GroupRead); ok {
		if w, wm := open(agent.GroupWrite); w != "" && wm == agent.ToolAllow {
			for _, t := range byGroup[agent.GroupSkills] {
				if p.Mode(t) == agent.ToolAllow && p.Mode(agent.SkillRule("x")) != agent.ToolDeny {
					out = append(out, fmt.Sprintf("read (group) is %s, but %s and %s are allowed: a file written or copied into skills/NAME/SKILL.md in the workspace is loaded as a skill; deny skills, or write, as well", m, w, t))
				}
			}
		}
	}
	return out
}

func verb(group string) string {
	if group == agent.GroupRead {
		return "read"
	}
	return "change"
}

func strictness(m agent.ToolMode) int {
	switch m {
	case agent.ToolDeny:
		return 2
	case agent.ToolAsk:
		return 1
	}
	return 0
}

// ParseRuleName turns what a person wrote ("exec", "shell", "group:read",
// "tool:read", "skill:deploy", "default") into a rule name, given the
// tools that exist. A bare word that is a group names the group.
func ParseRuleName(s string, ts Tools) (string, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	var known []string
	if ts != nil {
		known = ts.Known()
	}
	isGroup := func(g string) bool {
		if slices.Contains(agent.Groups(), g) {
			return true
		}
		for _, t := range known {
			if GroupOf(ts, t) == g {
				return true
			}
		}
		return false
	}
	switch {
	case s == agent.DefaultRule || s == "*":
		return agent.DefaultRule, nil
	case strings.HasPrefix(s, "group:"):
		if g, _ := agent.IsGroupRule(s); isGroup(g) {
			return s, nil
		}
	case strings.HasPrefix(s, "tool:"):
		if t := s[len("tool:"):]; slices.Contains(known, t) {
			return t, nil
		}
	case strings.HasPrefix(s, agent.SkillPrefix):
		// Any valid name: a channel's skills come and go with its files.
		if isSkill(s) {
			return s, nil
		}
	case isGroup(s):
		return agent.GroupRule(s), nil
	case slices.Contains(known, s):
		return s, nil
	}
	return "", fmt.Errorf("%q is neither a tool here nor a group (%s)", s, strings.Join(agent.Groups(), ", "))
}

// needRule is the rule name of what a call needs: skill:NAME, or the
// power's group.
func needRule(need tools.Power) string {
	if name, ok := need.Skill(); ok {
		return agent.SkillRule(name)
	}
	return agent.GroupRule(string(need))
}

// validRule reports whether a rule name can be stored for the tools ts.
func validRule(rule string, ts Tools) error {
	if rule == agent.DefaultRule || isSkill(rule) {
		return nil
	}
	if g, ok := agent.IsGroupRule(rule); ok {
		if _, err := ParseRuleName(agent.GroupRule(g), ts); err != nil {
			return fmt.Errorf("%w: %v", agent.ErrInvalid, err)
		}
		return nil
	}
	if ts != nil {
		if _, ok := ts.PowerOf(rule); ok {
			return nil
		}
	}
	return fmt.Errorf("%w: no tool %q here", agent.ErrInvalid, rule)
}
