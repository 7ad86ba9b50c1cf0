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
	Admins                 // the bot's admins only (the command checks)
)

// CommandOwner is who runs a command: the Dispatcher itself, the gate, or the
// schedules (DispatcherConfig.Later).
type CommandOwner int

const (
	OwnCore CommandOwner = iota
	OwnGate
	OwnLater
)

// Command is a chat command: a message that is only its name, with or
// without a slash ("stop", "/stop"), or its name and arguments of the
// command's shape ("tools exec=ask", "why shell"); a sentence that merely
// starts with the word is an ordinary message, unless it starts with a
// slash. Commands are defined here, once: the help text, Slack's slash
// command, Telegram's command menu and the terminal read [Commands]; what
// one does is its owner's.
type Command struct {
	Name    string
	Summary string // one line, for help and the platforms' menus
	Args    string // the arguments' shape for help ("[group=mode …]"); "" takes none
	Who     Audience
	Owner   CommandOwner
	// shaped reports whether args look like this command's arguments, so
	// that "why is the sky blue" goes to the model; nil takes none. known
	// says whether a word names a tool here (nil: no tool is known).
	shaped func(args string, known func(string) bool) bool
	// seenFirst: the message is marked seen before the command takes
	// effect, because a late redelivery must not take effect again (a stop
	// must not stop the next turn). Other commands are safe to repeat and
	// are marked seen only once they took effect, so a failure makes the
	// platform deliver them again.
	seenFirst bool
}

// commands, in the order help lists them.
var commands = []Command{
	{Name: "help", Summary: "what I can do, and these commands"},
	{Name: "status", Summary: "what I am doing in this thread"},
	{Name: "stop", Summary: "stop the running turn", seenFirst: true},
	{Name: "reset", Summary: "forget this thread's conversation (the workspace files stay)"},
	{Name: "tools", Summary: "this channel's tool policy; admins change it", Args: "[exec=ask web=deny …]", Owner: OwnGate, shaped: rulesShaped},
	{Name: "why", Summary: "why a tool (or skill:NAME) is or is not available here", Args: "TOOL", Owner: OwnGate, shaped: toolShaped},
	{Name: "usage", Summary: "what this channel spent today, and its budget", Owner: OwnGate},
	{Name: "jobs", Summary: "this channel's background jobs; its starter or an admin stops one", Args: "[stop ID]", Owner: OwnGate, shaped: jobsShaped,
		seenFirst: true}, // a redelivered stop must not stop a later job
	{Name: "schedule", Summary: "post a prompt here later: in 90m, at 09:00, or on a cron", Args: "in|at|cron WHEN PROMPT", Owner: OwnLater, shaped: scheduleShaped,
		seenFirst: true}, // a redelivery must not make a second schedule
	{Name: "schedules", Summary: "this channel's schedules and waits (yours; admins see all)", Owner: OwnLater},
	{Name: "unschedule", Summary: "remove a schedule (yours; admins any of this channel's)", Args: "ID", Owner: OwnLater, shaped: scheduleIDShaped},
	{Name: "timezone", Summary: "this channel's time zone for schedules; admins change it", Args: "[ZONE|default]", Owner: OwnLater, shaped: zoneShaped},
	{Name: "pair", Summary: "approve a pairing code someone was given", Args: "CODE", Who: Admins, Owner: OwnGate, shaped: codeShaped},
}

// rulesShaped: "exec=ask web=deny".
func rulesShaped(args string, _ func(string) bool) bool {
	fields := strings.Fields(args)
	for _, f := range fields {
		name, mode, ok := strings.Cut(f, "=")
		if !ok || name == "" || mode == "" {
			return false
		}
	}
	return len(fields) > 0
}

// toolShaped: one word that names a tool here, a group, or a rule
// (group:NAME, tool:NAME, skill:NAME, mcp:SERVER).
func toolShaped(args string, known func(string) bool) bool {
	w := strings.ToLower(strings.TrimSpace(args))
	if w == "" || strings.ContainsAny(w, " \t\n") {
		return false
	}
	if slices.Contains(Groups(), w) || (known != nil && known(w)) {
		return true
	}
	for _, p := range []string{"group:", "tool:", SkillPrefix, "mcp:"} {
		if strings.HasPrefix(w, p) && len(w) > len(p) {
			return true
		}
	}
	return false
}

// jobsShaped: "stop 3".
func jobsShaped(args string, _ func(string) bool) bool {
	verb, id, _ := strings.Cut(strings.TrimSpace(args), " ")
	return strings.EqualFold(verb, "stop") && strings.Trim(strings.TrimSpace(id), "0123456789") == "" && strings.TrimSpace(id) != ""
}

func codeShaped(args string, _ func(string) bool) bool { return IsCode(args) }

// scheduleShaped: "in 90m …", "at 09:00 …", "cron 0 9 * * 1-5 …".
func scheduleShaped(args string, _ func(string) bool) bool {
	how, rest, _ := strings.Cut(args, " ")
	switch strings.ToLower(how) {
	case "in", "at", "cron":
		return strings.TrimSpace(rest) != ""
	}
	return false
}

// IDAlphabet leaves out letters and digits that read alike (0 o, 1 l i),
// for IDs people type (schedules').
const IDAlphabet = "23456789abcdefghjkmnpqrstuvwxyz"

// scheduleIDShaped: one word of the IDs' alphabet.
func scheduleIDShaped(args string, _ func(string) bool) bool {
	return len(args) >= 4 && len(args) <= 16 && strings.Trim(strings.ToLower(args), IDAlphabet) == ""
}

// zoneShaped: one word, such as Asia/Tokyo or default.
func zoneShaped(args string, _ func(string) bool) bool { return len(strings.Fields(args)) == 1 }

