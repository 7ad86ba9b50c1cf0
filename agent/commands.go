package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// Audience is who may run a command.
type Audience int

const (
	Anyone Audience = iota // whoever may talk to the bot there
	Admins                 // the bot's admins only
)

// Command is a chat command: a message that is only its name, with or
// without a slash ("stop", "/stop"), or its name and arguments of the
// command's shape ("tools exec=ask", "why shell"); a sentence that merely
// starts with the word is an ordinary message, unless it starts with a
// slash. Commands are defined here, once: the help text, Slack's slash
// command, Telegram's command menu and the terminal read [Commands].
type Command struct {
	Name    string
	Summary string // one line, for help and the platforms' menus
	Args    string // the arguments' shape for help ("[group=mode …]"); "" takes none
	Who     Audience
	// shaped reports whether args look like this command's arguments, so
	// that "why is the sky blue" goes to the model; nil takes none.
	shaped func(args string) bool
	// seenFirst: the message is marked seen before the command takes
	// effect, because a late redelivery must not take effect again (a stop
	// must not stop the next turn). Other commands are safe to repeat and
	// are marked seen only once they took effect, so a failure makes the
	// platform deliver them again.
	seenFirst bool
	run       func(ctx context.Context, d *Dispatcher, in Inbound, args string) (Notice, error)
}

// text makes a plain reply.
func text(s string, err error) (Notice, error) { return Notice{Text: s}, err }

// commands, in the order help lists them.
var commands = []Command{
	{Name: "help", Summary: "what I can do, and these commands"}, // run: see init
	{Name: "status", Summary: "what I am doing in this thread", run: func(ctx context.Context, d *Dispatcher, in Inbound, _ string) (Notice, error) {
		return text(d.status(ctx, in.Key))
	}},
	{Name: "stop", Summary: "stop the running turn", seenFirst: true, run: func(_ context.Context, d *Dispatcher, in Inbound, _ string) (Notice, error) {
		if d.Stop(in.Key) {
			return text("Stopping.", nil)
		}
		return text("Nothing is running in this thread.", nil)
	}},
	{Name: "reset", Summary: "forget this thread's conversation (the workspace files stay)", run: func(ctx context.Context, d *Dispatcher, in Inbound, _ string) (Notice, error) {
		if d.busy(in.Key) {
			// The running turn would write its messages back after the
			// reset; make the order explicit instead.
			return text("A turn is running in this thread. Send stop first, then reset.", nil)
		}
		if err := d.cfg.Store.Reset(ctx, in.Key); err != nil {
			return Notice{}, fmt.Errorf("reset history: %w", err)
		}
		return text("Done: I have forgotten this thread's conversation. The workspace files are still there.", nil)
	}},
	{Name: "tools", Summary: "this channel's tool policy; admins change it", Args: "[exec=ask web=deny …]", shaped: rulesShaped, run: toolsCommand},
	{Name: "why", Summary: "why a tool (or skill:NAME) is or is not available here", Args: "TOOL", shaped: toolShaped, run: func(ctx context.Context, d *Dispatcher, in Inbound, args string) (Notice, error) {
		if args == "" {
			return text("Say which tool: why shell", nil)
		}
		p, err := d.policy(ctx, in.Key)
		if err != nil {
			return Notice{}, err
		}
		if name, ok := IsSkillRule(strings.ToLower(strings.TrimSpace(args))); ok {
			return text(explainSkill(p, name, d.skillTool()), nil)
		}
		return text(explain(p, strings.ToLower(strings.TrimSpace(args)), d.knownTools()), nil)
	}},
	{Name: "usage", Summary: "what this channel spent today, and its budget", run: func(ctx context.Context, d *Dispatcher, in Inbound, _ string) (Notice, error) {
		used, err := d.cfg.Store.Usage(ctx, in.Key.Channel(), today())
		if err != nil {
			return Notice{}, fmt.Errorf("read usage: %w", err)
		}
		s := fmt.Sprintf("This channel used %d model tokens today (UTC)", used)
		if lim := d.cfg.Budgets.ChannelTokensPerDay; lim > 0 {
			s += fmt.Sprintf(" of its %d a day", lim)
		} else {
			s += "; it has no daily budget"
		}
		s += "."
		if lim := d.cfg.Budgets.UserMessagesPerMinute; lim > 0 {
			s += fmt.Sprintf(" A person may send me %d messages a minute.", lim)
		}
		return text(s, nil)
	}},
	{Name: "schedule", Summary: "post a prompt here later: in 90m, at 09:00, or on a cron", Args: "in|at|cron WHEN PROMPT", shaped: scheduleShaped,
		seenFirst: true, run: scheduleCommand}, // a redelivery must not make a second schedule
	{Name: "schedules", Summary: "this channel's schedules and waits (yours; admins see all)", run: schedulesCommand},
	{Name: "unschedule", Summary: "remove a schedule (yours; admins any of this channel's)", Args: "ID", shaped: scheduleIDShaped, run: unscheduleCommand},
	{Name: "timezone", Summary: "this channel's time zone for schedules; admins change it", Args: "[ZONE|default]", shaped: zoneShaped, run: timezoneCommand},
	{Name: "pair", Summary: "approve a pairing code someone was given", Args: "CODE", Who: Admins, shaped: IsCode, run: func(ctx context.Context, d *Dispatcher, in Inbound, args string) (Notice, error) {
		if !IsCode(args) {
			return text("Send the code as it was given, like: pair K7QP-M2XD", nil)
		}
		return text(d.approvePairing(ctx, in, args))
	}},
}

