package skills_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/firstmate/firstmate/tools"
	"github.com/firstmate/firstmate/tools/skills"
)

// listed returns the skill names the prompt section lists, in order.
func listed(section string) []string {
	var out []string
	for line := range strings.Lines(section) {
		if name, _, ok := strings.Cut(strings.TrimPrefix(line, "- "), ":"); ok && strings.HasPrefix(line, "- ") {
			out = append(out, name)
		}
	}
	return out
}

// The section lists names and descriptions, never instructions, sorted by
// name whatever the source, only the allowed ones, and is the same text
// turn after turn until the skills change.
func TestPromptListsNamesNotBodies(t *testing.T) {
	conf := t.TempDir()
	addSkill(t, conf, "zebra", "Paint stripes.", "BODY-ZEBRA")
	addSkill(t, conf, "Alpha", "First things.\n  On two lines.", "BODY-ALPHA")
	ws, dir := workspace(t)
	addSkill(t, filepath.Join(dir, "skills"), "mid", "From the channel.", "BODY-MID")
	addSkill(t, filepath.Join(dir, "skills"), "secret", "Denied here.", "BODY-SECRET")
	c := skills.Load(skills.Options{Dirs: []string{conf}, Channel: true})
	allowed := func(name string) bool { return name != "secret" }

	p := c.Prompt(t.Context(), ws, allowed)
	if got := listed(p); !slices.Equal(got, []string{"Alpha", "mid", "zebra"}) {
		t.Fatalf("listed %q in:\n%s", got, p)
	}
	if !strings.Contains(p, "- Alpha: First things. On two lines.\n") || !strings.HasPrefix(p, "# Skills\n") {
		t.Errorf("section:\n%s", p)
	}
	if strings.Contains(p, "BODY-") || strings.Contains(p, "secret") || strings.Contains(p, "Denied here") {
		t.Errorf("the section shows a body or a denied skill:\n%s", p)
	}
	if again := c.Prompt(t.Context(), ws, allowed); again != p {
		t.Errorf("a second turn's section differs:\n%s\n---\n%s", p, again)
	}
	// A new skill changes it; none allowed leaves nothing at all.
	addSkill(t, filepath.Join(dir, "skills"), "beta", "Second.", "B.")
	if p2 := c.Prompt(t.Context(), ws, allowed); !slices.Equal(listed(p2), []string{"Alpha", "beta", "mid", "zebra"}) {
		t.Errorf("after adding beta:\n%s", p2)
	}
	if p := c.Prompt(t.Context(), ws, func(string) bool { return false }); p != "" {
		t.Errorf("nothing allowed gives %q", p)
	}
	if p := skills.Load(skills.Options{Channel: true}).Prompt(t.Context(), nil, nil); p != "" {
		t.Errorf("no skills gives %q", p)
	}
}

// Many skills: the section stops at PromptSkills entries or PromptBytes,
// whichever comes first, and says how many were left out.
func TestPromptBounded(t *testing.T) {
	conf := t.TempDir()
	for i := range 60 {
		addSkill(t, conf, fmt.Sprintf("s%02d", i), strings.Repeat("d", 200), "b")
	}
	for _, c := range []struct {
		lim        skills.Limits
		list, left int
	}{
		{skills.Limits{}, 60, 0},
		{skills.Limits{PromptSkills: 10}, 10, 50},
		{skills.Limits{PromptBytes: 4096}, 16, 44}, // (4096-256-head) / 210-byte lines
	} {
		cat := skills.Load(skills.Options{Dirs: []string{conf}, Limits: c.lim})
		p := cat.Prompt(t.Context(), nil, nil)
		got := listed(p)
		if len(got) != c.list || !slices.IsSorted(got) || got[0] != "s00" {
			t.Errorf("%+v: listed %d (%q)", c.lim, len(got), got)
		}
		limit := c.lim.PromptBytes
		if limit == 0 {
			limit = 16 << 10
		}
		if len(p) > limit {
			t.Errorf("%+v: section is %d bytes, over %d", c.lim, len(p), limit)
		}
		note := fmt.Sprintf("[%d more skill(s) can be used here but are not listed", c.left)
		if (c.left > 0) != strings.Contains(p, note) {
			t.Errorf("%+v: want note %q in:\n%s", c.lim, note, p[max(0, len(p)-300):])
		}
	}
}

