package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/firstmate/firstmate/adapters/console"
	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/agent/govern"
	"github.com/firstmate/firstmate/internal/config"
	"github.com/firstmate/firstmate/store/local"
	"github.com/firstmate/firstmate/tools"
	"github.com/firstmate/firstmate/tools/shell"
)

// `firstmate admin` changes from a terminal what admins change in chat
// (a channel's tool policy, who may talk to the bot, pairing codes), lists
// and stops a channel's background jobs, and reads the audit log, against
// the store serve uses. Every change goes through the same functions as a
// change made in chat (govern.ChangePolicy, govern.AllowAccess, …), so it is
// validated and audited the same way, by "cli:" and the name of the user
// who ran it; a job is stopped through the board, as the stop tool stops
// one on another replica, and audited here.

const adminUsage = `Usage: firstmate admin COMMAND [--config FILE] [-v]

  policy show  CHANNEL                 a channel's tool policy: each tool's mode and the rule that decides it
  policy set   CHANNEL RULE=MODE ...   set the channel's rules; MODE is allow, ask or deny,
                                       or default to drop the channel's rule and follow the config
  policy reset CHANNEL                 drop all the channel's rules
  access list  [PLATFORM]              who may talk to the bot: the config's lists and stored grants
  access allow PLATFORM user|chat ID [--name NAME]
  access revoke PLATFORM user|chat ID
  pair list                            pairing codes waiting for an admin
  pair approve CODE                    let in who was given CODE
  jobs list    CHANNEL                 a channel's background jobs, on every replica
  jobs stop    CHANNEL ID              ask the replica running job ID to stop it (even with exec denied)
  audit [--channel CHANNEL] [--since 24h|2006-01-02T15:04:05Z] [--limit N] [--json]

CHANNEL is slack:TEAM:CHANNEL (slack:T0123ABC:C0456DEF), telegram:CHAT (telegram:-1001234567890),
console (the terminal chat), or a session key as logs print it (slack:T0123ABC:C0456DEF:1700000000.000100).
RULE is a tool (shell), a group (exec, or group:exec; read, write, exec, web, send, mcp:SERVER),
tool:NAME for a tool named like a group (tool:read), or default (tools no other rule names).

Examples:
  firstmate admin policy set slack:T0123ABC:C0456DEF exec=ask web=deny
  firstmate admin access allow telegram user 123456789 --name Ann
  firstmate admin jobs stop slack:T0123ABC:C0456DEF 3
  firstmate admin audit --channel telegram:-1001234567890 --since 24h

--config FILE and -v (--verbose) are as for every command; see firstmate -h.
`

// adminDefaultLimit is how many audit entries admin audit prints unless
// told: a screenful or two.
const adminDefaultLimit = 100

// usageError is a command line that does not fit adminUsage.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{fmt.Sprintf(format, args...)}
}

// cmdAdmin runs `firstmate admin ARGS`.
func cmdAdmin(ctx context.Context, c *cli, args []string) error {
	stderr := c.stderr
	err := admin(ctx, c, args)
	if ue := (*usageError)(nil); errors.As(err, &ue) {
		fmt.Fprintf(stderr, "firstmate admin: %s\n\n%s", ue.msg, adminUsage)
		return errUsage
	}
	return err
}

// adminCommand is one leaf of the admin command tree.
type adminCommand struct {
	path string // "policy set"
	// args is how many positional arguments it takes: at least min, at
	// most max (-1: any number).
	min, max int
	flags    func(fs *flag.FlagSet) // its own flags, besides --config
	run      func(a *adminRun, ctx context.Context, args []string) error
}

// adminRun is what a command runs with.
type adminRun struct {
	cfg   *config.Config
	st    store
	out   io.Writer
	by    string     // who is recorded for changes: "cli:NAME"
	known *tools.Set // every tool a policy may name, with its power
	fs    *flag.FlagSet
}