func init() {
	// Help lists the commands, help among them: set here, or the list
	// would refer to itself while it is being initialized.
	commands[0].run = func(context.Context, *Dispatcher, Inbound, string) (Notice, error) { return text(helpText(), nil) }
}

// rulesShaped: "exec=ask web=deny".
func rulesShaped(args string) bool {
	fields := strings.Fields(args)
	for _, f := range fields {
		name, mode, ok := strings.Cut(f, "=")
		if !ok || name == "" || mode == "" {
			return false
		}
	}
	return len(fields) > 0
}

// toolShaped: one word that names a tool or a group.
func toolShaped(args string) bool {
	w := strings.ToLower(strings.TrimSpace(args))
	return w != "" && !strings.ContainsAny(w, " \t\n") && (GroupOf(w) != "" || slices.Contains(Groups(), w))
}

// toolsCommand shows the channel's policy or, with rules, changes it.
func toolsCommand(ctx context.Context, d *Dispatcher, in Inbound, args string) (Notice, error) {
	if strings.TrimSpace(args) == "" {
		v, err := d.Policy(ctx, in.Key, in.User)
		if err != nil {
			return Notice{}, err
		}
		s := describePolicy(v)
		if p, err := d.policy(ctx, in.Key); err == nil {
			s += skillRules(p)
		}
		return Notice{Text: s, Policy: &v}, nil
	}
	change := PolicyChange{Version: -1, Set: map[string]ToolMode{}}
	known := d.knownTools()
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
		m, err := ParseMode(mode)
		if err != nil {
			return text(err.Error()+".", nil)
		}
		change.Set[rule] = m
	}
	v, err := d.SetPolicy(ctx, in.Key, in.User, change)
	switch {
	case errors.Is(err, ErrNotAdmin):
		return text("Only an admin can change this channel's tools. Send tools to see them, or why TOOL.", nil)
	case err != nil:
		return Notice{}, err
	}
	reply := "Saved. " + describePolicy(v)
	if p, err := d.policy(ctx, in.Key); err == nil {
		reply += skillRules(p)
		for _, l := range p.Leaks(known) {
			reply += "\nNote: " + l
		}
	}
	return Notice{Text: reply, Policy: &v}, nil
}

// Commands lists the chat commands, in the order help shows them.
func Commands() []Command { return slices.Clone(commands) }

