package files_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/firstmate/firstmate/tools"
	"github.com/firstmate/firstmate/tools/files"
)

// gone, as an expected content in toolCase.after, means the path must not
// exist.
const gone = "\x00gone"

type toolCase struct {
	name    string
	opts    files.Options
	files   map[string]string // setup; a key ending in / is a directory
	tool    string
	args    any
	want    []string // substrings of the result text
	exact   string   // the whole text, when set
	summary string   // the whole summary, when set
	err     error    // the error kind expected (errors.Is); nil: success
	after   map[string]string
}

func runCases(t *testing.T, cases []toolCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.opts)
			for p, content := range tc.files {
				if strings.HasSuffix(p, "/") {
					must(t, os.MkdirAll(filepath.Join(e.dir, p), 0o755))
					continue
				}
				e.write(map[string]string{p: content})
			}
			res, err := e.call(tc.tool, tc.args)
			switch {
			case tc.err == nil && err != nil:
				t.Fatalf("error: %v", err)
			case tc.err != nil && !errors.Is(err, tc.err):
				t.Fatalf("error = %v, want %v", err, tc.err)
			}
			if tc.exact != "" && res.Text != tc.exact {
				t.Errorf("text =\n%s\nwant\n%s", res.Text, tc.exact)
			}
			for _, w := range tc.want {
				if !strings.Contains(res.Text, w) {
					t.Errorf("text does not contain %q:\n%s", w, res.Text)
				}
			}
			if tc.summary != "" && res.Summary != tc.summary {
				t.Errorf("summary = %q, want %q", res.Summary, tc.summary)
			}
			for p, want := range tc.after {
				got, ok := e.read(p)
				switch {
				case want == gone && ok:
					t.Errorf("%s still exists", p)
				case want != gone && got != want:
					t.Errorf("%s = %q, want %q", p, got, want)
				}
			}
		})
	}
}

func lines(n int, format string) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, format+"\n", i)
	}
	return b.String()
}

var tree = map[string]string{
	"notes.md":            "hello\nworld\n",
	"docs/a.md":           strings.Repeat("x", 1500),
	"docs/sub/deep/x.txt": "deep\n",
	"docs/sub/deep/y.go":  "package y\n",
	"src/main.go":         "package main\n\nfunc main() {\n\tprintln(\"Hello\")\n}\n",
	"src/util/strings.go": "package util\n// hello there\n",
	"emptydir/":           "",
}

func TestLs(t *testing.T) {
	runCases(t, []toolCase{
		{name: "root", files: tree, tool: "ls", args: map[string]any{},
			exact:   "/workspace/\n  docs/\n    a.md  1.5 KiB\n    sub/  (1 entry)\n  emptydir/\n    (empty)\n  notes.md  12 B\n  src/\n    main.go  48 B\n    util/  (1 entry)",
			summary: "listed /workspace (8 entries)"},
		{name: "depth 1", files: tree, tool: "ls", args: map[string]any{"depth": 1},
			exact: "/workspace/\n  docs/  (2 entries)\n  emptydir/  (empty)\n  notes.md  12 B\n  src/  (2 entries)"},
		{name: "subdir under /workspace", files: tree, tool: "ls", args: map[string]any{"path": "/workspace/docs/sub", "depth": 5},
			exact: "docs/sub/\n  deep/\n    x.txt  5 B\n    y.go  10 B", summary: "listed docs/sub (3 entries)"},
		{name: "depth clamped", files: tree, tool: "ls", args: map[string]any{"depth": 50},
			want: []string{"x.txt  5 B", "[depth is at most 5"}},
		{name: "a file", files: tree, tool: "ls", args: map[string]any{"path": "notes.md"}, exact: "notes.md  12 B"},
		{name: "empty workspace", tool: "ls", args: map[string]any{}, exact: "/workspace/\n  (empty)"},
		{name: "capped", opts: files.Options{MaxEntries: 3}, files: tree, tool: "ls", args: map[string]any{"depth": 5},
			want: []string{"docs/", "[9 more entries not shown; list a subdirectory, or use find]"}},
		{name: "missing", tool: "ls", args: map[string]any{"path": "nope"}, err: fs.ErrNotExist},
		{name: "negative depth", tool: "ls", args: map[string]any{"depth": -1}, err: files.ErrBadArgs},
	})
}