// Commands lists the chat commands, in the order help shows them.
func Commands() []Command { return slices.Clone(commands) }

// ParseCommand returns the command a message is, if it is one, and its
// arguments. "/why is the sky blue" is the command why (which says what is
// wrong with its argument); "why is the sky blue" is a question. known
// says whether a word names a tool here, for the shapes that name tools
// ("why shell"); nil knows none, which only slash forms need.
func ParseCommand(text string, known func(string) bool) (cmd Command, args string, ok bool) {
	text = strings.TrimSpace(text)
	slash := strings.HasPrefix(text, "/")
	name, args, _ := strings.Cut(strings.TrimPrefix(text, "/"), " ")
	name, args = strings.ToLower(name), strings.TrimSpace(args)
	for _, c := range commands {
		if c.Name != name {
			continue
		}
		if args == "" || slash || (c.shaped != nil && c.shaped(args, known)) {
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

// codeAlphabet has no letters that read like digits (no I, L, O, U).
const codeAlphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// NormalizeCode upper-cases a pairing code as typed and restores its dash.
func NormalizeCode(s string) string {
	s = strings.ToUpper(strings.Map(func(r rune) rune {
		if r == '-' || r == ' ' {
			return -1
		}
		return r
	}, strings.TrimSpace(s)))
	if len(s) == 8 {
		return s[:4] + "-" + s[4:]
	}
	return s
}

// IsCode reports whether s, as typed, is shaped like a pairing code
// ("K7QP-M2XD").
func IsCode(s string) bool {
	c := NormalizeCode(s)
	if len(c) != 9 || c[4] != '-' {
		return false
	}
	for i, r := range c {
		if i != 4 && !strings.ContainsRune(codeAlphabet, r) {
			return false
		}
	}
	return true
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
	var err error
	switch cmd.Owner {
	case OwnGate:
		reply, err = d.cfg.Gate.RunCommand(ctx, cmd.Name, in, args)
	case OwnLater:
		if d.cfg.Later == nil {
			reply.Text = "Scheduling is not available here (the operator turned it off, or the store cannot keep schedules)."
		} else {
			reply, err = d.cfg.Later.RunCommand(ctx, cmd.Name, in, args)
		}
	default:
		reply, err = d.coreCommand(ctx, cmd.Name, in)
	}
	if err != nil {
		return err
	}
	if !cmd.seenFirst {
		if first, err := markSeen(); err != nil || !first {
			return err // a redelivery took effect again, harmlessly; reply once
		}
	}
	d.reply(ctx, in, reply)
	return nil
}

// coreCommand runs the commands about the session itself.
func (d *Dispatcher) coreCommand(ctx context.Context, name string, in Inbound) (Notice, error) {
	switch name {
	case "help":
		return Notice{Text: helpText()}, nil
	case "status":
		s, err := d.status(ctx, in.Key)
		return Notice{Text: s}, err
	case "stop":
		if d.Stop(in.Key) {
			return Notice{Text: "Stopping."}, nil
		}
		return Notice{Text: "Nothing is running in this thread."}, nil
	case "reset":
		d.mu.Lock()
		_, busy := d.sessions[in.Key]
		d.mu.Unlock()
		if busy {
			// The running turn would write its messages back after the
			// reset; make the order explicit instead.
			return Notice{Text: "A turn is running in this thread. Send stop first, then reset."}, nil
		}
		if err := d.cfg.Store.Reset(ctx, in.Key); err != nil {
			return Notice{}, fmt.Errorf("reset history: %w", err)
		}
		text := "Done: I have forgotten this thread's conversation. The workspace files are still there."
		if more, err := d.cfg.Gate.Forget(ctx, in.Key, in.User); err != nil {
			d.log.Warn("reset: stop the session's jobs", "session", in.Key.String(), "err", err)
		} else if more != "" {
			text += " " + more
		}
		return Notice{Text: text}, nil
	}
	return Notice{}, fmt.Errorf("%w command %q", ErrInvalid, name)
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

// Tell leaves a note in a session's thread, in the background (a job that
// was stopped says so where it was started).
func (d *Dispatcher) Tell(ctx context.Context, key SessionKey, text string) {
	d.reply(ctx, Inbound{Key: key, MessageID: "note", Addressed: true, Time: time.Now()}, Notice{Text: text})
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
	if name := d.cfg.Loop.ModelName; name != "" {
		fmt.Fprintf(&b, "\nModel: %s.", name)
	}
	if d.cfg.Tools != nil {
		fmt.Fprintf(&b, "\nTools: %s.", strings.Join(d.cfg.Tools.Now().Names(), ", "))
	}
	return b.String(), nil
}

// inputMessage folds a turn's mailbox into one user message. Each entry is
// attributed when the platform named its author (several people share a
// channel), capped so one huge paste cannot crowd out the rest, and lists
// the files that came with it. Entries that resume an approval are not
// messages; a mailbox of only those makes none (Role empty).
func inputMessage(mailbox []Inbound, maxBytes int) Message {
	var msgs []Inbound
	for _, in := range mailbox {
		if in.Approval == "" {
			msgs = append(msgs, in)
		}
	}
	if len(msgs) == 0 {
		return Message{}
	}
	var b strings.Builder
	per := maxBytes / len(msgs)
	for i, in := range msgs {
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
func userMessage(err error, timeout time.Duration) string {
	var me *ModelError
	var told Told
	switch {
	case errors.Is(err, ErrStopped):
		return "Stopped."
	case errors.As(err, &told):
		return told.Told()
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Sprintf("That took longer than my %s limit, so I stopped. Ask me to continue if you want me to go on.", timeout)
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
