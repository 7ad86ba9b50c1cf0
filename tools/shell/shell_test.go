//go:build linux

package shell

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/firstmate/firstmate/tools"
	"github.com/firstmate/firstmate/tools/files"
	"github.com/firstmate/firstmate/tools/sandbox"
)

func TestMain(m *testing.M) {
	sandbox.MaybeHelper()
	os.Exit(m.Run())
}

type env struct {
	t   *testing.T
	sh  *Shell
	set *tools.Set
	ws  *tools.Workspace
	sb  *sandbox.Sandbox
}

func newEnv(t *testing.T, cfg Config) *env {
	t.Helper()
	sb := sandbox.New(sandbox.Config{})
	if _, err := sb.Probe(context.Background()); err != nil {
		t.Fatalf("the sandbox does not work here: %v", err)
	}
	cfg.Sandbox = sb
	sh := New(cfg)
	t.Cleanup(sh.Close)
	e := &env{t: t, sh: sh, sb: sb}
	e.set = tools.NewSet(append(sh.Tools(), files.All(files.Options{})...))
	e.ws = e.open("C1")
	return e
}

func (e *env) open(channel string) *tools.Workspace {
	var opts []tools.WorkspaceOption
	if uid, gid := e.sb.Owner(); uid >= 0 {
		opts = append(opts, tools.WithOwner(tools.Owner{UID: uid, GID: gid}))
	}
	ws, err := tools.OpenWorkspace(e.t.TempDir(), channel, opts...)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { ws.Close() })
	return ws
}

func (e *env) call(ws *tools.Workspace, name string, args any) (tools.Result, error) {
	e.t.Helper()
	raw, _ := json.Marshal(args)
	return e.set.Call(context.Background(), ws, name, raw)
}

// callAs calls a tool as the agent loop does, for the person and the
// conversation in by.
func (e *env) callAs(by tools.Call, ws *tools.Workspace, name string, args any) (tools.Result, error) {
	e.t.Helper()
	raw, _ := json.Marshal(args)
	return e.set.Call(tools.WithCall(context.Background(), by), ws, name, raw)
}

func (e *env) must(ws *tools.Workspace, name string, args any) tools.Result {
	e.t.Helper()
	res, err := e.call(ws, name, args)
	if err != nil {
		e.t.Fatalf("%s %v: %v\n%s", name, args, err, res.Text)
	}
	return res
}

func TestShellOutputAndExitCode(t *testing.T) {
	e := newEnv(t, Config{})
	res := e.must(e.ws, "shell", map[string]any{"command": "echo out; echo err >&2; exit 3"})
	if !strings.Contains(res.Text, "out\nerr\n") || !strings.Contains(res.Text, "[exit code 3 ·") {
		t.Fatalf("text = %q", res.Text)
	}
	if res.Summary != "echo out; echo err >&2; exit 3 → exit code 3" {
		t.Fatalf("summary = %q", res.Summary)
	}
}

// Files written by the file tools can be changed by commands, and the
// other way round, whoever this process runs as.
func TestShellAndFileToolsShareTheWorkspace(t *testing.T) {
	e := newEnv(t, Config{})
	e.must(e.ws, "write", map[string]any{"path": "notes/a.txt", "content": "one\n"})
	res := e.must(e.ws, "shell", map[string]any{"command": "echo two >> notes/a.txt && mkdir -p notes/sub && echo three > notes/sub/b.txt && cat notes/a.txt"})
	if !strings.Contains(res.Text, "one\ntwo\n") || !strings.Contains(res.Text, "exit code 0") {
		t.Fatalf("shell could not change a file the write tool made: %q", res.Text)
	}
	got := e.must(e.ws, "read", map[string]any{"path": "notes/sub/b.txt"})
	if !strings.Contains(got.Text, "three") {
		t.Fatalf("read = %q", got.Text)
	}
	e.must(e.ws, "edit", map[string]any{"path": "notes/sub/b.txt", "old": "three", "new": "four"})
	res = e.must(e.ws, "shell", map[string]any{"command": "cat notes/sub/b.txt; rm -r notes && ls"})
	if !strings.Contains(res.Text, "four") || !strings.Contains(res.Text, "exit code 0") {
		t.Fatalf("text = %q", res.Text)
	}
}

func TestShellTimeout(t *testing.T) {
	e := newEnv(t, Config{})
	res := e.must(e.ws, "shell", map[string]any{"command": "echo before; sleep 30", "timeout_seconds": 1})
	if !strings.Contains(res.Text, "before") || !strings.Contains(res.Text, "timed out after 1s and was killed") {
		t.Fatalf("text = %q", res.Text)
	}
}