func TestLsShowsSymlinksAndSpecialFiles(t *testing.T) {
	e := newEnv(t, files.Options{})
	e.plant()
	e.write(map[string]string{"d/file.txt": "x"})
	must(t, os.Symlink("d/file.txt", filepath.Join(e.dir, "inside")))
	must(t, os.Symlink("nowhere", filepath.Join(e.dir, "broken")))
	must(t, mkfifo(filepath.Join(e.dir, "fifo")))
	res, err := e.call("ls", map[string]any{"depth": 5})
	must(t, err)
	for _, want := range []string{
		"  abs -> " + e.secret + "  (outside the workspace)",
		"  dirlink -> " + e.outside + "  (outside the workspace)",
		"  reldir -> ../../outside  (outside the workspace)",
		"  inside -> d/file.txt\n",
		"  broken -> nowhere  (broken)",
		"  fifo  (a FIFO (named pipe))",
		"  hard  18 B",
	} {
		if !strings.Contains(res.Text+"\n", want) {
			t.Errorf("ls does not show %q:\n%s", want, res.Text)
		}
	}
	if strings.Contains(res.Text, "deep.txt") || strings.Contains(res.Text, "sub/") {
		t.Errorf("ls followed a symlink out:\n%s", res.Text)
	}
}

func TestRead(t *testing.T) {
	small := files.Options{MaxReadBytes: 1 << 10}
	runCases(t, []toolCase{
		{name: "whole", files: tree, tool: "read", args: map[string]any{"path": "notes.md"},
			exact: "     1\thello\n     2\tworld", summary: "read notes.md lines 1-2"},
		{name: "under /workspace", files: tree, tool: "read", args: map[string]any{"path": "/workspace/notes.md"},
			exact: "     1\thello\n     2\tworld"},
		{name: "range", files: map[string]string{"f.txt": lines(5, "line %d")}, tool: "read", args: map[string]any{"path": "f.txt", "offset": 2, "limit": 2},
			exact: "     2\tline 2\n     3\tline 3\n[showing lines 2-3 of 5; continue with offset=4]", summary: "read f.txt lines 2-3 of 5"},
		{name: "offset to end", files: map[string]string{"f.txt": lines(5, "line %d")}, tool: "read", args: map[string]any{"path": "f.txt", "offset": 4},
			exact: "     4\tline 4\n     5\tline 5", summary: "read f.txt lines 4-5 of 5"},
		{name: "no final newline", files: map[string]string{"f.txt": "a\nb"}, tool: "read", args: map[string]any{"path": "f.txt"},
			exact: "     1\ta\n     2\tb"},
		{name: "crlf", files: map[string]string{"f.txt": "a\r\nb\r\n"}, tool: "read", args: map[string]any{"path": "f.txt"},
			exact: "     1\ta\n     2\tb"},
		{name: "empty", files: map[string]string{"e.txt": ""}, tool: "read", args: map[string]any{"path": "e.txt"},
			exact: `(e.txt is empty)`, summary: "read e.txt (empty)"},
		{name: "long line cut", files: map[string]string{"l.txt": strings.Repeat("é", 3000) + "\nshort\n"}, tool: "read", args: map[string]any{"path": "l.txt"},
			want: []string{" …[line cut]\n     2\tshort", "[1 line longer than 2000 bytes cut]"}},
		{name: "default line limit", opts: files.Options{MaxLines: 3}, files: map[string]string{"f.txt": lines(10, "%d")}, tool: "read", args: map[string]any{"path": "f.txt"},
			want: []string{"     3\t3\n[showing lines 1-3 of 10; continue with offset=4]"}},
		{name: "output budget", opts: files.Options{MaxOutputBytes: 100}, files: map[string]string{"f.txt": lines(50, "line number %d")}, tool: "read", args: map[string]any{"path": "f.txt"},
			want: []string{"[output limit reached: showing lines 1-4 of 50; continue with offset=5]"}},
		{name: "too big without a range", opts: small, files: map[string]string{"big.txt": lines(500, "line %d")}, tool: "read", args: map[string]any{"path": "big.txt"},
			err: tools.ErrTooLarge, want: []string{"4.3 KiB", "1 KiB", "offset and limit"}},
		{name: "too big with a range", opts: small, files: map[string]string{"big.txt": lines(500, "line %d")}, tool: "read", args: map[string]any{"path": "big.txt", "offset": 400, "limit": 2},
			exact: "   400\tline 400\n   401\tline 401\n[showing lines 400-401 of 500; continue with offset=402]"},
		{name: "past the end", files: tree, tool: "read", args: map[string]any{"path": "notes.md", "offset": 9}, err: files.ErrBadArgs,
			want: []string{"past the end", "2 lines"}},
		{name: "negative", files: tree, tool: "read", args: map[string]any{"path": "notes.md", "offset": -1}, err: files.ErrBadArgs},
		{name: "directory", files: tree, tool: "read", args: map[string]any{"path": "docs"}, err: tools.ErrIsDir, want: []string{"use ls"}},
		{name: "missing", tool: "read", args: map[string]any{"path": "nope.md"}, err: fs.ErrNotExist, want: []string{`"nope.md" does not exist`}},
		{name: "binary", files: map[string]string{"img.gif": "GIF89a\x01\x00\x01\x00\x00\x00\x00"}, tool: "read", args: map[string]any{"path": "img.gif"},
			err: tools.ErrBinary, want: []string{"image/gif", "13 B", "only text files"}},
		{name: "empty path", tool: "read", args: map[string]any{"path": ""}, err: tools.ErrBadPath},
	})
}