var adminCommands = []adminCommand{
	{path: "policy show", min: 1, max: 1, run: (*adminRun).policyShow},
	{path: "policy set", min: 2, max: -1, run: (*adminRun).policySet},
	{path: "policy reset", min: 1, max: 1, run: (*adminRun).policyReset},
	{path: "access list", min: 0, max: 1, run: (*adminRun).accessList},
	{path: "access allow", min: 3, max: 3, flags: func(fs *flag.FlagSet) { fs.String("name", "", "the user's or chat's name, shown in lists") }, run: (*adminRun).accessAllow},
	{path: "access revoke", min: 3, max: 3, run: (*adminRun).accessRevoke},
	{path: "pair list", min: 0, max: 0, run: (*adminRun).pairList},
	{path: "pair approve", min: 1, max: 1, run: (*adminRun).pairApprove},
	{path: "jobs list", min: 1, max: 1, run: (*adminRun).jobsList},
	{path: "jobs stop", min: 2, max: 2, run: (*adminRun).jobsStop},
	{path: "audit", min: 0, max: 0, flags: func(fs *flag.FlagSet) {
		fs.String("channel", "", "only this channel's entries")
		fs.String("since", "", "only entries since this long ago (24h) or this time (RFC 3339)")
		fs.Int("limit", adminDefaultLimit, "at most this many entries, the newest")
		fs.Bool("json", false, "one JSON object per line")
	}, run: (*adminRun).audit},
}

func admin(ctx context.Context, c *cli, args []string) error {
	stdout := c.stdout
	// The common flags may come before the command's words too.
	lead := flag.NewFlagSet("firstmate admin", flag.ContinueOnError)
	lead.SetOutput(io.Discard)
	c.register(lead)
	if err := lead.Parse(args); errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, adminUsage)
		return nil
	} else if err != nil {
		return usagef("%v", err)
	}
	args = lead.Args()
	if len(args) == 0 {
		return usagef("which command?")
	}
	if args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(stdout, adminUsage)
		return nil
	}
	var cmd *adminCommand
	rest := args
	for i := range adminCommands {
		c := &adminCommands[i]
		words := strings.Fields(c.path)
		if len(args) >= len(words) && slices.Equal(args[:len(words)], words) {
			cmd, rest = c, args[len(words):]
			break
		}
	}
	if cmd == nil {
		if len(args) > 1 && slices.Contains([]string{"policy", "access", "pair", "jobs"}, args[0]) {
			return usagef("unknown command %q", args[0]+" "+args[1])
		}
		return usagef("unknown command %q", args[0])
	}

	fs := commonFlags(c, "admin "+cmd.path, "")
	if cmd.flags != nil {
		cmd.flags(fs)
	}
	fs.Usage = func() {}
	pos, err := parseInterspersed(fs, rest)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, adminUsage)
		return nil
	}
	if err != nil {
		return usagef("%s: %v", cmd.path, err)
	}
	if len(pos) < cmd.min || (cmd.max >= 0 && len(pos) > cmd.max) {
		return usagef("%s: wrong number of arguments", cmd.path)
	}

	// The LLM settings are not needed here: Load does not ask for them.
	cfg, err := c.load()
	if err != nil {
		return err
	}
	known, err := knownTools(cfg)
	if err != nil {
		return err
	}
	a := &adminRun{cfg: cfg, out: stdout, by: "cli:" + whoRuns(), known: known, fs: fs}
	// Check what can be checked before opening the store, so that a typo
	// does not wait for Redis or for the embedded store's lock.
	if err := a.check(cmd.path, pos); err != nil {
		return err
	}
	st, _, err := openStore(ctx, cfg)
	if errors.Is(err, local.ErrInUse) {
		return fmt.Errorf("%w\nA running firstmate (serve or chat) holds the embedded store; stop it first, or run firstmate with Redis (REDIS_URL) to administer it while it runs", err)
	}
	if err != nil {
		return err
	}
	defer st.Close()
	a.st = st
	return cmd.run(a, ctx, pos)
}

