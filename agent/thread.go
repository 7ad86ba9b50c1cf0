package agent

import (
	"context"

	"github.com/firstmate/firstmate/tools"
)

// Thread is where one session's events are shown: a Slack thread, a Telegram
// chat or topic, a terminal. Adapters implement it; they decide how to
// render (one progress message edited at a throttled rate, typing
// indicators, the final answer as a reply). Emit must not block for long:
// a slow platform is the adapter's to absorb, not the loop's.
//
// A thread that holds resources for its turn (a goroutine pacing edits)
// also implements io.Closer; the dispatcher closes it when the turn is over,
// however it ended.
type Thread interface {
	Emit(ctx context.Context, ev Event) error
}

// Submitter is what an adapter hands incoming messages and clicks to: the
// [Dispatcher]. Submit returns once the message is durable; then the
// adapter may acknowledge the platform.
type Submitter interface {
	Submit(ctx context.Context, in Inbound) error
	// Admit reports whether in's author may talk to the bot there, telling
	// a refused person once, as Submit does. An adapter asks it before what
	// it serves itself, without Submit (Slack's tools dialog).
	Admit(ctx context.Context, in Inbound) (bool, error)
	// Decide records a person's click on an approval; see [Decision].
	Decide(ctx context.Context, d Decision) (Decided, error)
	// Policy describes a channel's tool policy to user (a Slack modal, a
	// Telegram keyboard); Editable says whether user may change it.
	Policy(ctx context.Context, chat SessionKey, user User) (PolicyView, error)
	// SetPolicy changes a channel's policy for user: ErrNotAdmin if user
	// may not, ErrVersionConflict if another change came first.
	SetPolicy(ctx context.Context, chat SessionKey, user User, change PolicyChange) (PolicyView, error)
}

// AdminChecker is implemented by platforms that know their own admins
// (Slack workspace admins and owners, Telegram chat administrators), when
// the operator lets those count as the bot's admins in their chats. It may
// cache its answers briefly.
type AdminChecker interface {
	IsAdmin(ctx context.Context, chat SessionKey, userID string) (bool, error)
}

// Platform opens threads for one platform's sessions. The dispatcher asks
// for a thread when a turn starts or a command answers; the trigger is the
// message being answered, so the thread can reply to it.
type Platform interface {
	Thread(key SessionKey, trigger Inbound) Thread
}

// ThreadReader is implemented by platforms that can read a thread's earlier
// messages. When the bot is first addressed inside a thread it took no part
// in, those messages are given to the model with the turn, so "@bot what do
// you think?" has something to think about. The text is capped by the
// dispatcher.
type ThreadReader interface {
	EarlierMessages(ctx context.Context, key SessionKey, trigger Inbound) (string, error)
}

// Downloader is implemented by platforms whose messages carry files. When a
// turn starts, the dispatcher has each file saved into the channel's
// workspace and tells the model where it is (or why it could not be had).
// It returns the workspace-relative path.
type Downloader interface {
	Download(ctx context.Context, f File, ws *tools.Workspace) (path string, err error)
}
