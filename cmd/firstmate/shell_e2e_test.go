//go:build linux

package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/firstmate/firstmate/internal/testkit/fakellm"
	"github.com/firstmate/firstmate/internal/testkit/faketelegram"
)

// versionCommand prints a toolchain's version: go's where the sandbox sees
// it, else python3's.
const versionCommand = `if command -v go >/dev/null; then go version; else python3 -c 'print(1)'; fi`

func offered(req fakellm.Request) []string {
	var names []string
	for _, t := range req.Tools {
		names = append(names, t.Function.Name)
	}
	return names
}

// lastToolResult is what the model was told of the last tool call.
func lastToolResult(t *testing.T, llm *fakellm.Server) string {
	t.Helper()
	reqs := llm.Requests()
	msgs := reqs[len(reqs)-1].Messages
	return msgs[len(msgs)-1].Text()
}

// TestChatShellRunsInSandbox is the acceptance path: a turn in the
// terminal chat runs a toolchain in the sandbox and shows its output.
func TestChatShellRunsInSandbox(t *testing.T) {
	t.Parallel()
	llm := fakellm.New(t, fakellm.WithHandler(fakellm.Demo))
	out, errOut, code := runBinary(t, chatEnv(t, llm, t.TempDir()), "$ "+versionCommand+"\n", "chat")
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	// The progress line, then the answer with what the command printed.
	if !strings.Contains(out, "✓ shell · if command -v go") || !strings.Contains(out, "exit code 0") {
		t.Errorf("output:\n%s", out)
	}
	if !strings.Contains(out, "go version go1.") && !strings.Contains(out, "\n1\n") {
		t.Errorf("the chat does not show the toolchain's output:\n%s", out)
	}
	res := lastToolResult(t, llm)
	if !strings.Contains(res, "go version go1.") && !strings.Contains(res, "1\n") {
		t.Fatalf("the model did not get the toolchain's output: %q", res)
	}
	if !strings.Contains(res, "[exit code 0 ·") || strings.Contains(res, "WITHOUT a sandbox") {
		t.Fatalf("result = %q", res)
	}
	if tools := offered(llm.Requests()[0]); !slices.Contains(tools, "shell") || !slices.Contains(tools, "start") {
		t.Fatalf("offered %v", tools)
	}
}

// TestChatShellUnavailable runs firstmate where the kernel refuses new user
// namespaces (user.max_user_namespaces=0 in the namespace it runs in): the
// shell is not offered, a call anyway says why and what fixes it, and
// doctor says the same.
func TestChatShellUnavailable(t *testing.T) {
	t.Parallel()
	llm := fakellm.New(t, fakellm.WithReplies(
		fakellm.Calls(fakellm.Call("shell", map[string]any{"command": "id"})),
		fakellm.Text("No shell here."),
	))
	env := chatEnv(t, llm, t.TempDir())
	confined := withoutUserNamespaces
	// Until the probe has failed, a turn is offered the shell as if it will
	// pass; this one starts after.
	out, errOut, code := runAfterLog(t, env, confined, "the shell is not offered", "run id\n", "chat")
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if tools := offered(llm.Requests()[0]); slices.Contains(tools, "shell") || slices.Contains(tools, "start") || !slices.Contains(tools, "read") {
		t.Fatalf("offered %v with no working sandbox", tools)
	}
	res := lastToolResult(t, llm)
	for _, want := range []string{"shell is unavailable here", "user namespaces are disabled (user.max_user_namespaces is 0)", "sysctl -w user.max_user_namespaces"} {
		if !strings.Contains(res, want) {
			t.Errorf("the call's result lacks %q: %q", want, res)
		}
	}
	if !strings.Contains(errOut, "the shell is not offered") {
		t.Errorf("the log does not say the shell is off:\n%s", errOut)
	}

	out, _, _ = runBinaryWith(t, env, "", confined, "doctor")
	if !strings.Contains(out, "warn  sandbox    shell, start, jobs and stop are not offered: the sandbox is unavailable: user namespaces are disabled") {
		t.Errorf("doctor:\n%s", out)
	}

	// With sandbox: namespaces the operator asked for the sandbox: no start.
	_, errOut, code = runBinaryWith(t, append(env, "FIRSTMATE_SANDBOX=namespaces"), "hi\n", confined, "chat")
	if code != 1 || !strings.Contains(errOut, "sandbox: namespaces is set, but the sandbox is unavailable: user namespaces are disabled") {
		t.Errorf("exit %d, stderr:\n%s", code, errOut)
	}
	out, _, code = runBinaryWith(t, append(env, "FIRSTMATE_SANDBOX=namespaces"), "", confined, "doctor")
	if code != 1 || !strings.Contains(out, "FAIL  sandbox") {
		t.Errorf("doctor exit %d:\n%s", code, out)
	}
}

