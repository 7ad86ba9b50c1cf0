package agent

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Store is what the dispatcher needs to keep, durably and shared between
// replicas. store/redis and store/local implement it; store/storetest holds
// the conformance suite both pass.
//
// A session has a mailbox (inbound messages not yet answered, in arrival
// order), a lease (who runs its turn now), and a history (whole turns, oldest
// first). Only the lease holder removes mailbox entries or appends history.
type Store interface {
	GovernStore

	// Enqueue appends in to its session's mailbox unless a message with the
	// same ID was enqueued in the same chat within the dedup window. It
	// reports whether the message was new. When it returns nil the message
	// is durable.
	Enqueue(ctx context.Context, in Inbound) (added bool, err error)

	// Seen records the ID of a message that does not enter the mailbox (a
	// chat command) and reports whether it is the first time, with the same
	// dedup window as Enqueue.
	Seen(ctx context.Context, in Inbound) (first bool, err error)

	// Claim takes the session's lease for owner if nobody holds it (or owner
	// already does) and returns the mailbox and history in one step. It
	// returns ErrLeaseHeld if another owner holds the lease.
	Claim(ctx context.Context, key SessionKey, owner string, ttl time.Duration) (*Claim, error)

	// Renew extends owner's lease. ErrLeaseLost if owner no longer holds it.
	Renew(ctx context.Context, key SessionKey, owner string, ttl time.Duration) error

	// Commit appends one turn to the history, removes the first consumed
	// mailbox entries, trims the history to the store's turn limit (whole
	// turns, oldest first) and refreshes the idle TTL, all at once.
	// ErrLeaseLost if owner no longer holds the lease (nothing is written).
	Commit(ctx context.Context, key SessionKey, owner string, consumed int, turn []Message) error

	// Release drops owner's lease unless the mailbox has entries; then it
	// keeps the lease and reports pending > 0 so the owner runs another turn.
	Release(ctx context.Context, key SessionKey, owner string) (pending int, err error)

	// Abandon drops owner's lease whatever the mailbox holds, so another
	// worker (or the next start) can take the session at once. A worker
	// calls it when it stops without finishing (shutdown). It is not an
	// error if owner no longer holds the lease.
	Abandon(ctx context.Context, key SessionKey, owner string) error

	// Waiting lists the sessions whose mailbox has entries. A starting
	// process calls it to pick up messages recorded before a crash or a
	// restart; it may scan, so it is not for the hot path.
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

	// Settings returns a channel's settings; the zero value (Version 0) if
	// none were ever set.
	Settings(ctx context.Context, channel SessionKey) (ChannelSettings, error)

	// SetSettings stores s if s.Version equals the stored version, and
	// returns the stored settings with the version incremented.
	// ErrVersionConflict if another write came first.
	SetSettings(ctx context.Context, channel SessionKey, s ChannelSettings) (ChannelSettings, error)

	Close() error
}

// Claim is what a lease holder starts a turn with.
type Claim struct {
	Mailbox []Inbound // pending messages, oldest first
	History []Message
}

// ChannelSettings are a channel's stored overrides of the configured
// defaults. Version increments on every write.
type ChannelSettings struct {
	Version int64 `json:"version"`
	// Tools holds the channel's policy rules by rule name: a tool, a
	// group ("group:exec") or "default" (see [Policy]).
	Tools map[string]Rule `json:"tools,omitempty"`
}

// ToolMode is a channel's policy for one tool.
type ToolMode string

const (
	ToolAllow ToolMode = "allow"
	ToolAsk   ToolMode = "ask"
	ToolDeny  ToolMode = "deny"
)

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