// A configured skill's files are read with the tool itself: only those it
// lists, text only, capped; no path leads outside.
func TestConfiguredSkillFiles(t *testing.T) {
	conf, out := t.TempDir(), outside(t)
	addSkill(t, conf, "deploy", "Deploy.", "Use scripts/run.sh.")
	writeFile(t, conf, "deploy/scripts/run.sh", "#!/bin/sh\nmake deploy\n")
	writeFile(t, conf, "deploy/empty.txt", "")
	writeFile(t, conf, "deploy/logo.png", "\x89PNG\r\n\x1a\n\x00\x00\x00")
	writeFile(t, conf, "deploy/big.txt", strings.Repeat("x", 2000))
	writeFile(t, conf, "notes.txt", "beside the skill")
	must(t, os.Symlink(filepath.Join(out, "secret.txt"), filepath.Join(conf, "deploy", "leak.txt")))
	c := skills.Load(skills.Options{Dirs: []string{conf}, Limits: skills.Limits{MaxFileBytes: 1024}})
	ws, _ := workspace(t)

	res, err := call(t, c, ws, map[string]any{"name": "deploy"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Text, "Use scripts/run.sh.") || !strings.Contains(res.Text, "- scripts/run.sh") || strings.Contains(res.Text, "leak.txt") || res.Summary != "skill deploy" {
		t.Errorf("deploy = %+v", res)
	}
	noLeak(t, "deploy", res.Text, conf)

	res, err = call(t, c, ws, map[string]any{"name": "deploy", "file": "./scripts//run.sh"})
	if err != nil || res.Text != "#!/bin/sh\nmake deploy\n" || res.Summary != "skill deploy: scripts/run.sh" {
		t.Errorf("run.sh = %+v, %v", res, err)
	}
	if res, err := call(t, c, ws, map[string]any{"name": "deploy", "file": "empty.txt"}); err != nil || !strings.Contains(res.Text, "is empty") {
		t.Errorf("empty.txt = %+v, %v", res, err)
	}
	for file, kind := range map[string]error{
		"logo.png":        tools.ErrBinary,
		"big.txt":         tools.ErrTooLarge,
		"leak.txt":        skills.ErrNotFound, // not listed, so not read
		"../notes.txt":    tools.ErrPathEscapes,
		"SKILL.md":        skills.ErrNotFound,
		"/etc/passwd":     skills.ErrNotFound,
		"/workspace/x":    skills.ErrNotFound,
		"scripts":         skills.ErrNotFound,
		"scripts/../../x": tools.ErrPathEscapes,
	} {
		res, err := call(t, c, ws, map[string]any{"name": "deploy", "file": file})
		if !errors.Is(err, kind) {
			t.Errorf("file %s: %v, want %v", file, err, kind)
		}
		noLeak(t, "file "+file, res.Text, conf, out)
	}
	// Unknown and malformed names.
	for name, kind := range map[string]error{"nope": skills.ErrNotFound, "../deploy": skills.ErrInvalid, "": skills.ErrInvalid} {
		if _, err := call(t, c, ws, map[string]any{"name": name}); !errors.Is(err, kind) {
			t.Errorf("name %q: %v, want %v", name, err, kind)
		}
	}
}

// SkillName is what the agent's policy sees of a call.
func TestSkillName(t *testing.T) {
	tl := skills.Load(skills.Options{}).Tool()
	for args, want := range map[string]string{
		`{"name":"Deploy"}`:             "deploy",
		`{"name":" notes ","file":"x"}`: "notes",
		`{"name":"../x"}`:               "",
		`{}`:                            "",
		`not json`:                      "",
		`{"name":7}`:                    "",
	} {
		if got := tl.SkillName([]byte(args)); got != want {
			t.Errorf("SkillName(%s) = %q, want %q", args, got, want)
		}
	}
}
