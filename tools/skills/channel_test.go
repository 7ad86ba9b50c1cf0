package skills_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/firstmate/firstmate/tools"
	"github.com/firstmate/firstmate/tools/skills"
)

// A channel's skills are read through its workspace: every hostile entry
// is skipped with a reason of the right kind, shows nothing from outside,
// does not hang, and the good skills still work.
func TestChannelSkillsHostile(t *testing.T) {
	ws, dir := workspace(t)
	out := outside(t)
	sk := filepath.Join(dir, "skills")
	addSkill(t, sk, "good", "A good skill.", "Do good things.")
	writeFile(t, sk, "good/ref/guide.md", "guide")
	must(t, os.Symlink(filepath.Join(out, "secret.txt"), filepath.Join(sk, "good", "leak.txt")))
	// A folder that is a link out, and one that is a link inside.
	must(t, os.Symlink(filepath.Join(out, "stolen"), filepath.Join(sk, "stolen")))
	must(t, os.Symlink("good", filepath.Join(sk, "alias")))
	// SKILL.md a link out, a hard link to a file outside, a FIFO.
	must(t, os.MkdirAll(filepath.Join(sk, "leak"), 0o755))
	must(t, os.Symlink(filepath.Join(out, "stolen", "SKILL.md"), filepath.Join(sk, "leak", "SKILL.md")))
	must(t, os.MkdirAll(filepath.Join(sk, "hard"), 0o755))
	if err := os.Link(filepath.Join(out, "stolen", "SKILL.md"), filepath.Join(sk, "hard", "SKILL.md")); err != nil {
		t.Skipf("hard links across temp dirs: %v", err)
	}
	must(t, os.MkdirAll(filepath.Join(sk, "fifo"), 0o755))
	must(t, syscall.Mkfifo(filepath.Join(sk, "fifo", "SKILL.md"), 0o644))
	// Huge (sparse: refusing it must not read it), binary, broken.
	huge := writeFile(t, sk, "huge/SKILL.md", skillMD("huge", "Huge.", "x"))
	must(t, os.Truncate(huge, 1<<40))
	writeFile(t, sk, "binary/SKILL.md", "---\nname: binary\ndescription: \x00\x01\x02\n---\n")
	writeFile(t, sk, "broken/SKILL.md", "---\nname: broken\ndescription: [unclosed\n---\nbody")
	writeFile(t, sk, "nofront/SKILL.md", "Just do it.\n")
	writeFile(t, sk, "mismatch/SKILL.md", skillMD("other", "d", "b"))
	writeFile(t, sk, "nodesc/SKILL.md", "---\nname: nodesc\n---\nbody")
	writeFile(t, sk, "bad name/SKILL.md", skillMD("bad name", "d", "b"))
	writeFile(t, sk, "empty/.keep", "")
	writeFile(t, sk, "README.md", "how we write skills")
	writeFile(t, sk, "SKILL.md", skillMD("loose", "Not in a folder.", "b"))

	c := skills.Load(skills.Options{Channel: true})
	done := make(chan struct{})
	var got []skills.Skill
	var probs []skills.Problem
	go func() {
		defer close(done)
		got, probs = c.Available(context.Background(), ws)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("listing the channel's skills hangs (a FIFO was opened?)")
	}
	if !slices.Equal(names(got), []string{"good"}) {
		t.Fatalf("skills = %q; problems %v", names(got), probs)
	}
	want := map[string]error{
		"skills/stolen":   tools.ErrNotRegular, // a link is not a skill folder, wherever it leads
		"skills/alias":    tools.ErrNotRegular,
		"skills/leak":     tools.ErrPathEscapes,
		"skills/hard":     tools.ErrHardLinked,
		"skills/fifo":     tools.ErrNotRegular,
		"skills/huge":     tools.ErrTooLarge,
		"skills/binary":   tools.ErrBinary,
		"skills/broken":   skills.ErrInvalid,
		"skills/nofront":  skills.ErrInvalid,
		"skills/mismatch": skills.ErrInvalid,
		"skills/nodesc":   skills.ErrInvalid,
		"skills/bad name": skills.ErrInvalid,
		"skills/empty":    fs.ErrNotExist,
		"skills/SKILL.md": skills.ErrInvalid,
	}
	for path, kind := range want {
		i := slices.IndexFunc(probs, func(p skills.Problem) bool { return p.Path == path })
		if i < 0 {
			t.Errorf("no problem for %s", path)
			continue
		}
		if !errors.Is(probs[i].Err, kind) {
			t.Errorf("%s: %v, want %v", path, probs[i].Err, kind)
		}
		noLeak(t, path, probs[i].Err.Error(), dir) // a link's target, as written, may show
	}
	if len(probs) != len(want) {
		t.Errorf("%d problems, want %d: %v", len(probs), len(want), probs)
	}

	// The tool refuses each bad one, saying why, and shows nothing outside.
	for path, kind := range want {
		name := strings.TrimPrefix(path, "skills/")
		if skills.ValidName(name) != nil {
			continue
		}
		res, err := call(t, c, ws, map[string]any{"name": name})
		if !errors.Is(err, kind) {
			t.Errorf("skill %s: %v, want %v", name, err, kind)
		}
		noLeak(t, "skill "+name, res.Text, dir)
	}

	// The good one loads; its files are listed as workspace paths, and a
	// link out among them is not listed, nor readable through the tool.
	res, err := call(t, c, ws, map[string]any{"name": "GOOD"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Text, "Do good things.") || !strings.Contains(res.Text, "skills/good/") || !strings.Contains(res.Text, "- ref/guide.md") || strings.Contains(res.Text, "leak.txt") {
		t.Errorf("good = %q", res.Text)
	}
	res, err = call(t, c, ws, map[string]any{"name": "good", "file": "ref/guide.md"})
	if err != nil || res.Text != "guide" {
		t.Errorf("good's file = %q, %v", res.Text, err)
	}
	for file, kind := range map[string]error{"leak.txt": tools.ErrPathEscapes, "../../etc/passwd": tools.ErrPathEscapes, "/etc/passwd": skills.ErrNotFound, "SKILL.md/x": tools.ErrBadPath} {
		res, err := call(t, c, ws, map[string]any{"name": "good", "file": file})
		if !errors.Is(err, kind) {
			t.Errorf("file %s: %v, want %v", file, err, kind)
		}
		noLeak(t, "file "+file, res.Text, dir)
	}
}

// The skills folder itself may not lead out of the workspace.
func TestChannelSkillsFolderIsALinkOut(t *testing.T) {
	ws, dir := workspace(t)
	out := outside(t)
	must(t, os.Symlink(out, filepath.Join(dir, "skills")))
	c := skills.Load(skills.Options{Channel: true})
	got, probs := c.Available(t.Context(), ws)
	if len(got) != 0 || len(probs) != 1 || !errors.Is(probs[0].Err, tools.ErrPathEscapes) {
		t.Fatalf("skills %q, problems %v", names(got), probs)
	}
	res, err := call(t, c, ws, map[string]any{"name": "stolen"})
	if err == nil {
		t.Fatalf("stolen loaded: %q", res.Text)
	}
	noLeak(t, "stolen", res.Text, dir, out)
}

// A configured skill wins over a channel's of the same name (in any
// case); the channel's is reported as shadowed, and the tool loads the
// configured one.
func TestConfiguredSkillWins(t *testing.T) {
	conf := t.TempDir()
	addSkill(t, conf, "deploy", "The operator's deploy.", "Operator steps.")
	ws, dir := workspace(t)
	addSkill(t, filepath.Join(dir, "skills"), "Deploy", "A channel's deploy.", "Channel steps.")
	addSkill(t, filepath.Join(dir, "skills"), "notes", "Take notes.", "Write them down.")
	c := skills.Load(skills.Options{Dirs: []string{conf}, Channel: true})
	got, probs := c.Available(t.Context(), ws)
	if !slices.Equal(names(got), []string{"deploy", "notes"}) || got[0].Source != skills.Configured || got[1].Source != skills.Channel {
		t.Fatalf("skills = %+v", got)
	}
	if len(probs) != 1 || probs[0].Path != "skills/Deploy" || !errors.Is(probs[0].Err, skills.ErrShadowed) {
		t.Fatalf("problems = %v", probs)
	}
	for _, name := range []string{"deploy", "Deploy"} {
		res, err := call(t, c, ws, map[string]any{"name": name})
		if err != nil || !strings.Contains(res.Text, "Operator steps.") || strings.Contains(res.Text, "Channel steps.") {
			t.Errorf("%s = %q, %v", name, res.Text, err)
		}
	}
	// Without channel skills, the workspace is not read at all.
	off := skills.Load(skills.Options{Dirs: []string{conf}})
	if got, _ := off.Available(t.Context(), ws); !slices.Equal(names(got), []string{"deploy"}) {
		t.Errorf("channel skills off: %q", names(got))
	}
	if _, err := call(t, off, ws, map[string]any{"name": "notes"}); !errors.Is(err, skills.ErrNotFound) {
		t.Errorf("notes with channel skills off: %v", err)
	}
}

// Two folders whose names differ only in case are one skill: the first
// in name order is used.
func TestChannelSkillsCaseClash(t *testing.T) {
	ws, dir := workspace(t)
	addSkill(t, filepath.Join(dir, "skills"), "Notes", "Upper.", "U.")
	addSkill(t, filepath.Join(dir, "skills"), "notes", "Lower.", "L.")
	c := skills.Load(skills.Options{Channel: true})
	got, probs := c.Available(t.Context(), ws)
	if len(got) != 1 || got[0].Name != "Notes" || len(probs) != 1 || !errors.Is(probs[0].Err, skills.ErrShadowed) {
		t.Fatalf("skills %+v, problems %v", got, probs)
	}
}

// Only MaxSkills folders are read, and a skill's files are listed up to
// MaxFiles.
func TestChannelSkillsBounded(t *testing.T) {
	ws, dir := workspace(t)
	for i := range 30 {
		addSkill(t, filepath.Join(dir, "skills"), "s"+string(rune('a'+i/26))+string(rune('a'+i%26)), "D.", "B.")
	}
	for i := range 20 {
		writeFile(t, filepath.Join(dir, "skills"), "saa/f"+string(rune('a'+i)), "x")
	}
	c := skills.Load(skills.Options{Channel: true, Limits: skills.Limits{MaxSkills: 10, MaxFiles: 5}})
	got, probs := c.Available(t.Context(), ws)
	if len(got) != 10 || len(probs) != 1 || !strings.Contains(probs[0].Err.Error(), "only the first 10") {
		t.Fatalf("%d skills, problems %v", len(got), probs)
	}
	res, err := call(t, c, ws, map[string]any{"name": "saa"})
	if err != nil || strings.Count(res.Text, "\n- ") != 5 || !strings.Contains(res.Text, "only the first 5 files") {
		t.Fatalf("saa = %q, %v", res.Text, err)
	}
}