func TestWrite(t *testing.T) {
	runCases(t, []toolCase{
		{name: "create nested", tool: "write", args: map[string]any{"path": "a/b/c.txt", "content": "hello\nthere\n"},
			exact: "created a/b/c.txt (12 B, 2 lines)", summary: "wrote 12 B to a/b/c.txt", after: map[string]string{"a/b/c.txt": "hello\nthere\n"}},
		{name: "replace", files: tree, tool: "write", args: map[string]any{"path": "/workspace/notes.md", "content": "new"},
			exact: "replaced notes.md (3 B, 1 line)", after: map[string]string{"notes.md": "new"}},
		{name: "empty content", tool: "write", args: map[string]any{"path": "e", "content": ""},
			summary: "wrote 0 B to e", after: map[string]string{"e": ""}},
		{name: "too large", opts: files.Options{MaxWriteBytes: 4}, files: tree, tool: "write", args: map[string]any{"path": "notes.md", "content": "12345"},
			err: tools.ErrTooLarge, want: []string{"5 B", "4 B"}, after: map[string]string{"notes.md": "hello\nworld\n"}},
		{name: "over a directory", files: tree, tool: "write", args: map[string]any{"path": "docs", "content": "x"}, err: tools.ErrIsDir},
		{name: "under a file", files: tree, tool: "write", args: map[string]any{"path": "notes.md/x", "content": "x"}, err: tools.ErrBadPath,
			after: map[string]string{"notes.md": "hello\nworld\n"}},
	})
}

