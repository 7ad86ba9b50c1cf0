package tools_test

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/firstmate/firstmate/internal/testkit/fstest"
	"github.com/firstmate/firstmate/tools"
)

// hostile is a workspace with an outside directory next to it and a set of
// traps planted inside the workspace that point at it.
type hostile struct {
	ws      *tools.Workspace
	dir     string // the workspace's host directory
	outside string // a directory outside the workspace
	secret  string // outside/secret, the canary file
}

const secretText = "TOP SECRET\n"

func newHostile(t *testing.T) *hostile {
	t.Helper()
	base := t.TempDir()
	h := &hostile{outside: filepath.Join(base, "outside")}
	h.secret = filepath.Join(h.outside, "secret")
	must(t, os.MkdirAll(filepath.Join(h.outside, "sub"), 0o755))
	must(t, os.WriteFile(h.secret, []byte(secretText), 0o644))
	must(t, os.WriteFile(filepath.Join(h.outside, "sub", "deep"), []byte("DEEP SECRET\n"), 0o644))
	ws, err := tools.OpenWorkspace(filepath.Join(base, "data"), "C123")
	must(t, err)
	t.Cleanup(func() { ws.Close() })
	h.ws, h.dir = ws, ws.Dir()
	// The workspace dir is base/data/C123, so ../../outside leaves it.
	links := map[string]string{
		"abs":     h.secret,
		"rel":     "../../outside/secret",
		"proc":    "/proc/self/root" + h.secret,
		"dirlink": h.outside,
		"reldir":  "../../outside",
		"missing": "../../outside/nothing-here",
	}
	for name, target := range links {
		must(t, os.Symlink(target, filepath.Join(h.dir, name)))
	}
	must(t, os.Link(h.secret, filepath.Join(h.dir, "hard")))
	must(t, os.WriteFile(filepath.Join(h.dir, "notes.md"), []byte("hello\nworld\n"), 0o644))
	t.Cleanup(func() { h.checkOutside(t) })
	return h
}

