//go:build linux

package main

import (
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/firstmate/firstmate/internal/testkit/fakellm"
	"github.com/firstmate/firstmate/internal/testkit/faketelegram"
)

// imageUID is the user deploy/Dockerfile runs firstmate as (USER
// 10001:10001); deploy/check checks the Dockerfile and the Helm chart
// say the same.
const imageUID = 10001

// imageLayout is the container image's file system, as far as firstmate
// sees it: both binaries side by side in a directory root owns, a data
// directory that only the image's user may write, and nothing else
// writable (the working directory is the binaries' directory).
type imageLayout struct {
	bin  string // /usr/local/bin
	data string // /data
}

func newImageLayout(t *testing.T) imageLayout {
	t.Helper()
	root, err := os.MkdirTemp("", "firstmate-image")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	l := imageLayout{bin: filepath.Join(root, "bin"), data: filepath.Join(root, "data")}
	// The temporary directory's own mode is 0700: the image's user must
	// be able to reach the binaries, as in the image.
	for _, d := range []string{root, l.bin} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Link(binary, filepath.Join(l.bin, "firstmate")); err != nil {
		t.Fatal(err)
	}
	// The helper the image ships beside firstmate, from this source tree.
	if out, err := exec.Command("go", "build", "-o", filepath.Join(l.bin, "firstmate-sandbox"), "../firstmate-sandbox").CombinedOutput(); err != nil {
		t.Fatalf("build firstmate-sandbox: %v\n%s", err, out)
	}
	if err := os.Mkdir(l.data, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(l.data, imageUID, imageUID); err != nil {
		t.Fatal(err)
	}
	return l
}

// env is the image's environment (deploy/Dockerfile's ENV) plus the
// configuration given: no config file.
func (l imageLayout) env(config []string) []string {
	return append([]string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + l.data, "FIRSTMATE_DATA_DIR=" + l.data}, config...)
}

// asImageUser runs a command as the image does: the image's firstmate,
// uid and gid 10001 with no supplementary groups, in a directory it
// cannot write.
func (l imageLayout) asImageUser(cmd *exec.Cmd) {
	cmd.Path = filepath.Join(l.bin, "firstmate")
	cmd.Args[0] = cmd.Path
	cmd.Dir = l.bin
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: imageUID, Gid: imageUID, Groups: []uint32{}}}
}

// TestImageServesAsNonRootUser runs the binary the way deploy/Dockerfile
// runs it, against the fake model and the fake Telegram: it starts,
// /healthz and /readyz answer, a message gets an answer, and the
// sandboxed shell works under that uid (or doctor names what is missing).
func TestImageServesAsNonRootUser(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root to run firstmate as the image's uid")
	}
	l := newImageLayout(t)
	tg := faketelegram.New(t)
	// A command in the sandbox: its root is the image's user on the host.
	const command = `awk '{print "mapped-to-" $2}' /proc/self/uid_map; echo from-the-sandbox > proof.txt`
	llm := fakellm.New(t, fakellm.WithHandler(func(req *fakellm.Request) fakellm.Reply {
		last := req.LastMessage()
		switch {
		case last.Role == "tool":
			return fakellm.Text("The command said:\n" + last.Text())
		case slices.Contains(req.ToolNames(), "shell"):
			return fakellm.Calls(fakellm.Call("shell", map[string]any{"command": command}))
		}
		return fakellm.Text("The shell is not offered here.")
	}))
	addr := deadAddr(t)
	env := []string{
		"OPENAI_BASE_URL=" + llm.URL(), "FIRSTMATE_MODEL=fake-model", "FIRSTMATE_HTTP_ADDR=" + addr,
		"TELEGRAM_BOT_TOKEN=" + tg.Token(), "TELEGRAM_API_URL=" + tg.URL(), "TELEGRAM_ACCESS=open",
	}
	// doctor first: the image's user, the environment alone.
	out, errOut, code := runBinaryWith(t, l.env(env), "", l.asImageUser, "doctor")
	var sandboxLine string
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, " sandbox ") {
			sandboxLine = line
		}
	}
	t.Logf("doctor as uid %d: %s", imageUID, sandboxLine)
	if code != 0 || !strings.Contains(out, "ok    store") || !strings.Contains(out, "ok    llm") {
		t.Fatalf("doctor exit %d\n%s\n%s", code, out, errOut)
	}
	sandboxed := strings.HasPrefix(sandboxLine, "ok    sandbox")
	if !sandboxed && !strings.Contains(sandboxLine, "the sandbox is unavailable: ") {
		t.Fatalf("doctor neither passes the sandbox nor says what is missing: %q", sandboxLine)
	}

	srv := &server{done: make(chan error, 1)}
	srv.cmd = exec.Command(binary, "serve")
	l.asImageUser(srv.cmd)
	srv.cmd.Env = l.env(env)
	srv.cmd.Stdout, srv.cmd.Stderr = srv, srv
	if err := srv.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { srv.done <- srv.cmd.Wait() }()
	defer func() {
		srv.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-srv.done:
			if err != nil {
				t.Errorf("serve did not exit cleanly: %v\n%s", err, srv.logs())
			}
		case <-time.After(30 * time.Second):
			srv.cmd.Process.Kill()
			t.Errorf("serve did not stop within 30s of SIGTERM\n%s", srv.logs())
		}
		if t.Failed() {
			t.Logf("serve logs:\n%s", srv.logs())
		}
	}()

	waitHTTP(t, "http://"+addr+"/healthz")
	if !tg.WaitFor(20*time.Second, func() bool { return tg.Polling() > 0 }) {
		t.Fatalf("firstmate does not poll Telegram\n%s", srv.logs())
	}
	waitHTTP(t, "http://"+addr+"/readyz")

	tg.PrivateMessage(faketelegram.Alice, "who are you in the sandbox?")
	want := "mapped-to-" + strconv.Itoa(imageUID)
	if !sandboxed {
		want = "The shell is not offered here."
	}
	var answer string
	if !tg.WaitFor(30*time.Second, func() bool {
		for _, m := range tg.BotMessages(faketelegram.Alice) {
			if !m.Deleted && strings.Contains(m.Text, want) {
				answer = m.Text
				return true
			}
		}
		return false
	}) {
		t.Fatalf("no answer with %q: %+v\n%s", want, tg.BotMessages(faketelegram.Alice), srv.logs())
	}
	t.Logf("answer: %s", answer)
	if !sandboxed {
		t.Skipf("the sandbox does not work here as uid %d; doctor said: %s", imageUID, sandboxLine)
	}
	proofs, _ := filepath.Glob(filepath.Join(l.data, "workspaces", "*", "proof.txt"))
	if len(proofs) != 1 {
		t.Fatalf("the command's file is not in one workspace under the data directory: %v", proofs)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(proofs[0], &st); err != nil || st.Uid != imageUID {
		t.Errorf("%s belongs to uid %d (%v), want %d", proofs[0], st.Uid, err, imageUID)
	}
	// Everything firstmate keeps is under the data directory.
	if _, err := os.Stat(filepath.Join(l.data, "firstmate.db")); err != nil {
		t.Errorf("the embedded store is not in the data directory: %v", err)
	}
	if ents, _ := os.ReadDir(l.bin); len(ents) != 2 {
		t.Errorf("the working directory gained files: %v", ents)
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `firstmate_tool_calls_total{outcome="ok",tool="shell"} 1`) {
		t.Errorf("/metrics does not count the shell call:\n%s", grepLines(string(body), "firstmate_tool_calls_total"))
	}
}

func grepLines(text, substr string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