func TestEdit(t *testing.T) {
	code := "func a() {\n\treturn 1\n}\n\nfunc b() {\n\treturn 1\n}\n"
	runCases(t, []toolCase{
		{name: "unique", files: map[string]string{"f.go": code}, tool: "edit",
			args:    map[string]any{"path": "f.go", "old": "func b() {\n\treturn 1", "new": "func b() {\n\treturn 2"},
			summary: "edited f.go (1 replacement)", want: []string{"replaced 1 occurrence", "     5\tfunc b() {\n     6\t\treturn 2\n     7\t}"},
			after: map[string]string{"f.go": strings.Replace(code, "func b() {\n\treturn 1", "func b() {\n\treturn 2", 1)}},
		{name: "ambiguous", files: map[string]string{"f.go": code}, tool: "edit",
			args: map[string]any{"path": "f.go", "old": "return 1", "new": "return 2"},
			err:  files.ErrAmbiguous, want: []string{"2 times (at lines 2, 6)", "all=true", "unchanged"}, after: map[string]string{"f.go": code}},
		{name: "all", files: map[string]string{"f.go": code}, tool: "edit",
			args:    map[string]any{"path": "f.go", "old": "return 1", "new": "return 2", "all": true},
			summary: "edited f.go (2 replacements)", after: map[string]string{"f.go": strings.ReplaceAll(code, "return 1", "return 2")}},
		{name: "delete text", files: map[string]string{"f.txt": "keep\ndrop\nkeep\n"}, tool: "edit",
			args: map[string]any{"path": "f.txt", "old": "drop\n", "new": ""}, after: map[string]string{"f.txt": "keep\nkeep\n"}},
		{name: "not found, closest line", files: map[string]string{"f.go": code}, tool: "edit",
			args: map[string]any{"path": "f.go", "old": "func c() {", "new": "x"},
			err:  files.ErrNoMatch, want: []string{"does not contain old", "closest lines", "     1\tfunc a() {", "unchanged"}, after: map[string]string{"f.go": code}},
		{name: "not found, whitespace", files: map[string]string{"f.go": code}, tool: "edit",
			args: map[string]any{"path": "f.go", "old": "func a() {\n    return 1\n}", "new": "x"},
			err:  files.ErrNoMatch, want: []string{"Lines 1-3 match it apart from whitespace", "     2\t\treturn 1"}, after: map[string]string{"f.go": code}},
		{name: "not found, line numbers", files: tree, tool: "edit",
			args: map[string]any{"path": "notes.md", "old": "     1\thello", "new": "x"},
			err:  files.ErrNoMatch, want: []string{"line numbers"}},
		{name: "crlf", files: map[string]string{"w.txt": "a\r\nb\r\nc\r\n"}, tool: "edit",
			args: map[string]any{"path": "w.txt", "old": "a\nb", "new": "x\ny"}, after: map[string]string{"w.txt": "x\r\ny\r\nc\r\n"}},
		{name: "to empty", files: map[string]string{"f.txt": "only"}, tool: "edit",
			args: map[string]any{"path": "f.txt", "old": "only", "new": ""}, want: []string{"now empty"}, after: map[string]string{"f.txt": ""}},
		{name: "empty old", files: tree, tool: "edit", args: map[string]any{"path": "notes.md", "old": "", "new": "x"}, err: files.ErrBadArgs},
		{name: "same", files: tree, tool: "edit", args: map[string]any{"path": "notes.md", "old": "hello", "new": "hello"}, err: files.ErrBadArgs},
		{name: "missing file", tool: "edit", args: map[string]any{"path": "no.txt", "old": "a", "new": "b"}, err: fs.ErrNotExist, after: map[string]string{"no.txt": gone}},
		{name: "binary", files: map[string]string{"b.bin": "a\x00b"}, tool: "edit", args: map[string]any{"path": "b.bin", "old": "a", "new": "b"}, err: tools.ErrBinary},
		{name: "result too large", opts: files.Options{MaxWriteBytes: 10}, files: map[string]string{"f.txt": "abc"}, tool: "edit",
			args: map[string]any{"path": "f.txt", "old": "b", "new": "0123456789"}, err: tools.ErrTooLarge, after: map[string]string{"f.txt": "abc"}},
	})
}

func TestMkdir(t *testing.T) {
	runCases(t, []toolCase{
		{name: "nested", tool: "mkdir", args: map[string]any{"path": "a/b/c"}, exact: "created a/b/c/", summary: "created directory a/b/c/"},
		{name: "exists", files: tree, tool: "mkdir", args: map[string]any{"path": "docs"}, exact: "docs/ already exists"},
		{name: "over a file", files: tree, tool: "mkdir", args: map[string]any{"path": "notes.md"}, err: fs.ErrExist, want: []string{"regular file"}},
		{name: "root", tool: "mkdir", args: map[string]any{"path": "/workspace"}, err: tools.ErrBadPath},
	})
}

