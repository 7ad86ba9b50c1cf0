//go:build linux

package main

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/firstmate/firstmate/internal/testkit/fakellm"
)

// Power is checked where it is spent: a background job started while the
// channel allowed exec is stopped within a few seconds of exec=deny (set
// by the terminal's operator, who is an admin there), the thread is told,
// and the job can be listed from chat where exec, and with it the jobs
// tool, is denied.
func TestChatJobStoppedWhenExecDenied(t *testing.T) {
	t.Parallel()
	const marker = "sleep 617" // a command line no other test runs
	llm := fakellm.New(t, fakellm.WithHandler(func(req *fakellm.Request) fakellm.Reply {
		last := req.LastMessage()
		switch {
		case last.Role == "tool":
			return fakellm.Text("the tool said: " + last.Text())
		case strings.Contains(last.Text(), "run the job"):
			return fakellm.Calls(fakellm.Call("start", map[string]string{"command": marker}))
		}
		return fakellm.Text("ok")
	}))
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "chat")
	cmd.Env = append([]string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}, chatEnv(t, llm, t.TempDir())...)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { in.Close(); cmd.Wait() }()
	waitOut := func(what string) {
		t.Helper()
		deadline := time.Now().Add(45 * time.Second)
		for !strings.Contains(out.String(), what) {
			if time.Now().After(deadline) {
				t.Fatalf("no %q in the chat after 45 s\nstdout:\n%s\nstderr:\n%s", what, out.String(), errOut.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	send := func(line string) {
		t.Helper()
		if _, err := in.Write([]byte(line + "\n")); err != nil {
			t.Fatal(err)
		}
	}
	send("run the job")
	waitOut("the tool said:")
	if strings.Contains(out.String(), "shell is unavailable") || strings.Contains(out.String(), "unavailable here") {
		t.Skipf("no sandbox on this host:\n%s", out.String())
	}
	waitOut("Started job 1")
	if !jobRunning(marker) {
		t.Fatalf("the job is not running\n%s", out.String())
	}
	send("/tools exec=deny")
	waitOut("Saved.")
	waitOut("⏹ Stopped job 1")
	if !strings.Contains(out.String(), "exec is denied in this channel") {
		t.Errorf("the note does not say why:\n%s", out.String())
	}
	deadline := time.Now().Add(10 * time.Second)
	for jobRunning(marker) && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if jobRunning(marker) {
		t.Fatal("the job's process outlived exec=deny")
	}
	send("/jobs")
	waitOut("stopped: exec is denied")
}

// jobRunning reports whether a process on this host runs command line cmd.
func jobRunning(cmd string) bool {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		data, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && strings.Contains(strings.ReplaceAll(string(data), "\x00", " "), cmd) {
			return true
		}
	}
	return false
}
