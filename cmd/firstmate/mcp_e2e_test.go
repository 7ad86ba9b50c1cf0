package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/firstmate/firstmate/internal/testkit/fakellm"
	"github.com/firstmate/firstmate/internal/testkit/fakemcp"
)

// buildFakeMCP builds cmd/fakemcp into a directory of the test's that the
// sandbox's user may read (a stdio server's paths).
func buildFakeMCP(t *testing.T) (bin, dir string) {
	t.Helper()
	dir = t.TempDir()
	os.Chmod(dir, 0o755)
	bin = filepath.Join(dir, "fakemcp")
	build := exec.Command("go", "build", "-o", bin, "github.com/firstmate/firstmate/cmd/fakemcp")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build fakemcp: %v\n%s", err, out)
	}
	return bin, dir
}

// TestMCPEndToEnd runs firstmate with three MCP servers: cmd/fakemcp on
// stdio in the sandbox, the same server over HTTP on loopback (allowed by
// web.fetch.allow_networks, with a token from the environment), and one
// that cannot start. doctor lists them; a chat turn calls a tool of one,
// while the policy denies the other's.
func TestMCPEndToEnd(t *testing.T) {
	t.Parallel()
	bin, dir := buildFakeMCP(t)
	h := fakemcp.Handler(fakemcp.Options{})
	wiki := httptest.NewServer(h)
	t.Cleanup(wiki.Close)
	cfg := writeFile(t, fmt.Sprintf(`
web:
  fetch:
    allow_networks: [127.0.0.0/8]
mcp:
  servers:
    notes:
      command: [%q]
      paths: [%q]
      env: {NOTES_KEY: "${E2E_NOTES_KEY}"}
    wiki:
      url: %s/
      headers: {Authorization: "Bearer ${E2E_WIKI_TOKEN}"}
    broken:
      command: [/nonexistent/server]
tools:
  deny: [mcp:wiki]
`, bin, dir, wiki.URL))
	secrets := []string{"FIRSTMATE_CONFIG=" + cfg, "E2E_NOTES_KEY=notes-key-e2e-value", "E2E_WIKI_TOKEN=wiki-token-e2e"}
	doctorLLM := fakellm.New(t, fakellm.WithHandler(toolCaller))
	out, _, code := runBinary(t, append(chatEnv(t, doctorLLM, t.TempDir()), secrets...), "", "doctor")
	if code != 1 {
		t.Errorf("doctor exit %d with a server that does not start", code)
	}
	for _, want := range []string{"ok    mcp notes", "notes__echo", "ok    mcp wiki", "wiki__echo",
		"FAIL  mcp broken /nonexistent/server does not start", "exit code 127",
		"warn  mcp wiki", "wiki__bad_schema is not offered"} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "wiki-token-e2e") || strings.Contains(out, "notes-key-e2e-value") {
		t.Errorf("doctor shows a secret:\n%s", out)
	}

	// The servers list their tools in the background; a turn that starts
	// at once waits for them (a few seconds at most).
	llm := fakellm.New(t, fakellm.WithReplies(
		fakellm.Calls(fakellm.Call("notes__env", map[string]any{"name": "NOTES_KEY"})),
		fakellm.Text("The key is set."),
	))
	env := append(chatEnv(t, llm, t.TempDir()), secrets...)
	out, errOut, code := runBinary(t, env, "what is the key?\n", "chat")
	if code != 0 {
		t.Fatalf("chat exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	reqs := llm.Requests()
	if len(reqs) != 2 {
		t.Fatalf("model got %d requests\nstdout:\n%s\nstderr:\n%s", len(reqs), out, errOut)
	}
	offered := reqs[0].ToolNames()
	if !slices.Contains(offered, "notes__echo") || slices.ContainsFunc(offered, func(n string) bool { return strings.HasPrefix(n, "wiki__") }) {
		t.Errorf("offered %v", offered)
	}
	result := reqs[1].LastMessage().Text()
	if !strings.Contains(result, "[redacted]") || strings.Contains(result, "notes-key-e2e-value") {
		t.Errorf("the tool result is %q: the variable's value must reach the server and be scrubbed from what the model reads", result)
	}
	if !strings.Contains(out, "The key is set.") {
		t.Errorf("chat output:\n%s", out)
	}
}

// A turn that starts the moment firstmate does, while an MCP server is
// still listing its tools (cmd/fakemcp answers tools/list a second late),
// is offered them and calls one; a server that never lists its tools holds
// that turn a few seconds at most (mcp.DefaultStartWait), and is not
// offered.
func TestMCPTurnRightAfterStart(t *testing.T) {
	t.Parallel()
	bin, dir := buildFakeMCP(t)
	cfg := writeFile(t, fmt.Sprintf(`
mcp:
  servers:
    slow:
      command: [%[1]q, --list-delay, 1s]
      paths: [%[2]q]
    mute:
      command: [%[1]q, --list-delay, 1h]
      paths: [%[2]q]
`, bin, dir))
	llm := fakellm.New(t, fakellm.WithReplies(
		fakellm.Calls(fakellm.Call("slow__echo", map[string]any{"text": "early bird"})),
		fakellm.Text("The server answered."),
	))
	env := append(chatEnv(t, llm, t.TempDir()), "FIRSTMATE_CONFIG="+cfg, "FIRSTMATE_LOG_LEVEL=debug")
	out, errOut, code := runBinary(t, env, "call the slow server\n", "chat")
	if code != 0 {
		t.Fatalf("chat exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	reqs := llm.Requests()
	if len(reqs) != 2 {
		t.Fatalf("model got %d requests\nstdout:\n%s\nstderr:\n%s", len(reqs), out, errOut)
	}
	offered := reqs[0].ToolNames()
	if !slices.Contains(offered, "slow__echo") || slices.ContainsFunc(offered, func(n string) bool { return strings.HasPrefix(n, "mute__") }) {
		t.Errorf("a turn right after start was offered %v\nstderr:\n%s", offered, errOut)
	}
	if result := reqs[1].LastMessage().Text(); result != "early bird" {
		t.Errorf("the tool result is %q", result)
	}
	if !strings.Contains(errOut, "turns no longer wait for them") || !strings.Contains(errOut, "mute") {
		t.Errorf("the log does not say which server turns stopped waiting for:\n%s", errOut)
	}
}

// /readyz of serve says 503, naming the server, until the MCP servers'
// first listings have settled (here: until turns stop waiting for a server
// that never lists its tools), then 200.
func TestMCPReadyzWaitsForFirstListing(t *testing.T) {
	t.Parallel()
	bin, dir := buildFakeMCP(t)
	cfg := writeFile(t, fmt.Sprintf(`
mcp:
  servers:
    mute:
      command: [%q, --list-delay, 1h]
      paths: [%q]
`, bin, dir))
	e := telegramBase(t, func(*fakellm.Request) fakellm.Reply { return fakellm.Text("hi") })
	e.env = append(e.env, "FIRSTMATE_CONFIG="+cfg)
	addr := ""
	for _, kv := range e.env {
		if v, ok := strings.CutPrefix(kv, "FIRSTMATE_HTTP_ADDR="); ok {
			addr = v
		}
	}
	e.srv = startServe(t, e.env)
	var notReady []string
	deadline := time.Now().Add(30 * time.Second)
	for {
		status, body := getURL("http://" + addr + "/readyz")
		if status == http.StatusOK {
			break
		}
		if status == http.StatusServiceUnavailable {
			notReady = append(notReady, body)
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz not ready after 30 s: %d %q\n%s", status, body, e.srv.logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Serve listens within moments of starting the servers; the wait for
	// the mute one lasts seconds.
	if !slices.ContainsFunc(notReady, func(b string) bool { return strings.Contains(b, "MCP servers still listing their tools: mute") }) {
		t.Errorf("/readyz never said it waits for the mute server: %q\n%s", notReady, e.srv.logs())
	}
}

// getURL returns the status and body of a GET, 0 if it failed.
func getURL(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