func (h *hostile) checkOutside(t *testing.T) {
	t.Helper()
	data, err := os.ReadFile(h.secret)
	if err != nil || string(data) != secretText {
		t.Fatalf("the outside canary changed: %q, %v", data, err)
	}
	want := h.outside + " d---------\n" + h.secret + " ---------- " + secretText + "\n" +
		filepath.Join(h.outside, "sub") + " d---------\n" + filepath.Join(h.outside, "sub", "deep") + " ---------- DEEP SECRET\n"
	if got := fstest.Snapshot(t, h.outside); got != want {
		t.Fatalf("something outside the workspace changed:\n%s\nwant:\n%s", got, want)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestCleanPath(t *testing.T) {
	long := strings.Repeat("x", 256)
	tests := []struct {
		in   string
		want string
		err  error
	}{
		{"notes.md", "notes.md", nil},
		{"a/b/c.txt", "a/b/c.txt", nil},
		{"./a//b/./c/", "a/b/c", nil},
		{"", ".", nil},
		{".", ".", nil},
		{"/workspace", ".", nil},
		{"/workspace/", ".", nil},
		{"/workspace/a/b", "a/b", nil},
		{"/workspace//a", "a", nil},
		{"dir with space/ü.txt", "dir with space/ü.txt", nil},
		{strings.Repeat("x", 255), strings.Repeat("x", 255), nil},
		{"../secret", "", tools.ErrPathEscapes},
		{"a/../../x", "", tools.ErrPathEscapes},
		{"a/../b", "", tools.ErrPathEscapes},
		{"..", "", tools.ErrPathEscapes},
		{"/workspace/../etc/passwd", "", tools.ErrPathEscapes},
		{"/etc/passwd", "", tools.ErrPathEscapes},
		{"/workspacefoo/x", "", tools.ErrPathEscapes},
		{"/", "", tools.ErrPathEscapes},
		{"a\x00b", "", tools.ErrBadPath},
		{"notes.md\x00.png", "", tools.ErrBadPath},
		{long, "", tools.ErrBadPath},
		{"a/" + long + "/b", "", tools.ErrBadPath},
		{strings.Repeat("a/", 2100), "", tools.ErrBadPath},
	}
	for _, tt := range tests {
		got, err := tools.CleanPath(tt.in)
		if !errors.Is(err, tt.err) || got != tt.want {
			t.Errorf("CleanPath(%.40q) = %q, %v; want %q, %v", tt.in, got, err, tt.want, tt.err)
		}
		if err != nil && (len(err.Error()) > 400 || !strings.Contains(err.Error(), " ")) {
			t.Errorf("CleanPath(%.40q): unhelpful message %q", tt.in, err)
		}
	}
}

func TestCleanFilePathRefusesRoot(t *testing.T) {
	for _, p := range []string{"", ".", "/workspace", "/workspace/", "./"} {
		if _, err := tools.CleanFilePath(p); !errors.Is(err, tools.ErrBadPath) {
			t.Errorf("CleanFilePath(%q) = %v, want ErrBadPath", p, err)
		}
	}
	if got, err := tools.CleanFilePath("/workspace/x"); got != "x" || err != nil {
		t.Errorf("CleanFilePath(/workspace/x) = %q, %v", got, err)
	}
}

func FuzzCleanPath(f *testing.F) {
	for _, s := range []string{"", ".", "..", "a/../b", "/workspace/x", "/etc/passwd", "a\x00b", "./a//b/", "/workspace/..", strings.Repeat("x", 300), "…/ü"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		got, err := tools.CleanPath(p)
		if err != nil {
			var fe *tools.FileError
			if !errors.As(err, &fe) || (!errors.Is(err, tools.ErrBadPath) && !errors.Is(err, tools.ErrPathEscapes)) {
				t.Fatalf("CleanPath(%q): untyped error %v", p, err)
			}
			return
		}
		if got == "" || strings.HasPrefix(got, "/") || strings.IndexByte(got, 0) >= 0 {
			t.Fatalf("CleanPath(%q) = %q: not a relative path", p, got)
		}
		// Like fs.ValidPath, except that names need not be UTF-8 (Linux
		// file names are bytes; a walk may meet any of them).
		for _, part := range strings.Split(got, "/") {
			if got != "." && (part == "" || part == ".") || part == ".." || len(part) > 255 {
				t.Fatalf("CleanPath(%q) = %q: bad component %q", p, got, part)
			}
		}
		if again, err := tools.CleanPath(got); again != got || err != nil {
			t.Fatalf("CleanPath is not idempotent: %q -> %q -> %q, %v", p, got, again, err)
		}
	})
}

// Every way of reaching the outside through a planted symlink is refused
// by every primitive, with ErrPathEscapes, and nothing outside changes.
func TestSymlinkEscapes(t *testing.T) {
	h := newHostile(t)
	ws := h.ws
	for _, p := range []string{"abs", "rel", "proc", "dirlink/secret", "reldir/secret", "dirlink/sub/deep", "reldir/sub/../secret"} {
		t.Run(strings.ReplaceAll(p, "/", "_"), func(t *testing.T) {
			wantEscape := func(op string, err error) {
				t.Helper()
				if p == "reldir/sub/../secret" && errors.Is(err, tools.ErrPathEscapes) {
					return // refused lexically, before any symlink
				}
				if !errors.Is(err, tools.ErrPathEscapes) {
					t.Errorf("%s(%s) = %v, want ErrPathEscapes", op, p, err)
				}
				if err != nil && strings.Contains(err.Error(), h.dir) {
					t.Errorf("%s(%s): message leaks the host path: %v", op, p, err)
				}
			}
			f, _, err := ws.OpenRead(p)
			if f != nil {
				f.Close()
			}
			wantEscape("OpenRead", err)
			_, _, err = ws.ReadText(p, 1<<20)
			wantEscape("ReadText", err)
			_, err = ws.WriteFile(p, []byte("pwned"), 1<<20)
			wantEscape("WriteFile", err)
			_, err = ws.Stat(p)
			wantEscape("Stat", err)
			_, err = ws.MkdirAll(p + "/x")
			wantEscape("MkdirAll", err)
			dst := p + "2" // through the directory symlink
			if !strings.Contains(p, "/") {
				dst = "dirlink/notes.md"
			}
			err = ws.Rename("notes.md", dst)
			wantEscape("Rename to", err)
			_, err = ws.ReadDir(p)
			if !strings.Contains(p, "/") {
				_, err = ws.ReadDir("dirlink")
			}
			wantEscape("ReadDir", err)
			err = ws.Walk(context.Background(), p, func(string, fs.DirEntry, error) error { return nil })
			wantEscape("Walk", err)
			if strings.Contains(p, "/") {
				_, err = ws.Remove(p, true)
				wantEscape("Remove", err)
				err = ws.Rename(p, "stolen")
				wantEscape("Rename from", err)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(h.dir, "notes.md")); err != nil {
		t.Errorf("notes.md moved: %v", err)
	}
}

// Absolute and relative escapes name the link target so the model knows
// why; the message says only what was in the link.
func TestSymlinkMessages(t *testing.T) {
	h := newHostile(t)
	_, _, err := h.ws.OpenRead("abs")
	if err == nil || !strings.Contains(err.Error(), "outside the workspace") || !strings.Contains(err.Error(), "symlink") {
		t.Errorf("OpenRead(abs) = %v", err)
	}
	_, _, err = h.ws.OpenRead("missing")
	if !errors.Is(err, tools.ErrPathEscapes) && !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("OpenRead(missing) = %v", err)
	}
}

// A symlink that stays inside the workspace works for reading, and writing
// through it is refused with a hint instead of silently replacing the link.
func TestSymlinkInside(t *testing.T) {
	h := newHostile(t)
	must(t, os.Symlink("notes.md", filepath.Join(h.dir, "alias")))
	must(t, os.Mkdir(filepath.Join(h.dir, "d"), 0o755))
	must(t, os.Symlink("../notes.md", filepath.Join(h.dir, "d", "up")))
	for _, p := range []string{"alias", "d/up"} {
		text, _, err := h.ws.ReadText(p, 1<<20)
		if err != nil || text != "hello\nworld\n" {
			t.Errorf("ReadText(%s) = %q, %v", p, text, err)
		}
	}
	if _, err := h.ws.WriteFile("alias", []byte("x"), 10); !errors.Is(err, tools.ErrNotRegular) {
		t.Errorf("WriteFile(alias) = %v, want ErrNotRegular", err)
	}
	if fi, err := os.Lstat(filepath.Join(h.dir, "alias")); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("alias is no longer a symlink: %v", err)
	}
}

func TestHardLinkRefused(t *testing.T) {
	h := newHostile(t)
	ws := h.ws
	f, _, err := ws.OpenRead("hard")
	if f != nil {
		f.Close()
	}
	if !errors.Is(err, tools.ErrHardLinked) || !strings.Contains(err.Error(), "2 hard links") {
		t.Errorf("OpenRead(hard) = %v, want ErrHardLinked", err)
	}
	if _, _, err := ws.ReadText("hard", 1<<20); !errors.Is(err, tools.ErrHardLinked) {
		t.Errorf("ReadText(hard) = %v", err)
	}
	if _, err := ws.WriteFile("hard", []byte("overwritten"), 1<<20); !errors.Is(err, tools.ErrHardLinked) {
		t.Errorf("WriteFile(hard) = %v", err)
	}
	if _, _, err := ws.WriteFrom("hard", strings.NewReader("x"), 10); !errors.Is(err, tools.ErrHardLinked) {
		t.Errorf("WriteFrom(hard) = %v", err)
	}
	// Deleting the link inside the workspace only drops that name.
	if _, err := ws.Remove("hard", false); err != nil {
		t.Errorf("Remove(hard) = %v", err)
	}
}

// openWithin fails the test if op does not return within a few seconds:
// a FIFO must never hang a read.
func within(t *testing.T, name string, op func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- op() }()
	select {
	case err := <-done:
		return err
	case <-time.After(5 * time.Second):
		t.Fatalf("%s hung", name)
		return nil
	}
}

func TestSpecialFilesRefused(t *testing.T) {
	h := newHostile(t)
	ws := h.ws
	must(t, syscall.Mkfifo(filepath.Join(h.dir, "fifo"), 0o644))
	l, err := net.Listen("unix", filepath.Join(h.dir, "sock"))
	must(t, err)
	defer l.Close()
	special := []string{"fifo", "sock"}
	if err := syscall.Mknod(filepath.Join(h.dir, "null"), syscall.S_IFCHR|0o666, 1<<8|3); err == nil {
		special = append(special, "null")
	} else {
		t.Logf("no device test: %v", err)
	}
	for _, p := range special {
		err := within(t, "OpenRead "+p, func() error {
			f, _, err := ws.OpenRead(p)
			if f != nil {
				f.Close()
			}
			return err
		})
		if !errors.Is(err, tools.ErrNotRegular) || !strings.Contains(err.Error(), "only regular files can be read") {
			t.Errorf("OpenRead(%s) = %v, want ErrNotRegular", p, err)
		}
		err = within(t, "WriteFile "+p, func() error { _, err := ws.WriteFile(p, []byte("x"), 10); return err })
		if !errors.Is(err, tools.ErrNotRegular) {
			t.Errorf("WriteFile(%s) = %v, want ErrNotRegular", p, err)
		}
	}
	_, _, err = ws.OpenRead("fifo")
	if !strings.Contains(err.Error(), "FIFO") {
		t.Errorf("message does not name the FIFO: %v", err)
	}
	// A walk lists them without opening them.
	err = within(t, "Walk", func() error {
		return ws.Walk(context.Background(), ".", func(string, fs.DirEntry, error) error { return nil })
	})
	must(t, err)
}

func TestSparseFileRefusedBySize(t *testing.T) {
	h := newHostile(t)
	f, err := os.Create(filepath.Join(h.dir, "huge.log"))
	must(t, err)
	must(t, f.Truncate(100<<30))
	f.Close()
	_, _, err = h.ws.OpenText("huge.log", 64<<20)
	if !errors.Is(err, tools.ErrTooLarge) || !strings.Contains(err.Error(), "100 GiB") || !strings.Contains(err.Error(), "64 MiB") {
		t.Errorf("OpenText(huge.log) = %v, want ErrTooLarge naming 100 GiB and 64 MiB", err)
	}
	if _, _, err := h.ws.ReadText("huge.log", 64<<20); !errors.Is(err, tools.ErrTooLarge) {
		t.Errorf("ReadText(huge.log) = %v", err)
	}
}

func TestBinaryDetected(t *testing.T) {
	h := newHostile(t)
	png := append([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"), make([]byte, 100)...)
	must(t, os.WriteFile(filepath.Join(h.dir, "logo.png"), png, 0o644))
	must(t, os.WriteFile(filepath.Join(h.dir, "latin1.txt"), []byte("caf\xe9\n"), 0o644))
	_, _, err := h.ws.OpenText("logo.png", 1<<20)
	if !errors.Is(err, tools.ErrBinary) || !strings.Contains(err.Error(), "image/png") || !strings.Contains(err.Error(), "116 B") {
		t.Errorf("OpenText(logo.png) = %v", err)
	}
	if _, _, err := h.ws.OpenText("latin1.txt", 1<<20); !errors.Is(err, tools.ErrBinary) {
		t.Errorf("OpenText(latin1.txt) = %v", err)
	}
	// A multi-byte character cut by the sniff window is not binary.
	text := strings.Repeat("a", tools.SniffLen-1) + "ü and more"
	must(t, os.WriteFile(filepath.Join(h.dir, "cut.txt"), []byte(text), 0o644))
	if got, _, err := h.ws.ReadText("cut.txt", 1<<20); err != nil || got != text {
		t.Errorf("ReadText(cut.txt) = %v", err)
	}
}

func TestIsBinary(t *testing.T) {
	tests := []struct {
		head     string
		complete bool
		want     bool
	}{
		{"", true, false},
		{"plain text\n", true, false},
		{"naïve ☃", true, false},
		{"a\x00b", true, true},
		{"\xff\xfe", true, true},
		{"abc\xe2\x98", false, false}, // cut ☃
		{"abc\xe2\x98", true, true},
		{"abc\x98\x98\x98\x98", false, true},
	}
	for _, tt := range tests {
		if got := tools.IsBinary([]byte(tt.head), tt.complete); got != tt.want {
			t.Errorf("IsBinary(%q, %v) = %v", tt.head, tt.complete, got)
		}
	}
}

func TestWorkspaceRootProtected(t *testing.T) {
	h := newHostile(t)
	for _, p := range []string{"", ".", "/workspace", "/workspace/", "./"} {
		if _, err := h.ws.Remove(p, true); !errors.Is(err, tools.ErrBadPath) || !strings.Contains(err.Error(), "cannot be deleted") {
			t.Errorf("Remove(%q) = %v", p, err)
		}
		if err := h.ws.Rename(p, "elsewhere"); !errors.Is(err, tools.ErrBadPath) || !strings.Contains(err.Error(), "cannot be moved") {
			t.Errorf("Rename(%q) = %v", p, err)
		}
		if _, err := h.ws.WriteFile(p, nil, 10); !errors.Is(err, tools.ErrBadPath) {
			t.Errorf("WriteFile(%q) = %v", p, err)
		}
	}
	if _, err := os.Stat(filepath.Join(h.dir, "notes.md")); err != nil {
		t.Fatal(err)
	}
}

func TestWriteFileAtomic(t *testing.T) {
	h := newHostile(t)
	ws := h.ws
	created, err := ws.WriteFile("a/b/c.txt", []byte("one"), 100)
	if err != nil || !created {
		t.Fatalf("WriteFile new = %v, %v", created, err)
	}
	must(t, os.Chmod(filepath.Join(h.dir, "a/b/c.txt"), 0o750))
	created, err = ws.WriteFile("a/b/c.txt", []byte("two"), 100)
	if err != nil || created {
		t.Fatalf("WriteFile again = %v, %v", created, err)
	}
	fi, err := os.Stat(filepath.Join(h.dir, "a/b/c.txt"))
	must(t, err)
	if fi.Mode().Perm() != 0o750 {
		t.Errorf("mode = %v, want 0750 kept", fi.Mode())
	}
	// Over the limit: refused, the old content stays, no temp file left.
	if _, err := ws.WriteFile("a/b/c.txt", []byte("three!"), 5); !errors.Is(err, tools.ErrTooLarge) {
		t.Errorf("WriteFile over limit = %v", err)
	}
	if data, _ := os.ReadFile(filepath.Join(h.dir, "a/b/c.txt")); string(data) != "two" {
		t.Errorf("content = %q after a refused write", data)
	}
	ents, _ := os.ReadDir(filepath.Join(h.dir, "a/b"))
	if len(ents) != 1 {
		t.Errorf("temp files left behind: %v", ents)
	}
	// A reader failing mid-way leaves nothing either.
	_, _, err = ws.WriteFrom("a/b/d.txt", io.MultiReader(strings.NewReader("x"), errReader{}), 100)
	if err == nil {
		t.Error("WriteFrom with a failing reader succeeded")
	}
	if ents, _ := os.ReadDir(filepath.Join(h.dir, "a/b")); len(ents) != 1 {
		t.Errorf("temp files left behind: %v", ents)
	}
	if _, err := ws.WriteFile("notes.md/x", []byte("x"), 10); err == nil {
		t.Error("wrote under a file")
	}
	if _, err := ws.WriteFile("a", []byte("x"), 10); !errors.Is(err, tools.ErrIsDir) {
		t.Errorf("WriteFile over a directory = %v", err)
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("boom") }

func TestRemove(t *testing.T) {
	h := newHostile(t)
	ws := h.ws
	must(t, os.MkdirAll(filepath.Join(h.dir, "d/e"), 0o755))
	must(t, os.WriteFile(filepath.Join(h.dir, "d/e/f"), []byte("x"), 0o644))
	// The directory holds links to the outside; deleting it removes the
	// links, never what they point to.
	must(t, os.Symlink(h.outside, filepath.Join(h.dir, "d/out")))
	must(t, os.Symlink(h.secret, filepath.Join(h.dir, "d/e/sec")))
	if _, err := ws.Remove("d", false); !errors.Is(err, tools.ErrIsDir) || !strings.Contains(err.Error(), "recursive=true") {
		t.Errorf("Remove(d) = %v", err)
	}
	if _, err := ws.Remove("d", true); err != nil {
		t.Errorf("Remove(d, recursive) = %v", err)
	}
	for _, p := range []string{"abs", "dirlink", "reldir", "proc"} {
		fi, err := ws.Remove(p, true)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			t.Errorf("Remove(%s) = %v, %v", p, fi, err)
		}
	}
	if _, err := ws.Remove("nothing", false); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Remove(nothing) = %v", err)
	}
}

func TestRename(t *testing.T) {
	h := newHostile(t)
	ws := h.ws
	must(t, ws.Rename("notes.md", "x/y/notes.md"))
	if _, err := os.Stat(filepath.Join(h.dir, "x/y/notes.md")); err != nil {
		t.Error(err)
	}
	if err := ws.Rename("x", "x/y/z"); !errors.Is(err, tools.ErrBadPath) {
		t.Errorf("Rename into itself = %v", err)
	}
	if err := ws.Rename("x/y/notes.md", "x"); !errors.Is(err, fs.ErrExist) {
		t.Errorf("Rename onto a directory = %v", err)
	}
	// Moving a link moves the link.
	must(t, ws.Rename("dirlink", "moved"))
	if target, err := os.Readlink(filepath.Join(h.dir, "moved")); err != nil || target != h.outside {
		t.Errorf("moved link = %q, %v", target, err)
	}
}

func TestErrorsHideHostPath(t *testing.T) {
	h := newHostile(t)
	_, err := h.ws.ReadDir("nothing")
	if err == nil || strings.Contains(err.Error(), h.dir) || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadDir(nothing) = %v", err)
	}
	_, _, err = h.ws.OpenRead("nothing/else")
	if err == nil || strings.Contains(err.Error(), h.dir) {
		t.Errorf("OpenRead = %v", err)
	}
}

func TestWalkDoesNotFollowSymlinks(t *testing.T) {
	h := newHostile(t)
	must(t, os.MkdirAll(filepath.Join(h.dir, "d/e"), 0o755))
	must(t, os.Symlink("..", filepath.Join(h.dir, "d/e/loop")))
	var seen []string
	err := h.ws.Walk(context.Background(), ".", func(p string, d fs.DirEntry, err error) error {
		must(t, err)
		seen = append(seen, p)
		return nil
	})
	must(t, err)
	got := strings.Join(seen, " ")
	want := ". abs d d/e d/e/loop dirlink hard missing notes.md proc rel reldir"
	if got != want {
		t.Errorf("walk = %s\nwant   %s", got, want)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := h.ws.Walk(ctx, ".", func(string, fs.DirEntry, error) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled walk = %v", err)
	}
}

func TestFormatSize(t *testing.T) {
	tests := map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1 KiB", 1536: "1.5 KiB", 64 << 20: "64 MiB", 100 << 30: "100 GiB"}
	for n, want := range tests {
		if got := tools.FormatSize(n); got != want {
			t.Errorf("FormatSize(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestDirName(t *testing.T) {
	tests := map[string]string{"": "_", "C123": "C123", "a_b": "a_5Fb", "../x": "_2E_2E_2Fx", "-100/7": "-100_2F7"}
	for in, want := range tests {
		if got := tools.DirName(in); got != want {
			t.Errorf("DirName(%q) = %q, want %q", in, got, want)
		}
	}
	long := tools.DirName(strings.Repeat("/", 300))
	if len(long) > 200 || long == tools.DirName(strings.Repeat("/", 301)) {
		t.Errorf("long DirName = %q", long)
	}
}

// Another process (the sandboxed shell) may swap a file for a symlink out,
// a hard link to the outside or a FIFO while a tool is at work. Whatever
// the timing, reads never return the outside content or hang, and writes
// never change the outside file.
func TestSwapRace(t *testing.T) {
	h := newHostile(t)
	target := filepath.Join(h.dir, "swap")
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tmp := filepath.Join(h.dir, "swap.new")
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			os.Remove(tmp)
			switch i % 4 {
			case 0:
				os.WriteFile(tmp, []byte("harmless\n"), 0o644)
			case 1:
				os.Symlink(h.secret, tmp)
			case 2:
				os.Link(h.secret, tmp)
			case 3:
				syscall.Mkfifo(tmp, 0o644)
			}
			os.Rename(tmp, target)
		}
	}()
	deadline := time.Now().Add(time.Second)
	reads := 0
	for i := 0; i < 20000 && time.Now().Before(deadline); i++ {
		err := within(t, "ReadText", func() error {
			text, _, err := h.ws.ReadText("swap", 1<<20)
			if err == nil {
				reads++
				if text != "harmless\n" && text != "hello\nworld\n" {
					t.Errorf("read %q", text)
				}
			}
			return nil
		})
		must(t, err)
		if i%8 == 0 {
			h.ws.WriteFile("swap", []byte("hello\nworld\n"), 100)
		}
	}
	close(stop)
	<-done
	t.Logf("%d successful reads", reads)
}
