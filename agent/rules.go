package agent

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/firstmate/firstmate/tools"
	"github.com/firstmate/firstmate/tools/skills"
)

// The vocabulary of a channel's policy, shared by the core, the gate
// (agent/govern) that resolves it, the stores that keep it and the
// screens that show it.
//
// Per channel, each tool is allow, ask or deny, set for a tool, for a
// group of tools with the same power, or by default; a tool declares its
// power where it is defined (tools.Power), so no list here names tools.
// A rule's name is a tool's name, "group:NAME" or "default"; where a word
// is both (read), people's input means the group unless written
// "tool:read". A skill's rule is "skill:NAME".

// ToolMode is a channel's policy for one tool.
type ToolMode string

const (
	ToolAllow ToolMode = "allow"
	ToolAsk   ToolMode = "ask"
	ToolDeny  ToolMode = "deny"
)

// ParseMode parses allow, ask or deny.
func ParseMode(s string) (ToolMode, error) {
	switch m := ToolMode(strings.ToLower(strings.TrimSpace(s))); m {
	case ToolAllow, ToolAsk, ToolDeny:
		return m, nil
	}
	return "", fmt.Errorf("%q is not a mode; use allow, ask or deny", s)
}

// The built-in groups: the built-in powers of tools.
const (
	GroupRead  = string(tools.PowerRead)
	GroupWrite = string(tools.PowerWrite)
	GroupExec  = string(tools.PowerExec)
	GroupWeb   = string(tools.PowerWeb)
	GroupSend  = string(tools.PowerSend)
	GroupLater = string(tools.PowerLater)
	// GroupSkills is every skill's rule (skill:NAME falls back to it), and
	// the power of the tool that loads skills; that tool's own mode is its
	// rule or the default, so that "skills=deny skill:deploy=allow" lets
	// a channel load deploy and nothing else.
	GroupSkills = string(tools.PowerSkills)
)

// Groups lists the built-in groups in the order screens show them.
func Groups() []string {
	ps := tools.Powers()
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = string(p)
	}
	return out
}

// groupPrefix marks a group's rule among tool rules.
const groupPrefix = "group:"

// DefaultRule is the rule name of a channel's default mode.
const DefaultRule = "default"

// GroupRule is the rule name of a group.
func GroupRule(group string) string { return groupPrefix + group }

// IsGroupRule reports whether a rule name is a group's, and which.
func IsGroupRule(rule string) (string, bool) { return strings.CutPrefix(rule, groupPrefix) }

// RuleLabel is how a rule name is shown to people: "exec (group)", "shell".
func RuleLabel(rule string) string {
	if g, ok := IsGroupRule(rule); ok {
		return g + " (group)"
	}
	return rule
}

// SkillPrefix starts a skill's rule name.
const SkillPrefix = "skill:"

// SkillRule is the rule name of the skill called name.
func SkillRule(name string) string { return string(tools.SkillPower(name)) }

// IsSkillRule reports whether rule names a skill, and which: "skill:" and
// a valid skill name, in lower case.
func IsSkillRule(rule string) (string, bool) {
	name, ok := strings.CutPrefix(rule, SkillPrefix)
	if !ok || name != strings.ToLower(name) || skills.ValidName(name) != nil {
		return "", false
	}
	return name, true
}

// Rule is one stored policy entry of a channel.
type Rule struct {
	Mode ToolMode  `json:"mode"`
	By   string    `json:"by,omitempty"` // who set it
	At   time.Time `json:"at"`
}

// ChannelSettings are a channel's stored overrides of the configured
// defaults. Version increments on every write.
type ChannelSettings struct {
	Version int64 `json:"version"`
	// Tools holds the channel's policy rules by rule name: a tool, a
	// group ("group:exec") or "default".
	Tools map[string]Rule `json:"tools,omitempty"`
	// TimeZone is the channel's time zone (an IANA name such as
	// Asia/Tokyo): crons and times written without an offset are read in
	// it, and schedules are shown in it. Empty: the configured zone.
	TimeZone string `json:"time_zone,omitempty"`
}

// PolicyChange is an edit of a channel's stored rules.
type PolicyChange struct {
	// Version is the stored version the change was made against; the write
	// fails with ErrVersionConflict if another came first. -1: whatever is
	// stored now (a text command names its rules whole).
	Version int64
	// Set maps rule names (a tool, group:NAME, default) to a mode; an
	// empty mode removes the channel's rule, so the configured one applies.
	Set map[string]ToolMode
	// Reset removes every rule of the channel first.
	Reset bool
}

// String says the change in rule=mode words; "rule=default" drops the
// channel's rule.
func (c PolicyChange) String() string {
	var parts []string
	if c.Reset {
		parts = append(parts, "reset")
	}
	for _, rule := range slices.Sorted(maps.Keys(c.Set)) {
		mode := string(c.Set[rule])
		if mode == "" {
			mode = "default"
		}
		parts = append(parts, rule+"="+mode)
	}
	return strings.Join(parts, " ")
}

// Reason says why a tool has its mode in a channel.
type Reason struct {
	Mode  ToolMode
	Rule  string    // the rule that decided: a tool, group:NAME or default
	Layer string    // "channel" (set by an admin here) or "config"
	By    string    // who set a channel rule
	At    time.Time // when
}

// PolicyView describes a channel's tool policy: for the screens that show
// it and, when Editable, change it. Groups come in [Groups] order, then a
// group per MCP server (mcp:SERVER).
type PolicyView struct {
	Channel  SessionKey
	Version  int64
	Editable bool // the person it is for may change it
	Default  Reason
	Groups   []GroupView
}

// GroupView is one group of tools in a [PolicyView].
type GroupView struct {
	Name  string
	Rule  *Reason // the group's own rule, if one is set (here or in config)
	Tools []ToolView
}

// ToolView is one tool in a [PolicyView] (in the skills group, a skill's
// rule skill:NAME).
type ToolView struct {
	Name   string
	Reason Reason // its effective mode and why
}

// ErrNotAdmin is returned when someone who is not an admin (here) tries to
// change what only admins may.
var ErrNotAdmin = errors.New("only an admin can change this")
