package govern

import (
	"context"
	"time"

	"github.com/firstmate/firstmate/agent"
)

// Store is what admins' decisions need kept, durably and shared between
// replicas: a channel's settings (its policy and time zone), who may talk
// to the bot (grants and pairing codes), approvals of tool calls, the
// audit log and usage counters. store/redis and store/local implement it;
// store/storetest holds its conformance tests.
type Store interface {
	// Settings returns a channel's settings; the zero value (Version 0) if
	// none were ever set.
	Settings(ctx context.Context, channel agent.SessionKey) (agent.ChannelSettings, error)
	// SetSettings stores s if s.Version equals the stored version, and
	// returns the stored settings with the version incremented.
	// agent.ErrVersionConflict if another write came first.
	SetSettings(ctx context.Context, channel agent.SessionKey, s agent.ChannelSettings) (agent.ChannelSettings, error)

	// Allowed reports whether a grant for (platform, kind, id) is stored.
	Allowed(ctx context.Context, platform string, kind GrantKind, id string) (bool, error)
	// Allow stores g (replacing a grant for the same subject).
	Allow(ctx context.Context, g Grant) error
	// Revoke removes the grant for the subject and reports whether there
	// was one.
	Revoke(ctx context.Context, platform string, kind GrantKind, id string) (bool, error)
	// Grants lists the stored grants, of every platform when platform is
	// empty, sorted by platform, kind, then ID.
	Grants(ctx context.Context, platform string) ([]Grant, error)

	// Pair records a pairing request for p's subject unless one that has
	// not expired exists; it returns the request that is stored and
	// whether it is new (only a new one is told to the person). p.Code
	// must be unique; the request expires at p.Expires.
	Pair(ctx context.Context, p Pairing) (stored Pairing, created bool, err error)
	// TakePairing removes the request with that code and returns it;
	// agent.ErrNotFound if there is none or it expired. Of two callers
	// with one code, one gets it.
	TakePairing(ctx context.Context, code string) (Pairing, error)
	// Pairings lists the requests that have not expired, oldest first.
	Pairings(ctx context.Context) ([]Pairing, error)

	// Once reports whether name was not marked within ttl, and marks it:
	// the first caller in a window gets true. (One refusal message per
	// person, one budget notice per window.)
	Once(ctx context.Context, name string, ttl time.Duration) (bool, error)

	// PutApproval stores a new approval request (state pending). It keeps
	// it for a while after its deadline so late clicks are answered.
	PutApproval(ctx context.Context, a agent.Approval) error
	// Approval returns the approval with that ID; agent.ErrNotFound if
	// unknown.
	Approval(ctx context.Context, id string) (agent.Approval, error)
	// DecideApproval sets the state, decider and time of a pending
	// approval, atomically. If it was already decided it is left as it is;
	// decided reports whether this call decided it. agent.ErrNotFound if
	// unknown.
	DecideApproval(ctx context.Context, id string, d ApprovalDecision) (a agent.Approval, decided bool, err error)

	// Audit appends e to the audit log, which keeps the newest entries up
	// to the store's cap. The store sets e.ID (ordered by time) and, if
	// zero, e.Time.
	Audit(ctx context.Context, e AuditEntry) error
	// AuditLog returns entries matching q, oldest first, at most q.Limit
	// (the newest ones when there are more).
	AuditLog(ctx context.Context, q AuditQuery) ([]AuditEntry, error)

	// AddUsage adds tokens to a channel's count for day ("2006-01-02",
	// UTC) and returns the new total. Counts expire after a few days.
	AddUsage(ctx context.Context, channel agent.SessionKey, day string, tokens int64) (int64, error)
	// Usage returns a channel's count for day.
	Usage(ctx context.Context, channel agent.SessionKey, day string) (int64, error)
	// CountMessage counts a message toward its author's budget of limit
	// messages in the current fixed window of length window (aligned to the
	// Unix epoch), in one atomic step: who names the author, message the
	// message (its chat and its ID). A message already counted within the
	// last dedup (a platform delivering it again) is not counted again. The
	// one message that takes the count past limit is to be told of; the
	// ones after it in the window are not.
	CountMessage(ctx context.Context, who, message string, limit int64, window, dedup time.Duration) (MessageCount, error)
}