// ParseCommand returns the command a message is, if it is one, and its
// arguments. "/why is the sky blue" is the command why (which says what is
// wrong with its argument); "why is the sky blue" is a question.
func ParseCommand(text string) (cmd Command, args string, ok bool) {
	text = strings.TrimSpace(text)
	slash := strings.HasPrefix(text, "/")
	name, args, _ := strings.Cut(strings.TrimPrefix(text, "/"), " ")
	name, args = strings.ToLower(name), strings.TrimSpace(args)
	for _, c := range commands {
		if c.Name != name {
			continue
		}
		if args == "" || slash || (c.shaped != nil && c.shaped(args)) {
			return c, args, true
		}
	}
	if IsCode(text) {
		return pairCommand(), text, true // an admin sending a pairing code
	}
	return Command{}, "", false
}

func pairCommand() Command {
	for _, c := range commands {
		if c.Name == "pair" {
			return c
		}
	}
	panic("no pair command")
}

func helpText() string {
	var b strings.Builder
	b.WriteString("I am an agent with a workspace for this channel: I can read and write files there and use the tools this channel allows.\n")
	b.WriteString("Commands (send the word alone):")
	for _, c := range commands {
		b.WriteString("\n• " + c.Name)
		if c.Args != "" {
			b.WriteString(" " + c.Args)
		}
		b.WriteString(": " + c.Summary)
		if c.Who == Admins {
			b.WriteString(" (admins)")
		}
	}
	return b.String()
}

// command runs a chat command. Its effect happens before Submit returns;
// the reply is sent in the background so the platform is acknowledged
// without waiting for it.
func (d *Dispatcher) command(ctx context.Context, cmd Command, args string, in Inbound) error {
	markSeen := func() (bool, error) {
		first, err := d.cfg.Store.Seen(ctx, in)
		if err != nil {
			return false, fmt.Errorf("record command: %w", err)
		}
		return first, nil
	}
	if cmd.seenFirst {
		if first, err := markSeen(); err != nil || !first {
			return err
		}
	}
	var reply Notice
	if cmd.Who == Admins && !d.globalAdmin(in.Key.Platform, in.User) {
		reply.Text = "Only an admin can use " + cmd.Name + " here."
	} else {
		var err error
		if reply, err = cmd.run(ctx, d, in, args); err != nil {
			return err
		}
	}
	if !cmd.seenFirst {
		if first, err := markSeen(); err != nil || !first {
			return err // a redelivery took effect again, harmlessly; reply once
		}
	}
	d.reply(ctx, in, reply)
	return nil
}

// reply shows n in in's thread, in the background: the platform is
// acknowledged without waiting for it.
func (d *Dispatcher) reply(ctx context.Context, in Inbound, n Notice) {
	th := d.thread(in.Key, in)
	if th == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closing {
		return // Run is waiting for replies; what caused this took effect
	}
	d.replies.Go(func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		emit(rctx, th, n, d.log)
		if c, ok := th.(io.Closer); ok {
			c.Close()
		}
	})
}

// busy reports whether this process has a turn queued or running for key.
func (d *Dispatcher) busy(key SessionKey) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, ok := d.sessions[key]
	return ok
}

func (d *Dispatcher) status(ctx context.Context, key SessionKey) (string, error) {
	hist, err := d.cfg.Store.History(ctx, key)
	if err != nil {
		return "", fmt.Errorf("load history: %w", err)
	}
	pending, err := d.cfg.Store.Pending(ctx, key)
	if err != nil {
		return "", fmt.Errorf("count mailbox: %w", err)
	}
	var b strings.Builder
	d.mu.Lock()
	s := d.sessions[key]
	switch {
	case s != nil && s.running && s.cancel != nil:
		fmt.Fprintf(&b, "Working on a turn (for %s).", time.Since(s.started).Round(time.Second))
		pending -= s.claimed // in the mailbox until the turn is saved, but not waiting
	case s != nil:
		b.WriteString("About to start a turn.")
	default:
		b.WriteString("Idle.")
	}
	d.mu.Unlock()
	if pending > 0 {
		fmt.Fprintf(&b, " %d message(s) waiting.", pending)
	}
	turns := 0
	for _, m := range hist {
		if m.Role == RoleUser {
			turns++
		}
	}
	fmt.Fprintf(&b, "\nConversation: %d turn(s), %d message(s).", turns, len(hist))
	if d.cfg.ModelName != "" {
		fmt.Fprintf(&b, "\nModel: %s.", d.cfg.ModelName)
	}
	if d.cfg.Tools != nil {
		fmt.Fprintf(&b, "\nTools: %s.", strings.Join(d.cfg.Tools.Now().Names(), ", "))
	}
	return b.String(), nil
}