func TestCopy(t *testing.T) {
	runCases(t, []toolCase{
		{name: "file", files: tree, tool: "copy", args: map[string]any{"from": "notes.md", "to": "copy.md"},
			exact: "copied notes.md to copy.md (12 B)", summary: "copied notes.md to copy.md", after: map[string]string{"copy.md": "hello\nworld\n", "notes.md": "hello\nworld\n"}},
		{name: "into a directory", files: tree, tool: "copy", args: map[string]any{"from": "notes.md", "to": "docs"},
			after: map[string]string{"docs/notes.md": "hello\nworld\n"}},
		{name: "into a new directory", files: tree, tool: "copy", args: map[string]any{"from": "notes.md", "to": "bak/"},
			after: map[string]string{"bak/notes.md": "hello\nworld\n"}},
		{name: "over a file", files: tree, tool: "copy", args: map[string]any{"from": "notes.md", "to": "src/main.go"},
			after: map[string]string{"src/main.go": "hello\nworld\n"}},
		{name: "directory", files: tree, tool: "copy", args: map[string]any{"from": "docs", "to": "backup/docs2"},
			want:  []string{"copied docs/ to backup/docs2/ (3 files, 3 directories, 1.5 KiB)"},
			after: map[string]string{"backup/docs2/sub/deep/y.go": "package y\n", "backup/docs2/a.md": strings.Repeat("x", 1500)}},
		{name: "directory into itself", files: tree, tool: "copy", args: map[string]any{"from": "docs", "to": "docs/sub"}, err: tools.ErrBadPath,
			after: map[string]string{"docs/sub/sub/deep/x.txt": gone, "docs/sub/docs/a.md": gone}},
		{name: "onto itself", files: tree, tool: "copy", args: map[string]any{"from": "notes.md", "to": "notes.md"}, err: tools.ErrBadPath},
		{name: "missing", tool: "copy", args: map[string]any{"from": "no", "to": "b"}, err: fs.ErrNotExist},
		{name: "too large", opts: files.Options{MaxWriteBytes: 5}, files: tree, tool: "copy", args: map[string]any{"from": "notes.md", "to": "c"},
			err: tools.ErrTooLarge, after: map[string]string{"c": gone}},
		{name: "directory over budget", opts: files.Options{MaxCopyBytes: 100}, files: tree, tool: "copy", args: map[string]any{"from": "docs", "to": "d2"},
			err: tools.ErrTooLarge, want: []string{"copy it in parts"}},
	})
}

func TestCopyDirectorySkipsLinksAndSpecialFiles(t *testing.T) {
	e := newEnv(t, files.Options{})
	e.write(map[string]string{"d/a.txt": "a"})
	must(t, os.Symlink(e.outside, filepath.Join(e.dir, "d", "out")))
	must(t, os.Symlink("a.txt", filepath.Join(e.dir, "d", "in")))
	must(t, os.Link(e.secret, filepath.Join(e.dir, "d", "hard")))
	must(t, mkfifo(filepath.Join(e.dir, "d", "fifo")))
	res, err := e.call("copy", map[string]any{"from": "d", "to": "e"})
	must(t, err)
	for _, want := range []string{"(1 file, 1 directory, 1 B)", "skipped 4:", `"d/fifo" is a FIFO`, `"d/hard" has 2 hard links`, `"d/out" is a symlink`, `"d/in" is a symlink`} {
		if !strings.Contains(res.Text, want) {
			t.Errorf("copy text lacks %q:\n%s", want, res.Text)
		}
	}
	ents, err := os.ReadDir(filepath.Join(e.dir, "e"))
	must(t, err)
	if len(ents) != 1 || ents[0].Name() != "a.txt" {
		t.Errorf("copied %v", ents)
	}
}

func TestMove(t *testing.T) {
	runCases(t, []toolCase{
		{name: "rename", files: tree, tool: "move", args: map[string]any{"from": "notes.md", "to": "renamed.md"},
			exact: "moved notes.md to renamed.md", summary: "moved notes.md to renamed.md", after: map[string]string{"notes.md": gone, "renamed.md": "hello\nworld\n"}},
		{name: "into a directory", files: tree, tool: "move", args: map[string]any{"from": "notes.md", "to": "/workspace/docs/"},
			exact: "moved notes.md to docs/notes.md", after: map[string]string{"docs/notes.md": "hello\nworld\n"}},
		{name: "into a new directory", files: tree, tool: "move", args: map[string]any{"from": "notes.md", "to": "archive/2024/"},
			exact: "moved notes.md to archive/2024/notes.md", after: map[string]string{"archive/2024/notes.md": "hello\nworld\n"}},
		{name: "to the root", files: tree, tool: "move", args: map[string]any{"from": "docs/a.md", "to": "/workspace"},
			exact: "moved docs/a.md to a.md"},
		{name: "new parents", files: tree, tool: "move", args: map[string]any{"from": "src", "to": "a/b/src2"},
			after: map[string]string{"a/b/src2/util/strings.go": "package util\n// hello there\n", "src/main.go": gone}},
		{name: "replace a file", files: tree, tool: "move", args: map[string]any{"from": "notes.md", "to": "src/main.go"},
			want: []string{"was replaced"}, after: map[string]string{"src/main.go": "hello\nworld\n"}},
		{name: "into itself", files: tree, tool: "move", args: map[string]any{"from": "docs", "to": "docs/sub/x"}, err: tools.ErrBadPath,
			after: map[string]string{"docs/a.md": strings.Repeat("x", 1500)}},
		{name: "root", files: tree, tool: "move", args: map[string]any{"from": "/workspace", "to": "x"}, err: tools.ErrBadPath, want: []string{"cannot be moved"}},
		{name: "root dot", files: tree, tool: "move", args: map[string]any{"from": ".", "to": "x"}, err: tools.ErrBadPath, want: []string{"cannot be moved"}},
		{name: "missing", tool: "move", args: map[string]any{"from": "no", "to": "x"}, err: fs.ErrNotExist},
		{name: "empty to", files: tree, tool: "move", args: map[string]any{"from": "notes.md", "to": ""}, err: tools.ErrBadPath},
	})
}

