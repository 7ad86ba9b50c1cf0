// Package storelease holds the rules of session ownership and delivery that
// store/local and store/redis share: argument checks for the calls beyond a
// session lease, how an owner's boot is read (the Redis store has the same
// rule in Lua), and the mailbox's sort order, so that both stores decide
// alike.
package storelease

import (
	"fmt"
	"strings"
	"time"

	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/store/internal/storegov"
)

// Earlier reports whether holder is an earlier boot of owner's replica:
// both are written "REPLICA#BOOT" (agent.Owner), with the same non-empty
// REPLICA (everything before the last '#') and BOOT in decimal digits,
// holder's smaller. Boots compare as numbers of any length, leading zeros
// ignored, so no number is too large to compare. An owner of any other
// form is never an earlier boot, and never has one.
func Earlier(holder, owner string) bool {
	hr, hb, ok := split(holder)
	if !ok {
		return false
	}
	r, b, ok := split(owner)
	if !ok || hr != r {
		return false
	}
	if len(hb) != len(b) {
		return len(hb) < len(b)
	}
	return hb < b
}

// split returns the replica and boot of an owner written "REPLICA#BOOT",
// the boot without leading zeros.
func split(owner string) (replica, boot string, ok bool) {
	i := strings.LastIndexByte(owner, '#')
	if i <= 0 || i == len(owner)-1 {
		return "", "", false
	}
	boot = owner[i+1:]
	for j := 0; j < len(boot); j++ {
		if boot[j] < '0' || boot[j] > '9' {
			return "", "", false
		}
	}
	return owner[:i], strings.TrimLeft(boot, "0"), true
}

// GoesAfter reports whether a mailbox entry with seq stays after a new
// message with seq next: the mailbox is sorted by Inbound.Seq compared as
// bytes, an empty Seq after every other, arrival order among equals (so a
// new message without a Seq goes last).
func GoesAfter(seq, next string) bool {
	return next != "" && (seq == "" || next < seq)
}

// CheckReplica checks the argument of Boot.
func CheckReplica(replica string) error {
	if replica == "" {
		return fmt.Errorf("%w boot: empty replica name", agent.ErrInvalid)
	}
	return nil
}

// CheckNamed checks the arguments of TryLease and DropLease (ttl > 0 is
// TryLease's alone).
func CheckNamed(name, owner string) error {
	if name == "" {
		return fmt.Errorf("%w lease: empty name", agent.ErrInvalid)
	}
	if owner == "" {
		return fmt.Errorf("%w lease: empty owner", agent.ErrInvalid)
	}
	return nil
}

// CheckTTL checks a lease's ttl.
func CheckTTL(ttl time.Duration) error {
	if ttl <= 0 {
		return fmt.Errorf("%w lease: ttl %v <= 0", agent.ErrInvalid, ttl)
	}
	return nil
}

// CheckCommit checks the arguments of Commit beyond the key.
func CheckCommit(key agent.SessionKey, consumed int, out *agent.Outbound) error {
	if consumed < 0 {
		return fmt.Errorf("%w commit: consumed %d < 0", agent.ErrInvalid, consumed)
	}
	if out == nil {
		return nil
	}
	if out.ID == "" {
		return fmt.Errorf("%w commit: outbox entry without ID", agent.ErrInvalid)
	}
	if out.Spent != (agent.Spent{}) {
		if err := storegov.CheckUsage(key.Channel(), out.Spent.Day, out.Spent.Tokens); err != nil {
			return fmt.Errorf("commit: %w", err)
		}
	}
	return nil
}

// CheckDelivered checks the arguments of Delivered.
func CheckDelivered(key agent.SessionKey, id string) error {
	if err := key.Validate(); err != nil {
		return err
	}
	if id == "" {
		return fmt.Errorf("%w delivered: empty outbox entry ID", agent.ErrInvalid)
	}
	return nil
}
