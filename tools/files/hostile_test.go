package files_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/firstmate/firstmate/tools"
	"github.com/firstmate/firstmate/tools/files"
)

// Each hostile call must fail with the right kind of error and a message
// that says what to do, leave the outside directory exactly as it was
// (checked by newEnv's cleanup), show nothing of it, and create nothing in
// the workspace that the call was refused for.
func TestHostileCallsFail(t *testing.T) {
	long := strings.Repeat("n", 300)
	escapes := []string{"../secret", "a/../../x", "/etc/passwd", "/workspace/../secret", "abs", "rel", "proc",
		"dirlink/secret", "reldir/secret", "dirlink/sub/deep.txt", "reldir/sub/x"}
	bad := []string{"a\x00b", long, "dir/" + long}
	type hcase struct {
		tool string
		args map[string]any
		err  error
	}
	var cases []hcase
	add := func(tool string, err error, args map[string]any) { cases = append(cases, hcase{tool, args, err}) }
	for _, p := range escapes {
		add("read", tools.ErrPathEscapes, map[string]any{"path": p})
		add("send_file", tools.ErrPathEscapes, map[string]any{"path": p})
		add("write", tools.ErrPathEscapes, map[string]any{"path": p, "content": "pwned"})
		add("edit", tools.ErrPathEscapes, map[string]any{"path": p, "old": "TOP", "new": "pwned"})
		add("copy", tools.ErrPathEscapes, map[string]any{"from": p, "to": "stolen"})
		add("copy", tools.ErrPathEscapes, map[string]any{"from": "notes.md", "to": p})
		add("grep", tools.ErrPathEscapes, map[string]any{"pattern": "SECRET", "path": p})
		if strings.Contains(p, "/") { // a final symlink is moved or deleted itself; see below
			add("move", tools.ErrPathEscapes, map[string]any{"from": p, "to": "stolen"})
			add("delete", tools.ErrPathEscapes, map[string]any{"path": p, "recursive": true})
			add("ls", tools.ErrPathEscapes, map[string]any{"path": p})
			add("mkdir", tools.ErrPathEscapes, map[string]any{"path": p + "/new"})
		}
		add("move", tools.ErrPathEscapes, map[string]any{"from": "notes.md", "to": p + "/moved"})
	}
	for _, p := range []string{"dirlink", "reldir"} {
		add("ls", tools.ErrPathEscapes, map[string]any{"path": p})
		add("find", tools.ErrPathEscapes, map[string]any{"pattern": "*", "path": p})
		add("grep", tools.ErrPathEscapes, map[string]any{"pattern": ".", "path": p})
		add("copy", tools.ErrPathEscapes, map[string]any{"from": p, "to": "stolen"})
		add("write", tools.ErrPathEscapes, map[string]any{"path": p + "/new.txt", "content": "x"})
	}
	for _, p := range bad {
		add("read", tools.ErrBadPath, map[string]any{"path": p})
		add("send_file", tools.ErrBadPath, map[string]any{"path": p})
		add("write", tools.ErrBadPath, map[string]any{"path": p, "content": "x"})
		add("delete", tools.ErrBadPath, map[string]any{"path": p})
		add("ls", tools.ErrBadPath, map[string]any{"path": p})
		add("move", tools.ErrBadPath, map[string]any{"from": "notes.md", "to": p})
	}
	// The hard link to the canary: no reading, no writing, no copying.
	add("read", tools.ErrHardLinked, map[string]any{"path": "hard"})
	add("send_file", tools.ErrHardLinked, map[string]any{"path": "hard"})
	add("write", tools.ErrHardLinked, map[string]any{"path": "hard", "content": "pwned"})
	add("edit", tools.ErrHardLinked, map[string]any{"path": "hard", "old": "TOP", "new": "pwned"})
	add("copy", tools.ErrHardLinked, map[string]any{"from": "hard", "to": "stolen"})
	add("copy", tools.ErrHardLinked, map[string]any{"from": "notes.md", "to": "hard"})
	add("grep", tools.ErrHardLinked, map[string]any{"pattern": "SECRET", "path": "hard"})
	// The workspace root itself.
	for _, p := range []string{"", ".", "/workspace", "/workspace/"} {
		add("delete", tools.ErrBadPath, map[string]any{"path": p, "recursive": true})
		add("move", tools.ErrBadPath, map[string]any{"from": p, "to": "elsewhere"})
	}
	add("find", files.ErrBadArgs, map[string]any{"pattern": "../*"})
	add("find", files.ErrBadArgs, map[string]any{"pattern": "/etc/*"})
	add("grep", files.ErrBadArgs, map[string]any{"pattern": "x", "glob": "../*"})

	for _, c := range cases {
		t.Run(c.tool+" "+strings.NewReplacer("/", "|", "\x00", "NUL").Replace(trunc(c.args)), func(t *testing.T) {
			e := newEnv(t, files.Options{})
			e.plant()
			e.write(map[string]string{"notes.md": "hello\n"})
			res, err := e.call(c.tool, c.args)
			if !errors.Is(err, c.err) {
				t.Fatalf("error = %v, want %v", err, c.err)
			}
			if !strings.HasPrefix(res.Text, "error: ") || len(res.Text) < 30 {
				t.Errorf("unhelpful text %q", res.Text)
			}
			if got, _ := e.read("notes.md"); got != "hello\n" {
				t.Errorf("notes.md = %q", got)
			}
			for _, p := range []string{"stolen", "elsewhere"} {
				if _, ok := e.read(p); ok {
					t.Errorf("%s was created", p)
				}
			}
			if _, err := os.Lstat(filepath.Join(e.dir, "abs")); err != nil {
				t.Errorf("planted link gone: %v", err)
			}
		})
	}
}

