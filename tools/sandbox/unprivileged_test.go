//go:build linux

package sandbox

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestUnprivilegedParent runs the sandbox from a process that is not root
// (uid 1000), the recommended way to run firstmate: the namespace's root is
// then that uid, and the workspace is bound by path instead of through a
// detached mount (which needs privilege in the host's namespace).
func TestUnprivilegedParent(t *testing.T) {
	if os.Getenv("SANDBOX_TEST_UNPRIVILEGED") == "1" {
		unprivilegedChild(t)
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to start a process as another user")
	}
	ws, tmp := t.TempDir(), t.TempDir()
	os.Chmod(filepath.Dir(ws), 0o755) // the test's own directory, which uid 1000 must pass through
	for _, d := range []string{ws, tmp} {
		if err := os.Chown(d, 1000, 1000); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("/proc/self/exe", "-test.run=^TestUnprivilegedParent$", "-test.v")
	cmd.Env = []string{"SANDBOX_TEST_UNPRIVILEGED=1", "SANDBOX_TEST_WS=" + ws, "TMPDIR=" + tmp, "PATH=/usr/bin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 1000, Gid: 1000}}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestUnprivilegedParent") {
		t.Fatalf("as uid 1000: %v\n%s", err, out)
	}
}

func unprivilegedChild(t *testing.T) {
	if os.Geteuid() != 1000 {
		t.Fatalf("child runs as uid %d", os.Geteuid())
	}
	sb := New(Config{})
	if uid, _ := sb.Owner(); uid != -1 {
		t.Errorf("Owner() = %d; a process that is not root needs no hand-over", uid)
	}
	if _, err := sb.Probe(context.Background()); err != nil {
		t.Fatalf("probe: %v", err)
	}
	ws := os.Getenv("SANDBOX_TEST_WS")
	res, err := sb.Run(context.Background(), Command{Dir: ws, Script: "echo made > f && cat f && cat /proc/self/status | grep -E '^(Uid|CapEff)'"})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("run: %v %+v %s", err, res, res.Output)
	}
	if !strings.Contains(string(res.Output), "made\n") || !strings.Contains(string(res.Output), "CapEff:\t0000000000000000") {
		t.Fatalf("output %q", res.Output)
	}
	fi, err := os.Stat(ws + "/f")
	if err != nil || fi.Sys().(*syscall.Stat_t).Uid != 1000 {
		t.Fatalf("the file the command made: %v %+v", err, fi)
	}
}
