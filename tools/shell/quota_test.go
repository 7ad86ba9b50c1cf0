//go:build linux

package shell

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/firstmate/firstmate/tools"
	"github.com/firstmate/firstmate/tools/files"
)

// slack is what a command can write between two samples near a cap: the
// growth rate the sampling assumes, over its shortest interval. The tests
// allow a few of it: on a loaded machine (CI, -race) the sampler and the
// kill run late, and a command writing to the page cache at gigabytes a
// second gets that much further.
var slack = Usage{
	Bytes: int64(defaultTiming.byteRate * defaultTiming.minEvery.Seconds()),
	Files: int64(defaultTiming.fileRate * defaultTiming.minEvery.Seconds()),
}

// used measures the workspace exactly, as the walk that enforces the quota
// does (TestWalkTree checks that walk against a plain one).
func used(t *testing.T, dir string) Usage {
	t.Helper()
	u, err := walkTree(dir, noStop)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// A job that writes in a loop is stopped near the quota, not at the next
// check 10 s later (issue "Limits that hold": 849 MiB under a 20 MiB quota).
func TestQuotaJobStoppedNearTheLimit(t *testing.T) {
	const quota = 20 << 20
	e := newEnv(t, Config{Quota: quota})
	e.must(e.ws, "start", map[string]any{"command": "i=0; while :; do head -c 1000000 /dev/zero > f$i; i=$((i+1)); done"})
	waitFor(t, "the job to be stopped", func() bool {
		return strings.Contains(e.must(e.ws, "jobs", map[string]any{}).Text, "job 1 · stopped: it took the workspace over its quota")
	})
	u := used(t, e.ws.Dir())
	t.Logf("the workspace holds %d bytes (quota %d, slack %d)", u.Bytes, quota, slack.Bytes)
	if u.Bytes > quota+4*slack.Bytes {
		t.Fatalf("the job wrote %d bytes under a %d-byte quota", u.Bytes, quota)
	}
	// Full, it takes no new job, and says why.
	_, err := e.call(e.ws, "start", map[string]any{"command": "true"})
	if err == nil || !strings.Contains(err.Error(), "over its quota") {
		t.Fatalf("a job started in a full workspace: %v", err)
	}
	if !errors.Is(err, ErrOverQuota) {
		t.Logf("the tool set does not keep the error's chain: %v", err)
	}
	res := e.must(e.ws, "shell", map[string]any{"command": "echo x > more; echo rc=$?; head -c 1 /dev/zero >> f0; echo rc=$?"})
	if strings.Contains(res.Text, "rc=0") || !strings.Contains(res.Text, "over its 20 MiB quota, so this command could not grow or create any file") {
		t.Fatalf("text = %q", res.Text)
	}
}

// One command writing 3 × 30 MB under a 20 MB quota: each file is cut at
// the bytes left, and the command is stopped once the workspace is over.
func TestQuotaShellStoppedNearTheLimit(t *testing.T) {
	const quota = 20 << 20
	e := newEnv(t, Config{Quota: quota})
	res := e.must(e.ws, "shell", map[string]any{"command": "for i in 1 2 3; do head -c 30000000 /dev/zero > f$i; done; echo finished"})
	u := used(t, e.ws.Dir())
	t.Logf("the workspace holds %d bytes (quota %d, slack %d): %q", u.Bytes, quota, slack.Bytes, res.Text)
	if u.Bytes > quota+4*slack.Bytes {
		t.Fatalf("the command wrote %d bytes under a %d-byte quota", u.Bytes, quota)
	}
	if !strings.Contains(res.Text, "[stopped: it took the workspace over its quota") || strings.Contains(res.Text, "finished") {
		t.Fatalf("text = %q", res.Text)
	}
	if !strings.Contains(res.Text, "over its 20 MiB quota: until files are deleted") {
		t.Fatalf("no note that the workspace is over: %q", res.Text)
	}
}

// A workspace over its quota when firstmate starts (the state is not kept
// in memory only) refuses growth at its first command, after one walk.
func TestQuotaRememberedAfterRestart(t *testing.T) {
	e := newEnv(t, Config{})
	e.must(e.ws, "shell", map[string]any{"command": "head -c 25000000 /dev/urandom > big"})

	// A restart: a new Shell, with a 20 MiB quota, over the same workspace.
	e2 := e.restarted(Config{Quota: 20 << 20})
	res := e2.must(e.ws, "shell", map[string]any{"command": "head -c 10000000 /dev/zero > more; echo rc=$?; head -c 10 /dev/zero >> big; echo rc=$?; ls"})
	if strings.Contains(res.Text, "rc=0") || !strings.Contains(res.Text, "over its 20 MiB quota, so this command could not grow or create any file") {
		t.Fatalf("a workspace over its quota grew after a restart: %q", res.Text)
	}
	if u := used(t, e.ws.Dir()); u.Bytes > 25<<20 {
		t.Fatalf("the workspace holds %d bytes", u.Bytes)
	}
	if _, err := e2.call(e.ws, "start", map[string]any{"command": "true"}); err == nil {
		t.Fatal("a job started in a full workspace after a restart")
	}
	if n := e2.sh.quota.walks.Load(); n != 1 {
		t.Fatalf("%d walks, want the one at first use", n)
	}
	cleanUp(e2)
	res = e2.must(e.ws, "shell", map[string]any{"command": "rm big && echo removed"})
	if !strings.Contains(res.Text, "removed") || !strings.Contains(res.Text, "back under its quota") {
		t.Fatalf("text = %q", res.Text)
	}
	res = e2.must(e.ws, "shell", map[string]any{"command": "echo more > small && cat small"})
	if !strings.Contains(res.Text, "more") || strings.Contains(res.Text, "quota") {
		t.Fatalf("text = %q", res.Text)
	}
}

// restarted is a new Shell over e's sandbox and workspace, as after a
// restart of firstmate.
func (e *env) restarted(cfg Config) *env {
	e.t.Helper()
	cfg.Sandbox = e.sb
	sh := New(cfg)
	e.t.Cleanup(sh.Close)
	return &env{t: e.t, sh: sh, sb: e.sb, ws: e.ws, set: tools.NewSet(append(sh.Tools(), files.All(files.Options{})...))}
}

// cleanUp makes the command after it see that the workspace is back under
// its quota even if, on this shared machine, other processes' writing
// hides what it freed from statfs (TestQuotaDecisions covers that check).
func cleanUp(e *env) { e.sh.quota.timing.frozenRecheck = 0 }

// A file bomb is stopped by the file cap close to it; over the cap no file
// can be created (Landlock), and later commands do not walk the tree each.
func TestQuotaFileBomb(t *testing.T) {
	const files = 2000
	e := newEnv(t, Config{QuotaFiles: files})
	res := e.must(e.ws, "shell", map[string]any{"command": "seq 1 200000 | xargs touch; echo finished"})
	u := used(t, e.ws.Dir())
	t.Logf("the workspace holds %d files (cap %d, slack %d): %q", u.Files, files, slack.Files, res.Text)
	if u.Files > files+4*slack.Files {
		t.Fatalf("the bomb made %d files under a cap of %d", u.Files, files)
	}
	if !strings.Contains(res.Text, "[stopped: it took the workspace over its quota") || strings.Contains(res.Text, "finished") {
		t.Fatalf("text = %q", res.Text)
	}
	if !strings.Contains(res.Text, "files, over its 2,000-file quota") {
		t.Fatalf("no note that the workspace is over: %q", res.Text)
	}

	w0 := e.sh.quota.walks.Load()
	for i := range 5 {
		res = e.must(e.ws, "shell", map[string]any{"command": fmt.Sprintf("ls | wc -l; touch new%d; echo rc=$?; mkdir d%d; echo rc=$?", i, i)})
		if strings.Contains(res.Text, "rc=0") || !strings.Contains(res.Text, "could not grow or create any file") {
			t.Fatalf("a file was created over the file cap: %q", res.Text)
		}
	}
	// Old code walked twice per command over quota. Here a walk needs the
	// filesystem to have freed as many inodes as the excess, which other
	// processes on a shared machine may do now and then.
	if n := e.sh.quota.walks.Load() - w0; n > 2 {
		t.Fatalf("5 commands over the cap walked the workspace %d times", n)
	}

	cleanUp(e)
	res = e.must(e.ws, "shell", map[string]any{"command": "find . -maxdepth 1 -name '[0-9]*' -delete && echo cleaned"})
	if !strings.Contains(res.Text, "cleaned") || !strings.Contains(res.Text, "back under its quota") {
		t.Fatalf("text = %q", res.Text)
	}
	res = e.must(e.ws, "shell", map[string]any{"command": "touch new && echo rc=$?"})
	if !strings.Contains(res.Text, "rc=0") || strings.Contains(res.Text, "quota") {
		t.Fatalf("text = %q", res.Text)
	}
}

// Commands well under the quota cost no walk: the one at first use is all.
func TestQuotaNoWalkUnderQuota(t *testing.T) {
	e := newEnv(t, Config{})
	e.must(e.ws, "shell", map[string]any{"command": "mkdir -p a/b && head -c 100000 /dev/urandom > a/b/c"})
	if n := e.sh.quota.walks.Load(); n != 1 {
		t.Fatalf("%d walks for the first command, want 1", n)
	}
	e.must(e.ws, "write", map[string]any{"path": "notes.txt", "content": "hello\n"})
	for i := range 10 {
		res := e.must(e.ws, "shell", map[string]any{"command": fmt.Sprintf("echo %d > f%d; cat f%d; head -c 200000 /dev/zero > g%d", i, i, i, i)})
		if !strings.Contains(res.Text, "exit code 0") || strings.Contains(res.Text, "quota") {
			t.Fatalf("text = %q", res.Text)
		}
	}
	e.must(e.ws, "start", map[string]any{"command": "echo job > job.txt"})
	if n := e.sh.quota.walks.Load(); n != 1 {
		t.Fatalf("commands well under the quota walked the workspace %d times", n-1)
	}
}

// Where the sandbox cannot forbid creating files (no Landlock), a command
// run over the file cap that creates files is stopped when it is seen.
func TestQuotaFrozenWithoutLandlock(t *testing.T) {
	e := newEnv(t, Config{QuotaFiles: 50})
	e.sh.quota.noCreate = false
	for i := range 60 {
		if _, err := e.ws.WriteFile(fmt.Sprintf("f%d", i), nil, 1); err != nil {
			t.Fatal(err)
		}
	}
	res := e.must(e.ws, "shell", map[string]any{"command": "i=0; while [ $i -lt 100000 ]; do : > n$i; i=$((i+1)); done; echo finished"})
	if !strings.Contains(res.Text, "[stopped: it grew the workspace while it was over its quota") || strings.Contains(res.Text, "finished") {
		t.Fatalf("text = %q", res.Text)
	}
	u := used(t, e.ws.Dir())
	if lim := 60 + defaultTiming.frozenSlack.Files + 2*slack.Files; u.Files > lim {
		t.Fatalf("%d files, want at most %d", u.Files, lim)
	}
	// Cleaning up is not growing: it runs to its end.
	cleanUp(e)
	res = e.must(e.ws, "shell", map[string]any{"command": "rm -f n* f1* && echo cleaned"})
	if !strings.Contains(res.Text, "cleaned") || !strings.Contains(res.Text, "back under its quota") {
		t.Fatalf("text = %q", res.Text)
	}
}

// The shell's description gives the model the caps.
func TestQuotaInDescription(t *testing.T) {
	sh := New(Config{Sandbox: newEnv(t, Config{}).sb, Quota: 20 << 20, QuotaFiles: 5000})
	defer sh.Close()
	if d := sh.Tools()[0].Description(); !strings.Contains(d, "at most 20 MiB in 5,000 files") {
		t.Fatalf("description = %q", d)
	}
	s := sh.QuotaEnforcement(t.TempDir())
	t.Log(s)
	if !strings.Contains(s, "20 MiB and 5,000 files per workspace") || !strings.Contains(s, "Landlock forbids creating") {
		t.Fatalf("enforcement = %q", s)
	}
}

// walkTree counts what du and find would: blocks (hard links once, the
// top directory too) and entries, through trees deeper than it keeps
// descriptors open for; and it stops early when asked.
func TestWalkTree(t *testing.T) {
	dir := t.TempDir()
	write := func(p string, n int) {
		t.Helper()
		p = filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, make([]byte, n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a", 10)
	write("b/c", 100000)
	write("b/d/e", 5000)
	for i := range 300 {
		write(fmt.Sprintf("many/%d", i), i)
	}
	deep := "deep"
	for range 3 * heldLevels {
		deep += "/x"
		write(deep+"/f", 1)
	}
	if err := os.Link(filepath.Join(dir, "b/c"), filepath.Join(dir, "b/d/link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "sym")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("..", filepath.Join(dir, "b/up")); err != nil {
		t.Fatal(err)
	}
	syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644)

	// A plain walk, as du counts.
	var want Usage
	seen := map[uint64]bool{}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		fi, _ := d.Info()
		st := fi.Sys().(*syscall.Stat_t)
		if p != dir {
			want.Files++
		}
		if !fi.IsDir() && st.Nlink > 1 {
			if seen[st.Ino] {
				return nil
			}
			seen[st.Ino] = true
		}
		want.Bytes += st.Blocks * 512
		return nil
	})
	got, err := walkTree(dir, noStop)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("walkTree = %+v, want %+v", got, want)
	}
	got, err = walkTree(dir, Usage{Bytes: noStop.Bytes, Files: 10})
	if err != nil || got.Files != 11 {
		t.Fatalf("walkTree stopping past 10 files = %+v, %v", got, err)
	}
	got, err = walkTree(dir, Usage{Bytes: 50000, Files: noStop.Files})
	if err != nil || got.Bytes <= 50000 || got.Bytes >= want.Bytes {
		t.Fatalf("walkTree stopping past 50000 bytes = %+v, %v (all: %+v)", got, err, want)
	}
}

