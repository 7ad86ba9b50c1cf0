package agent

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/firstmate/firstmate/tools"
	"github.com/firstmate/firstmate/tools/skills"
)

// A tool group is tools with the same power: denying one of them while
// another runs the same way is no policy, so rules are usually set for a
// group. A rule's name is a tool's name or "group:NAME"; where a word is
// both (read), people's input means the group unless written "tool:read".
const (
	GroupRead  = "read"  // ls, read, find, grep
	GroupWrite = "write" // write, edit, mkdir, copy, move, delete
	GroupExec  = "exec"  // shell, start, jobs, stop
	GroupWeb   = "web"   // fetch, search
	GroupSend  = "send"  // send_file
	// GroupLater is work that runs later as a new turn, with a stored
	// prompt: schedule, schedules, unschedule, wait, wait_for_job.
	GroupLater = "later"
	// GroupSkills holds no tool: it is every skill's rule (skill:NAME),
	// and the skill tool is in no group (see skills.go).
	GroupSkills = "skills"
)

// groupPrefix marks a group's rule among tool rules.
const groupPrefix = "group:"

// DefaultRule is the rule name of a channel's default mode.
const DefaultRule = "default"

var toolGroups = map[string]string{
	"ls": GroupRead, "read": GroupRead, "find": GroupRead, "grep": GroupRead,
	"write": GroupWrite, "edit": GroupWrite, "mkdir": GroupWrite, "copy": GroupWrite, "move": GroupWrite, "delete": GroupWrite,
	"shell": GroupExec, "start": GroupExec, "jobs": GroupExec, "stop": GroupExec,
	"fetch": GroupWeb, "search": GroupWeb,
	"send_file": GroupSend,
	"schedule":  GroupLater, "schedules": GroupLater, "unschedule": GroupLater, "wait": GroupLater, "wait_for_job": GroupLater,
}

// Groups lists the built-in groups in the order screens show them.
func Groups() []string {
	return []string{GroupRead, GroupWrite, GroupExec, GroupWeb, GroupSend, GroupLater, GroupSkills}
}

// GroupOf is the group a tool belongs to: a built-in group, "mcp:SERVER"
// for a tool "SERVER__NAME" of an MCP server, "skills" for a skill's rule
// skill:NAME, or "" for none.
func GroupOf(tool string) string {
	if g, ok := toolGroups[tool]; ok {
		return g
	}
	if _, ok := IsSkillRule(tool); ok {
		return GroupSkills
	}
	if server, _, ok := strings.Cut(tool, "__"); ok && server != "" {
		return "mcp:" + server
	}
	return ""
}

// GroupRule is the rule name of a group.
func GroupRule(group string) string { return groupPrefix + group }

// IsGroupRule reports whether a rule name is a group's, and which.
func IsGroupRule(rule string) (string, bool) { return strings.CutPrefix(rule, groupPrefix) }

// ParseMode parses allow, ask or deny.
func ParseMode(s string) (ToolMode, error) {
	switch m := ToolMode(strings.ToLower(strings.TrimSpace(s))); m {
	case ToolAllow, ToolAsk, ToolDeny:
		return m, nil
	}
	return "", fmt.Errorf("%q is not a mode; use allow, ask or deny", s)
}

// ParseRuleName turns what a person wrote ("exec", "shell", "group:read",
// "tool:read", "skill:deploy", "default") into a rule name, given the
// tools that exist.
// A bare word that is a group names the group.
func ParseRuleName(s string, known []string) (string, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	isGroup := func(g string) bool {
		if slices.Contains(Groups(), g) {
			return true
		}
		for _, t := range known {
			if GroupOf(t) == g {
				return true
			}
		}
		return false
	}
	switch {
	case s == DefaultRule || s == "*":
		return DefaultRule, nil
	case strings.HasPrefix(s, groupPrefix):
		if g := s[len(groupPrefix):]; isGroup(g) {
			return s, nil
		}
	case strings.HasPrefix(s, "tool:"):
		if t := s[len("tool:"):]; slices.Contains(known, t) {
			return t, nil
		}
	case strings.HasPrefix(s, SkillPrefix):
		// Any valid name: a channel's skills come and go with its files.
		if _, ok := IsSkillRule(s); ok {
			return s, nil
		}
	case isGroup(s):
		return GroupRule(s), nil
	case slices.Contains(known, s):
		return s, nil
	}
	return "", fmt.Errorf("%q is neither a tool here nor a group (%s)", s, strings.Join(Groups(), ", "))
}

