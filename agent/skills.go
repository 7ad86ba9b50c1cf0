package agent

import (
	"context"
	"slices"

	"github.com/firstmate/firstmate/tools"
)

// Skills are instructions the model loads when a task calls for one
// (package tools/skills). A channel's policy governs them like tools, with
// the same modes and the same "most specific rule wins": skill:NAME is one
// skill's rule, group:skills every skill's, then the channel's default.
// The tool that loads them is governed by its own rule or the default: a
// call of it needs its skill's rule (and read, for another of the skill's
// files), so "skills=deny skill:deploy=allow" lets a channel load deploy
// and nothing else, and "skill=deny" turns skills off.
//
// A denied skill is not listed to the model, and a call that loads it is
// refused before it runs. A skill in ask mode is listed, and loading it
// waits for a person's approval like any ask-mode call; the approval names
// the rule (skill:NAME), so "always allow here" allows that skill.

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
	allowed := func(skill string) bool { return t.Gate == nil || t.Gate.Mode(SkillRule(skill)) != ToolDeny }
	section := l.Skills.Prompt(ctx, t.Workspace, allowed)
	switch {
	case section == "":
		return l.System
	case l.System == "":
		return section
	}
	return l.System + "\n\n" + section
}
