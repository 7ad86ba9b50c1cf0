package config

import (
	"slices"
	"strings"
	"testing"

	"github.com/firstmate/firstmate/agent"
)

func TestSkillsSection(t *testing.T) {
	c := mustLoad(t, "", env{}.withHome())
	if c.Skills.Enabled() {
		t.Error("skills are on by default")
	}
	c = mustLoad(t, writeConfig(t, "skills: {dirs: [/etc/firstmate/skills], channel: true}\n"), env{}.withHome())
	if !c.Skills.Enabled() || !slices.Equal(c.Skills.Dirs, []string{"/etc/firstmate/skills"}) || !c.Skills.Channel {
		t.Errorf("skills = %+v", c.Skills)
	}
	_, err := Load(writeConfig(t, "skills:\n  dirs: [relative/skills, /a, /a/, '']\n"), env{}.withHome().lookup)
	var got []string
	for _, p := range problems(t, err) {
		got = append(got, p.Key+" "+p.Msg)
	}
	for _, want := range []string{"skills.dirs[0] \"relative/skills\" is not an absolute path", "skills.dirs[2] \"/a/\" is also skills.dirs[1]", "skills.dirs[3] empty path"} {
		if !slices.ContainsFunc(got, func(s string) bool { return strings.HasPrefix(s, want) }) {
			t.Errorf("no problem %q in %q", want, got)
		}
	}
}

// The tools lists name skills the way admins do in chat: skills (the
// group of every skill) and skill:NAME.
func TestSkillRulesInToolsLists(t *testing.T) {
	c := mustLoad(t, writeConfig(t, "tools:\n  deny: [skills]\n  allow: [skill:Deploy, skill]\n"), env{}.withHome())
	known := append(slices.Clone(seedTools), "skill")
	if err := c.ValidateTools(toolset(known...)); err != nil {
		t.Fatal(err)
	}
	rules := c.PolicyDefaults().Rules
	want := map[string]agent.ToolMode{"group:skills": agent.ToolDeny, "skill:deploy": agent.ToolAllow, "skill": agent.ToolAllow}
	for r, m := range want {
		if rules[r] != m {
			t.Errorf("rule %s = %q, want %q (rules %v)", r, rules[r], m, rules)
		}
	}
	c = mustLoad(t, writeConfig(t, "tools:\n  deny: [skill:../x]\n"), env{}.withHome())
	if err := c.ValidateTools(toolset(known...)); err == nil {
		t.Error("skill:../x accepted")
	}
}