// RuleLabel is how a rule name is shown to people: "exec (group)", "shell".
func RuleLabel(rule string) string {
	if g, ok := IsGroupRule(rule); ok {
		return g + " (group)"
	}
	return rule
}

// Rule is one stored policy entry of a channel.
type Rule struct {
	Mode ToolMode  `json:"mode"`
	By   string    `json:"by,omitempty"` // who set it
	At   time.Time `json:"at"`
}

// PolicyDefaults is the configured policy every channel starts from: rules
// by rule name, and the mode of tools no rule names.
type PolicyDefaults struct {
	Default ToolMode
	Rules   map[string]ToolMode
}

// Policy is a channel's effective policy: the configured defaults overlaid
// by the channel's stored rules (a stored rule replaces the configured rule
// of the same name). For one tool, the most specific rule wins: the tool's
// own, then its group's, then the default.
type Policy struct {
	Channel  SessionKey
	Version  int64 // of the channel's stored settings; 0 if none
	defaults PolicyDefaults
	stored   map[string]Rule
}

// NewPolicy resolves a channel's policy.
func NewPolicy(channel SessionKey, defaults PolicyDefaults, s ChannelSettings) *Policy {
	if defaults.Default == "" {
		defaults.Default = ToolAllow
	}
	return &Policy{Channel: channel.Channel(), Version: s.Version, defaults: defaults, stored: s.Tools}
}

// Reason says why a tool has its mode in a channel.
type Reason struct {
	Mode  ToolMode
	Rule  string    // the rule that decided: a tool, group:NAME or default
	Layer string    // "channel" (set by an admin here) or "config"
	By    string    // who set a channel rule
	At    time.Time // when
}

// Mode is the tool's mode in the channel.
func (p *Policy) Mode(tool string) ToolMode { return p.Why(tool).Mode }

// Why says which rule decides the tool's mode.
func (p *Policy) Why(tool string) Reason {
	names := []string{tool}
	if g := GroupOf(tool); g != "" {
		names = append(names, GroupRule(g))
	}
	names = append(names, DefaultRule)
	for _, n := range names {
		if r, ok := p.stored[n]; ok {
			return Reason{Mode: r.Mode, Rule: n, Layer: "channel", By: r.By, At: r.At}
		}
		if n == DefaultRule {
			return Reason{Mode: p.defaults.Default, Rule: n, Layer: "config"}
		}
		if m, ok := p.defaults.Rules[n]; ok {
			return Reason{Mode: m, Rule: n, Layer: "config"}
		}
	}
	panic("unreachable")
}

// Stored returns the channel's own rules.
func (p *Policy) Stored() map[string]Rule { return maps.Clone(p.stored) }

// OtherGroup is where a [PolicyView] puts tools of no group (the skill
// tool): a heading, not a group a rule can name.
const OtherGroup = "other"

// View describes the policy for a screen (a Slack modal, a Telegram
// keyboard): the built-in groups in [Groups] order, then a group per MCP
// server (mcp:SERVER) and [OtherGroup], each with its known tools. The
// skills group lists one row per skill, named by its rule (skill:NAME):
// the skills given (those the channel has) and any a rule names, so a rule
// about a skill that is gone can still be seen and changed. A group with
// no row is left out. editable says whether the person it is for may
// change it.
func (p *Policy) View(known, skillNames []string, editable bool) PolicyView {
	v := PolicyView{Channel: p.Channel, Version: p.Version, Editable: editable, Default: p.Why("\x00")}
	byGroup := map[string][]string{}
	var order []string
	for _, g := range Groups() {
		byGroup[g] = nil
		order = append(order, g)
	}
	for _, t := range known {
		g := GroupOf(t)
		if g == "" {
			g = OtherGroup
		}
		if _, ok := byGroup[g]; !ok {
			order = append(order, g)
		}
		byGroup[g] = append(byGroup[g], t)
	}
	byGroup[GroupSkills] = p.skillRows(skillNames)
	for _, g := range order {
		gv := GroupView{Name: g}
		if r, ok := p.stored[GroupRule(g)]; ok {
			gv.Rule = &Reason{Mode: r.Mode, Rule: GroupRule(g), Layer: "channel", By: r.By, At: r.At}
		} else if m, ok := p.defaults.Rules[GroupRule(g)]; ok {
			gv.Rule = &Reason{Mode: m, Rule: GroupRule(g), Layer: "config"}
		}
		for _, t := range byGroup[g] {
			gv.Tools = append(gv.Tools, ToolView{Name: t, Reason: p.Why(t)})
		}
		if len(gv.Tools) > 0 {
			v.Groups = append(v.Groups, gv)
		}
	}
	return v
}

