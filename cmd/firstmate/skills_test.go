package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/firstmate/firstmate/adapters/console"
	"github.com/firstmate/firstmate/internal/config"
	"github.com/firstmate/firstmate/internal/testkit/fakellm"
	"github.com/firstmate/firstmate/tools"
)

// doctor lists the configured skills and says why each skipped one was.
func TestDoctorSkills(t *testing.T) {
	dir := t.TempDir()
	for rel, content := range map[string]string{
		"deploy/SKILL.md": "---\nname: deploy\ndescription: Deploy.\n---\nSteps.\n",
		"broken/SKILL.md": "no front matter\n",
	} {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(s config.Skills) string {
		var b strings.Builder
		cfg := config.Default()
		cfg.Skills = s
		d := &doctor{report: &report{w: &b}, cfg: cfg}
		d.skills()
		if d.failed {
			t.Errorf("doctor failed on skills: %s", b.String())
		}
		return b.String()
	}
	if out := run(config.Skills{}); !strings.Contains(out, "ok    skills     off") {
		t.Errorf("off: %q", out)
	}
	out := run(config.Skills{Dirs: []string{dir, filepath.Join(dir, "missing")}, Channel: true})
	for _, want := range []string{
		"ok    skills     1 configured: deploy; each channel's own from skills/ in its workspace",
		"warn  skills     skipped " + filepath.Join(dir, "broken", "SKILL.md") + ": invalid skill: SKILL.md: it must begin with front matter",
		"warn  skills     skipped " + filepath.Join(dir, "missing") + ": the skills directory cannot be opened",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor says:\n%s\nwant a line with %q", out, want)
		}
	}
	if newSkills(config.Default(), nil) != nil {
		t.Error("skills are on by default")
	}
}

// The real binary in the terminal chat: the shipped example skill and a
// channel's own are listed to the model by name and description; the
// skill tool loads the instructions.
func TestChatSkills(t *testing.T) {
	t.Parallel()
	examples, err := filepath.Abs("../../deploy/skills")
	if err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	own := filepath.Join(tools.WorkspacePath(filepath.Join(data, "workspaces"), console.Key.Channel().String()), "skills", "standup")
	if err := os.MkdirAll(own, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(own, "SKILL.md"), []byte("---\nname: standup\ndescription: Run the daily standup.\n---\nSTANDUP-BODY\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := writeFile(t, "skills:\n  dirs: ["+examples+"]\n  channel: true\n")
	llm := fakellm.New(t, fakellm.WithReplies(
		fakellm.Calls(fakellm.Call("skill", map[string]any{"name": "release-notes"})),
		fakellm.Text("done"),
	))
	out, errOut, code := runBinary(t, append(chatEnv(t, llm, data), "FIRSTMATE_CONFIG="+cfg), "write release notes\n", "chat")
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	reqs := llm.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model calls", len(reqs))
	}
	system := reqs[0].Messages[0].Text()
	if !strings.HasPrefix(system, systemPrompt+"\n\n# Skills\n") ||
		!strings.Contains(system, "\n- release-notes: Write release notes for a version") ||
		!strings.Contains(system, "\n- standup: Run the daily standup.") ||
		strings.Contains(system, "STANDUP-BODY") || strings.Contains(system, "# Release notes") {
		t.Errorf("system prompt:\n%s", system)
	}
	var offered []string
	for _, tl := range reqs[0].Tools {
		offered = append(offered, tl.Function.Name)
	}
	if !slices.Contains(offered, "skill") {
		t.Errorf("tools offered: %q", offered)
	}
	last := reqs[1].Messages[len(reqs[1].Messages)-1]
	if last.Role != "tool" || !strings.Contains(last.Text(), "# Release notes") || !strings.Contains(last.Text(), "- template.md") {
		t.Errorf("skill result: %+v", last)
	}
}
