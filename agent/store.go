package agent

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Sessions is what the Dispatcher keeps, durably and shared between
// replicas: each session's mailbox, lease, history and outbox. The stores
// (store/redis, store/local) implement it with the other roles (the
// gate's governance, schedules, the job board, the poll lease);
// store/storetest holds the conformance suite, one file per role.
//
// A session has a mailbox (inbound messages not yet answered, in arrival
// order), a lease (who runs its turn now), and a history (whole turns, oldest
// first). Only the lease holder removes mailbox entries or appends history.
type Sessions interface {
	// Enqueue adds in to its session's mailbox unless a message with the
	// same ID was enqueued in the same chat within the dedup window. It
	// reports whether the message was new. When it returns nil the message
	// is durable, and the session is ready (see Ready) until its mailbox
	// is empty.
	//
	// The mailbox keeps the platform's order (Inbound.Seq, compared as
	// strings; a message without one goes last), whatever order deliveries
	// arrive in, except that a message never goes before entries a running
	// turn claimed: those are consumed first, by count.
	Enqueue(ctx context.Context, in Inbound) (added bool, err error)

	// Seen records the ID of a message that does not enter the mailbox (a
	// chat command) and reports whether it is the first time, with the same
	// dedup window as Enqueue.
	Seen(ctx context.Context, in Inbound) (first bool, err error)

	// Claim takes the session's lease for owner if nobody holds it (or owner
	// already does) and returns the mailbox, the history and the outbox in
	// one step. It returns ErrLeaseHeld if another owner holds the lease.
	//
	// An owner written "REPLICA#BOOT" ([Owner]) also takes a lease held by
	// an earlier boot of the same replica: that process is gone (it
	// crashed and this one replaced it), so its sessions need not wait out
	// the lease's TTL.
	Claim(ctx context.Context, key SessionKey, owner string, ttl time.Duration) (*Claim, error)

	// Renew extends owner's lease. ErrLeaseLost if owner no longer holds it.
	Renew(ctx context.Context, key SessionKey, owner string, ttl time.Duration) error

	// Commit appends one turn to the history, removes the first consumed
	// mailbox entries, adds out (if not nil) to the session's outbox, trims
	// the history to the store's turn limit (whole turns, oldest first) and
	// refreshes the idle TTL, all at once. ErrLeaseLost if owner no longer
	// holds the lease (nothing is written): the owner is the fencing token,
	// unique to one process's life, so a stale holder can never commit.
	Commit(ctx context.Context, key SessionKey, owner string, consumed int, turn []Message, out *Outbound) error

	// Delivered removes the outbox entry with that ID: it was shown. It is
	// not an error if there is none (another holder delivered it).
	Delivered(ctx context.Context, key SessionKey, id string) error

	// Ready lists up to limit sessions whose mailbox or outbox has entries
	// and whose lease nobody holds, the longest waiting first: a holder
	// died, or a turn was handed back at shutdown. Every replica polls it
	// and claims what it finds, so nothing waits for a restart or a new
	// message. It must stay cheap with many idle sessions (no full scan).
	Ready(ctx context.Context, limit int) ([]SessionKey, error)

	// Release drops owner's lease unless the mailbox has entries; then it
	// keeps the lease and reports pending > 0 so the owner runs another turn.
	// With shown not empty it first removes that outbox entry, as Delivered
	// does (whether or not owner holds the lease): the turn's answer and the
	// session's release in one call.
	Release(ctx context.Context, key SessionKey, owner, shown string) (pending int, err error)

	// Abandon drops owner's lease whatever the mailbox holds, so another
	// worker (or the next start) can take the session at once. A worker
	// calls it when it stops without finishing (shutdown). It is not an
	// error if owner no longer holds the lease.
	Abandon(ctx context.Context, key SessionKey, owner string) error

	// Waiting lists the sessions whose mailbox has entries, sorted by
	// SessionKey.String. It may scan, so it is for tools and tests, not
	// for the hot path (see Ready).
	Waiting(ctx context.Context) ([]SessionKey, error)

	// History returns the session's history, oldest first.
	History(ctx context.Context, key SessionKey) ([]Message, error)

	// Reset deletes the session's history (not its mailbox or lease).
	Reset(ctx context.Context, key SessionKey) error

	// Active reports whether the session has history or waiting messages:
	// the bot takes part in it. (A reply in a thread the bot answers in is
	// addressed to the bot without a mention.)
	Active(ctx context.Context, key SessionKey) (bool, error)

	// Pending counts the session's mailbox entries.
	Pending(ctx context.Context, key SessionKey) (int, error)
}