// inputMessage folds a turn's mailbox into one user message. Each entry is
// attributed when the platform named its author (several people share a
// channel), capped so one huge paste cannot crowd out the rest, and lists
// the files that came with it.
func inputMessage(mailbox []Inbound, maxBytes int) Message {
	var b strings.Builder
	per := maxBytes / len(mailbox)
	for i, in := range mailbox {
		if i > 0 {
			b.WriteString("\n\n")
		}
		if in.User.Name != "" {
			b.WriteString("[")
			b.WriteString(in.User.Name)
			b.WriteString("] ")
		}
		text := in.Text
		if len(text) > per {
			cut := per
			for cut > 0 && text[cut]&0xC0 == 0x80 {
				cut--
			}
			text = fmt.Sprintf("%s\n[message cut: %d of %d bytes not shown]", text[:cut], len(in.Text)-cut, len(in.Text))
		}
		if strings.TrimSpace(text) == "" && len(in.Files) == 0 {
			text = "(empty message)"
		}
		b.WriteString(text)
		for _, f := range in.Files {
			switch {
			case f.Path != "":
				fmt.Fprintf(&b, "\n[attached file: %s (%s, %d bytes) in the workspace]", f.Path, orUnknown(f.MIME), f.Size)
			case f.Error != "":
				fmt.Fprintf(&b, "\n[attached file %q could not be saved: %s]", f.Name, f.Error)
			default:
				fmt.Fprintf(&b, "\n[attached file %q could not be downloaded]", f.Name)
			}
		}
	}
	return Message{Role: RoleUser, Content: b.String()}
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown type"
	}
	return s
}

// userMessage is what a person is told when a turn fails: short, human,
// with what to do. The error itself goes to the log.
func (d *Dispatcher) userMessage(err error) string {
	var me *ModelError
	var be *BudgetError
	switch {
	case errors.Is(err, ErrStopped):
		return "Stopped."
	case errors.As(err, &be):
		return fmt.Sprintf("This channel has used its model budget for today (%d of %d tokens), so I stopped. It resets at midnight UTC; an admin can raise budgets.channel_tokens_per_day.", be.Used, be.Limit)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Sprintf("That took longer than my %s limit, so I stopped. Ask me to continue if you want me to go on.", d.cfg.Loop.Timeout)
	case errors.Is(err, ErrModelTooLarge):
		return "The model's answer grew past the size I accept, so I dropped it (the detail is in the log). Try asking for less at once."
	case errors.Is(err, ErrModelStalled):
		return "The model stopped sending its answer partway, so I gave up on it. Try again shortly."
	case errors.As(err, &me) && me.RateLimited():
		if me.RetryAfter > 0 {
			return fmt.Sprintf("The model is rate-limited right now. Try again in %s.", me.RetryAfter.Round(time.Second))
		}
		return "The model is rate-limited right now. Try again in a minute."
	case errors.As(err, &me) && (me.Status == 401 || me.Status == 403):
		return "The model endpoint refused my credentials; an operator needs to check OPENAI_API_KEY."
	case errors.As(err, &me) && me.Status >= 400 && me.Status < 500:
		return fmt.Sprintf("The model endpoint rejected the request (HTTP %d); an operator can find the detail in the log.", me.Status)
	case errors.As(err, &me):
		return fmt.Sprintf("I could not reach the model (%d attempts). Try again shortly.", me.Attempts)
	}
	return "Something went wrong on my side; it is in the log. Try again."
}
