package redis

import (
	"errors"
	"strconv"
	"strings"

	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/store/internal/storegov"
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
	// A session's outbox: a list of Outbound JSON, oldest first. Expires
	// like the mailbox (Commit, which adds to it, and Enqueue refresh it).
	outbox
	// How many mailbox entries the lease holder's last Claim handed out
	// and no Commit has consumed yet: an integer, set by Claim with the
	// lease's ttl, extended by Renew, lowered by Commit, deleted at 0 and
	// by Release and Abandon. Enqueue never inserts before that many
	// entries. It never outlives its lease by more than a moment, and
	// Enqueue ignores it when the lease is gone.
	claimed
	// The ID of the session's last committed turn (its outbox entry's):
	// a string, so that a Commit sent again (the reply to the first was
	// lost, the client or the dispatcher retried) changes nothing the
	// second time. Expires like the mailbox.
	committed
	// A message ID seen in a chat: expires after DedupTTL.
	dedup
	// A channel's settings: a hash of version and JSON. It has no TTL on
	// purpose: an admin's policy holds until an admin changes it, and there
	// is one per channel that ever had its policy changed.
	settings
	// A channel's token count for one day (name: the day, 2006-01-02): an
	// integer. Expires storegov.UsageTTL (8 days) after its last change.
	usage

	// The records below are global, not a channel's: each has a hash tag
	// of its own, so that a script touching several of its keys stays in
	// one slot.

	// The stored grants: a hash of storegov.Subject → Grant JSON. No TTL:
	// a grant holds until an admin revokes it, and there is one per
	// person or chat an admin let in.
	grants
	// Pairing requests by code: a hash of code → storegov.Pairing JSON.
	// With pairSubjects and pairExpiry it is changed only by the pairing
	// scripts, which also drop expired requests. The three keys expire
	// when their latest request does (each Pair extends them).
	pairCodes
	// The pending request of each subject: a hash of storegov.Subject →
	// code. Expires with pairCodes.
	pairSubjects
	// When each request expires: a sorted set of codes scored by expiry
	// (Unix ms), so the scripts find the expired ones without decoding
	// every request. Expires with pairCodes.
	pairExpiry
	// An approval (name: its ID): a hash of state, the request's JSON and,
	// once decided, the decision's JSON (storegov.Decision). Expires
	// storegov.ApprovalKeep (24h) after its deadline, so a late click is
	// answered.
	approval
	// A Once mark (name: the mark's name): "1", expiring after the mark's
	// ttl.
	once
	// A person's message count in one window (name: msgCountName, the
	// person, the window's length and its number since the epoch): an
	// integer, expiring a window's length after its first message, when
	// its window has surely ended.
	msgCount
	// A message counted toward its author's count (name: msgSeenName, the
	// author and the message): "1", expiring after CountMessage's dedup.
	msgSeen
	// The audit log: a stream of entries, one field "e" holding the
	// entry's JSON. No TTL: it is capped by length (Options.AuditCap),
	// and a record of who did what should outlive any idle time.
	audit
	// The ready set: a sorted set of SessionKey.String of sessions that
	// had a mailbox or outbox entry when last touched, scored by the
	// touch number (readySeq) at which the session entered it, so the
	// lowest score has waited longest. With readyTouch and readySeq it
	// is changed only by touchScript and sweepScript. No TTL: Ready
	// removes a member once its session is empty (including a session
	// whose keys expired), so the set holds the sessions with work
	// pending plus those emptied since the last Ready, whatever the
	// number of idle sessions.
	ready
	// The latest touch number of each member of the ready set: a hash of
	// SessionKey.String → number. Ready removes a member only if this has
	// not changed since it found the session empty, so an Enqueue that
	// lands in between is never lost. No TTL: a field goes with its
	// member.
	readyTouch
	// The touch counter: an integer incremented by every touch, so touch
	// numbers never repeat (a member removed and added again cannot be
	// mistaken for the one Ready saw). No TTL: it must never restart.
	readySeq
	// A replica's boot counter (name: the replica): an integer
	// incremented by Boot. No TTL on purpose: the owner strings built
	// from it are the leases' fencing tokens, and a counter that expired
	// and restarted at 1 would hand a new process the owner string of an
	// earlier one, whose late Commit would then pass the fencing check
	// (and the earlier boot's leases would not be taken over). It costs
	// a few bytes per replica name ever started.
	boot
	// A named lease (name: the lease's): the owner string, with the
	// lease's ttl.
	named
	// A workspace's background jobs (name: the space): a hash of "next"
	// (the last ID handed out), "job:ID" (tools.Job JSON) and "stop:ID"
	// (who asked the job to stop). Expires tools.JobKeep after its last
	// change; a running job's owner rewrites it every few seconds.
	jobs

	// The four schedule records share the tag {sched}: every schedule
	// script touches several of them at once. No TTL on any: a schedule
	// holds until it fires for the last time or someone removes it, and
	// each channel holds at most its limit of them (schedules.per_channel).

	// Every schedule by ID (name: none): a sorted set scored, for a
	// pending schedule, by its due time, for a firing one by the end of
	// its claimer's lease (Unix ms), so one range finds what fell due and
	// what a dead replica left firing.
	scheduleDue
	// The schedules: a hash of ID → schedules.Schedule JSON, as pending (its
	// firing state is in scheduleFiring and scheduleDue).
	scheduleData
	// The firing schedules: a hash of ID → the owner that claimed it.
	scheduleFiring
	// A channel's schedules (the channel's key; its threads' schedules
	// too): a set of IDs, to list them and count them against the limit.
	// Redis deletes it with its last member.
	scheduleChannel
)

