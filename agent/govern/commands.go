package govern

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/tools"
)

// RunCommand implements [agent.CommandRunner]: the commands that govern
// (agent.Commands says which are the gate's).
func (g *Gate) RunCommand(ctx context.Context, name string, in agent.Inbound, args string) (agent.Notice, error) {
	switch name {
	case "tools":
		return g.toolsCommand(ctx, in, args)
	case "why":
		return g.whyCommand(ctx, in, args)
	case "usage":
		return g.usageCommand(ctx, in)
	case "pair":
		return text(g.pairCommand(ctx, in, args))
	case "jobs":
		return text(g.jobsCommand(ctx, in, args))
	}
	return agent.Notice{}, fmt.Errorf("%w command %q: not the gate's", agent.ErrInvalid, name)
}

func text(s string, err error) (agent.Notice, error) { return agent.Notice{Text: s}, err }

// toolsCommand shows the channel's policy or, with rules, changes it.
func (g *Gate) toolsCommand(ctx context.Context, in agent.Inbound, args string) (agent.Notice, error) {
	if strings.TrimSpace(args) == "" {
		v, err := g.Policy(ctx, in.Key, in.User)
		if err != nil {
			return agent.Notice{}, err
		}
		s := describePolicy(v)
		if p, err := g.policy(ctx, in.Key); err == nil {
			s += skillRules(p)
		}
		return agent.Notice{Text: s, Policy: &v}, nil
	}
	change := agent.PolicyChange{Version: -1, Set: map[string]agent.ToolMode{}}
	known := g.known()
	for _, f := range strings.Fields(args) {
		name, mode, ok := strings.Cut(f, "=")
		if !ok {
			return text(fmt.Sprintf("%q is not rule=mode; write it like exec=ask.", f), nil)
		}
		rule, err := ParseRuleName(name, known)
		if err != nil {
			return text(err.Error()+".", nil)
		}
		if strings.EqualFold(mode, "default") || strings.EqualFold(mode, "inherit") {
			change.Set[rule] = ""
			continue
		}
		m, err := agent.ParseMode(mode)
		if err != nil {
			return text(err.Error()+".", nil)
		}
		change.Set[rule] = m
	}
	v, err := g.SetPolicy(ctx, in.Key, in.User, change)
	switch {
	case errors.Is(err, agent.ErrNotAdmin):
		return text("Only an admin can change this channel's tools. Send tools to see them, or why TOOL.", nil)
	case err != nil:
		return agent.Notice{}, err
	}
	reply := "Saved. " + describePolicy(v)
	if p, err := g.policy(ctx, in.Key); err == nil {
		reply += skillRules(p)
		for _, l := range p.Leaks() {
			reply += "\nNote: " + l
		}
	}
	return agent.Notice{Text: reply, Policy: &v}, nil
}

func (g *Gate) whyCommand(ctx context.Context, in agent.Inbound, args string) (agent.Notice, error) {
	if args == "" {
		return text("Say which tool: why shell", nil)
	}
	p, err := g.policy(ctx, in.Key)
	if err != nil {
		return agent.Notice{}, err
	}
	name := strings.ToLower(strings.TrimSpace(args))
	if skill, ok := agent.IsSkillRule(name); ok {
		return text(explainSkill(p, skill, g.skillTool()), nil)
	}
	return text(explain(p, name), nil)
}

func (g *Gate) usageCommand(ctx context.Context, in agent.Inbound) (agent.Notice, error) {
	used, err := g.cfg.Store.Usage(ctx, in.Key.Channel(), today())
	if err != nil {
		return agent.Notice{}, fmt.Errorf("read usage: %w", err)
	}
	s := fmt.Sprintf("This channel used %d model tokens today (UTC)", used)
	if lim := g.cfg.Budgets.ChannelTokensPerDay; lim > 0 {
		s += fmt.Sprintf(" of its %d a day", lim)
	} else {
		s += "; it has no daily budget"
	}
	s += "."
	if lim := g.cfg.Budgets.UserMessagesPerMinute; lim > 0 {
		s += fmt.Sprintf(" A person may send me %d messages a minute.", lim)
	}
	return text(s, nil)
}