// Claim is what a lease holder starts a turn with.
type Claim struct {
	Mailbox []Inbound // pending messages, in the platform's order
	History []Message
	Outbox  []Outbound // answers committed but not yet shown, oldest first
	// Settings are the channel's settings as they were at the claim (zero
	// if none are stored), read with it to spare the turn a round trip;
	// nil from a store that does not read them, and the turn reads them.
	Settings *ChannelSettings
}

// Outbound is a turn's answer (or its failure message), committed with the
// turn and shown from the outbox, so that a crash between the commit and
// the platform call loses nothing: whoever claims the session next shows
// it. What remains is a duplicate if the crash falls between the platform
// call and Delivered.
type Outbound struct {
	ID      string  `json:"id"`
	Trigger Inbound `json:"trigger"` // the message it answers, to reply to it
	Answer  string  `json:"answer,omitempty"`
	Failure string  `json:"failure,omitempty"` // said instead of an answer
	// Ask is the approval the turn waits for, shown with its question;
	// Answer then holds what the model wrote before the call, if anything.
	Ask   *Approval     `json:"ask,omitempty"`
	Files []string      `json:"files,omitempty"` // workspace-relative, attached to the answer
	Steps int           `json:"steps,omitempty"`
	Tools int           `json:"tools,omitempty"`
	Took  time.Duration `json:"took,omitempty"`
	// Spent is what the turn's last model calls used that its channel's
	// count does not hold yet: the commit adds it (once, however often it
	// is sent), which spares the turn a round trip. Not kept in the outbox.
	Spent Spent `json:"-"`
}

// Spent is a number of tokens to add to a channel's count for a day.
type Spent struct {
	Day    string // "2006-01-02", UTC
	Tokens int64
}

// Owner names a lease holder: a replica's stable name (its host or pod,
// and its port) and its boot number (a store counts a replica's boots),
// unique to one process's life.
func Owner(replica string, boot int64) string { return fmt.Sprintf("%s#%d", replica, boot) }

// ValidateLease checks the arguments of a lease operation.
func ValidateLease(key SessionKey, owner string, ttl time.Duration) error {
	if err := key.Validate(); err != nil {
		return err
	}
	if owner == "" {
		return fmt.Errorf("%w lease: empty owner", ErrInvalid)
	}
	if ttl <= 0 {
		return fmt.Errorf("%w lease: ttl %v <= 0", ErrInvalid, ttl)
	}
	return nil
}

var (
	ErrLeaseHeld       = errors.New("session lease held by another worker")
	ErrLeaseLost       = errors.New("session lease lost")
	ErrVersionConflict = errors.New("settings changed concurrently")
	// ErrNotFound is returned for a record that does not exist or expired.
	ErrNotFound = errors.New("not found")
)

// Retention bounds what a store keeps. Stores take it at construction.
type Retention struct {
	MaxTurns   int           // history turns kept per session (whole turns)
	HistoryTTL time.Duration // a session idle this long is forgotten
	DedupTTL   time.Duration // how long a message ID is remembered
}

// DefaultRetention is what a store uses for zero fields.
var DefaultRetention = Retention{MaxTurns: 200, HistoryTTL: 30 * 24 * time.Hour, DedupTTL: 24 * time.Hour}

// WithDefaults fills zero fields from DefaultRetention.
func (r Retention) WithDefaults() Retention {
	if r.MaxTurns <= 0 {
		r.MaxTurns = DefaultRetention.MaxTurns
	}
	if r.HistoryTTL <= 0 {
		r.HistoryTTL = DefaultRetention.HistoryTTL
	}
	if r.DedupTTL <= 0 {
		r.DedupTTL = DefaultRetention.DedupTTL
	}
	return r
}