// fakeFS is a filesystem and one workspace on it whose use the tests set:
// the quota's decisions without a sandbox.
type fakeFS struct {
	fs, ws Usage
	walks  int
}

func (f *fakeFS) quota(caps Usage) *quota {
	q := newQuota(caps, true)
	q.timing.uncertain = Usage{50, 5}
	q.statfs = func(string) (fsUse, error) { return fsUse{Usage: f.fs, FilesKnown: true}, nil }
	q.walk = func(_ string, stop Usage) (Usage, error) {
		f.walks++
		u := f.ws
		// A walk stops just past stop, having counted only so far.
		if u.Files > stop.Files {
			u.Files = stop.Files + 1
		}
		if u.Bytes > stop.Bytes {
			u.Bytes = stop.Bytes + 1
		}
		return u, nil
	}
	return q
}

// grow adds u to the workspace, and so to its filesystem; other adds to the
// filesystem only (another workspace, another program).
func (f *fakeFS) grow(u Usage) {
	f.ws, f.fs = Usage{f.ws.Bytes + u.Bytes, f.ws.Files + u.Files}, Usage{f.fs.Bytes + u.Bytes, f.fs.Files + u.Files}
}
func (f *fakeFS) other(u Usage) { f.fs = Usage{f.fs.Bytes + u.Bytes, f.fs.Files + u.Files} }