// pairCommand is an admin sending a pairing code to the bot.
func (g *Gate) pairCommand(ctx context.Context, in agent.Inbound, code string) (string, error) {
	if !agent.IsCode(code) {
		return "Send the code as it was given, like: pair K7QP-M2XD", nil
	}
	if !g.globalAdmin(in.Key.Platform, in.User) {
		return "Only an admin can approve a pairing code.", nil
	}
	p, err := ApprovePairing(ctx, g.cfg.Store, code, AuditUser(in.Key.Platform, in.User.ID))
	if errors.Is(err, agent.ErrNotFound) {
		return "That code is unknown or expired. Codes last " + g.cfg.PairingTTL.Round(time.Minute).String() + "; the person gets a new one when they write again.", nil
	}
	if err != nil {
		return "", fmt.Errorf("approve pairing: %w", err)
	}
	what := "user " + p.ID
	if p.Kind == GrantChat {
		what = "chat " + p.ID
	}
	return fmt.Sprintf("Approved: %s%s may talk to me now.", what, nameSuffix(p.Name)), nil
}

// jobsCommand lists the channel's background jobs, or ("jobs stop N")
// asks one to stop: an admin's, or its starter's, whatever the channel's
// policy says of exec, whose tools (start, jobs, stop) it may deny.
func (g *Gate) jobsCommand(ctx context.Context, in agent.Inbound, args string) (string, error) {
	if g.cfg.Jobs == nil {
		return "There are no background jobs here (this bot runs no shell, or its store keeps no job board).", nil
	}
	space := tools.JobSpace(in.Key.Channel().String())
	all, err := g.cfg.Jobs.Jobs(ctx, space)
	if err != nil {
		return "", fmt.Errorf("list jobs: %w", err)
	}
	verb, rest, _ := strings.Cut(strings.TrimSpace(args), " ")
	if verb == "" {
		return describeJobs(all), nil
	}
	if !strings.EqualFold(verb, "stop") {
		return "Send jobs to list this channel's jobs, or jobs stop ID to stop one.", nil
	}
	id, err := tools.ParseJobID(rest)
	if err != nil {
		return "Say which job: jobs stop ID (jobs lists them).", nil
	}
	i := slices.IndexFunc(all, func(j tools.Job) bool { return j.ID == id })
	if i < 0 {
		return fmt.Sprintf("This channel has no job %d; jobs lists them.", id), nil
	}
	j := all[i]
	if !j.Running() {
		return fmt.Sprintf("Job %d has ended already (%s).", id, j.State), nil
	}
	if j.User != in.User.ID && !g.Admin(ctx, in.Key, in.User) {
		return fmt.Sprintf("Only %s, who started job %d, or an admin can stop it.", orSomeone(j.UserName, j.User), id), nil
	}
	by := AuditUser(in.Key.Platform, in.User.ID)
	if err := g.cfg.Jobs.AskStop(ctx, space, id, by); err != nil {
		return "", fmt.Errorf("stop job %d: %w", id, err)
	}
	g.audit(ctx, AuditEntry{Action: AuditJobStopped, Platform: in.Key.Platform, Channel: in.Key.Channel().String(), User: by,
		Tool: "job", Args: agent.Shorten(j.Command, 200), Outcome: "asked", Detail: fmt.Sprintf("job %d from chat", id)})
	return fmt.Sprintf("Asked job %d to stop; it stops within a few seconds.", id), nil
}

func orSomeone(name, id string) string {
	switch {
	case name != "":
		return name
	case id != "":
		return id
	}
	return "the person"
}

// describeJobs lists jobs for people, the running ones first.
func describeJobs(all []tools.Job) string {
	if len(all) == 0 {
		return "This channel has no background jobs."
	}
	var b strings.Builder
	b.WriteString("Background jobs here:")
	for _, running := range []bool{true, false} {
		for _, j := range all {
			if j.Running() != running {
				continue
			}
			state := "running"
			if !running {
				state = j.State
			}
			fmt.Fprintf(&b, "\n• %d %s: %s", j.ID, state, agent.Shorten(oneLine(j.Command), 120))
			if j.UserName != "" || j.User != "" {
				fmt.Fprintf(&b, " (by %s)", orSomeone(j.UserName, j.User))
			}
		}
	}
	b.WriteString("\nStop one with: jobs stop ID (its starter or an admin).")
	return b.String()
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// maxDescribed bounds the tools (or skills: a channel may have hundreds)
// listed for one group, so the answer stays one message.
const maxDescribed = 25

// describePolicy says a channel's policy in words.
func describePolicy(v agent.PolicyView) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Tool policy here (default %s, %s):", v.Default.Mode, source(v.Default))
	for _, g := range v.Groups {
		fmt.Fprintf(&b, "\n• %s:", g.Name)
		for i, t := range g.Tools {
			if i == maxDescribed {
				fmt.Fprintf(&b, " and %d more", len(g.Tools)-i)
				break
			}
			fmt.Fprintf(&b, " %s=%s", t.Name, t.Reason.Mode)
		}
		if g.Rule != nil {
			fmt.Fprintf(&b, " (group rule %s, %s)", g.Rule.Mode, source(*g.Rule))
		}
	}
	if v.Editable {
		b.WriteString("\nChange it with: tools exec=ask web=deny (a group or a tool; =default removes this channel's rule).")
	} else {
		b.WriteString("\nOnly an admin can change it.")
	}
	return b.String()
}