// MessageCount is what CountMessage made of a message.
type MessageCount struct {
	// N is the author's count in the current window, this message
	// included once.
	N int64
	// First reports whether this call counted the message; false for one
	// counted before.
	First bool
	// Tell reports whether this message is the first over the limit in
	// the window: the one its author is told about.
	Tell bool
}

// GrantKind is what a grant lets in: a person, or everyone in a chat.
type GrantKind string

const (
	GrantUser GrantKind = "user"
	GrantChat GrantKind = "chat"
)

// Grant lets a user or a chat talk to the bot, stored by an admin (a
// pairing approval, `firstmate admin access allow`).
type Grant struct {
	Platform string    `json:"platform"`
	Kind     GrantKind `json:"kind"`
	ID       string    `json:"id"`             // user ID, or chat ID
	Name     string    `json:"name,omitempty"` // as last seen, for lists
	By       string    `json:"by,omitempty"`   // who granted it
	At       time.Time `json:"at"`
}

// Pairing is a stranger's request to talk to the bot, waiting for an admin
// to approve its code.
type Pairing struct {
	Code     string           `json:"code"`
	Platform string           `json:"platform"`
	Kind     GrantKind        `json:"kind"` // what approving it grants
	ID       string           `json:"id"`
	Name     string           `json:"name,omitempty"`
	Chat     agent.SessionKey `json:"chat"` // where it was asked
	Created  time.Time        `json:"created"`
	Expires  time.Time        `json:"expires"`
}

// ApprovalDecision is what DecideApproval writes.
type ApprovalDecision struct {
	State  agent.ApprovalState
	By     agent.User
	At     time.Time
	Always bool
	Why    string // why it was decided without a person's click
}

// AuditEntry is one line of the audit log.
type AuditEntry struct {
	ID       string    `json:"id"` // set by the store; ordered by time
	Time     time.Time `json:"time"`
	Action   string    `json:"action"` // see the Audit* constants
	Platform string    `json:"platform,omitempty"`
	Channel  string    `json:"channel,omitempty"` // SessionKey.Channel().String(); empty for global actions
	// User is who did it (platform user ID "slack:U0123", "cli:NAME",
	// "console"); for a turn that answered several people, all of them,
	// comma-separated.
	User     string        `json:"user,omitempty"`
	Tool     string        `json:"tool,omitempty"`
	Args     string        `json:"args,omitempty"` // short, secrets scrubbed
	Outcome  string        `json:"outcome,omitempty"`
	Duration time.Duration `json:"duration,omitempty"`
	Detail   string        `json:"detail,omitempty"`
}

// Audit actions.
const (
	AuditPolicySet       = "policy.set"
	AuditPolicyRefused   = "policy.refused" // a non-admin tried
	AuditAccessAllow     = "access.allow"
	AuditAccessRevoke    = "access.revoke"
	AuditAccessRefused   = "access.refused" // a stranger was turned away
	AuditAccessRefusedOp = "access.change_refused"
	AuditPairRequest     = "pair.request"
	AuditPairApprove     = "pair.approve"
	AuditApprovalAsked   = "approval.asked"
	AuditApprovalDecided = "approval.decided" // Outcome: approved, denied, expired
	AuditApprovalRefused = "approval.refused" // a click by someone who may not decide
	AuditToolCall        = "tool.call"        // Outcome: ok, error, denied
	AuditBudget          = "budget.exceeded"
	AuditJobStopped      = "job.stopped" // a running job the gate stopped, or an admin
	AuditTimeZoneSet     = "timezone.set"
	AuditTimeZoneRefused = "timezone.refused" // a non-admin tried
	AuditScheduleAdd     = "schedule.add"
	AuditScheduleRemove  = "schedule.remove"
	AuditScheduleSkipped = "schedule.skipped" // it came due, and the gate did not let it post
)

// AuditQuery selects audit entries.
type AuditQuery struct {
	Channel string    // SessionKey.Channel().String(); empty: all
	Since   time.Time // zero: from the start
	Limit   int       // 0: 1000
}