func TestQuotaDecisions(t *testing.T) {
	caps := Usage{Bytes: 1000, Files: 100}
	f := &fakeFS{fs: Usage{50000, 5000}, ws: Usage{100, 10}}
	q := f.quota(caps)
	step := func(what string, wantWalks int, wantFrozen bool) admission {
		t.Helper()
		a := q.admit("/ws")
		if f.walks != wantWalks || a.frozen != wantFrozen {
			t.Fatalf("%s: %d walks, frozen %v; want %d, %v (estimate %+v)", what, f.walks, a.frozen, wantWalks, wantFrozen, a.est)
		}
		return a
	}
	step("first use", 1, false)
	step("nothing changed", 1, false)
	f.grow(Usage{100, 5})
	a := step("grown less than a quarter of what is left", 1, false)
	if a.est != (Usage{200, 15}) {
		t.Fatalf("estimate %+v", a.est)
	}
	f.other(Usage{300, 0})
	a = step("the filesystem grew by more than a quarter of what was left", 2, false)
	if a.est != f.ws {
		t.Fatalf("after a walk the estimate is %+v, want the workspace's %+v", a.est, f.ws)
	}
	f.other(Usage{900, 0})
	step("estimate over the cap from others' growth: a walk clears it", 3, false)
	f.grow(Usage{900, 0})
	a = step("over the cap", 4, true)
	if a.police {
		t.Fatal("a frozen command is policed where Landlock forbids creating files")
	}
	f.other(Usage{5000, 100})
	step("over: the filesystem grew, no walk", 4, true)
	f.grow(Usage{-50, -1})
	step("over: freed less than the excess, no walk", 4, true)
	f.other(Usage{-5000, -100})
	step("over: others freed more than the excess since the last look: a walk, still over", 5, true)
	f.grow(Usage{-30, 0})
	step("over: freed less than the excess", 5, true)
	f.grow(Usage{-30, 0})
	step("freed the excess in two steps: walk, back under", 6, false)

	// While a command runs: a walk only when the estimate is past the cap.
	a = q.admit("/ws")
	f.grow(Usage{5, 1})
	if over, _ := q.sample(a); over || f.walks != 6 {
		t.Fatalf("under the cap: over %v, %d walks", over, f.walks)
	}
	f.other(Usage{1000, 0})
	if over, _ := q.sample(a); over || f.walks != 7 {
		t.Fatalf("estimate past the cap from others' growth: over %v, %d walks", over, f.walks)
	}
	a.w.paidAt = time.Now().Add(time.Hour) // walks are owed: no kill on an estimate
	f.grow(Usage{1000, 0})
	if over, _ := q.sample(a); over || f.walks != 7 {
		t.Fatalf("no walk allowed yet: over %v, %d walks", over, f.walks)
	}
	a.w.paidAt = time.Time{}
	if over, _ := q.sample(a); !over || f.walks != 8 {
		t.Fatalf("past the cap: over %v, %d walks", over, f.walks)
	}
	if a.w.exact {
		t.Fatal("a walk that stopped past the cap is taken for exact")
	}
	step("after a stopped walk the next command measures all", 9, true)

	// Figures are measured again after a while: over quota sooner.
	f.grow(Usage{-1200, 0})
	q.workspace("/ws").walked = time.Now().Add(-q.timing.recheck)
	step("old figure", 10, false)
	f.grow(Usage{1000, 0})
	step("over again", 11, true)
	step("over, nothing freed", 11, true)
	q.workspace("/ws").walked = time.Now().Add(-q.timing.frozenRecheck)
	step("over, a while later", 12, true)

	// What others free does not hide what the workspace writes after.
	f = &fakeFS{fs: Usage{50000, 5000}, ws: Usage{100, 10}}
	q = f.quota(caps)
	a = step("first use", 1, false)
	f.other(Usage{-5000, -100})
	if over, _ := q.sample(a); over || f.walks != 1 {
		t.Fatalf("others freed: over %v, %d walks", over, f.walks)
	}
	f.grow(Usage{950, 0})
	if over, _ := q.sample(a); !over || f.walks != 2 {
		t.Fatalf("grew past the cap while the filesystem shrank overall: over %v, %d walks", over, f.walks)
	}

	// Near a cap, a little growth of the filesystem is not worth a walk;
	// past the cap it is.
	f = &fakeFS{fs: Usage{50000, 5000}, ws: Usage{990, 10}}
	q = f.quota(caps)
	step("first use near the cap", 1, false)
	f.other(Usage{8, 0})
	if a := step("others grew by less than the floor", 1, false); a.est.Bytes != 998 {
		t.Fatalf("estimate %+v", a.est)
	}
	f.other(Usage{50, 0})
	if a := step("others took the estimate past the cap", 2, false); a.est.Bytes != 990 {
		t.Fatalf("estimate %+v", a.est)
	}
}

// The sampling interval shortens as the workspace nears a cap.
func TestQuotaEvery(t *testing.T) {
	q := newQuota(Usage{1 << 30, 100_000}, true)
	for _, c := range []struct {
		left Usage
		want time.Duration
	}{
		{Usage{1 << 30, 100_000}, 250 * time.Millisecond},
		{Usage{20 << 20, 100_000}, 9765625 * time.Nanosecond},
		{Usage{1 << 30, 2000}, 10 * time.Millisecond},
		{Usage{1 << 10, 100_000}, 2 * time.Millisecond},
		{Usage{-5, -5}, 2 * time.Millisecond},
	} {
		if got := q.every(c.left, true); got != c.want {
			t.Errorf("every(%+v) = %s, want %s", c.left, got, c.want)
		}
	}
}

func TestThousands(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 100000: "100,000", 1234567: "1,234,567", -1000: "-1,000"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}
