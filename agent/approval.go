package agent

import "time"

// ApprovalState is where an approval stands.
type ApprovalState string

const (
	ApprovalPending  ApprovalState = "pending"
	ApprovalApproved ApprovalState = "approved"
	ApprovalDenied   ApprovalState = "denied"
	ApprovalExpired  ApprovalState = "expired" // no decision before the deadline: a denial
)

// Approval is a tool call waiting for (or given) a person's decision, as
// the gate keeps it.
type Approval struct {
	ID     string     `json:"id"`
	Key    SessionKey `json:"key"` // the session whose turn asked
	CallID string     `json:"call_id"`
	Tool   string     `json:"tool"` // the rule asked about: a tool, or skill:NAME
	// Args are the call's arguments as people see them (secrets scrubbed),
	// whole: a prompt that shows part of a command must say so.
	Args string `json:"args"`
	// Requester is the author of the message the turn answered; Authors
	// are the authors of every message it answered (several people's
	// messages can make one turn). An approval comes from an admin or
	// from one of them.
	Requester User          `json:"requester"`
	Authors   []User        `json:"authors,omitempty"`
	Asked     time.Time     `json:"asked"`
	Deadline  time.Time     `json:"deadline"`
	State     ApprovalState `json:"state"`
	DecidedBy User          `json:"decided_by,omitzero"`
	DecidedAt time.Time     `json:"decided_at,omitzero"`
	Always    bool          `json:"always,omitempty"` // approved with "always allow here"
	// Why says why it was decided without a person's click (the requester
	// lost access; the deadline passed).
	Why string `json:"why,omitempty"`
	// Calls are what runs once it is approved: the call asked about, then
	// the rest of its step, as the model made them.
	Calls []ToolCall `json:"calls,omitempty"`
	// Trigger is the message the turn that asked answered: the turn the
	// decision resumes answers it too (it replies to it, marks it done).
	Trigger Inbound `json:"trigger,omitzero"`
}

// Decision is a person's click on an approval's button.
type Decision struct {
	ApprovalID string
	Chat       SessionKey // where the click came from
	User       User
	Approve    bool
	Always     bool // approve and allow the tool in this channel from now on (admins)
}

// Decided is what a click did, for the platform to tell the person who
// clicked (a callback answer, an ephemeral message).
type Decided struct {
	Approval Approval
	Applied  bool   // this click decided it
	Notice   string // what to tell the person who clicked
}