// check validates positional arguments that need no store.
func (a *adminRun) check(path string, args []string) error {
	switch path {
	case "policy show", "policy reset", "jobs list":
		_, err := parseChannel(args[0])
		return err
	case "jobs stop":
		if _, err := parseChannel(args[0]); err != nil {
			return err
		}
		_, err := parseJobID(args[1])
		return err
	case "policy set":
		if _, err := parseChannel(args[0]); err != nil {
			return err
		}
		_, err := a.parseRules(args[1:])
		return err
	case "access list":
		if len(args) == 1 {
			return a.checkPlatform(args[0])
		}
	case "access allow", "access revoke":
		if err := a.checkPlatform(args[0]); err != nil {
			return err
		}
		_, err := parseKind(args[1])
		return err
	case "audit":
		_, err := a.auditQuery()
		return err
	}
	return nil
}

// knownTools is every tool firstmate can have with this configuration,
// whether or not this host could run it (the shell's sandbox is not
// probed): the tools a policy may name, each with its power.
func knownTools(cfg *config.Config) (*tools.Set, error) {
	base, opts, err := otherTools(cfg, jobPlace{})
	if err != nil {
		return nil, err
	}
	return tools.NewSet(base, append(opts, shell.Unavailable("the command line does not run commands")...)...), nil
}

// whoRuns names the person at the terminal, for the audit log.
func whoRuns() string {
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return "unknown"
}

// parseInterspersed parses fs's flags wherever they are among args and
// returns the other arguments. A negative number is an argument, not a
// flag: Telegram's group chat IDs are negative. "--" ends the flags.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if arg == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if len(arg) < 2 || arg[0] != '-' || isNumber(arg) {
			pos = append(pos, arg)
			continue
		}
		flags = append(flags, arg)
		name, _, hasValue := strings.Cut(strings.TrimLeft(arg, "-"), "=")
		f := fs.Lookup(name)
		if f == nil || hasValue {
			continue // fs.Parse reports an unknown flag
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			continue
		}
		if i+1 < len(args) {
			i++
			flags = append(flags, args[i])
		}
	}
	if err := fs.Parse(flags); err != nil {
		return nil, err
	}
	return pos, nil
}

func isNumber(s string) bool {
	_, err := strconv.ParseFloat(s, 64)
	return err == nil
}

// channelHelp ends the error about a channel that cannot be read.
const channelHelp = "write slack:TEAM:CHANNEL (slack:T0123ABC:C0456DEF), telegram:CHAT (telegram:-1001234567890), console, or a session key as logs print it (slack:T0123ABC:C0456DEF:1700000000.000100)"

// parseChannel reads a channel as people write it, and returns its key.
func parseChannel(s string) (agent.SessionKey, error) {
	s = strings.TrimSpace(s)
	parts := strings.Split(s, ":")
	var k agent.SessionKey
	switch {
	case s == console.Key.Platform:
		k = console.Key
	case len(parts) == 4:
		var err error
		if k, err = agent.ParseSessionKey(s); err != nil {
			return k, fmt.Errorf("channel %q: %w; %s", s, err, channelHelp)
		}
	case len(parts) == 3 && parts[0] == "slack":
		k = agent.SessionKey{Platform: "slack", Team: parts[1], Chat: parts[2]}
	case len(parts) == 2 && parts[0] == "telegram":
		k = agent.SessionKey{Platform: "telegram", Chat: parts[1]}
	default:
		return k, fmt.Errorf("channel %q: %s", s, channelHelp)
	}
	if k.Chat == "" || (k.Platform == "slack" && k.Team == "") {
		return k, fmt.Errorf("channel %q: a part is empty; %s", s, channelHelp)
	}
	return k.Channel(), nil
}

