package agent

import (
	"encoding/json"
	"io"
	"time"
)

// Event is one step of a turn, sent to the session's [Thread]. The set is
// sealed: only this package defines events, so a type switch over them can
// be complete.
type Event interface{ isEvent() }

// TurnStarted opens a turn. MessageIDs are the inbound messages it answers.
type TurnStarted struct {
	Key        SessionKey
	MessageIDs []string
}

// TextDelta is a piece of the model's streamed text.
type TextDelta struct{ Text string }

// ToolStarted is emitted before a tool runs.
type ToolStarted struct {
	CallID string
	Name   string
	Args   json.RawMessage
}

// ToolFinished is emitted after a tool ran, successfully or not.
type ToolFinished struct {
	CallID   string
	Name     string
	Summary  string // one line for the progress display
	Failed   bool
	Duration time.Duration
}

// ApprovalNeeded asks the thread to let a person decide on a tool call, and
// ends the turn that asked: the decision is a durable record, the thread
// shows the question with buttons whose clicks reach [Submitter.Decide]
// (on any replica), and the decision resumes the session as a new turn.
type ApprovalNeeded struct {
	CallID    string
	Name      string
	Args      json.RawMessage
	ID        string    // the approval's ID, for its buttons
	Requester User      // whose message started the turn
	Authors   []User    // whose messages the turn answered: they, or an admin, decide
	Deadline  time.Time // no decision by then is a denial
	// Text is what the model wrote before the call, if anything; Steps,
	// Tools and Took describe the turn that asked, as an Answer's do.
	Text  string
	Steps int
	Tools int
	Took  time.Duration
}

// Answer is the turn's final text, with workspace files to attach.
type Answer struct {
	Text  string
	Files []Attachment
	Steps int           // model calls made in the turn
	Tools int           // tool calls made in the turn
	Took  time.Duration // wall time of the turn
}

// Attachment is a workspace file to attach to an answer. Open reads it
// through the workspace's checks; it works while the Answer is emitted.
type Attachment struct {
	Path string // workspace-relative; its base name is the file's name
	Open func() (r io.ReadCloser, size int64, err error)
}

// Failed ends a turn that could not produce an answer. Message is short and
// meant for people; Err is for logs.
type Failed struct {
	Message string
	Err     error
}

// Notice is a reply that is not a model answer: a command's output, a
// short status line. It does not end a turn. Policy, when set, is a
// channel's policy the thread may show as a screen with buttons for
// admins (the text says the same in words).
type Notice struct {
	Text   string
	Policy *PolicyView
}

// Queued says the turn's model call waits its turn under the model's
// limits (agent/modellimit): Ahead calls wait before it; 0 when it no
// longer waits for others.
type Queued struct{ Ahead int }

func (TurnStarted) isEvent()    {}
func (Queued) isEvent()         {}
func (TextDelta) isEvent()      {}
func (ToolStarted) isEvent()    {}
func (ToolFinished) isEvent()   {}
func (ApprovalNeeded) isEvent() {}
func (Answer) isEvent()         {}
func (Failed) isEvent()         {}
func (Notice) isEvent()         {}
