package skills_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/firstmate/firstmate/tools"
	"github.com/firstmate/firstmate/tools/skills"
)

// problemAt returns the problem whose path ends in suffix.
func problemAt(probs []skills.Problem, suffix string) (skills.Problem, bool) {
	for _, p := range probs {
		if strings.HasSuffix(p.Path, suffix) {
			return p, true
		}
	}
	return skills.Problem{}, false
}

func TestLoadConfigured(t *testing.T) {
	first, second := t.TempDir(), t.TempDir()
	addSkill(t, first, "deploy", "Deploy the web app to staging or production.", "Run make deploy.")
	writeFile(t, first, "deploy/scripts/check.sh", "#!/bin/sh\necho ok\n")
	writeFile(t, first, "deploy/templates/notes.md", "notes")
	writeFile(t, first, "deploy/.git/config", "hidden")
	writeFile(t, first, "README.md", "not a skill")
	addSkill(t, first, "Report", "Write the weekly report.", "Gather, then write.")
	addSkill(t, second, "deploy", "Another deploy.", "Shadowed.")
	addSkill(t, second, "zebra", "Stripes.", "Z.")
	writeFile(t, second, "noname/SKILL.md", "# just markdown\n")
	writeFile(t, second, "mismatch/SKILL.md", skillMD("other", "d", "b"))
	writeFile(t, second, "bad.name/SKILL.md", skillMD("bad.name", "d", "b"))
	writeFile(t, second, "empty/notes.md", "no SKILL.md here")
	missing := filepath.Join(t.TempDir(), "nope")

	c := skills.Load(skills.Options{Dirs: []string{first, second, missing}})
	if got := names(c.Configured()); !slices.Equal(got, []string{"deploy", "Report", "zebra"}) {
		t.Fatalf("configured = %q", got)
	}
	dep := c.Configured()[0]
	if dep.Source != skills.Configured || dep.Description != "Deploy the web app to staging or production." || dep.Dir != filepath.Join(first, "deploy") {
		t.Errorf("deploy = %+v", dep)
	}
	if !slices.Equal(dep.Files, []string{"scripts/check.sh", "templates/notes.md"}) {
		t.Errorf("deploy files = %q", dep.Files)
	}
	probs := c.Problems()
	want := map[string]error{
		filepath.Join(second, "deploy"):               skills.ErrShadowed,
		filepath.Join(second, "noname", "SKILL.md"):   skills.ErrInvalid,
		filepath.Join(second, "mismatch", "SKILL.md"): skills.ErrInvalid,
		filepath.Join(second, "bad.name"):             skills.ErrInvalid,
		filepath.Join(second, "empty", "SKILL.md"):    fs.ErrNotExist,
		missing: fs.ErrNotExist,
	}
	for path, kind := range want {
		i := slices.IndexFunc(probs, func(p skills.Problem) bool { return p.Path == path })
		if i < 0 {
			t.Errorf("no problem for %s; problems: %v", path, probs)
			continue
		}
		if !errors.Is(probs[i].Err, kind) {
			t.Errorf("%s: %v, want %v", path, probs[i].Err, kind)
		}
	}
	if len(probs) != len(want) {
		t.Errorf("%d problems, want %d: %v", len(probs), len(want), probs)
	}
}

// A ConfigMap mounted in Kubernetes is a tree of symlinks inside the
// mounted directory; those are followed. Links that leave it are not, and
// special, huge and binary files are refused without hanging or reading.
func TestLoadConfiguredLinksAndHostileFiles(t *testing.T) {
	dir, out := t.TempDir(), outside(t)
	// ConfigMap layout: ..data -> ..2024_01; deploy -> ..data/deploy.
	addSkill(t, filepath.Join(dir, "..2024_01"), "deploy", "Deploy.", "Steps.")
	writeFile(t, dir, "..2024_01/deploy/run.sh", "echo run")
	must(t, os.Symlink("..2024_01", filepath.Join(dir, "..data")))
	must(t, os.Symlink("..data/deploy", filepath.Join(dir, "deploy")))
	// Leading out.
	must(t, os.Symlink(filepath.Join(out, "stolen"), filepath.Join(dir, "stolen")))
	must(t, os.MkdirAll(filepath.Join(dir, "leak"), 0o755))
	must(t, os.Symlink(filepath.Join(out, "stolen", "SKILL.md"), filepath.Join(dir, "leak", "SKILL.md")))
	must(t, os.Symlink(filepath.Join(out, "secret.txt"), filepath.Join(dir, "..2024_01", "deploy", "secret.txt")))
	// Special, huge, binary.
	must(t, os.MkdirAll(filepath.Join(dir, "fifo"), 0o755))
	must(t, syscall.Mkfifo(filepath.Join(dir, "fifo", "SKILL.md"), 0o644))
	huge := writeFile(t, dir, "huge/SKILL.md", "")
	must(t, os.Truncate(huge, 1<<40))
	writeFile(t, dir, "bin/SKILL.md", "---\nname: bin\x00\n---\n")

	c := skills.Load(skills.Options{Dirs: []string{dir}})
	if got := names(c.Configured()); !slices.Equal(got, []string{"deploy"}) {
		t.Fatalf("configured = %q; problems %v", got, c.Problems())
	}
	if files := c.Configured()[0].Files; !slices.Equal(files, []string{"run.sh"}) {
		t.Errorf("files = %q (a link out must not be listed)", files)
	}
	kinds := map[string]error{
		"stolen":        tools.ErrPathEscapes,
		"leak/SKILL.md": tools.ErrPathEscapes,
		"fifo/SKILL.md": tools.ErrNotRegular,
		"huge/SKILL.md": tools.ErrTooLarge,
		"bin/SKILL.md":  tools.ErrBinary,
	}
	for suffix, kind := range kinds {
		p, ok := problemAt(c.Problems(), suffix)
		if !ok || !errors.Is(p.Err, kind) {
			t.Errorf("%s: %+v, want %v", suffix, p, kind)
		}
		if ok {
			noLeak(t, suffix, p.Err.Error(), out)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// The example skill in deploy/skills loads, with its template.
func TestShippedExample(t *testing.T) {
	c := skills.Load(skills.Options{Dirs: []string{"../../deploy/skills"}})
	if len(c.Problems()) != 0 || !slices.Equal(names(c.Configured()), []string{"release-notes"}) {
		t.Fatalf("skills %q, problems %v", names(c.Configured()), c.Problems())
	}
	if files := c.Configured()[0].Files; !slices.Equal(files, []string{"template.md"}) {
		t.Errorf("files %q", files)
	}
}
