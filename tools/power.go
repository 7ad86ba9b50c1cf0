package tools

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Power is what a tool can do: the policy group it belongs to. Every tool
// declares its own where it is defined (see [New]); a channel's policy
// sets allow, ask or deny for a tool or for a power, so a tool added later
// is governed with the others of its power without anyone listing it.
//
// A power is a built-in one ([Powers]), "mcp:SERVER" for the tools of an
// MCP server, or "skill:NAME", which only a call needs (see [Scoped]): a
// skill is governed by its own rule, then the skills power's.
type Power string

// The built-in powers, in the order screens show them.
const (
	PowerRead  Power = "read"  // look at the workspace's files
	PowerWrite Power = "write" // change them
	PowerExec  Power = "exec"  // run commands (which can do both, in the sandbox)
	PowerWeb   Power = "web"   // reach the network
	PowerSend  Power = "send"  // post files into the chat
	// PowerLater is work that runs later as a new turn, with a stored
	// prompt (schedules, waits).
	PowerLater Power = "later"
	// PowerSkills is the skills' power: the rule of every skill:NAME, and
	// the power of the tool that loads them.
	PowerSkills Power = "skills"
)

// Powers lists the built-in powers in the order screens show them.
func Powers() []Power {
	return []Power{PowerRead, PowerWrite, PowerExec, PowerWeb, PowerSend, PowerLater, PowerSkills}
}

const (
	mcpPrefix   = "mcp:"
	skillPrefix = "skill:"
)

// MCPPower is the power of an MCP server's tools.
func MCPPower(server string) Power { return Power(mcpPrefix + server) }

// SkillPower is what a call that loads the skill called name needs.
func SkillPower(name string) Power { return Power(skillPrefix + strings.ToLower(name)) }

// Skill reports whether p is a skill's power, and the skill's name.
func (p Power) Skill() (string, bool) { return strings.CutPrefix(string(p), skillPrefix) }

// Validate reports whether a tool may declare p: a built-in power or an
// MCP server's (a skill's power is a call's need, not a tool's).
func (p Power) Validate() error {
	for _, b := range Powers() {
		if p == b {
			return nil
		}
	}
	if server, ok := strings.CutPrefix(string(p), mcpPrefix); ok && server != "" && !strings.ContainsAny(server, ": \t\n") {
		return nil
	}
	return fmt.Errorf("tools: %q is not a power (one of %v, or mcp:SERVER)", p, Powers())
}

// Scoped is a tool whose calls need more than its own power, depending on
// their arguments: the skill tool needs skill:NAME to load a skill's
// instructions, and also read for another of its files. The policy of a
// call is the strictest of what it needs; a call a tool cannot read needs
// nothing more (it fails in the tool).
type Scoped interface {
	Needs(args json.RawMessage) []Power
}