func TestDelete(t *testing.T) {
	runCases(t, []toolCase{
		{name: "file", files: tree, tool: "delete", args: map[string]any{"path": "notes.md"},
			exact: "deleted notes.md", summary: "deleted notes.md", after: map[string]string{"notes.md": gone}},
		{name: "empty dir", files: tree, tool: "delete", args: map[string]any{"path": "emptydir"}, exact: "deleted directory emptydir/"},
		{name: "dir needs recursive", files: tree, tool: "delete", args: map[string]any{"path": "docs"},
			err: tools.ErrIsDir, want: []string{"2 entries", "recursive=true"}, after: map[string]string{"docs/a.md": strings.Repeat("x", 1500)}},
		{name: "recursive", files: tree, tool: "delete", args: map[string]any{"path": "docs", "recursive": true},
			exact: "deleted directory docs/", after: map[string]string{"docs/a.md": gone, "notes.md": "hello\nworld\n"}},
		{name: "root", files: tree, tool: "delete", args: map[string]any{"path": "/workspace", "recursive": true},
			err: tools.ErrBadPath, want: []string{"cannot be deleted"}, after: map[string]string{"notes.md": "hello\nworld\n"}},
		{name: "root empty", files: tree, tool: "delete", args: map[string]any{"path": "", "recursive": true},
			err: tools.ErrBadPath, after: map[string]string{"notes.md": "hello\nworld\n"}},
		{name: "missing", tool: "delete", args: map[string]any{"path": "no"}, err: fs.ErrNotExist},
	})
}

func TestFind(t *testing.T) {
	runCases(t, []toolCase{
		{name: "name anywhere", files: tree, tool: "find", args: map[string]any{"pattern": "*.go"},
			exact: "docs/sub/deep/y.go  10 B\nsrc/main.go  48 B\nsrc/util/strings.go  28 B", summary: "found 3 matches for *.go"},
		{name: "doublestar", files: tree, tool: "find", args: map[string]any{"pattern": "docs/**/*.txt"}, exact: "docs/sub/deep/x.txt  5 B"},
		{name: "doublestar dirs", files: tree, tool: "find", args: map[string]any{"pattern": "**/deep"}, exact: "docs/sub/deep/"},
		{name: "in a path", files: tree, tool: "find", args: map[string]any{"pattern": "*", "path": "src"},
			exact: "src/main.go  48 B\nsrc/util/\nsrc/util/strings.go  28 B"},
		{name: "relative to path", files: tree, tool: "find", args: map[string]any{"pattern": "util/*.go", "path": "/workspace/src"},
			exact: "src/util/strings.go  28 B"},
		{name: "workspace prefix", files: tree, tool: "find", args: map[string]any{"pattern": "/workspace/src/*.go"}, exact: "src/main.go  48 B"},
		{name: "none", files: tree, tool: "find", args: map[string]any{"pattern": "*.rs"}, exact: "nothing under /workspace matches *.rs", summary: "no matches for *.rs"},
		{name: "capped", opts: files.Options{MaxEntries: 2}, files: tree, tool: "find", args: map[string]any{"pattern": "**"},
			want: []string{"[showing 2 of 12 matches; narrow the pattern or path]"}},
		{name: "bad glob", tool: "find", args: map[string]any{"pattern": "[a"}, err: files.ErrBadArgs},
		{name: "dotdot", tool: "find", args: map[string]any{"pattern": "../*"}, err: files.ErrBadArgs},
		{name: "absolute", tool: "find", args: map[string]any{"pattern": "/etc/*"}, err: files.ErrBadArgs},
		{name: "path is a file", files: tree, tool: "find", args: map[string]any{"pattern": "*", "path": "notes.md"}, err: tools.ErrBadPath},
		{name: "missing path", tool: "find", args: map[string]any{"pattern": "*", "path": "nope"}, err: fs.ErrNotExist},
	})
}