// skillRows are the rule names of the skills given and of those a rule
// names (here or in the config), sorted, each once.
func (p *Policy) skillRows(names []string) []string {
	var rows []string
	for _, n := range names {
		if r := SkillRule(n); isSkill(r) {
			rows = append(rows, r)
		}
	}
	for r := range p.stored {
		if isSkill(r) {
			rows = append(rows, r)
		}
	}
	for r := range p.defaults.Rules {
		if isSkill(r) {
			rows = append(rows, r)
		}
	}
	slices.Sort(rows)
	return slices.Compact(rows)
}

func isSkill(rule string) bool {
	_, ok := IsSkillRule(rule)
	return ok
}

// Leaks lists, for the tools known, each tool left more open than a tool
// of its group that a rule restricts: "shell is deny, but start is allow
// (both exec)". A person setting a rule is shown these, and the config
// check warns with them.
func (p *Policy) Leaks(known []string) []string {
	var out []string
	byGroup := map[string][]string{}
	for _, t := range known {
		if g := GroupOf(t); g != "" {
			byGroup[g] = append(byGroup[g], t)
		}
	}
	for _, g := range slices.Sorted(maps.Keys(byGroup)) {
		ts := byGroup[g]
		slices.Sort(ts)
		for _, t := range ts {
			why := p.Why(t)
			if why.Rule != t || why.Mode == ToolAllow {
				continue // only a tool's own restricting rule can be undone by its group
			}
			for _, o := range ts {
				if o != t && strictness(p.Mode(o)) < strictness(why.Mode) {
					out = append(out, fmt.Sprintf("%s is %s, but %s is %s (both %s): set the group instead, %s=%s", t, why.Mode, o, p.Mode(o), g, g, why.Mode))
				}
			}
		}
	}
	return out
}

func strictness(m ToolMode) int {
	switch m {
	case ToolDeny:
		return 2
	case ToolAsk:
		return 1
	}
	return 0
}

// skillCatalog is a [SkillLister] that can say which skills a channel has
// (tools/skills' Catalog): the policy screens list them.
type skillCatalog interface {
	Available(ctx context.Context, ws *tools.Workspace) ([]skills.Skill, []skills.Problem)
}

// channelSkills names the skills a turn in chat's channel could load
// before policy: the configured ones and the channel's own, read from its
// workspace if it has one (a screen does not create it). nil when this bot
// offers no skills.
func (d *Dispatcher) channelSkills(ctx context.Context, chat SessionKey) []string {
	if d.skillTool() == "" {
		return nil
	}
	cat, ok := d.cfg.Loop.Skills.(skillCatalog)
	if !ok {
		return nil
	}
	var ws *tools.Workspace
	name := chat.Channel().String()
	if d.cfg.WorkspaceDir != "" {
		if _, err := os.Stat(tools.WorkspacePath(d.cfg.WorkspaceDir, name)); err == nil {
			if w, err := tools.OpenWorkspace(d.cfg.WorkspaceDir, name, d.cfg.Workspace...); err == nil {
				defer w.Close()
				ws = w
			} else {
				d.log.Warn("open workspace for the policy screen", "chat", name, "err", err)
			}
		}
	}
	list, _ := cat.Available(ctx, ws)
	names := make([]string, 0, len(list))
	for _, sk := range list {
		names = append(names, sk.Name)
	}
	return names
}
