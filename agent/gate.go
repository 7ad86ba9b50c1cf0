package agent

import (
	"context"
	"log/slog"
	"time"
)

// Gate decides every power the Dispatcher spends on someone's behalf: who
// may talk to the bot here, what a turn's tools may do, what a click
// decides, and the commands that govern (agent/govern implements it). The
// Dispatcher asks it; it never decides itself.
type Gate interface {
	// Receive decides whether in may become work: its author may talk to
	// the bot here and has not sent more messages than a person may. A
	// refused message is dropped; Tell, if set, is said to its author
	// (once: the gate remembers whom it told).
	Receive(ctx context.Context, in Inbound) (Admission, error)
	// Admit is Receive without counting the message: for what a platform
	// serves itself (Slack's tools dialog).
	Admit(ctx context.Context, in Inbound) (Admission, error)
	// Turn resolves a turn's governance at its start: the channel's policy
	// (from settings, read with the claim, when not nil), its budgets,
	// the audit of its tool calls and approvals.
	Turn(ctx context.Context, t TurnInfo) (TurnGate, error)
	// Decide records a person's click on an approval, if they may decide
	// it; Approval reads one (to resume its session).
	Decide(ctx context.Context, d Decision) (Decided, error)
	Approval(ctx context.Context, id string) (Approval, error)
	// Policy describes a channel's tool policy to user; Editable says
	// whether user may change it.
	Policy(ctx context.Context, chat SessionKey, user User) (PolicyView, error)
	// SetPolicy changes a channel's policy for user: ErrNotAdmin if user
	// may not, ErrVersionConflict if another change came first.
	SetPolicy(ctx context.Context, chat SessionKey, user User, change PolicyChange) (PolicyView, error)
	// Forget takes back what runs on behalf of a session that was reset
	// (its background jobs), and says what, for the reply ("" for nothing).
	Forget(ctx context.Context, key SessionKey, by User) (string, error)
	// CommandRunner runs the commands the gate owns (see [Commands]).
	CommandRunner
}

// Admission is what the gate said of a message.
type Admission struct {
	OK   bool
	Tell string // said to the author when not OK; "" says nothing
}

// TurnInfo is what the gate is told of a turn it governs.
type TurnInfo struct {
	Key SessionKey
	// Authors wrote the messages the turn answers, in order, each once:
	// the turn runs on behalf of them all.
	Authors []User
	// Trigger is the message the turn answers (an approval it asks for
	// keeps it, for the turn its decision resumes).
	Trigger Inbound
	// Settings are the channel's, read with the claim; nil: the gate
	// reads them.
	Settings *ChannelSettings
	Log      *slog.Logger
}

// TurnGate is one turn's governance: the channel's policy as it was when
// the turn started, its budgets and its audit. The loop asks it before it
// offers a tool, runs a call or calls the model.
type TurnGate interface {
	// Mode is the mode of a tool, or of a skill by its rule skill:NAME: a
	// denied one is not offered.
	Mode(name string) ToolMode
	// CallMode is one call's mode, and the rule that decides it: the
	// strictest of the tool's own and of what the call needs
	// (tools.Scoped).
	CallMode(call ToolCall) (mode ToolMode, rule string)
	// BeforeModel runs before each model call; an error ends the turn
	// with it (a budget spent: it says what to tell people).
	BeforeModel(ctx context.Context) error
	// AfterModel is told each model call's usage, how long it took and,
	// if it failed, why.
	AfterModel(ctx context.Context, u Usage, took time.Duration, err error)
	// ToolDone is told each tool call's outcome ("ok", "error", "denied"),
	// its arguments as shown to people, and how long it ran.
	ToolDone(ctx context.Context, call ToolCall, shownArgs, outcome string, took time.Duration)
	// Ask records an approval for a call the turn left pending, on behalf
	// of the turn's authors, with a deadline: the thread shows it, and the
	// decision (on any replica) resumes the session. Nothing waits for it.
	Ask(ctx context.Context, p Pending) (Approval, error)
	// Spent hands over what the turn's model calls used that no store
	// counts yet, for the commit to add; Flush counts it now, and unspent
	// too (what a commit that failed did not count).
	Spent() Spent
	Flush(ctx context.Context, unspent Spent)
}

// CommandRunner runs chat commands it owns, by name, for in's author.
type CommandRunner interface {
	RunCommand(ctx context.Context, name string, in Inbound, args string) (Notice, error)
}

// Told is an error that carries what a person is told of it, apart from
// what is logged (a spent budget says when it resets).
type Told interface {
	error
	Told() string
}