// key derives every Redis key the store uses; nothing else builds one.
//
//	fm:{slack:T1:C1:}:s:slack:T1:C1:1700.01:mbox     mailbox
//	fm:{slack:T1:C1:}:s:slack:T1:C1:1700.01:hist     history
//	fm:{slack:T1:C1:}:s:slack:T1:C1:1700.01:lease    lease
//	fm:{slack:T1:C1:}:s:slack:T1:C1:1700.01:out      outbox
//	fm:{slack:T1:C1:}:s:slack:T1:C1:1700.01:claimed  claimed
//	fm:{slack:T1:C1:}:s:slack:T1:C1:1700.01:committed  committed
//	fm:{slack:T1:C1:}:d:1700000000.000200            dedup (name: message ID)
//	fm:{slack:T1:C1:}:settings                       settings
//	fm:{slack:T1:C1:}:u:2025-03-04                   usage (name: day)
//	fm:{admin}:grants                                grants
//	fm:{pair}:codes                                  pairCodes
//	fm:{pair}:subjects                               pairSubjects
//	fm:{pair}:expiry                                 pairExpiry
//	fm:{approval:0a1b2c}                             approval (name: ID)
//	fm:{once:refused%3Atelegram%3A42}                once (name)
//	fm:{msgs:slack%3AU1}:60000:29000000              msgCount (msgCountName)
//	fm:{msgs:slack%3AU1}:m:slack%3AT1%3AC1%3A%3A1.2  msgSeen (msgSeenName)
//	fm:{audit}:log                                   audit
//	fm:{ready}                                       ready
//	fm:{ready}:touch                                 readyTouch
//	fm:{ready}:seq                                   readySeq
//	fm:{boot:web-0%3A8080}                           boot (name: replica)
//	fm:{lease:telegram}                              named (name: lease)
//	fm:{jobs:slack%3AT1%3AC1%3A}                     jobs (name: space)
//	fm:{sched}:due                                   scheduleDue
//	fm:{sched}:data                                  scheduleData
//	fm:{sched}:firing                                scheduleFiring
//	fm:{sched}:c:slack:T1:C1:                        scheduleChannel (the channel's key)
//
// The hash tag of a session's keys is its channel, so a session's keys, the
// dedup records of its chat and its channel's settings share one Cluster
// slot. Tagging the session alone would not do: dedup is per chat (a message
// ID is unique in its chat whatever thread an adapter files it under), and
// Enqueue must check the dedup record and append to the mailbox in one
// script, which Cluster allows only within one slot. The cost is that the
// threads of one channel live on one shard, which a single channel's traffic
// does not strain.
//
// SessionKey.String escapes ':' inside its parts, so the parts cannot run
// into each other, and the markers s:, d:, u: and settings keep the kinds
// apart. A '}' inside a chat ID cuts the hash tag short, but at the same
// place in every key of that channel, so they still share a slot.
//
// Global keys are tagged by what they hold. The names in them (a Once
// mark's, an approval's ID) are escaped by storegov.Escape, so they hold no
// '{' or '}'. No global key is a channel's: a channel's tag is its
// SessionKey.String, which ends in ':' (the empty thread) unless a '}' in
// it cuts the tag short, and then the key goes on with another '}'; a
// global tag never ends in ':', and nothing after it holds a '}'. Once
// and approval keys are tagged by their own name: each is one key, and
// spreading them spreads their load over the Cluster. A person's message
// counts and the marks of the messages counted share the person's tag:
// CountMessage checks a mark and counts in one script, and the hot path
// (every incoming message) is still spread over the Cluster, by person. A
// message's mark needs no slot of its own, as it is only ever looked at
// with its author's count. The ready keys share one tag: touchScript and
// sweepScript change them together, and so do the schedule keys, which
// every schedule script changes together. A channel's set of schedules
// carries the channel's key after the tag, not in it, so it stays in the
// schedules' slot; the schedules of every channel are on one shard, which
// their number (a few per channel) and their traffic (a look a second per
// replica) do not strain.
func (s *Store) key(r record, k agent.SessionKey, name string) string {
	switch r {
	case grants:
		return s.prefix + ":{admin}:grants"
	case pairCodes:
		return s.prefix + ":{pair}:codes"
	case pairSubjects:
		return s.prefix + ":{pair}:subjects"
	case pairExpiry:
		return s.prefix + ":{pair}:expiry"
	case approval:
		return s.prefix + ":{approval:" + storegov.Escape(name) + "}"
	case once:
		return s.prefix + ":{once:" + storegov.Escape(name) + "}"
	case msgCount, msgSeen:
		who, rest, _ := strings.Cut(name, ":")
		return s.prefix + ":{msgs:" + who + "}:" + rest
	case audit:
		return s.prefix + ":{audit}:log"
	case ready:
		return s.prefix + ":{ready}"
	case readyTouch:
		return s.prefix + ":{ready}:touch"
	case readySeq:
		return s.prefix + ":{ready}:seq"
	case boot:
		return s.prefix + ":{boot:" + storegov.Escape(name) + "}"
	case named:
		return s.prefix + ":{lease:" + storegov.Escape(name) + "}"
	case jobs:
		return s.prefix + ":{jobs:" + storegov.Escape(name) + "}"
	case scheduleDue:
		return s.prefix + ":{sched}:due"
	case scheduleData:
		return s.prefix + ":{sched}:data"
	case scheduleFiring:
		return s.prefix + ":{sched}:firing"
	case scheduleChannel:
		return s.prefix + ":{sched}:c:" + k.Channel().String()
	}
	tag := s.prefix + ":{" + k.Channel().String() + "}:"
	switch r {
	case mailbox:
		return tag + "s:" + k.String() + ":mbox"
	case history:
		return tag + "s:" + k.String() + ":hist"
	case lease:
		return tag + "s:" + k.String() + ":lease"
	case outbox:
		return tag + "s:" + k.String() + ":out"
	case claimed:
		return tag + "s:" + k.String() + ":claimed"
	case committed:
		return tag + "s:" + k.String() + ":committed"
	case dedup:
		return tag + "d:" + name
	case settings:
		return tag + "settings"
	case usage:
		return tag + "u:" + name
	}
	panic("redis: unknown record kind")
}

