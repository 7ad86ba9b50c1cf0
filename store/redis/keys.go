package redis

import (
	"errors"
	"strings"

	"github.com/firstmate/firstmate/agent"
)

// record names one kind of key the store keeps.
type record int

const (
	// A session's pending messages: a list of Inbound JSON, oldest first.
	// Expires HistoryTTL after the session's last Enqueue or Commit.
	mailbox record = iota
	// A session's history: a list with one element per turn, each a JSON
	// array of the turn's messages, so trimming never splits a turn.
	// Expires like the mailbox.
	history
	// A session's lease: the owner string, with the lease's ttl.
	lease
	// A message ID seen in a chat: expires after DedupTTL.
	dedup
	// A channel's settings: a hash of version and JSON. It has no TTL on
	// purpose: an admin's policy holds until an admin changes it, and there
	// is one per channel that ever had its policy changed.
	settings
)

// key derives every Redis key the store uses; nothing else builds one.
//
//	fm:{slack:T1:C1:}:s:slack:T1:C1:1700.01:mbox   mailbox
//	fm:{slack:T1:C1:}:s:slack:T1:C1:1700.01:hist   history
//	fm:{slack:T1:C1:}:s:slack:T1:C1:1700.01:lease  lease
//	fm:{slack:T1:C1:}:d:1700000000.000200          dedup (message ID)
//	fm:{slack:T1:C1:}:settings                     settings
//
// The hash tag is the session's channel, so a session's keys, the dedup
// records of its chat and its channel's settings share one Cluster slot.
// Tagging the session alone would not do: dedup is per chat (a message ID is
// unique in its chat whatever thread an adapter files it under), and Enqueue
// must check the dedup record and append to the mailbox in one script, which
// Cluster allows only within one slot. The cost is that the threads of one
// channel live on one shard, which a single channel's traffic does not strain.
//
// SessionKey.String escapes ':' inside its parts, so the parts cannot run
// into each other, and the markers s:, d: and settings keep the kinds apart.
// A '}' inside a chat ID cuts the hash tag short, but at the same place in
// every key of that channel, so they still share a slot.
func (s *Store) key(r record, k agent.SessionKey, messageID string) string {
	tag := s.prefix + ":{" + k.Channel().String() + "}:"
	switch r {
	case mailbox:
		return tag + "s:" + k.String() + ":mbox"
	case history:
		return tag + "s:" + k.String() + ":hist"
	case lease:
		return tag + "s:" + k.String() + ":lease"
	case dedup:
		return tag + "d:" + messageID
	case settings:
		return tag + "settings"
	}
	panic("redis: unknown record kind")
}

// sessionKeys returns the keys the session scripts take, in the order they
// expect them.
func (s *Store) sessionKeys(k agent.SessionKey) []string {
	return []string{s.key(lease, k, ""), s.key(mailbox, k, ""), s.key(history, k, "")}
}

// mailboxSession returns the session whose mailbox key is k, or false if k
// is not the mailbox key of one of s's sessions.
func (s *Store) mailboxSession(k string) (agent.SessionKey, bool) {
	rest, ok := strings.CutSuffix(k, ":mbox")
	if !ok {
		return agent.SessionKey{}, false
	}
	// A session key's String() has exactly three ':' of its own (its parts
	// escape theirs), so it is the last four ':'-separated fields. Neither
	// the first ":s:" nor the first "}:s:" would do: both can occur inside
	// the channel's part of the hash tag.
	i := len(rest)
	for range 4 {
		if i = strings.LastIndexByte(rest[:i], ':'); i < 0 {
			return agent.SessionKey{}, false
		}
	}
	key, err := agent.ParseSessionKey(rest[i+1:])
	// Rebuilding the key checks the rest: the prefix, the hash tag and the
	// s: marker.
	if err != nil || s.key(mailbox, key, "") != k {
		return agent.SessionKey{}, false
	}
	return key, true
}

// globEscape quotes s for a SCAN MATCH pattern, whose glob syntax gives
// '*', '?', '[', ']' and '\' a meaning; a prefix may contain any of them.
func globEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '*', '?', '[', ']', '\\':
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// DefaultPrefix starts every key when Options.Prefix is empty.
const DefaultPrefix = "fm"

func checkPrefix(p string) error {
	// A brace in the prefix would become the hash tag and put every key in
	// one slot, or split a session across slots.
	if strings.ContainsAny(p, "{}") {
		return errors.New("redis: key prefix must not contain '{' or '}'")
	}
	return nil
}
