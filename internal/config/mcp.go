package config

import (
	"fmt"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/firstmate/firstmate/internal/redact"
)

// MCP lists the MCP servers whose tools the agent may use. A server's tool
// "search" is offered as "SERVER__search", and every tool of a server is
// in the policy group "mcp:SERVER".
type MCP struct {
	// Timeout bounds one tool call of a server that sets no timeout; 0
	// is 60s.
	Timeout time.Duration `yaml:"timeout" json:"timeout"`
	// Servers by name: lower-case letters, digits and single "-" or "_".
	Servers map[string]MCPServer `yaml:"servers,omitempty" json:"servers,omitempty"`
}

// MCPServer is one MCP server: a command on stdio, run in the sandbox
// (with its own workspace, or one process per channel workspace), or the
// URL of a streamable-HTTP server.
type MCPServer struct {
	// Command is the server's argv, run in the sandbox with an empty
	// environment but for Env.
	Command []string `yaml:"command,omitempty" json:"command,omitempty"`
	// Paths are host files and directories the server needs, mounted
	// read-only at the same paths (/usr is in view already).
	Paths []string `yaml:"paths,omitempty" json:"paths,omitempty"`
	// Env are the variables the server gets; "${NAME}" in a value is the
	// environment variable NAME of firstmate, read at load time.
	Env map[string]Secret `yaml:"env,omitempty" json:"env,omitempty"`
	// Workspace is where the server runs: "own" (default, one process) or
	// "channel" (one per channel workspace, started at its first call).
	Workspace string `yaml:"workspace,omitempty" json:"workspace,omitempty"`

	// URL is a streamable-HTTP endpoint, reached like fetch: an intranet
	// host's network must be in web.fetch.allow_networks.
	URL string `yaml:"url,omitempty" json:"url,omitempty"`
	// Headers are sent with every request; "${NAME}" in a value is the
	// environment variable NAME, read at load time. They are secrets.
	Headers map[string]Secret `yaml:"headers,omitempty" json:"headers,omitempty"`

	// Timeout bounds one tool call; 0 is mcp.timeout's.
	Timeout time.Duration `yaml:"timeout,omitempty" json:"timeout,omitempty"`
}

// DefaultMCPTimeout bounds one MCP tool call when nothing else does.
const DefaultMCPTimeout = time.Minute

// CallTimeout is how long one call of the server may take.
func (m MCP) CallTimeout(s MCPServer) time.Duration {
	switch {
	case s.Timeout > 0:
		return s.Timeout
	case m.Timeout > 0:
		return m.Timeout
	}
	return DefaultMCPTimeout
}

// ServerNames returns the servers' names, sorted.
func (m MCP) ServerNames() []string { return slices.Sorted(maps.Keys(m.Servers)) }

var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// expandMCP replaces "${NAME}" in the servers' headers and variables by
// the environment variable NAME; the values it puts in are secrets.
func (c *Config) expandMCP(env func(string) (string, bool)) []error {
	var probs []error
	for _, name := range c.MCP.ServerNames() {
		s := c.MCP.Servers[name]
		for _, part := range []struct {
			key  string
			vals map[string]Secret
		}{{"headers", s.Headers}, {"env", s.Env}} {
			for _, k := range slices.Sorted(maps.Keys(part.vals)) {
				key := fmt.Sprintf("mcp.servers.%s.%s.%s", name, part.key, k)
				v := string(part.vals[k])
				if part.key == "headers" && !envRef.MatchString(v) && v != "" {
					c.meta.literal = append(c.meta.literal, key)
				}
				part.vals[k] = Secret(envRef.ReplaceAllStringFunc(v, func(ref string) string {
					val, ok := lookup(env, ref[2:len(ref)-1])
					if !ok {
						probs = append(probs, c.problem(key, "%s is not set in the environment; set it, or remove the key", ref))
						return ""
					}
					c.meta.expanded = append(c.meta.expanded, val)
					return val
				}))
			}
		}
	}
	return probs
}

