package main

import (
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/firstmate/firstmate/internal/fakellm"
	"github.com/firstmate/firstmate/internal/fakemcp"
)

// TestMCPEndToEnd runs firstmate with three MCP servers: cmd/fakemcp on
// stdio in the sandbox, the same server over HTTP on loopback (allowed by
// web.fetch.allow_networks, with a token from the environment), and one
// that cannot start. doctor lists them; a chat turn calls a tool of one,
// while the policy denies the other's.
func TestMCPEndToEnd(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	bin := filepath.Join(dir, "fakemcp")
	build := exec.Command("go", "build", "-o", bin, "github.com/firstmate/firstmate/cmd/fakemcp")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build fakemcp: %v\n%s", err, out)
	}
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

	// The servers list their tools in the background; the line comes once
	// they have.
	llm := fakellm.New(t, fakellm.WithReplies(
		fakellm.Calls(fakellm.Call("notes__env", map[string]any{"name": "NOTES_KEY"})),
		fakellm.Text("The key is set."),
	))
	env := append(chatEnv(t, llm, t.TempDir()), secrets...)
	out, errOut, code := runBinaryWith(t, env, "", func(c *exec.Cmd) {
		c.Path = "/bin/sh"
		c.Args = []string{"sh", "-c", `(sleep 3; echo "what is the key?") | "$0" chat`, binary}
	})
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
