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
// without a slash ("stop", "/stop"); a sentence that merely starts with the
// word is an ordinary message. Commands are defined here, once: the help
// text, Slack's slash command, Telegram's command menu and the terminal
// read [Commands].
type Command struct {
	Name    string
	Summary string // one line, for help and the platforms' menus
	Who     Audience
	// seenFirst: the message is marked seen before the command takes
	// effect, because a late redelivery must not take effect again (a stop
	// must not stop the next turn). Other commands are safe to repeat and
	// are marked seen only once they took effect, so a failure makes the
	// platform deliver them again.
	seenFirst bool
	run       func(ctx context.Context, d *Dispatcher, in Inbound) (reply string, err error)
}

// commands, in the order help lists them.
var commands = []Command{
	{Name: "help", Summary: "what I can do, and these commands"}, // run: see init
	{Name: "status", Summary: "what I am doing in this thread", run: func(ctx context.Context, d *Dispatcher, in Inbound) (string, error) {
		return d.status(ctx, in.Key)
	}},
	{Name: "stop", Summary: "stop the running turn", seenFirst: true, run: func(_ context.Context, d *Dispatcher, in Inbound) (string, error) {
		if d.Stop(in.Key) {
			return "Stopping.", nil
		}
		return "Nothing is running in this thread.", nil
	}},
	{Name: "reset", Summary: "forget this thread's conversation (the workspace files stay)", run: func(ctx context.Context, d *Dispatcher, in Inbound) (string, error) {
		if d.busy(in.Key) {
			// The running turn would write its messages back after the
			// reset; make the order explicit instead.
			return "A turn is running in this thread. Send stop first, then reset.", nil
		}
		if err := d.cfg.Store.Reset(ctx, in.Key); err != nil {
			return "", fmt.Errorf("reset history: %w", err)
		}
		return "Done: I have forgotten this thread's conversation. The workspace files are still there.", nil
	}},
}

func init() {
	// Help lists the commands, help among them: set here, or the list
	// would refer to itself while it is being initialized.
	commands[0].run = func(context.Context, *Dispatcher, Inbound) (string, error) { return helpText(), nil }
}

// Commands lists the chat commands, in the order help shows them.
func Commands() []Command { return slices.Clone(commands) }

// ParseCommand returns the command a message is, if it is one.
func ParseCommand(text string) (Command, bool) {
	name := strings.ToLower(strings.TrimPrefix(strings.TrimSpace(text), "/"))
	for _, c := range commands {
		if c.Name == name {
			return c, true
		}
	}
	return Command{}, false
}

func helpText() string {
	var b strings.Builder
	b.WriteString("I am an agent with a workspace for this channel: I can read and write files there and use the tools this channel allows.\n")
	b.WriteString("Commands (send the word alone):")
	for _, c := range commands {
		b.WriteString("\n• " + c.Name + ": " + c.Summary)
		if c.Who == Admins {
			b.WriteString(" (admins)")
		}
	}
	return b.String()
}

// command runs a chat command. Its effect happens before Submit returns;
// the reply is sent in the background so the platform is acknowledged
// without waiting for it.
func (d *Dispatcher) command(ctx context.Context, cmd Command, in Inbound) error {
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
	var reply string
	if cmd.Who == Admins && !in.User.Admin {
		reply = "Only an admin can use " + cmd.Name + " here."
	} else {
		var err error
		if reply, err = cmd.run(ctx, d, in); err != nil {
			return err
		}
	}
	if !cmd.seenFirst {
		if first, err := markSeen(); err != nil || !first {
			return err // a redelivery took effect again, harmlessly; reply once
		}
	}
	th := d.thread(in.Key, in)
	if th == nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closing {
		return nil // Run is waiting for replies; the command took effect
	}
	d.replies.Go(func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		emit(rctx, th, Notice{Text: reply}, d.log)
		if c, ok := th.(io.Closer); ok {
			c.Close()
		}
	})
	return nil
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
		fmt.Fprintf(&b, "\nTools: %s.", strings.Join(d.cfg.Tools.Current().Names(), ", "))
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
	switch {
	case errors.Is(err, ErrStopped):
		return "Stopped."
	case errors.Is(err, ErrShutdown):
		return "I am restarting and had to interrupt this. Send your message again in a moment."
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Sprintf("That took longer than my %s limit, so I stopped. Ask me to continue if you want me to go on.", d.cfg.Loop.Timeout)
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