// source says who set a rule.
func source(r agent.Reason) string {
	if r.Layer == "channel" {
		s := "set here"
		if r.By != "" {
			s += " by " + r.By
		}
		if !r.At.IsZero() {
			s += " on " + r.At.UTC().Format("2006-01-02 15:04 UTC")
		}
		return s
	}
	if r.Rule == agent.DefaultRule {
		return "the configured default"
	}
	return "configured"
}

// explain answers "why TOOL".
func explain(p *Policy, tool string) string {
	var known []string
	if p.tools != nil {
		known = p.tools.Known()
	}
	if !slices.Contains(known, tool) {
		return fmt.Sprintf("There is no tool %q here. Tools: %s.", tool, strings.Join(known, ", "))
	}
	why := p.Why(tool)
	var b strings.Builder
	verb := map[agent.ToolMode]string{agent.ToolAllow: "is allowed", agent.ToolAsk: "needs a person's approval each time", agent.ToolDeny: "is not allowed"}[why.Mode]
	fmt.Fprintf(&b, "%s %s here: ", tool, verb)
	switch {
	case why.Rule == agent.DefaultRule:
		fmt.Fprintf(&b, "no rule names it or its group, so the default (%s, %s) applies.", why.Mode, source(why))
	default:
		fmt.Fprintf(&b, "the rule %s=%s, %s.", agent.RuleLabel(why.Rule), why.Mode, source(why))
	}
	if g := GroupOf(p.tools, tool); g != "" {
		fmt.Fprintf(&b, " It is in the %s group.", g)
	}
	return b.String()
}

// explainSkill answers "why skill:NAME".
func explainSkill(p *Policy, name, tool string) string {
	why := p.Why(agent.SkillRule(name))
	verb := map[agent.ToolMode]string{agent.ToolAllow: "may be used", agent.ToolAsk: "needs a person's approval each time it is loaded", agent.ToolDeny: "may not be used"}[why.Mode]
	var b strings.Builder
	fmt.Fprintf(&b, "The skill %s %s here: ", name, verb)
	if why.Rule == agent.DefaultRule {
		fmt.Fprintf(&b, "no rule names it or the skills group, so the default (%s, %s) applies.", why.Mode, source(why))
	} else {
		fmt.Fprintf(&b, "the rule %s=%s, %s.", agent.RuleLabel(why.Rule), why.Mode, source(why))
	}
	if tool == "" {
		b.WriteString(" But this bot offers no skills.")
	} else if tw := p.Why(tool); tw.Mode == agent.ToolDeny && why.Mode != agent.ToolDeny {
		fmt.Fprintf(&b, " But the %s tool, which loads skills, is not allowed here (the rule %s=deny), so no skill can be used.", tool, agent.RuleLabel(tw.Rule))
	}
	if r := p.whyPower(tools.PowerRead); r.Mode != agent.ToolAllow {
		fmt.Fprintf(&b, " Its other files need read too, which is %s here.", r.Mode)
	}
	return b.String()
}

// skillRules says the channel's rules about skills in words, for the tools
// command ("" when there are none): the screens show tools, not these.
func skillRules(p *Policy) string {
	rules := map[string]agent.Reason{}
	for name, m := range p.defaults.Rules {
		if isSkill(name) || name == agent.GroupRule(agent.GroupSkills) {
			rules[name] = agent.Reason{Mode: m, Rule: name, Layer: "config"}
		}
	}
	for name, r := range p.stored {
		if isSkill(name) || name == agent.GroupRule(agent.GroupSkills) {
			rules[name] = agent.Reason{Mode: r.Mode, Rule: name, Layer: "channel", By: r.By, At: r.At}
		}
	}
	if len(rules) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\nSkills:")
	if r, ok := rules[agent.GroupRule(agent.GroupSkills)]; ok {
		fmt.Fprintf(&b, " all skills=%s (%s);", r.Mode, source(r))
	}
	for _, name := range slices.Sorted(maps.Keys(rules)) {
		if s, ok := agent.IsSkillRule(name); ok {
			r := rules[name]
			fmt.Fprintf(&b, " %s=%s (%s);", s, r.Mode, source(r))
		}
	}
	return strings.TrimSuffix(b.String(), ";") + ". Change them with tools skills=deny or tools skill:NAME=allow."
}