func trunc(args map[string]any) string {
	var parts []string
	for _, k := range []string{"path", "from", "to", "pattern", "glob"} {
		if v, ok := args[k].(string); ok {
			if len(v) > 30 {
				v = v[:30] + "…"
			}
			parts = append(parts, k+"="+v)
		}
	}
	return strings.Join(parts, ",")
}

// Walking tools see the traps but never go through them.
func TestWalkingToolsStayInside(t *testing.T) {
	e := newEnv(t, files.Options{})
	e.plant()
	e.write(map[string]string{"notes.md": "nothing secret here\n"})
	res, err := e.call("grep", map[string]any{"pattern": "SECRET", "ignore_case": true})
	must(t, err)
	if res.Text != "notes.md:1: nothing secret here\n[skipped 1 files with several hard links, 5 symlinks]" {
		t.Errorf("grep = %q", res.Text)
	}
	for _, pattern := range []string{"**/secret", "*deep*", "**/sub/**", "sub"} {
		res, err = e.call("find", map[string]any{"pattern": pattern})
		must(t, err)
		if !strings.HasPrefix(res.Text, "nothing under") {
			t.Errorf("find %s = %q", pattern, res.Text)
		}
	}
	res, err = e.call("find", map[string]any{"pattern": "*link"})
	must(t, err)
	if res.Text != "dirlink -> "+e.outside+"  (outside the workspace)" {
		t.Errorf("find *link = %q", res.Text)
	}
	res, err = e.call("ls", map[string]any{"depth": 5})
	must(t, err)
	if strings.Contains(res.Text, "deep") {
		t.Errorf("ls went through a link:\n%s", res.Text)
	}
}

// A symlink itself can be moved, copied inside a directory (skipped) or
// deleted: that touches only the link, never its target.
func TestLinksThemselvesCanBeMovedAndDeleted(t *testing.T) {
	e := newEnv(t, files.Options{})
	e.plant()
	_, err := e.call("move", map[string]any{"from": "dirlink", "to": "renamed"})
	must(t, err)
	if target, err := os.Readlink(filepath.Join(e.dir, "renamed")); err != nil || target != e.outside {
		t.Errorf("renamed link = %q, %v", target, err)
	}
	for _, p := range []string{"renamed", "abs", "rel", "proc", "reldir", "hard"} {
		res, err := e.call("delete", map[string]any{"path": p, "recursive": true})
		if err != nil {
			t.Errorf("delete %s: %v", p, err)
		}
		if p != "hard" && res.Summary != "deleted symlink "+p {
			t.Errorf("delete %s summary = %q", p, res.Summary)
		}
	}
	e.write(map[string]string{"d/x": "x"})
	must(t, os.Symlink(e.outside, filepath.Join(e.dir, "d", "out")))
	_, err = e.call("delete", map[string]any{"path": "d", "recursive": true})
	must(t, err)
}