func TestShellOutputCut(t *testing.T) {
	e := newEnv(t, Config{})
	res := e.must(e.ws, "shell", map[string]any{"command": "echo FIRST; head -c 3000000 /dev/zero | tr '\\0' x; echo; echo LAST"})
	for _, want := range []string{"FIRST", "LAST", "bytes of output cut", "2.9 MiB of output"} {
		if !strings.Contains(res.Text, want) {
			t.Errorf("missing %q in %q…", want, res.Text[:200])
		}
	}
}

func TestShellBadArguments(t *testing.T) {
	e := newEnv(t, Config{})
	if _, err := e.call(e.ws, "shell", map[string]any{"command": "  "}); err == nil {
		t.Fatal("an empty command ran")
	}
	if _, err := e.call(e.ws, "shell", map[string]any{"cmd": "ls"}); err == nil {
		t.Fatal("an unknown argument was accepted")
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestJobs(t *testing.T) {
	e := newEnv(t, Config{Jobs: JobLimits{PerChannel: 2}})
	res := e.must(e.ws, "start", map[string]any{"command": "echo serving on 8080; sleep 60"})
	if !strings.Contains(res.Text, "Started job 1") || !strings.Contains(res.Text, ".jobs/1.log") {
		t.Fatalf("start = %q", res.Text)
	}
	waitFor(t, "the log", func() bool {
		b, _ := os.ReadFile(filepath.Join(e.ws.Dir(), ".jobs/1.log"))
		return string(b) == "serving on 8080\n"
	})
	list := e.must(e.ws, "jobs", map[string]any{})
	if !strings.Contains(list.Text, "job 1 · running") || !strings.Contains(list.Text, "    serving on 8080") {
		t.Fatalf("jobs = %q", list.Text)
	}
	e.must(e.ws, "start", map[string]any{"command": "sleep 60"})
	if _, err := e.call(e.ws, "start", map[string]any{"command": "sleep 60"}); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Fatalf("a third job in a channel with a limit of 2: %v", err)
	}

	// Another channel neither sees nor stops them, and has its own limit
	// and its own job IDs.
	other := e.open("C2")
	if res := e.must(other, "jobs", map[string]any{}); !strings.Contains(res.Text, "No background jobs") {
		t.Fatalf("other channel sees %q", res.Text)
	}
	if _, err := e.call(other, "stop", map[string]any{"id": "1"}); err == nil {
		t.Fatal("another channel stopped job 1")
	}
	e.must(other, "start", map[string]any{"command": "true"})

	res = e.must(e.ws, "stop", map[string]any{"id": "1"})
	if !strings.Contains(res.Text, "Stopped job 1") {
		t.Fatalf("stop = %q", res.Text)
	}
	list = e.must(e.ws, "jobs", map[string]any{})
	if !strings.Contains(list.Text, "job 1 · stopped") || !strings.Contains(list.Text, "job 2 · running") {
		t.Fatalf("jobs = %q", list.Text)
	}
	waitFor(t, "the other channel's job 1 to end", func() bool {
		return strings.Contains(e.must(other, "jobs", map[string]any{}).Text, "job 1 · exit code 0")
	})
	if _, err := e.call(e.ws, "stop", map[string]any{"id": "nope"}); err == nil {
		t.Fatal("a bad id was accepted")
	}
}

func TestJobLifetimeAndClose(t *testing.T) {
	e := newEnv(t, Config{Jobs: JobLimits{Lifetime: time.Second}})
	e.must(e.ws, "start", map[string]any{"command": "sleep 60"})
	waitFor(t, "the lifetime to end the job", func() bool {
		return strings.Contains(e.must(e.ws, "jobs", map[string]any{}).Text, "stopped at its 1s lifetime")
	})

	e2 := newEnv(t, Config{})
	e2.must(e2.ws, "start", map[string]any{"command": "sleep 60"})
	var pid int
	e2.sh.jobs.mu.Lock()
	for j := range e2.sh.jobs.local {
		pid = j.proc.Pid()
	}
	e2.sh.jobs.mu.Unlock()
	e2.sh.Close()
	if _, err := os.Stat(filepath.Join("/proc", itoa(pid))); err == nil {
		t.Fatalf("job process %d outlived Close", pid)
	}
	if res := e2.must(e2.ws, "jobs", map[string]any{}); !strings.Contains(res.Text, "ended when firstmate stopped") {
		t.Fatalf("jobs = %q", res.Text)
	}
	if _, err := e2.call(e2.ws, "start", map[string]any{"command": "true"}); err == nil {
		t.Fatal("a job started after Close")
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