// mcpSecrets are the MCP settings' secret values: whole headers, and what
// "${NAME}" put into variables.
func (c *Config) mcpSecrets() []string {
	var out []string
	for _, s := range c.MCP.Servers {
		for _, v := range s.Headers {
			if v != "" {
				out = append(out, v.Reveal())
			}
		}
	}
	if c.meta != nil {
		out = append(out, c.meta.expanded...)
	}
	return out
}

var (
	mcpName    = regexp.MustCompile(`^[a-z0-9]+(?:[-_][a-z0-9]+)*$`)
	envName    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	headerName = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
)

func (v *validator) mcp() {
	m := &v.c.MCP
	if m.Timeout < 0 {
		v.add("mcp.timeout", "%v must not be negative; 0 is 60s", m.Timeout)
	}
	for _, name := range m.ServerNames() {
		s := m.Servers[name]
		key := "mcp.servers." + name
		if !mcpName.MatchString(name) || len(name) > 32 {
			v.add(key, "%q is not a server name: use up to 32 lower-case letters and digits, with single - or _ between them (it starts each tool's name, %s__TOOL)", name, name)
		}
		switch {
		case len(s.Command) > 0 && s.URL != "":
			v.add(key, "has both a command and a url; a server is one or the other")
		case len(s.Command) == 0 && s.URL == "":
			v.add(key, "has neither a command (a stdio server) nor a url (a streamable-HTTP server)")
		case len(s.Command) > 0:
			v.mcpStdio(key, s)
		default:
			v.mcpHTTP(key, s)
		}
		if s.Timeout < 0 {
			v.add(key+".timeout", "%v must not be negative", s.Timeout)
		}
	}
}

func (v *validator) mcpStdio(key string, s MCPServer) {
	if strings.TrimSpace(s.Command[0]) == "" {
		v.add(key+".command", "the program (the first word) is empty")
	}
	for i, p := range s.Paths {
		k := fmt.Sprintf("%s.paths[%d]", key, i)
		clean := filepath.Clean(p)
		first, _, _ := strings.Cut(strings.TrimPrefix(clean, "/"), "/")
		switch {
		case !filepath.IsAbs(p):
			v.add(k, "%q is not an absolute path", p)
		case clean == "/":
			v.add(k, "the host's root cannot be given to a server; name the directories it needs")
		case first == "workspace" || first == "proc" || first == "dev":
			v.add(k, "%s is the sandbox's own /%s", p, first)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(s.Env)) {
		if !envName.MatchString(name) {
			v.add(key+".env."+name, "%q is not a variable name (letters, digits and _, not starting with a digit)", name)
		}
	}
	if s.Workspace != "" {
		v.oneOf(key+".workspace", s.Workspace, "own", "channel")
	}
	if len(s.Headers) > 0 {
		v.add(key+".headers", "headers are for a server with a url; a command gets env")
	}
}

func (v *validator) mcpHTTP(key string, s MCPServer) {
	if u, msg := checkHTTPURL(s.URL, false); msg != "" {
		v.add(key+".url", "%s", msg)
	} else if u.User != nil {
		v.add(key+".url", "%q holds a user or password; send the credentials in headers instead", redact.URL(s.URL))
	}
	for _, name := range slices.Sorted(maps.Keys(s.Headers)) {
		if !headerName.MatchString(name) {
			v.add(key+".headers."+name, "%q is not a header name", name)
		}
		if strings.ContainsAny(string(s.Headers[name]), "\r\n") {
			v.add(key+".headers."+name, "contains a line break")
		}
	}
	if len(s.Paths) > 0 || len(s.Env) > 0 || s.Workspace != "" {
		v.add(key, "paths, env and workspace are for a server with a command; a url server runs elsewhere")
	}
}

// mcpRule reports whether rule (as ruleName reads a tools list entry)
// names a configured MCP server's group, or a tool of one: its tools are
// known only once it has started, after the configuration is checked.
func (c *Config) mcpRule(rule string) bool {
	for name := range c.MCP.Servers {
		if rule == "group:mcp:"+name || strings.HasPrefix(rule, name+"__") && len(rule) > len(name)+2 {
			return true
		}
	}
	return false
}