// msgCountName is the name of a person's msgCount key: the person's name
// (escaped, so the ':' after it is the first, where key ends the hash
// tag), the window's length in milliseconds and the window's number.
func msgCountName(who string, wms, n int64) string {
	return storegov.Escape(who) + ":" + strconv.FormatInt(wms, 10) + ":" + strconv.FormatInt(n, 10)
}

// msgSeenName is the name of a message's msgSeen key: its author's name
// and the message's, both escaped, apart from the author's counts by the
// "m" where theirs have a window's length.
func msgSeenName(who, message string) string {
	return storegov.Escape(who) + ":m:" + storegov.Escape(message)
}

// pairKeys returns the keys the pairing scripts take, in the order they
// expect them.
func (s *Store) pairKeys() []string {
	return []string{s.key(pairCodes, agent.SessionKey{}, ""), s.key(pairSubjects, agent.SessionKey{}, ""), s.key(pairExpiry, agent.SessionKey{}, "")}
}

// sessionKeys returns the keys the session scripts take, in the order they
// expect them.
func (s *Store) sessionKeys(k agent.SessionKey) []string {
	return []string{s.key(lease, k, ""), s.key(mailbox, k, ""), s.key(history, k, ""), s.key(outbox, k, ""), s.key(claimed, k, ""), s.key(committed, k, "")}
}

// readyKeys returns the keys the ready scripts take, in the order they
// expect them.
func (s *Store) readyKeys() []string {
	return []string{s.key(ready, noKey, ""), s.key(readyTouch, noKey, ""), s.key(readySeq, noKey, "")}
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