// parseRules reads RULE=MODE arguments into a policy change's rules; the
// mode "default" drops the channel's rule.
func (a *adminRun) parseRules(args []string) (map[string]agent.ToolMode, error) {
	set := map[string]agent.ToolMode{}
	for _, arg := range args {
		name, modeText, ok := strings.Cut(arg, "=")
		if !ok || strings.TrimSpace(name) == "" || strings.TrimSpace(modeText) == "" {
			return nil, usagef("policy set: %q is not RULE=MODE (exec=ask, shell=deny, default=ask, web=default)", arg)
		}
		rule, err := govern.ParseRuleName(name, a.known)
		if err != nil {
			return nil, fmt.Errorf("%v. Tools: %s", err, strings.Join(a.known.Known(), ", "))
		}
		var mode agent.ToolMode
		if m := strings.ToLower(strings.TrimSpace(modeText)); m != agent.DefaultRule {
			if mode, err = agent.ParseMode(m); err != nil {
				return nil, fmt.Errorf("%s: %v, or default to follow the config", arg, err)
			}
		}
		if _, dup := set[rule]; dup {
			return nil, fmt.Errorf("%s: the rule %s is named twice", arg, agent.RuleLabel(rule))
		}
		set[rule] = mode
	}
	return set, nil
}

func (a *adminRun) checkPlatform(p string) error {
	if _, ok := a.cfg.Access()[p]; !ok {
		return fmt.Errorf("platform %q: want one of %s", p, strings.Join(slices.Sorted(maps.Keys(a.cfg.Access())), ", "))
	}
	return nil
}

func parseKind(s string) (govern.GrantKind, error) {
	switch k := govern.GrantKind(strings.ToLower(s)); k {
	case govern.GrantUser, govern.GrantChat:
		return k, nil
	}
	return "", usagef("%q: want user or chat", s)
}