func TestFIFONeverHangs(t *testing.T) {
	e := newEnv(t, files.Options{})
	must(t, mkfifo(filepath.Join(e.dir, "fifo")))
	e.write(map[string]string{"notes.md": "hello\n"})
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"read", map[string]any{"path": "fifo"}},
		{"read", map[string]any{"path": "fifo", "offset": 1, "limit": 1}},
		{"edit", map[string]any{"path": "fifo", "old": "a", "new": "b"}},
		{"write", map[string]any{"path": "fifo", "content": "x"}},
		{"copy", map[string]any{"from": "fifo", "to": "f2"}},
		{"copy", map[string]any{"from": "notes.md", "to": "fifo"}},
		{"grep", map[string]any{"pattern": "x", "path": "fifo"}},
	} {
		res, err := e.call(c.tool, c.args)
		if !errors.Is(err, tools.ErrNotRegular) || !strings.Contains(res.Text, "FIFO") {
			t.Errorf("%s %v = %v", c.tool, c.args, err)
		}
	}
	res, err := e.call("read", map[string]any{"path": "fifo"})
	if !strings.Contains(res.Text, "is a FIFO (named pipe); only regular files can be read") {
		t.Errorf("read fifo = %q, %v", res.Text, err)
	}
	res, err = e.call("grep", map[string]any{"pattern": "hello"})
	if err != nil || res.Text != "notes.md:1: hello\n[skipped 1 special files]" {
		t.Errorf("grep = %q, %v", res.Text, err)
	}
	if _, err := e.call("ls", map[string]any{}); err != nil {
		t.Error(err)
	}
	if _, err := e.call("find", map[string]any{"pattern": "*"}); err != nil {
		t.Error(err)
	}
	if fi, err := os.Lstat(filepath.Join(e.dir, "fifo")); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("the FIFO was replaced: %v", err)
	}
}

func TestHugeSparseFileRefusedBySize(t *testing.T) {
	e := newEnv(t, files.Options{})
	f, err := os.Create(filepath.Join(e.dir, "huge.log"))
	must(t, err)
	must(t, f.Truncate(100<<30))
	must(t, f.Close())
	e.write(map[string]string{"small.log": "ok\n"})
	for _, c := range []struct {
		tool  string
		args  map[string]any
		limit string
	}{
		{"read", map[string]any{"path": "huge.log"}, "64 MiB"},
		{"read", map[string]any{"path": "huge.log", "offset": 1, "limit": 10}, "64 MiB"},
		{"grep", map[string]any{"pattern": "x", "path": "huge.log"}, "64 MiB"},
		{"edit", map[string]any{"path": "huge.log", "old": "a", "new": "b"}, "16 MiB"},
		{"copy", map[string]any{"from": "huge.log", "to": "copy.log"}, "16 MiB"},
	} {
		res, err := e.call(c.tool, c.args)
		if !errors.Is(err, tools.ErrTooLarge) || !strings.Contains(res.Text, "100 GiB") || !strings.Contains(res.Text, c.limit) {
			t.Errorf("%s %v = %q, %v", c.tool, c.args, res.Text, err)
		}
	}
	res, err := e.call("grep", map[string]any{"pattern": "ok"})
	if err != nil || res.Text != "small.log:1: ok\n[skipped 1 files over 64 MiB]" {
		t.Errorf("grep = %q, %v", res.Text, err)
	}
	res, err = e.call("ls", map[string]any{})
	if err != nil || !strings.Contains(res.Text, "huge.log  100 GiB") {
		t.Errorf("ls = %q, %v", res.Text, err)
	}
	if _, ok := e.read("copy.log"); ok {
		t.Error("copy.log was created")
	}
}
