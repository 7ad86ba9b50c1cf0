package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/firstmate/firstmate/tools"
	"github.com/firstmate/firstmate/tools/skills"
)

// Skills are instructions the model loads when a task calls for one
// (package tools/skills). A channel's policy governs them like tools, with
// the same modes and the same "most specific rule wins":
//
//   - skill:NAME is one skill's rule;
//   - group:skills (a bare "skills" in chat and in the config) is every
//     skill's;
//   - then the channel's default.
//
// The skill tool itself is an ordinary tool in no group: denying it turns
// skills off in a channel whatever the skill rules say. So "skills=deny
// skill:deploy=allow" lets a channel use deploy and nothing else.
//
// A denied skill is not listed to the model, and a call that loads it is
// refused before it runs. A skill in ask mode is listed, and loading it
// waits for a person's approval like any ask-mode call; the approval names
// the rule (skill:NAME), so "always allow here" allows that skill.

// SkillPrefix starts a skill's rule name.
const SkillPrefix = "skill:"

// SkillRule is the rule name of the skill called name.
func SkillRule(name string) string { return SkillPrefix + strings.ToLower(name) }

// IsSkillRule reports whether rule names a skill, and which: "skill:" and
// a valid skill name, in lower case, as [ParseRuleName] writes it.
func IsSkillRule(rule string) (string, bool) {
	name, ok := strings.CutPrefix(rule, SkillPrefix)
	if !ok || name != strings.ToLower(name) || skills.ValidName(name) != nil {
		return "", false
	}
	return name, true
}

// SkillLister lists, at the end of a turn's system prompt, the skills the
// channel may use. tools/skills' Catalog is one.
type SkillLister interface {
	// ToolName is the tool that loads a skill; when the channel does not
	// offer it, no skill is listed.
	ToolName() string
	// Prompt is the section for a turn in ws's channel, listing the
	// skills allowed reports true for; "" for none. It must give the same
	// text for the same skills: it sits in the provider's prompt cache.
	Prompt(ctx context.Context, ws *tools.Workspace, allowed func(name string) bool) string
}

// SkillLoader is a tool whose call loads a skill: the loop applies the
// skill's rule to the call as well as the tool's own.
type SkillLoader interface {
	// SkillName is the skill a call with args loads, or "" for none.
	SkillName(args json.RawMessage) string
}

// system is a turn's system prompt: the fixed prompt, then (when the skill
// tool is offered) the skills the channel allows. The fixed part comes
// first and does not change, so a provider's prompt cache keeps it.
func (l *Loop) system(ctx context.Context, t *Turn, specs []ToolSpec) string {
	if l.Skills == nil {
		return l.System
	}
	name := l.Skills.ToolName()
	if !slices.ContainsFunc(specs, func(s ToolSpec) bool { return s.Name == name }) {
		return l.System
	}
	allowed := func(skill string) bool { return t.Mode == nil || t.Mode(SkillRule(skill)) != ToolDeny }
	section := l.Skills.Prompt(ctx, t.Workspace, allowed)
	switch {
	case section == "":
		return l.System
	case l.System == "":
		return section
	}
	return l.System + "\n\n" + section
}

// callMode is a call's mode under the channel's policy and the rule that
// decides it: the tool's, or for a call that loads a skill the skill's
// rule when that is as strict or stricter (so an approval is asked for the
// skill, and "always allow" allows the skill).
func callMode(set *tools.Set, call ToolCall, mode func(string) ToolMode) (ToolMode, string) {
	m, rule := mode(call.Name), call.Name
	tl, ok := set.Get(call.Name)
	if !ok {
		return m, rule
	}
	sl, ok := tl.(SkillLoader)
	if !ok {
		return m, rule
	}
	if name := sl.SkillName(call.Args); name != "" {
		r := SkillRule(name)
		if sm := mode(r); strictness(sm) > strictness(m) || (sm == m && sm != ToolAllow) {
			return sm, r
		}
	}
	return m, rule
}

// deniedText tells the model a call was refused by the rule.
func deniedText(rule string) string {
	if name, ok := IsSkillRule(rule); ok {
		return fmt.Sprintf("the skill %s is not allowed in this channel; do not load it (an admin can allow it with: tools %s=allow)", name, rule)
	}
	return fmt.Sprintf("%s is not allowed in this channel; do not retry it (an admin can change the channel's tool policy)", rule)
}

// skillTool is the tool that loads skills, or "" when there are none.
func (d *Dispatcher) skillTool() string {
	if d.cfg.Loop == nil || d.cfg.Loop.Skills == nil {
		return ""
	}
	return d.cfg.Loop.Skills.ToolName()
}

// explainSkill answers "why skill:NAME".
func explainSkill(p *Policy, name, tool string) string {
	why := p.Why(SkillRule(name))
	verb := map[ToolMode]string{ToolAllow: "may be used", ToolAsk: "needs a person's approval each time it is loaded", ToolDeny: "may not be used"}[why.Mode]
	var b strings.Builder
	fmt.Fprintf(&b, "The skill %s %s here: ", name, verb)
	if why.Rule == DefaultRule {
		fmt.Fprintf(&b, "no rule names it or the skills group, so the default (%s, %s) applies.", why.Mode, source(why))
	} else {
		fmt.Fprintf(&b, "the rule %s=%s, %s.", RuleLabel(why.Rule), why.Mode, source(why))
	}
	if tool == "" {
		b.WriteString(" But this bot offers no skills.")
	} else if tw := p.Why(tool); tw.Mode == ToolDeny && why.Mode != ToolDeny {
		fmt.Fprintf(&b, " But the %s tool, which loads skills, is not allowed here (the rule %s=deny), so no skill can be used.", tool, RuleLabel(tw.Rule))
	}
	return b.String()
}

// skillRules says the channel's rules about skills in words, for the tools
// command ("" when there are none): the screens show tools, not these.
func skillRules(p *Policy) string {
	rules := map[string]Reason{}
	for name, m := range p.defaults.Rules {
		if _, ok := IsSkillRule(name); ok || name == GroupRule(GroupSkills) {
			rules[name] = Reason{Mode: m, Rule: name, Layer: "config"}
		}
	}
	for name, r := range p.stored {
		if _, ok := IsSkillRule(name); ok || name == GroupRule(GroupSkills) {
			rules[name] = Reason{Mode: r.Mode, Rule: name, Layer: "channel", By: r.By, At: r.At}
		}
	}
	if len(rules) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\nSkills:")
	if r, ok := rules[GroupRule(GroupSkills)]; ok {
		fmt.Fprintf(&b, " all skills=%s (%s);", r.Mode, source(r))
	}
	for _, name := range slices.Sorted(maps.Keys(rules)) {
		if s, ok := IsSkillRule(name); ok {
			r := rules[name]
			fmt.Fprintf(&b, " %s=%s (%s);", s, r.Mode, source(r))
		}
	}
	return strings.TrimSuffix(b.String(), ";") + ". Change them with tools skills=deny or tools skill:NAME=allow."
}