func (a *adminRun) policyShow(ctx context.Context, args []string) error {
	ch, _ := parseChannel(args[0])
	s, err := a.st.Settings(ctx, ch)
	if err != nil {
		return err
	}
	p := govern.NewPolicy(ch, a.cfg.PolicyDefaults(), s, a.known)
	fmt.Fprintf(a.out, "Tool policy of %s (stored version %d)\n\n", channelName(ch), p.Version)
	tw := tabwriter.NewWriter(a.out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  default\t%s\t%s\n", p.Why("\x00").Mode, source(p.Why("\x00")))
	byGroup := map[string][]string{}
	for _, t := range a.known.Known() {
		g := govern.GroupOf(a.known, t)
		if g == "" {
			g = "other"
		}
		byGroup[g] = append(byGroup[g], t)
	}
	order := agent.Groups()
	for _, g := range slices.Sorted(maps.Keys(byGroup)) {
		if !slices.Contains(order, g) {
			order = append(order, g)
		}
	}
	for _, g := range order {
		ts := byGroup[g]
		if len(ts) == 0 {
			continue
		}
		if why := p.Why(agent.GroupRule(g)); why.Rule == agent.GroupRule(g) {
			fmt.Fprintf(tw, "  %s (group)\t%s\t%s\n", g, why.Mode, source(why))
		} else {
			fmt.Fprintf(tw, "  %s (group)\t-\tno rule of its own\n", g)
		}
		for _, t := range ts {
			why := p.Why(t)
			fmt.Fprintf(tw, "    %s\t%s\t%s\n", t, why.Mode, source(why))
		}
	}
	tw.Flush()

	stored := p.Stored()
	if len(stored) == 0 {
		fmt.Fprintln(a.out, "\nNo rules are set for this channel: the config's apply.")
	} else {
		fmt.Fprintln(a.out, "\nRules set for this channel:")
		for _, name := range slices.Sorted(maps.Keys(stored)) {
			r := stored[name]
			fmt.Fprintf(a.out, "  %s=%s  by %s at %s\n", name, r.Mode, clean(r.By), stamp(r.At))
		}
	}
	for _, leak := range p.Leaks() {
		fmt.Fprintln(a.out, "Warning:", leak)
	}
	return nil
}

// source says where a mode comes from.
func source(r agent.Reason) string {
	if r.Layer == "channel" {
		return fmt.Sprintf("rule %s, set here by %s at %s", r.Rule, clean(r.By), stamp(r.At))
	}
	return fmt.Sprintf("rule %s, from the config", r.Rule)
}

func (a *adminRun) policySet(ctx context.Context, args []string) error {
	ch, _ := parseChannel(args[0])
	set, _ := a.parseRules(args[1:]) // checked
	return a.changePolicy(ctx, ch, agent.PolicyChange{Version: -1, Set: set})
}

func (a *adminRun) policyReset(ctx context.Context, args []string) error {
	ch, _ := parseChannel(args[0])
	return a.changePolicy(ctx, ch, agent.PolicyChange{Version: -1, Reset: true})
}

func (a *adminRun) changePolicy(ctx context.Context, ch agent.SessionKey, change agent.PolicyChange) error {
	s, err := govern.ChangePolicy(ctx, a.st, ch, a.by, change, a.known)
	if err != nil {
		return fmt.Errorf("policy of %s: %w", channelName(ch), err)
	}
	fmt.Fprintf(a.out, "Policy of %s changed by %s (version %d): %s\n", channelName(ch), a.by, s.Version, change)
	for _, leak := range govern.NewPolicy(ch, a.cfg.PolicyDefaults(), s, a.known).Leaks() {
		fmt.Fprintln(a.out, "Warning:", leak)
	}
	fmt.Fprintf(a.out, "It applies from the next turn. See it all: firstmate admin policy show %s\n", channelName(ch))
	return nil
}

// configLists names the config's allowlists, by platform and kind.
var configLists = map[string]map[govern.GrantKind]string{
	"slack":    {govern.GrantUser: "slack.allowed_users", govern.GrantChat: "slack.allowed_channels"},
	"telegram": {govern.GrantUser: "telegram.allowed_users", govern.GrantChat: "telegram.allowed_chats"},
}

func (a *adminRun) accessList(ctx context.Context, args []string) error {
	platform := ""
	if len(args) == 1 {
		platform = args[0]
	}
	grants, err := a.st.Grants(ctx, platform)
	if err != nil {
		return err
	}
	access := a.cfg.Access()
	platforms := slices.Sorted(maps.Keys(access))
	if platform != "" {
		platforms = []string{platform}
	}
	for _, g := range grants {
		if !slices.Contains(platforms, g.Platform) {
			platforms = append(platforms, g.Platform)
		}
	}
	for i, p := range platforms {
		if i > 0 {
			fmt.Fprintln(a.out)
		}
		acc, configured := access[p]
		if configured {
			fmt.Fprintf(a.out, "%s: access %s\n", p, acc.Mode)
		} else {
			fmt.Fprintf(a.out, "%s: not in the config\n", p)
		}
		tw := tabwriter.NewWriter(a.out, 0, 0, 2, ' ', 0)
		n := 0
		for _, kind := range []govern.GrantKind{govern.GrantUser, govern.GrantChat} {
			ids := acc.Users
			if kind == govern.GrantChat {
				ids = acc.Chats
			}
			for _, id := range ids {
				fmt.Fprintf(tw, "  %s\t%s\t\tconfig (%s)\n", kind, clean(id), configLists[p][kind])
				n++
			}
		}
		for _, g := range grants {
			if g.Platform == p {
				fmt.Fprintf(tw, "  %s\t%s\t%s\tgranted by %s at %s\n", g.Kind, clean(g.ID), clean(g.Name), clean(g.By), stamp(g.At))
				n++
			}
		}
		tw.Flush()
		if n == 0 {
			fmt.Fprintln(a.out, "  nobody is allowed by name")
		}
	}
	return nil
}

func (a *adminRun) accessAllow(ctx context.Context, args []string) error {
	platform, id := args[0], args[2]
	kind, _ := parseKind(args[1])
	name := a.fs.Lookup("name").Value.String()
	g := govern.Grant{Platform: platform, Kind: kind, ID: id, Name: name, By: a.by}
	if err := govern.AllowAccess(ctx, a.st, g); err != nil {
		return err
	}
	fmt.Fprintf(a.out, "Allowed: %s %s %s%s may talk to the bot.\n", platform, kind, id, nameIn(name))
	if a.cfg.Access()[platform].Mode == govern.AccessOpen {
		fmt.Fprintf(a.out, "Note: %s access is open, so this matters for people from outside the workspace, or if the access mode changes.\n", platform)
	}
	return nil
}

func (a *adminRun) accessRevoke(ctx context.Context, args []string) error {
	platform, id := args[0], args[2]
	kind, _ := parseKind(args[1])
	acc := a.cfg.Access()[platform]
	inConfig := slices.Contains(acc.Users, id)
	if kind == govern.GrantChat {
		inConfig = slices.Contains(acc.Chats, id)
	}
	list := configLists[platform][kind]
	if inConfig {
		// Say so without writing a revocation that did nothing to the log.
		stored, err := a.st.Allowed(ctx, platform, kind, id)
		if err != nil {
			return err
		}
		if !stored {
			return fmt.Errorf("%s %s %s is allowed by the config (%s), not by a grant, so it cannot be revoked here: remove it from the config and restart firstmate", platform, kind, id, list)
		}
	}
	had, err := govern.RevokeAccess(ctx, a.st, platform, kind, id, a.by)
	if err != nil {
		return err
	}
	switch {
	case had && inConfig:
		fmt.Fprintf(a.out, "Revoked the stored grant of %s %s %s, but the config still allows it (%s): remove it there and restart firstmate.\n", platform, kind, id, list)
	case had:
		fmt.Fprintf(a.out, "Revoked: %s %s %s may no longer talk to the bot (unless its access mode is open).\n", platform, kind, id)
	case inConfig:
		return fmt.Errorf("%s %s %s is allowed by the config (%s), not by a grant, so it cannot be revoked here: remove it from the config and restart firstmate", platform, kind, id, list)
	default:
		return fmt.Errorf("%s %s %s has no grant to revoke; see firstmate admin access list %s", platform, kind, id, platform)
	}
	return nil
}

func (a *adminRun) pairList(ctx context.Context, _ []string) error {
	ps, err := a.st.Pairings(ctx)
	if err != nil {
		return err
	}
	if len(ps) == 0 {
		fmt.Fprintln(a.out, "No pairing requests are waiting.")
		return nil
	}
	tw := tabwriter.NewWriter(a.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CODE\tPLATFORM\tWHO\tNAME\tASKED IN\tEXPIRES")
	now := time.Now()
	for _, p := range ps {
		fmt.Fprintf(tw, "%s\t%s\t%s %s\t%s\t%s\tin %s\n", clean(p.Code), clean(p.Platform), p.Kind, clean(p.ID), dash(p.Name), clean(channelName(p.Chat)),
			shortDuration(p.Expires.Sub(now)))
	}
	tw.Flush()
	fmt.Fprintln(a.out, "Approve one with: firstmate admin pair approve CODE")
	return nil
}

func (a *adminRun) pairApprove(ctx context.Context, args []string) error {
	code := agent.NormalizeCode(args[0])
	p, err := govern.ApprovePairing(ctx, a.st, code, a.by)
	if errors.Is(err, agent.ErrNotFound) {
		return fmt.Errorf("pairing code %s is unknown or expired (codes last %s; the person gets a new one when they write to the bot again)",
			clean(code), shortDuration(a.cfg.Pairing.CodeTTL))
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(a.out, "Approved: %s %s %s%s may talk to the bot now.\n", p.Platform, p.Kind, clean(p.ID), nameIn(clean(p.Name)))
	return nil
}

// auditQuery reads audit's flags.
func (a *adminRun) auditQuery() (govern.AuditQuery, error) {
	var q govern.AuditQuery
	if c := a.fs.Lookup("channel").Value.String(); c != "" {
		ch, err := parseChannel(c)
		if err != nil {
			return q, err
		}
		q.Channel = ch.String()
	}
	if s := strings.TrimSpace(a.fs.Lookup("since").Value.String()); s != "" {
		if d, err := time.ParseDuration(s); err == nil {
			if d <= 0 {
				return q, usagef("--since %s: want a positive duration, like 24h", s)
			}
			q.Since = time.Now().Add(-d)
		} else if t, err := time.Parse(time.RFC3339, s); err == nil {
			q.Since = t
		} else {
			return q, usagef("--since %s: want a duration (90m, 24h) or an RFC 3339 time (2006-01-02T15:04:05Z)", s)
		}
	}
	limit, _ := strconv.Atoi(a.fs.Lookup("limit").Value.String())
	if limit <= 0 {
		return q, usagef("--limit: want a number above 0")
	}
	q.Limit = limit
	return q, nil
}

func (a *adminRun) audit(ctx context.Context, _ []string) error {
	q, _ := a.auditQuery() // checked
	entries, err := a.st.AuditLog(ctx, q)
	if err != nil {
		return err
	}
	if a.fs.Lookup("json").Value.String() == "true" {
		enc := json.NewEncoder(a.out)
		for _, e := range entries {
			if err := enc.Encode(e); err != nil {
				return err
			}
		}
		return nil
	}
	if len(entries) == 0 {
		fmt.Fprintln(a.out, "No audit entries match.")
		return nil
	}
	tw := tabwriter.NewWriter(a.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tACTION\tCHANNEL\tUSER\tTOOL\tARGS\tOUTCOME\tDURATION\tDETAIL")
	for _, e := range entries {
		where := e.Channel
		if k, err := agent.ParseSessionKey(where); err == nil {
			where = channelName(k)
		} else if where == "" {
			where = e.Platform
		}
		args := ""
		if e.Args != "" {
			args = strconv.Quote(e.Args)
		}
		dur := ""
		if e.Duration != 0 {
			dur = e.Duration.Round(time.Millisecond).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Time.UTC().Format(time.RFC3339), dash(e.Action), dash(where), dash(e.User),
			dash(e.Tool), dash(args), dash(e.Outcome), dash(dur), dash(e.Detail))
	}
	return tw.Flush()
}

// dash shows an empty field as "-", so columns stay readable; it also
// cleans what it shows.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return clean(s)
}

// clean makes text from the store safe to print to a terminal: names and
// details come from chat platforms, and a control character (an escape
// sequence, a tab that shifts the columns) must not act on the terminal.
func clean(s string) string {
	if !strings.ContainsFunc(s, unicode.IsControl) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if unicode.IsControl(r) {
			fmt.Fprintf(&b, "\\x%02x", r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// channelName writes a channel the way parseChannel reads it: as short as
// it can be without being ambiguous.
func channelName(k agent.SessionKey) string {
	k = k.Channel()
	if k == console.Key.Channel() {
		return console.Key.Platform
	}
	if strings.ContainsAny(k.Team+k.Chat, ":%") {
		return k.String()
	}
	switch {
	case k.Platform == "slack" && k.Team != "":
		return "slack:" + k.Team + ":" + k.Chat
	case k.Platform == "telegram" && k.Team == "":
		return "telegram:" + k.Chat
	}
	return k.String()
}

// shortDuration writes d to the second without zero units: 1h, 54m10s.
func shortDuration(d time.Duration) string {
	s := d.Round(time.Second).String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "an unknown time"
	}
	return t.UTC().Format(time.RFC3339)
}

func nameIn(name string) string {
	if name == "" {
		return ""
	}
	return " (" + name + ")"
}

// jobBoard is the store's job board, and the space of ch on it: the one
// the shell files the channel's jobs under, named from the channel as the
// workspace directory is.
func (a *adminRun) jobBoard(ch agent.SessionKey) (tools.JobBoard, string, error) {
	return a.st, tools.JobSpace(ch.String()), nil
}

func parseJobID(s string) (int, error) {
	id, err := tools.ParseJobID(s)
	if err != nil {
		return 0, usagef("jobs stop: %q is not a job ID; firstmate admin jobs list CHANNEL shows them", s)
	}
	return id, nil
}

func (a *adminRun) jobsList(ctx context.Context, args []string) error {
	ch, _ := parseChannel(args[0])
	b, sp, err := a.jobBoard(ch)
	if err != nil {
		return err
	}
	all, err := b.Jobs(ctx, sp)
	if err != nil {
		return err
	}
	if len(all) == 0 {
		fmt.Fprintf(a.out, "No background jobs in %s.\n", channelName(ch))
		return nil
	}
	tw := tabwriter.NewWriter(a.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tCOMMAND\tSTARTED BY\tSTARTED\tCPU")
	now := time.Now()
	for _, j := range all {
		// A running job's owner writes it every few seconds; how long
		// ago it last did tells a live job from one whose replica died.
		state := fmt.Sprintf("running on %s (seen %s ago)", clean(j.Owner), shortDuration(now.Sub(j.Seen)))
		if !j.Running() {
			state = clean(j.State)
		} else if j.StopAsked != "" {
			state += ", stop asked by " + clean(j.StopAsked)
		}
		by := dash(j.UserName)
		if j.User != "" {
			by += " (" + clean(j.User) + ")"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", j.ID, state, cut(clean(j.Command), 60), by, stamp(j.Started), j.CPU.Round(10*time.Millisecond))
	}
	tw.Flush()
	fmt.Fprintf(a.out, "Stop one with: firstmate admin jobs stop %s ID\n", channelName(ch))
	return nil
}

// jobsStop asks the job's owner to stop it, through the board, as the
// stop tool does from another replica: the owner kills it at its next
// beat. It needs no power over exec, so a job can be stopped where exec
// is denied.
func (a *adminRun) jobsStop(ctx context.Context, args []string) error {
	ch, _ := parseChannel(args[0])
	id, _ := parseJobID(args[1]) // checked
	b, sp, err := a.jobBoard(ch)
	if err != nil {
		return err
	}
	all, err := b.Jobs(ctx, sp)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(all, func(j tools.Job) bool { return j.ID == id })
	if i < 0 {
		return fmt.Errorf("%s has no job %d; see firstmate admin jobs list %s", channelName(ch), id, channelName(ch))
	}
	j := all[i]
	if !j.Running() {
		fmt.Fprintf(a.out, "Job %d of %s had already ended: %s.\n", id, channelName(ch), clean(j.State))
		return nil
	}
	if err := b.AskStop(ctx, sp, id, a.by); err != nil {
		return fmt.Errorf("ask %s to stop job %d: %w", clean(j.Owner), id, err)
	}
	e := govern.AuditEntry{Time: time.Now().UTC(), Action: govern.AuditJobStopped, Platform: ch.Platform, Channel: ch.String(), User: a.by,
		Outcome: "asked", Detail: fmt.Sprintf("job %d (%s) on %s", id, cut(j.Command, 80), j.Owner)}
	if err := a.st.Audit(context.WithoutCancel(ctx), e); err != nil {
		// The request is made: say so, and that the log lacks it.
		fmt.Fprintf(a.out, "Warning: the audit log could not record this stop: %v\n", err)
	}
	fmt.Fprintf(a.out, "Asked %s, the replica running job %d (%s), to stop it; it does at its next beat, within seconds.\n",
		clean(j.Owner), id, cut(clean(j.Command), 60))
	fmt.Fprintf(a.out, "See that it did: firstmate admin jobs list %s\n", channelName(ch))
	return nil
}

// cut shortens s to n runes, marking the cut.
func cut(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
