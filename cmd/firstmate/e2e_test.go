package main

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/firstmate/firstmate/tools/sandbox"

	goredis "github.com/redis/go-redis/v9"

	"github.com/firstmate/firstmate/internal/testkit/fakellm"
	"github.com/firstmate/firstmate/store/redis/redisurl"
)

// binary is the firstmate binary built once for the end-to-end tests.
var binary string

func TestMain(m *testing.M) {
	sandbox.MaybeHelper() // the sandbox's helper, when a benchmark starts commands of its own
	flag.Parse()
	clearCallersConfig()
	// The end-to-end tests mostly wait (on the binary, the fakes, timers),
	// not compute: unless -parallel says otherwise, run more of them at once
	// than its default, GOMAXPROCS (measured: 6 takes their part of the run
	// from about 2 minutes on 2 cores to the longest test's 45 s).
	parallelSet := false
	flag.Visit(func(f *flag.Flag) { parallelSet = parallelSet || f.Name == "test.parallel" })
	if !parallelSet {
		flag.Set("test.parallel", strconv.Itoa(max(6, runtime.GOMAXPROCS(0))))
	}
	dir, err := os.MkdirTemp("", "firstmate-e2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "firstmate")
	out, err := exec.Command("go", "build", "-race", "-o", binary, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build firstmate: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// clearCallersConfig unsets the caller's configuration of firstmate and
// its platforms and model, which in-process commands (admin, chat) would
// read: each test sets what it needs itself. The benchmarks' own knobs
// (FIRSTMATE_BENCH_*) stay.
func clearCallersConfig() {
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "FIRSTMATE_BENCH_") {
			continue
		}
		for _, p := range []string{"FIRSTMATE_", "SLACK_", "TELEGRAM_", "OPENAI_"} {
			if strings.HasPrefix(k, p) {
				os.Unsetenv(k)
			}
		}
	}
}

// runBinary runs firstmate with args, stdin and a clean environment plus env.
func runBinary(t *testing.T, env []string, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return runBinaryWith(t, env, stdin, nil, args...)
}

// runBinaryWith is runBinary with the command changed by wrap first.
func runBinaryWith(t *testing.T, env []string, stdin string, wrap func(*exec.Cmd), args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	if wrap != nil {
		wrap(cmd)
	}
	cmd.Env = append([]string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}, env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("firstmate %v timed out\nstdout:\n%s\nstderr:\n%s", args, out.String(), errb.String())
	}
	code = 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

func chatEnv(t *testing.T, llm *fakellm.Server, dataDir string) []string {
	return []string{
		"OPENAI_BASE_URL=" + llm.URL(),
		"FIRSTMATE_MODEL=fake-model",
		"FIRSTMATE_DATA_DIR=" + dataDir,
	}
}

// TestChatTurnWithTools is the acceptance path: the terminal chat,
// on the fake model, runs a turn that calls ls and write and shows a line
// for each tool.
func TestChatTurnWithTools(t *testing.T) {
	t.Parallel()
	for _, store := range []string{"embedded", "redis"} {
		t.Run(store, func(t *testing.T) {
			llm := fakellm.New(t, fakellm.WithHandler(fakellm.Demo))
			data := t.TempDir()
			env := chatEnv(t, llm, data)
			if store == "redis" {
				url := redisURL(t)
				env = append(env, "REDIS_URL="+url, "FIRSTMATE_REDIS_PREFIX="+redisPrefix(t, url))
			}
			out, errOut, code := runBinary(t, env, "please make a note\n", "chat")
			if code != 0 {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
			}
			for _, want := range []string{"✓ ls ", "✓ write · wrote 21 B to hello.txt", "I left a note in hello.txt"} {
				if !strings.Contains(out, want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
			ws, err := filepath.Glob(filepath.Join(data, "workspaces", "*", "hello.txt"))
			if err != nil || len(ws) != 1 {
				t.Fatalf("hello.txt not in one workspace: %v %v", ws, err)
			}
			if b, _ := os.ReadFile(ws[0]); !strings.Contains(string(b), "hello") {
				t.Errorf("hello.txt = %q", b)
			}
			// The history outlives the process: a second run sees the turn.
			out, _, _ = runBinary(t, env, "/status\n", "chat")
			if !strings.Contains(out, "Conversation: 1 turn(s), 5 message(s).") {
				t.Errorf("status after restart:\n%s", out)
			}
			reqs := llm.Requests()
			if len(reqs) != 2 {
				t.Fatalf("model got %d requests, want 2", len(reqs))
			}
			// The 11 file tools, shell, start, jobs, stop, fetch, and the
			// five of work that runs later (schedule, schedules, unschedule,
			// wait, wait_for_job); search is not configured.
			if got := len(reqs[0].Tools); got != 21 {
				t.Errorf("model was offered %d tools, want 21", got)
			}
		})
	}
}

func TestChatScriptedLinesAreSeparateTurns(t *testing.T) {
	t.Parallel()
	llm := fakellm.New(t, fakellm.WithHandler(func(req *fakellm.Request) fakellm.Reply {
		return fakellm.Text(fmt.Sprintf("turn with %d messages", len(req.Messages)))
	}))
	out, errOut, code := runBinary(t, chatEnv(t, llm, t.TempDir()), "one\ntwo\n\nthree\n", "chat")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	// system + 1, then +2 each turn
	for _, want := range []string{"turn with 2 messages", "turn with 4 messages", "turn with 6 messages"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestChatModelFailureIsHuman(t *testing.T) {
	t.Parallel()
	llm := fakellm.New(t, fakellm.WithHandler(func(*fakellm.Request) fakellm.Reply {
		return fakellm.Error(500, "upstream exploded")
	}))
	env := append(chatEnv(t, llm, t.TempDir()), "FIRSTMATE_CONFIG="+writeFile(t, "llm:\n  max_retries: 1\n"))
	out, errOut, code := runBinary(t, env, "hi\n", "chat")
	// Piped, a failed turn is a failing exit status.
	if code != 1 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "I could not reach the model (2 attempts)") {
		t.Errorf("output:\n%s", out)
	}
	if strings.Contains(out, "goroutine") || strings.Contains(out, "panic") {
		t.Errorf("stack trace shown to the user:\n%s", out)
	}
}

func TestChatNeedsModel(t *testing.T) {
	t.Parallel()
	_, errOut, code := runBinary(t, []string{"FIRSTMATE_DATA_DIR=" + t.TempDir()}, "", "chat")
	if code != 1 || !strings.Contains(errOut, "FIRSTMATE_MODEL") {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut)
	}
}

func TestSecretsStayOutOfOutput(t *testing.T) {
	t.Parallel()
	const key = "sk-test-very-secret-key-123456"
	llm := fakellm.New(t, fakellm.WithAPIKey(key), fakellm.WithReplies(
		fakellm.Calls(fakellm.Call("write", `{"path":"leak.txt","content":"the key is `+key+`"}`)),
		fakellm.Calls(fakellm.Call("read", `{"path":"leak.txt"}`)),
		fakellm.Text("done"),
	))
	env := append(chatEnv(t, llm, t.TempDir()), "OPENAI_API_KEY="+key, "FIRSTMATE_LOG_LEVEL=debug")
	out, errOut, code := runBinary(t, env, "go\n", "chat")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if strings.Contains(out, key) || strings.Contains(errOut, key) {
		t.Fatalf("the API key appeared in output or logs:\n%s\n%s", out, errOut)
	}
	reqs := llm.Requests()
	last := reqs[len(reqs)-1].Messages
	if c := last[len(last)-1].Text(); strings.Contains(c, key) || !strings.Contains(c, "[redacted]") {
		t.Fatalf("the read result sent to the model: %q", c)
	}
}

func TestDoctor(t *testing.T) {
	t.Parallel()
	llm := fakellm.New(t, fakellm.WithHandler(toolCaller))
	t.Run("healthy", func(t *testing.T) {
		out, _, code := runBinary(t, chatEnv(t, llm, t.TempDir()), "", "doctor")
		if code != 0 || !strings.Contains(out, "All checks passed") || !strings.Contains(out, "ok    llm") {
			t.Fatalf("exit %d:\n%s", code, out)
		}
		if !strings.Contains(out, "ok    sandbox    namespaces (user, mount, pid, net, ipc, uts, cgroup), Landlock ABI") ||
			!strings.Contains(out, "shell, start, stop, write") {
			t.Errorf("doctor does not report the sandbox and the shell:\n%s", out)
		}
		if !strings.Contains(out, "ok    access     slack open, telegram pairing; 0 admin(s) configured") {
			t.Errorf("doctor does not report access:\n%s", out)
		}
	})
	t.Run("a rule that leaves a tool of the same power open", func(t *testing.T) {
		cfg := writeFile(t, "tools:\n  deny: [shell]\n")
		out, _, code := runBinary(t, append(chatEnv(t, llm, t.TempDir()), "FIRSTMATE_CONFIG="+cfg), "", "doctor")
		if code != 0 || !strings.Contains(out, "shell is deny, but start is allow (both exec)") {
			t.Fatalf("exit %d:\n%s", code, out)
		}
	})
	t.Run("bad config and unreachable llm", func(t *testing.T) {
		cfg := writeFile(t, "llm:\n  tool_protocol: xml\n  modle: x\n")
		env := []string{"FIRSTMATE_CONFIG=" + cfg, "OPENAI_BASE_URL=http://" + deadAddr(t) + "/v1", "FIRSTMATE_MODEL=m", "FIRSTMATE_DATA_DIR=" + t.TempDir()}
		out, _, code := runBinary(t, env, "", "doctor")
		if code != 1 {
			t.Fatalf("exit %d:\n%s", code, out)
		}
		for _, want := range []string{"tool_protocol", "modle", "FAIL  llm"} {
			if !strings.Contains(out, want) {
				t.Errorf("doctor output lacks %q:\n%s", want, out)
			}
		}
	})
	t.Run("redis and local workspaces", func(t *testing.T) {
		if !redisAnswers() {
			t.Skip("needs Redis")
		}
		url := redisURL(t)
		env := append(chatEnv(t, llm, t.TempDir()), "REDIS_URL="+url, "FIRSTMATE_REDIS_PREFIX="+redisPrefix(t, url))
		out, _, _ := runBinary(t, env, "", "doctor")
		if !strings.Contains(out, "warn  workspaces") || !strings.Contains(out, "on a local filesystem") {
			t.Errorf("doctor does not warn that workspaces are not shared:\n%s", out)
		}
	})
	t.Run("redis down", func(t *testing.T) {
		env := append(chatEnv(t, llm, t.TempDir()), "REDIS_URL=redis://"+deadAddr(t)+"/0")
		out, _, code := runBinary(t, env, "", "doctor")
		if code != 1 || !strings.Contains(out, "FAIL  store") {
			t.Fatalf("exit %d:\n%s", code, out)
		}
	})
}

func TestServeWithoutPlatformsSaysWhatToSet(t *testing.T) {
	t.Parallel()
	_, errOut, code := runBinary(t, []string{"FIRSTMATE_DATA_DIR=" + t.TempDir()}, "", "serve")
	if code != 1 || !strings.Contains(errOut, "SLACK_BOT_TOKEN") || !strings.Contains(errOut, "TELEGRAM_BOT_TOKEN") {
		t.Fatalf("exit %d:\n%s", code, errOut)
	}
}

func TestVersionAndUsage(t *testing.T) {
	t.Parallel()
	out, _, code := runBinary(t, nil, "", "version")
	if code != 0 || !strings.HasPrefix(out, "firstmate ") {
		t.Fatalf("version: %d %q", code, out)
	}
	_, errOut, code := runBinary(t, nil, "", "frobnicate")
	if code != 2 || !strings.Contains(errOut, "unknown command") {
		t.Fatalf("unknown command: %d %q", code, errOut)
	}
}

func writeFile(t *testing.T, content string) string {
	p := filepath.Join(t.TempDir(), "firstmate.yaml")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// deadAddr is a loopback address nothing listens on.
func deadAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// testRedisURL is the Redis the tests use: $REDIS_URL as the test process
// found it (the admin tests t.Setenv it for themselves), else the local one.
var testRedisURL = cmp.Or(os.Getenv("REDIS_URL"), "redis://127.0.0.1:6379/0")

// redisDown says why the test Redis does not answer, nil when it does; it
// is asked once for the whole run.
var redisDown = sync.OnceValue(func() error {
	u, err := redisurl.Parse(testRedisURL)
	if err != nil {
		return err
	}
	c := u.NewClient()
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return c.Ping(ctx).Err()
})

// redisAnswers reports whether the test Redis is up; the tests that may
// run on either store use it when it is (CI always has one), else the
// embedded store.
func redisAnswers() bool { return redisDown() == nil }

// redisPrefix is a key prefix of the test's own on the Redis at url; its
// keys are deleted when the test ends. Tests share the Redis (and its
// database) and never flush it: the prefix is their isolation, so that
// they may run in parallel.
func redisPrefix(t testing.TB, url string) string {
	t.Helper()
	u, err := redisurl.Parse(url)
	if err != nil {
		t.Fatal(err)
	}
	prefix := "fmtest-" + rand.Text()[:12]
	t.Cleanup(func() {
		c := u.NewClient()
		defer c.Close()
		if err := dropPrefix(context.Background(), c, prefix); err != nil {
			t.Errorf("deleting the test's Redis keys: %v", err)
		}
	})
	return prefix
}

// dropPrefix deletes the keys under prefix, on every master of a Cluster.
func dropPrefix(ctx context.Context, c goredis.UniversalClient, prefix string) error {
	drop := func(ctx context.Context, c *goredis.Client) error {
		iter := c.Scan(ctx, 0, prefix+":*", 1000).Iterator()
		for iter.Next(ctx) {
			if err := c.Del(ctx, iter.Val()).Err(); err != nil {
				return err
			}
		}
		return iter.Err()
	}
	if cc, ok := c.(*goredis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, drop)
	}
	return drop(ctx, c.(*goredis.Client))
}

// redisURL is the test Redis for a test that needs one. Without one the
// test skips, except in CI where it fails.
func redisURL(t testing.TB) string {
	t.Helper()
	if err := redisDown(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("no Redis at %s in CI: %v", redisurl.Redact(testRedisURL), err)
		}
		t.Skipf("no Redis at %s: %v", redisurl.Redact(testRedisURL), err)
	}
	return testRedisURL
}
