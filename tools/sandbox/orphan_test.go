//go:build linux

package sandbox

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestParentKilled: when firstmate dies without a chance to clean up
// (SIGKILL, OOM), its running commands die with it: the helper gets
// SIGKILL from the kernel (PR_SET_PDEATHSIG), which, being PID 1 of its
// namespace, takes every process of the command along.
func TestParentKilled(t *testing.T) {
	if os.Getenv("SANDBOX_TEST_PARENT") == "1" {
		sb := New(Config{})
		p, err := sb.Start(context.Background(), Command{Dir: os.Getenv("SANDBOX_TEST_WS"), Script: "sleep 300 & sleep 300"}, os.Stderr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("helper %d\n", p.Pid())
		time.Sleep(time.Minute) // until the test kills this process
		return
	}
	ws := t.TempDir()
	if uid, gid := New(Config{}).Owner(); uid >= 0 {
		os.Chown(ws, uid, gid)
	}
	cmd := exec.Command("/proc/self/exe", "-test.run=^TestParentKilled$")
	cmd.Env = []string{"SANDBOX_TEST_PARENT=1", "SANDBOX_TEST_WS=" + ws}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		t.Fatalf("no helper pid: %v", err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "helper ")))
	ns := holdNS(t, pid)
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for {
		left := nsProcs(ns)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes %v of the command outlived the killed parent", left)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