func TestGrep(t *testing.T) {
	runCases(t, []toolCase{
		{name: "everywhere", files: tree, tool: "grep", args: map[string]any{"pattern": "hello"},
			exact: "notes.md:1: hello\nsrc/util/strings.go:2: // hello there", summary: `2 matches for "hello" in 2 files`},
		{name: "ignore case", files: tree, tool: "grep", args: map[string]any{"pattern": "hello", "ignore_case": true},
			want: []string{"src/main.go:4: \tprintln(\"Hello\")", "notes.md:1: hello"}},
		{name: "glob", files: tree, tool: "grep", args: map[string]any{"pattern": "^package", "glob": "*.go", "path": "src"},
			exact: "src/main.go:1: package main\nsrc/util/strings.go:1: package util"},
		{name: "one file", files: tree, tool: "grep", args: map[string]any{"pattern": "o", "path": "/workspace/notes.md"},
			exact: "notes.md:1: hello\nnotes.md:2: world"},
		{name: "regexp", files: tree, tool: "grep", args: map[string]any{"pattern": `func \w+\(\)`}, exact: "src/main.go:3: func main() {"},
		{name: "none", files: tree, tool: "grep", args: map[string]any{"pattern": "zebra"}, exact: "no lines under /workspace match zebra", summary: `no matches for "zebra"`},
		{name: "capped", opts: files.Options{MaxMatches: 3}, files: map[string]string{"f.txt": lines(10, "m%d")}, tool: "grep", args: map[string]any{"pattern": "m"},
			want: []string{"f.txt:3: m3\n[showing the first 3 matches; there are more"}},
		{name: "binary skipped", files: map[string]string{"a.bin": "match\x00", "b.txt": "match"}, tool: "grep", args: map[string]any{"pattern": "match"},
			exact: "b.txt:1: match\n[skipped 1 binary files]"},
		{name: "large skipped", opts: files.Options{MaxFileBytes: 10}, files: map[string]string{"a.txt": "match and more text", "b.txt": "match"}, tool: "grep", args: map[string]any{"pattern": "match"},
			exact: "b.txt:1: match\n[skipped 1 files over 10 B]"},
		{name: "long line window", files: map[string]string{"l.txt": strings.Repeat("a", 5000) + "NEEDLE" + strings.Repeat("b", 5000)}, tool: "grep", args: map[string]any{"pattern": "NEEDLE"},
			want: []string{"l.txt:1: …aaa", "NEEDLEbbb", "b…"}},
		{name: "bad regexp", tool: "grep", args: map[string]any{"pattern": "(a"}, err: files.ErrBadArgs, want: []string{"regular expression"}},
		{name: "binary file named", files: map[string]string{"a.bin": "x\x00"}, tool: "grep", args: map[string]any{"pattern": "x", "path": "a.bin"}, err: tools.ErrBinary},
		{name: "bad glob", tool: "grep", args: map[string]any{"pattern": "x", "glob": "[x"}, err: files.ErrBadArgs},
	})
}

// Every listing tool stops at the output budget with a note, instead of
// leaving the Set to cut it mid-line.
func TestOutputBudget(t *testing.T) {
	e := newEnv(t, files.Options{MaxOutputBytes: 300})
	for i := range 100 {
		e.write(map[string]string{fmt.Sprintf("dir/file-with-a-longish-name-%03d.txt", i): "match\n"})
	}
	for _, c := range []struct {
		tool string
		args map[string]any
		note string
	}{
		{"ls", map[string]any{"path": "dir"}, "more entries not shown"},
		{"find", map[string]any{"pattern": "*.txt"}, "matches; narrow the pattern or path]"},
		{"grep", map[string]any{"pattern": "match"}, "[showing the first"},
	} {
		res, err := e.call(c.tool, c.args)
		must(t, err)
		if len(res.Text) > 500 || !strings.Contains(res.Text, c.note) {
			t.Errorf("%s: %d bytes:\n%s", c.tool, len(res.Text), res.Text)
		}
	}
}
