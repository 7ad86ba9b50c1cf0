package config

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestMCPConfig(t *testing.T) {
	path := writeConfig(t, `
mcp:
  timeout: 30s
  servers:
    notes:
      command: ["/usr/bin/python3", "/opt/mcp/notes/server.py"]
      paths: ["/opt/mcp/notes"]
      env: {NOTES_DIR: /workspace/notes, NOTES_KEY: "key-${NOTES_KEY}"}
      workspace: channel
    wiki:
      url: https://wiki.example.com/mcp
      headers: {Authorization: "Bearer ${WIKI_TOKEN}"}
      timeout: 2m
tools:
  deny: [mcp:wiki, notes__delete]
`)
	c := mustLoad(t, path, env{"WIKI_TOKEN": "wiki-token-value", "NOTES_KEY": "notes-key-value"}.withHome())
	notes, wiki := c.MCP.Servers["notes"], c.MCP.Servers["wiki"]
	if got := wiki.Headers["Authorization"].Reveal(); got != "Bearer wiki-token-value" {
		t.Errorf("header %q", got)
	}
	if got := notes.Env["NOTES_KEY"].Reveal(); got != "key-notes-key-value" {
		t.Errorf("env %q", got)
	}
	if notes.Workspace != "channel" || !slices.Equal(notes.Paths, []string{"/opt/mcp/notes"}) {
		t.Errorf("notes %+v", notes)
	}
	if c.MCP.CallTimeout(wiki) != 2*time.Minute || c.MCP.CallTimeout(notes) != 30*time.Second || (MCP{}).CallTimeout(notes) != time.Minute {
		t.Error("timeouts")
	}
	secrets := c.Secrets()
	for _, s := range []string{"Bearer wiki-token-value", "wiki-token-value", "notes-key-value"} {
		if !slices.Contains(secrets, s) {
			t.Errorf("%q is not a secret: %q", s, secrets)
		}
	}
	if slices.Contains(secrets, "/workspace/notes") {
		t.Error("a literal variable is a secret")
	}
	red := c.Redacted()
	if strings.Contains(red, "token-value") || strings.Contains(red, "key-value") {
		t.Errorf("Redacted shows a secret:\n%s", red)
	}
	// The servers' tools are not known until they start: their group and
	// tools may be named in the policy all the same, not another's.
	if err := c.ValidateTools(toolset("read", "shell")); err != nil {
		t.Errorf("ValidateTools: %v", err)
	}
	if got := c.PolicyDefaults().Rules; got["group:mcp:wiki"] != "deny" || got["notes__delete"] != "deny" {
		t.Errorf("rules %v", got)
	}
	c.Tools.Deny = []string{"mcp:other"}
	if err := c.ValidateTools(toolset("read")); err == nil {
		t.Error("a group of no configured server passed")
	}
}

func TestMCPProblems(t *testing.T) {
	for _, c := range []struct {
		name, yaml, key, msg string
	}{
		{"unset variable", `{servers: {wiki: {url: "https://w/", headers: {Authorization: "Bearer ${NOPE}"}}}}`, "mcp.servers.wiki.headers.Authorization", "${NOPE} is not set"},
		{"bad name", `{servers: {Wiki__x: {url: "https://w/"}}}`, "mcp.servers.Wiki__x", "is not a server name"},
		{"both", `{servers: {w: {url: "https://w/", command: [x]}}}`, "mcp.servers.w", "both a command and a url"},
		{"neither", `{servers: {w: {timeout: 1s}}}`, "mcp.servers.w", "neither a command"},
		{"relative path", `{servers: {w: {command: [x], paths: [opt/x]}}}`, "mcp.servers.w.paths[0]", "not an absolute path"},
		{"root path", `{servers: {w: {command: [x], paths: ["/"]}}}`, "mcp.servers.w.paths[0]", "host's root"},
		{"workspace path", `{servers: {w: {command: [x], paths: [/workspace/a]}}}`, "mcp.servers.w.paths[0]", "sandbox's own"},
		{"workspace", `{servers: {w: {command: [x], workspace: shared}}}`, "mcp.servers.w.workspace", `"shared" is not one of own, channel`},
		{"env name", `{servers: {w: {command: [x], env: {"A-B": x}}}}`, "mcp.servers.w.env.A-B", "not a variable name"},
		{"headers on stdio", `{servers: {w: {command: [x], headers: {A: b}}}}`, "mcp.servers.w.headers", "for a server with a url"},
		{"url scheme", `{servers: {w: {url: "ftp://w/"}}}`, "mcp.servers.w.url", "the scheme must be http or https"},
		{"url password", `{servers: {w: {url: "https://u:p@w/"}}}`, "mcp.servers.w.url", "holds a user or password"},
		{"env on http", `{servers: {w: {url: "https://w/", env: {A: b}}}}`, "mcp.servers.w", "for a server with a command"},
		{"bad duration", `{servers: {w: {url: "https://w/", timeout: 5}}}`, "mcp.servers.w.timeout", "has no unit"},
		{"unknown key", `{servers: {w: {url: "https://w/", header: {}}}}`, "mcp.servers.w.header", "unknown key"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Load(writeConfig(t, "mcp: "+c.yaml+"\n"), env{}.withHome().lookup)
			for _, p := range problems(t, err) {
				if p.Key == c.key && strings.Contains(p.Msg, c.msg) {
					return
				}
			}
			t.Errorf("want %s: %q; got %v", c.key, c.msg, err)
		})
	}
}