// withoutUserNamespaces runs cmd where the kernel refuses new user
// namespaces, so the sandbox probe fails at once.
func withoutUserNamespaces(cmd *exec.Cmd) {
	cmd.Args = append([]string{"sh", "-c", `echo 0 > /proc/sys/user/max_user_namespaces && exec "$0" "$@"`, cmd.Path}, cmd.Args[1:]...)
	cmd.Path = "/bin/sh"
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: syscall.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: syscall.Getgid(), Size: 1}},
	}
}

// TestServeStopsWhenTheSandboxIsRequiredAndFails: serve connects before
// the sandbox probe ends, but with sandbox: namespaces a failed probe
// still stops it, saying why.
func TestServeStopsWhenTheSandboxIsRequiredAndFails(t *testing.T) {
	t.Parallel()
	tg := faketelegram.New(t)
	llm := fakellm.New(t, fakellm.WithReplies(fakellm.Text("hi")))
	env := append(chatEnv(t, llm, t.TempDir()), "FIRSTMATE_SANDBOX=namespaces", "FIRSTMATE_HTTP_ADDR=127.0.0.1:0",
		"TELEGRAM_BOT_TOKEN="+tg.Token(), "TELEGRAM_API_URL="+tg.URL(), "TELEGRAM_ACCESS=open")
	_, errOut, code := runBinaryWith(t, env, "", withoutUserNamespaces, "serve")
	if code != 1 || !strings.Contains(errOut, "firstmate: sandbox: namespaces is set, but the sandbox is unavailable: user namespaces are disabled") {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut)
	}
}

// runAfterLog is runBinaryWith, but stdin is sent only once firstmate's log
// shows line: for a check of what firstmate decides in the background at
// start (the sandbox probe).
func runAfterLog(t *testing.T, env []string, wrap func(*exec.Cmd), line, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	wrap(cmd)
	cmd.Env = append([]string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}, env...)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	logs := &logWatch{line: line, seen: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = &out, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-logs.seen:
		io.WriteString(in, stdin)
	case <-ctx.Done():
	}
	in.Close()
	err = cmd.Wait()
	if ctx.Err() != nil {
		t.Fatalf("firstmate %v: no %q in its log, or it timed out\nstdout:\n%s\nstderr:\n%s", args, line, out.String(), logs.String())
	}
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), logs.String(), code
}

// logWatch keeps a process's log and closes seen once it shows line.
type logWatch struct {
	safeBuffer
	line string
	once sync.Once
	seen chan struct{}
}

func (w *logWatch) Write(p []byte) (int, error) {
	n, err := w.safeBuffer.Write(p)
	if strings.Contains(w.String(), w.line) {
		w.once.Do(func() { close(w.seen) })
	}
	return n, err
}

// TestChatUnsafeHostShell: with the sandbox off, commands run on the host
// only with the operator's explicit setting, and the thread is told.
func TestChatUnsafeHostShell(t *testing.T) {
	t.Parallel()
	call := fakellm.Calls(fakellm.Call("shell", map[string]any{"command": "echo on-the-host"}))
	llm := fakellm.New(t, fakellm.WithReplies(call, fakellm.Text("ran"), call, fakellm.Text("ran")))
	env := append(chatEnv(t, llm, t.TempDir()), "FIRSTMATE_SANDBOX=off")

	out, _, _ := runBinary(t, env, "go\n", "chat")
	if res := lastToolResult(t, llm); !strings.Contains(res, "the operator turned the shell off (sandbox: off)") || strings.Contains(out, "on-the-host") {
		t.Fatalf("sandbox off ran a command: %q\n%s", res, out)
	}

	out, errOut, _ := runBinary(t, append(env, "FIRSTMATE_UNSAFE_HOST_SHELL=1"), "go\n", "chat")
	if !strings.Contains(errOut, "UNSAFE: shell commands run on the host WITHOUT A SANDBOX") {
		t.Errorf("no loud warning at start:\n%s", errOut)
	}
	if !strings.Contains(out, "⚠ unsandboxed: echo on-the-host") {
		t.Errorf("the thread is not told:\n%s", out)
	}
	if res := lastToolResult(t, llm); !strings.Contains(res, "on-the-host") || !strings.Contains(res, "WITHOUT a sandbox") {
		t.Errorf("result = %q", res)
	}
}
