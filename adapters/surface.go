package adapters

import (
	"context"
	"errors"
	"time"

	"github.com/firstmate/firstmate/agent"
)

// A Surface is what one platform can do in one conversation (a Slack
// thread, a Telegram chat or topic, a terminal): post, edit and delete a
// message. That is all a platform must offer; the [Renderer] does the rest
// (sign of life, progress, the live answer, the answer, files, pacing, 429s).
// What else a platform can do it says by implementing the optional
// abilities below, found by type assertion: [Reactor], [Typer], [Statuser],
// [Drafter], [Streamer], [Uploader], [Stepper].
//
// A surface's calls return at once with the platform's answer: they do not
// wait out a rate limit (they return a [RateLimited] error, and the
// renderer waits) and do not pace themselves (the renderer takes tokens
// from the buckets of [Surface.Pace] first).
type Surface interface {
	// Format cuts t into the messages it takes on this platform, each
	// formatted and within the platform's size limit; at least one.
	Format(t Text) []Part
	// Post sends a new message into the conversation.
	Post(ctx context.Context, p Part) (MessageID, error)
	// Edit replaces a message's content. [ErrGone] means the message can
	// no longer be edited (someone deleted it, it is too old).
	Edit(ctx context.Context, id MessageID, p Part) error
	// Delete removes a message.
	Delete(ctx context.Context, id MessageID) error
	// Pace says what the platform allows in this conversation. It is read
	// once, when the turn starts.
	Pace() Pace
}

// MessageID names a message a surface posted, in the platform's terms (a
// Slack ts, a Telegram message_id).
type MessageID string

// Text is what the renderer asks a surface to show.
type Text struct {
	Body string
	// Markdown marks the model's Markdown, which the surface renders for
	// its platform and keeps from pinging people. Otherwise Body is our own
	// plain text (progress, a notice, an error), shown as written: the
	// surface escapes whatever its platform would read as markup.
	Markdown bool
	// Partial marks an answer still being written: the surface makes one
	// message of it (the first part, or the newest for a draft) and marks
	// it unfinished.
	Partial bool
	// Failure marks our message that a turn failed; a terminal paints it.
	Failure bool
	// Buttons go under the message (under its last part), in rows, on a
	// surface that is a [Asker]; others ignore them.
	Buttons [][]Button
}

// Button is a choice under a message: a Slack Block Kit button, a Telegram
// inline keyboard button. A click comes back to the adapter with Data,
// which it hands to [HandleClick]. Data is at most [MaxButtonData] bytes.
type Button struct {
	Label string
	Data  string
	Style ButtonStyle
}

// ButtonStyle colours a button where the platform can.
type ButtonStyle string

const (
	StylePlain   ButtonStyle = ""
	StylePrimary ButtonStyle = "primary"
	StyleDanger  ButtonStyle = "danger"
)

// MaxButtonData is the most a button's Data may hold: Telegram's limit
// for callback_data.
const MaxButtonData = 64

// Asker is a surface that shows [Text.Buttons] (approval questions, the
// policy screen). The renderer asks for
// approvals with buttons only on one.
type Asker interface {
	ShowsButtons() bool
}

// TypedAnswers is a surface where a person answers an approval question
// by typing (the terminal): the question says nothing of buttons.
type TypedAnswers interface {
	AnswersTyped()
}

// Part is one message's worth of a [Text], formatted by the surface that
// will send it. The renderer only hands it back to Post or Edit.
type Part struct {
	Text     string // in the platform's markup
	Markup   string // the markup of Text in the surface's own terms ("HTML", "markdown"); "" for plain text
	Fallback string // the same without markup: notifications show it; a platform that refuses the markup gets it
	// Reply makes the message a reply to the one being answered where the
	// platform threads by replies (Telegram). The renderer sets it.
	Reply bool
	// Buttons, from [Text.Buttons], on the last part only.
	Buttons [][]Button
}

// Errors a surface returns so the renderer can act on them.
var (
	// ErrUnsupported: the platform turned out not to have this ability here
	// (a Slack status line outside an assistant thread, a Bot API server
	// without drafts). The renderer stops using it for the turn.
	ErrUnsupported = errors.New("not supported here")
	// ErrGone: the message cannot be edited any more (deleted by someone,
	// too old). Progress goes on in a new message; a live answer is posted
	// whole.
	ErrGone = errors.New("the message is gone")
)

// RateLimited is an error that says when to try again: a Slack 429's
// Retry-After, Telegram's parameters.retry_after. Surfaces wrap their
// platform's rate-limit errors in a [RateLimitedError] (or any type with
// this method) so the renderer waits exactly as long as the platform asked.
type RateLimited interface {
	error
	RetryAfter() time.Duration
}

// RateLimitedError wraps a platform's rate-limit error.
type RateLimitedError struct {
	After time.Duration
	Err   error
}

func (e *RateLimitedError) Error() string {
	msg := "rate limited, retry after " + e.After.String()
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// RetryAfter implements [RateLimited].
func (e *RateLimitedError) RetryAfter() time.Duration { return e.After }

func (e *RateLimitedError) Unwrap() error { return e.Err }

// RetryAfter reports whether err is (or wraps) a [RateLimited] error, and
// how long it asks to wait.
func RetryAfter(err error) (time.Duration, bool) {
	var rl RateLimited
	if errors.As(err, &rl) {
		return rl.RetryAfter(), true
	}
	return 0, false
}

// Reaction is a mark on the message being answered.
type Reaction int

const (
	ReactWorking Reaction = iota // the sign of life where nothing else shows one
	ReactDone                    // the turn answered
	ReactFailed                  // the turn failed
)

// Reactor marks the message being answered (Slack reactions).
type Reactor interface {
	React(ctx context.Context, r Reaction, on bool) error
}

// Typer shows that the bot is typing (Telegram's "typing…"). The indicator
// fades on its own; the renderer renews it every [Pace].TypingEvery until
// the answer.
type Typer interface {
	Typing(ctx context.Context) error
}

// Statuser shows a status line while the turn runs ("is running ls…", a
// Slack assistant thread's status), in place of a progress message. The
// renderer renews it every [Pace].StatusEvery; the platform clears it when
// the answer comes.
type Statuser interface {
	Status(ctx context.Context, text string) error
}

// Drafter shows a draft of the answer that the answer replaces (Telegram's
// sendMessageDraft in private chats). The renderer puts the progress there
// while tools run and the answer as it is written, so a turn costs one
// message.
type Drafter interface {
	Draft(ctx context.Context, t Text) error
}

// Streamer is a platform's own streaming of a message (Slack's
// chat.startStream, a terminal): the answer appears as the model writes it.
type Streamer interface {
	// Stream opens a streamed message with its first Markdown.
	Stream(ctx context.Context, md string) (Stream, error)
}

// Stream is one streamed message.
type Stream interface {
	Append(ctx context.Context, md string) error
	// Stop ends the message with the last of its Markdown ("" for none).
	Stop(ctx context.Context, md string) error
}

// Uploader attaches a workspace file to the conversation.
type Uploader interface {
	Upload(ctx context.Context, f agent.Attachment) error
}

// Stepper is a surface that cannot edit (a terminal, a log): progress shows
// as one line per finished tool call, each written once, and a summary line
// after the answer.
type Stepper interface {
	Step(ctx context.Context, line string) error
}
