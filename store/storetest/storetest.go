// Package storetest is the conformance suite for agent.Store. store/redis and
// store/local both run it, so the dispatcher sees one behaviour whichever
// store the operator picked: the suite, not either implementation, is the
// reference for what agent.Store's comments mean in the corner cases.
//
// Beyond agent/store.go the suite pins down these decisions:
//
//   - Dedup is per chat (platform, team, chat): the same message ID in another
//     thread of the same chat is a duplicate; in another chat it is not.
//   - Enqueue and Seen need a valid key and a non-empty MessageID, and share
//     one dedup record: a message is first either as a command or as a
//     mailbox entry, never both.
//   - A turn with no messages appends nothing to the history.
//   - Commit with consumed larger than the mailbox empties the mailbox.
//   - The mailbox is sorted by Inbound.Seq compared byte by byte (not by a
//     locale's collation), a message without a Seq after every one with,
//     arrival order among equals; a duplicate moves nothing.
//   - A Claim records how many entries it handed out (the whole mailbox);
//     Enqueue puts nothing before them. A Commit lowers that count by
//     consumed, so a Commit of part of a claim keeps the rest in front;
//     Release (even when it keeps the lease), Abandon and the lease's
//     expiry forget it; the next Claim records a new one. The mailbox is
//     therefore sorted after the claimed entries, not across them.
//   - Commit's outbox entry needs an ID (agent.ErrInvalid otherwise, and
//     nothing is written). Delivered needs no lease, removes only that
//     session's entry, and is not an error for an ID it does not have.
//     Reset keeps the outbox; it expires with the rest of the session.
//   - Ready lists sessions in the order they got work (a mailbox or outbox
//     entry) since a Ready last found them without any, so a session
//     emptied and given mail again between two Ready calls may keep its
//     place. Any live lease keeps a session out, an earlier boot's too
//     (Claim takes that one over; Ready waits for its TTL). A limit <= 0
//     lists nothing. Release looks at the mailbox only: it drops the lease
//     with an outbox entry left, and the session is ready.
//   - An owner takes over a lease held by an earlier boot of its replica
//     when both are written REPLICA#BOOT (agent.Owner): REPLICA is all
//     before the last '#' and not empty, BOOT is decimal digits, compared
//     as a number of any length. No other owner takes over, and no other
//     holder is taken from. The old holder's Commit, Renew and Release
//     fail with ErrLeaseLost; its Abandon does nothing.
//   - Boot counts per replica name (opaque, like other names from
//     outside) and per store, from 1; an empty name is agent.ErrInvalid.
//   - Named leases are apart from session leases; DropLease by someone who
//     does not hold one does nothing. An empty name or owner and a ttl <= 0
//     are agent.ErrInvalid.
//   - Release by someone who does not hold the lease is ErrLeaseLost;
//     Abandon by someone who does not hold it does nothing and succeeds.
//   - Waiting lists sessions sorted by SessionKey.String, and only those of
//     its own store (another file, another Redis key prefix).
//   - Malformed arguments (a key without platform or chat, a message without
//     ID, an empty owner, a ttl <= 0, a negative consumed count) are errors
//     wrapping agent.ErrInvalid, and write nothing.
//   - A session idle for HistoryTTL (no Enqueue and no Commit) is forgotten
//     whole: history and mailbox.
//   - Settings of a thread key are its channel's settings.
//   - Tool call arguments round-trip byte for byte when compact (no HTML
//     escaping of '<', '>' or '&').
//
// And for agent.GovernStore:
//
//   - Names from outside (grant IDs, Once and Hit names, approval and
//     pairing IDs) are opaque: "a:b", "a%3Ab" and "{a}" are three names, and
//     a grant's platform, kind and ID never run into each other.
//   - A grant needs a platform, a kind (user or chat) and an ID; a pairing
//     request also a code and an expiry in the future; anything else is
//     agent.ErrInvalid and stores nothing.
//   - Pair with a code that another live request has is an error; an
//     expired request's code is free again, and so is its subject.
//   - TakePairing and Approval of an empty code or ID are agent.ErrNotFound.
//   - PutApproval stores a pending approval (an empty state means pending;
//     another state is agent.ErrInvalid); a second PutApproval with the same
//     ID fails and changes nothing. An approval is kept after its deadline
//     (24 hours), so that a late click is answered.
//   - DecideApproval's state must be a decision (approved, denied,
//     expired); a zero time is the store's now.
//   - Hit counts each window length apart: a name's per-minute and
//     per-hour counts do not add up.
//   - AddUsage takes a day written 2006-01-02 and tokens >= 0; a thread's
//     usage is its channel's.
//   - The audit log's IDs are the store's (an ID given to Audit is not
//     kept), distinct and in the order entries were appended; Since compares
//     the entries' Time; the cap applies to what AuditLog returns at once,
//     whatever the store keeps a little longer.
//
// Tests that wait for a TTL use TTLs of about a second and run in parallel,
// so the whole suite takes a couple of seconds.
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/firstmate/firstmate/agent"
)

// Config is what a store is opened with for one test.
type Config struct {
	Retention agent.Retention
	// AuditCap is how many audit entries the store keeps; 0 means the
	// store's default.
	AuditCap int
}

// Run runs the conformance suite. open must return a fresh, isolated, empty
// store configured by c each time it is called; it may register cleanups on
// t (removing files, deleting keys). Run closes every store it opened before
// those cleanups run.
func Run(t *testing.T, open func(t *testing.T, c Config) agent.Store) {
	s := suite{open: open}
	for _, tc := range []struct {
		name string
		fn   func(*testing.T)
	}{
		{"EnqueueDedup", s.testEnqueueDedup},
		{"InvalidArguments", s.testInvalid},
		{"Seen", s.testSeen},
		{"DedupExpires", s.testDedupExpires},
		{"MailboxOrder", s.testMailboxOrder},
		{"Claim", s.testClaim},
		{"LeaseExpires", s.testLeaseExpires},
		{"RenewExtends", s.testRenewExtends},
		{"CommitByNonHolder", s.testCommitByNonHolder},
		{"CommitConsumed", s.testCommitConsumed},
		{"CommitTrimsWholeTurns", s.testCommitTrims},
		{"Release", s.testRelease},
		{"Abandon", s.testAbandon},
		{"Waiting", s.testWaiting},
		{"SessionsIsolated", s.testIsolation},
		{"Reset", s.testReset},
		{"Active", s.testActive},
		{"HistoryExpires", s.testHistoryExpires},
		{"Settings", s.testSettings},
		{"RoundTrip", s.testRoundTrip},
		{"CanceledContext", s.testCanceled},
		{"ConcurrentEnqueue", s.testConcurrentEnqueue},
		{"ConcurrentClaim", s.testConcurrentClaim},
		{"ConcurrentSetSettings", s.testConcurrentSetSettings},
		{"MailboxPlatformOrder", s.testMailboxPlatformOrder},
		{"ConcurrentOutOfOrder", s.testConcurrentOutOfOrder},
		{"EnqueueAfterClaimed", s.testEnqueueAfterClaimed},
		{"Outbox", s.testOutbox},
		{"CommitSpent", s.testCommitSpent},
		{"CommitTwice", s.testCommitTwice},
		{"Ready", s.testReady},
		{"ReadyManyIdle", s.testReadyManyIdle},
		{"ReadyConcurrent", s.testReadyConcurrent},
		{"ClaimEarlierBoot", s.testClaimEarlierBoot},
		{"Boot", s.testBoot},
		{"NamedLease", s.testNamedLease},
		{"Grants", s.testGrants},
		{"Pairing", s.testPairing},
		{"PairingExpires", s.testPairingExpires},
		{"ConcurrentTakePairing", s.testConcurrentTakePairing},
		{"ConcurrentPair", s.testConcurrentPair},
		{"Once", s.testOnce},
		{"Hit", s.testHit},
		{"Usage", s.testUsage},
		{"Approval", s.testApproval},
		{"ConcurrentDecideApproval", s.testConcurrentDecide},
		{"Audit", s.testAudit},
		{"AuditPaging", s.testAuditPaging},
		{"AuditCap", s.testAuditCap},
		{"ConcurrentAudit", s.testConcurrentAudit},
		{"GovernInvalidArguments", s.testGovernInvalid},
		{"JobBoard", s.testJobBoard},
		{"JobBoardConcurrent", s.testJobBoardConcurrent},
		{"Schedules", s.testSchedules},
		{"ScheduleClaim", s.testScheduleClaim},
		{"ScheduleLeaseExpires", s.testScheduleLeaseExpires},
		{"ScheduleConcurrentClaim", s.testScheduleConcurrentClaim},
		{"ScheduleInvalid", s.testScheduleInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Every test has its own store, so they can all run at once;
			// that keeps the TTL waits from adding up.
			t.Parallel()
			tc.fn(t)
		})
	}
}

type suite struct {
	open func(*testing.T, Config) agent.Store
}

// store opens a store with retention ret and closes it when t ends.
func (s suite) store(t *testing.T, ret agent.Retention) agent.Store {
	t.Helper()
	return s.storeWith(t, Config{Retention: ret})
}

// storeWith opens a store configured by c and closes it when t ends.
func (s suite) storeWith(t *testing.T, c Config) agent.Store {
	t.Helper()
	st := s.open(t, c)
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return st
}

var (
	chanA   = agent.SessionKey{Platform: "slack", Team: "T1", Chat: "C1"}
	threadA = agent.SessionKey{Platform: "slack", Team: "T1", Chat: "C1", Thread: "1700000000.000100"}
	threadB = agent.SessionKey{Platform: "slack", Team: "T1", Chat: "C1", Thread: "1700000000.000200"}
	chanB   = agent.SessionKey{Platform: "slack", Team: "T1", Chat: "C2"}
)

const minute = time.Minute

func inbound(key agent.SessionKey, id string) agent.Inbound {
	return agent.Inbound{
		Key:       key,
		MessageID: id,
		User:      agent.User{ID: "U1"},
		Text:      "text of " + id,
		Time:      time.Unix(1700000000, 0).UTC(),
	}
}

// turn returns a turn of n messages whose contents name it: a question,
// tool calls and their results, an answer.
func turn(name string, n int) []agent.Message {
	msgs := make([]agent.Message, n)
	for i := range msgs {
		call := fmt.Sprintf("%s-call-%d", name, i-(i+1)%2)
		switch {
		case i == 0:
			msgs[i] = agent.Message{Role: agent.RoleUser, Content: name + " question"}
		case i == n-1:
			msgs[i] = agent.Message{Role: agent.RoleAssistant, Content: name + " answer"}
		case i%2 == 1:
			msgs[i] = agent.Message{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{{ID: call, Name: "ls", Args: json.RawMessage(`{}`)}}}
		default:
			msgs[i] = agent.Message{Role: agent.RoleTool, ToolCallID: call, ToolName: "ls", Content: "a.txt"}
		}
	}
	return msgs
}

func enqueue(t *testing.T, st agent.Store, in agent.Inbound, want bool) {
	t.Helper()
	added, err := st.Enqueue(t.Context(), in)
	if err != nil {
		t.Fatalf("Enqueue(%v, %q): %v", in.Key, in.MessageID, err)
	}
	if added != want {
		t.Fatalf("Enqueue(%v, %q) added = %v, want %v", in.Key, in.MessageID, added, want)
	}
}

func claim(t *testing.T, st agent.Store, key agent.SessionKey, owner string, ttl time.Duration) *agent.Claim {
	t.Helper()
	c, err := st.Claim(t.Context(), key, owner, ttl)
	if err != nil {
		t.Fatalf("Claim(%v, %q): %v", key, owner, err)
	}
	if c == nil {
		t.Fatalf("Claim(%v, %q) returned a nil claim", key, owner)
	}
	return c
}

func commit(t *testing.T, st agent.Store, key agent.SessionKey, owner string, consumed int, turn []agent.Message) {
	t.Helper()
	if err := st.Commit(t.Context(), key, owner, consumed, turn, nil); err != nil {
		t.Fatalf("Commit(%v, %q, %d): %v", key, owner, consumed, err)
	}
}

func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: err = %v, want %v", what, err, want)
	}
}

func wantPending(t *testing.T, st agent.Store, key agent.SessionKey, want int) {
	t.Helper()
	n, err := st.Pending(t.Context(), key)
	if err != nil {
		t.Fatalf("Pending(%v): %v", key, err)
	}
	if n != want {
		t.Fatalf("Pending(%v) = %d, want %d", key, n, want)
	}
}

func wantHistory(t *testing.T, st agent.Store, key agent.SessionKey, want ...[]agent.Message) {
	t.Helper()
	got, err := st.History(t.Context(), key)
	if err != nil {
		t.Fatalf("History(%v): %v", key, err)
	}
	sameMessages(t, fmt.Sprintf("History(%v)", key), got, slices.Concat(want...))
}

func sameMessages(t *testing.T, what string, got, want []agent.Message) {
	t.Helper()
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s =\n%s\nwant\n%s", what, jsonString(got), jsonString(want))
	}
}

func ids(mailbox []agent.Inbound) []string {
	out := make([]string, len(mailbox))
	for i, in := range mailbox {
		out[i] = in.MessageID
	}
	return out
}

func wantMailbox(t *testing.T, what string, got []agent.Inbound, want ...string) {
	t.Helper()
	if g := ids(got); !slices.Equal(g, want) {
		t.Fatalf("%s mailbox = %q, want %q", what, g, want)
	}
}

func jsonString(v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func (s suite) testEnqueueDedup(t *testing.T) {
	st := s.store(t, agent.Retention{})
	enqueue(t, st, inbound(threadA, "m1"), true)
	enqueue(t, st, inbound(threadA, "m1"), false)
	// Slack sends one message as app_mention and as message; an adapter may
	// even place them differently. A message ID is unique within its chat.
	enqueue(t, st, inbound(threadB, "m1"), false)
	enqueue(t, st, inbound(chanA, "m1"), false)
	// The same ID elsewhere is another message.
	enqueue(t, st, inbound(chanB, "m1"), true)
	enqueue(t, st, inbound(agent.SessionKey{Platform: "slack", Team: "T2", Chat: "C1"}, "m1"), true)
	enqueue(t, st, inbound(agent.SessionKey{Platform: "telegram", Chat: "C1"}, "m1"), true)
	enqueue(t, st, inbound(threadA, "m2"), true)

	wantPending(t, st, threadA, 2)
	wantPending(t, st, threadB, 0)
	wantPending(t, st, chanA, 0)
	wantPending(t, st, chanB, 1)
}

func seen(t *testing.T, st agent.Store, in agent.Inbound, want bool) {
	t.Helper()
	first, err := st.Seen(t.Context(), in)
	if err != nil {
		t.Fatalf("Seen(%v, %q): %v", in.Key, in.MessageID, err)
	}
	if first != want {
		t.Fatalf("Seen(%v, %q) = %v, want %v", in.Key, in.MessageID, first, want)
	}
}

func (s suite) testSeen(t *testing.T) {
	st := s.store(t, agent.Retention{})
	seen(t, st, inbound(threadA, "cmd1"), true)
	seen(t, st, inbound(threadA, "cmd1"), false)
	seen(t, st, inbound(threadB, "cmd1"), false)
	enqueue(t, st, inbound(threadA, "cmd1"), false)
	seen(t, st, inbound(chanB, "cmd1"), true)

	enqueue(t, st, inbound(threadA, "m1"), true)
	seen(t, st, inbound(threadA, "m1"), false)
	wantPending(t, st, threadA, 1)
	wantPending(t, st, chanB, 0)

	wantErr(t, "Seen without a message ID", errOf(st.Seen(t.Context(), inbound(threadA, ""))), agent.ErrInvalid)
}

// errOf returns the error of a call that also returns a value.
func errOf[T any](_ T, err error) error { return err }

func (s suite) testInvalid(t *testing.T) {
	st := s.store(t, agent.Retention{})
	ctx := t.Context()
	noPlatform := agent.SessionKey{Chat: "C1"}
	noChat := agent.SessionKey{Platform: "slack", Team: "T1", Thread: "1700000000.000100"}
	for _, tc := range []struct {
		what string
		err  error
	}{
		{"Enqueue without a message ID", errOf(st.Enqueue(ctx, inbound(threadA, "")))},
		{"Enqueue with a key without platform", errOf(st.Enqueue(ctx, inbound(noPlatform, "m1")))},
		{"Enqueue with a key without chat", errOf(st.Enqueue(ctx, inbound(noChat, "m1")))},
		{"Seen without a message ID", errOf(st.Seen(ctx, inbound(threadA, "")))},
		{"Seen with an invalid key", errOf(st.Seen(ctx, inbound(noPlatform, "m1")))},
		{"Claim with an empty owner", errOf(st.Claim(ctx, threadA, "", minute))},
		{"Claim with a zero ttl", errOf(st.Claim(ctx, threadA, "w1", 0))},
		{"Claim with a negative ttl", errOf(st.Claim(ctx, threadA, "w1", -minute))},
		{"Claim with an invalid key", errOf(st.Claim(ctx, noChat, "w1", minute))},
		{"Renew with an empty owner", st.Renew(ctx, threadA, "", minute)},
		{"Renew with a zero ttl", st.Renew(ctx, threadA, "w1", 0)},
		{"Renew with an invalid key", st.Renew(ctx, noPlatform, "w1", minute)},
		{"Commit with an invalid key", st.Commit(ctx, noPlatform, "w1", 0, turn("t", 1), nil)},
		{"Delivered with an invalid key", st.Delivered(ctx, noChat, "o1")},
		{"Delivered without an ID", st.Delivered(ctx, threadA, "")},
		{"Boot without a replica", errOf(st.Boot(ctx, ""))},
		{"Release with an invalid key", errOf(st.Release(ctx, noPlatform, "w1", ""))},
		{"Abandon with an invalid key", st.Abandon(ctx, noChat, "w1")},
		{"History with an invalid key", errOf(st.History(ctx, noChat))},
		{"Reset with an invalid key", st.Reset(ctx, noChat)},
		{"Pending with an invalid key", errOf(st.Pending(ctx, noPlatform))},
		{"Settings with an invalid key", errOf(st.Settings(ctx, noPlatform))},
		{"SetSettings with an invalid key", errOf(st.SetSettings(ctx, noChat, agent.ChannelSettings{}))},
	} {
		wantErr(t, tc.what, tc.err, agent.ErrInvalid)
	}
	wantPending(t, st, threadA, 0)
	wantWaiting(t, st)

	// None of the invalid claims took the lease.
	claim(t, st, threadA, "w1", minute)
	wantErr(t, "Commit with negative consumed", st.Commit(ctx, threadA, "w1", -1, turn("t", 1), nil), agent.ErrInvalid)
	wantErr(t, "Commit of an outbox entry without ID", st.Commit(ctx, threadA, "w1", 0, turn("t", 1), &agent.Outbound{Answer: "a"}), agent.ErrInvalid)
	wantHistory(t, st, threadA)
	if c := claim(t, st, threadA, "w1", minute); len(c.Outbox) != 0 {
		t.Fatalf("outbox after invalid commits = %+v, want empty", c.Outbox)
	}
	wantReady(t, st, 10)
}

func (s suite) testDedupExpires(t *testing.T) {
	const ttl = time.Second
	st := s.store(t, agent.Retention{DedupTTL: ttl})
	enqueue(t, st, inbound(threadA, "m1"), true)
	enqueue(t, st, inbound(threadA, "m1"), false)
	seen(t, st, inbound(threadA, "cmd"), true)
	time.Sleep(ttl + 300*time.Millisecond)
	enqueue(t, st, inbound(threadA, "m1"), true)
	enqueue(t, st, inbound(threadA, "m1"), false)
	seen(t, st, inbound(threadA, "cmd"), true)
	seen(t, st, inbound(threadA, "cmd"), false)
	wantPending(t, st, threadA, 2)
}

func (s suite) testMailboxOrder(t *testing.T) {
	st := s.store(t, agent.Retention{})
	want := []string{"5", "3", "10", "1", "m-4"}
	for _, id := range want {
		enqueue(t, st, inbound(threadA, id), true)
	}
	wantPending(t, st, threadA, len(want))
	c := claim(t, st, threadA, "w1", minute)
	wantMailbox(t, "Claim", c.Mailbox, want...)
	if len(c.History) != 0 {
		t.Fatalf("Claim history = %v, want empty", c.History)
	}
}

func (s suite) testClaim(t *testing.T) {
	st := s.store(t, agent.Retention{})
	ctx := t.Context()

	c := claim(t, st, threadA, "w1", minute)
	if len(c.Mailbox) != 0 || len(c.History) != 0 {
		t.Fatalf("Claim of an empty session = %+v, want empty", c)
	}
	enqueue(t, st, inbound(threadA, "m1"), true)
	enqueue(t, st, inbound(threadA, "m2"), true)

	// The holder may claim again (a second turn) and sees the new state.
	c = claim(t, st, threadA, "w1", minute)
	wantMailbox(t, "re-Claim", c.Mailbox, "m1", "m2")

	_, err := st.Claim(ctx, threadA, "w2", minute)
	wantErr(t, "Claim by a second owner", err, agent.ErrLeaseHeld)

	// Leases are per session, not per channel.
	claim(t, st, threadB, "w2", minute)
	claim(t, st, chanA, "w3", minute)

	if err := st.Renew(ctx, threadA, "w1", minute); err != nil {
		t.Fatalf("Renew by the holder: %v", err)
	}
	wantErr(t, "Renew by a non-holder", st.Renew(ctx, threadA, "w2", minute), agent.ErrLeaseLost)
	wantErr(t, "Renew of an unclaimed session", st.Renew(ctx, chanB, "w1", minute), agent.ErrLeaseLost)

	// History comes with the claim.
	first := turn("first", 2)
	commit(t, st, threadA, "w1", 2, first)
	c = claim(t, st, threadA, "w1", minute)
	wantMailbox(t, "Claim after Commit", c.Mailbox)
	sameMessages(t, "Claim history", c.History, first)
}

func (s suite) testLeaseExpires(t *testing.T) {
	st := s.store(t, agent.Retention{})
	ctx := t.Context()
	enqueue(t, st, inbound(threadA, "m1"), true)
	claim(t, st, threadA, "w1", 300*time.Millisecond)
	_, err := st.Claim(ctx, threadA, "w2", minute)
	wantErr(t, "Claim while held", err, agent.ErrLeaseHeld)

	time.Sleep(600 * time.Millisecond)

	// The first worker is presumed dead: its writes must not land.
	wantErr(t, "Renew after expiry", st.Renew(ctx, threadA, "w1", minute), agent.ErrLeaseLost)
	c := claim(t, st, threadA, "w2", minute)
	wantMailbox(t, "Claim after expiry", c.Mailbox, "m1")
	wantErr(t, "Commit by the expired owner", st.Commit(ctx, threadA, "w1", 1, turn("late", 2), nil), agent.ErrLeaseLost)
	_, err = st.Release(ctx, threadA, "w1", "")
	wantErr(t, "Release by the expired owner", err, agent.ErrLeaseLost)
	wantPending(t, st, threadA, 1)
	wantHistory(t, st, threadA)
	_, err = st.Claim(ctx, threadA, "w1", minute)
	wantErr(t, "Claim by the expired owner", err, agent.ErrLeaseHeld)
}

func (s suite) testRenewExtends(t *testing.T) {
	st := s.store(t, agent.Retention{})
	ctx := t.Context()
	claim(t, st, threadA, "w1", 300*time.Millisecond)
	if err := st.Renew(ctx, threadA, "w1", minute); err != nil {
		t.Fatalf("Renew: %v", err)
	}
	claim(t, st, threadB, "w1", 300*time.Millisecond)
	// A claim by the holder extends the lease too.
	claim(t, st, threadB, "w1", minute)

	time.Sleep(600 * time.Millisecond)

	for _, key := range []agent.SessionKey{threadA, threadB} {
		_, err := st.Claim(ctx, key, "w2", minute)
		wantErr(t, fmt.Sprintf("Claim of %v after the lease was extended", key), err, agent.ErrLeaseHeld)
		commit(t, st, key, "w1", 0, turn("still mine", 1))
	}
}

func (s suite) testCommitByNonHolder(t *testing.T) {
	st := s.store(t, agent.Retention{})
	ctx := t.Context()
	enqueue(t, st, inbound(threadA, "m1"), true)
	enqueue(t, st, inbound(threadA, "m2"), true)
	claim(t, st, threadA, "w1", minute)

	wantErr(t, "Commit by a non-holder", st.Commit(ctx, threadA, "w2", 1, turn("intruder", 2), nil), agent.ErrLeaseLost)
	wantErr(t, "Commit to an unclaimed session", st.Commit(ctx, threadB, "w1", 0, turn("intruder", 2), nil), agent.ErrLeaseLost)
	wantPending(t, st, threadA, 2)
	wantHistory(t, st, threadA)
	wantHistory(t, st, threadB)
}

func (s suite) testCommitConsumed(t *testing.T) {
	st := s.store(t, agent.Retention{})
	for _, id := range []string{"m1", "m2", "m3"} {
		enqueue(t, st, inbound(threadA, id), true)
	}
	c := claim(t, st, threadA, "w1", minute)
	wantMailbox(t, "Claim", c.Mailbox, "m1", "m2", "m3")

	// Messages that arrive during the turn are kept for the next one.
	enqueue(t, st, inbound(threadA, "m4"), true)
	enqueue(t, st, inbound(threadA, "m5"), true)
	t1 := turn("t1", 4)
	commit(t, st, threadA, "w1", len(c.Mailbox), t1)
	wantPending(t, st, threadA, 2)
	wantHistory(t, st, threadA, t1)

	c = claim(t, st, threadA, "w1", minute)
	wantMailbox(t, "second Claim", c.Mailbox, "m4", "m5")
	sameMessages(t, "second Claim history", c.History, t1)

	t2 := turn("t2", 2)
	commit(t, st, threadA, "w1", 0, t2)
	wantPending(t, st, threadA, 2)
	wantHistory(t, st, threadA, t1, t2)

	// An empty turn (messages nobody answers) only consumes.
	commit(t, st, threadA, "w1", 1, nil)
	wantPending(t, st, threadA, 1)
	wantHistory(t, st, threadA, t1, t2)

	commit(t, st, threadA, "w1", 5, nil)
	wantPending(t, st, threadA, 0)
	enqueue(t, st, inbound(threadA, "m6"), true)
	c = claim(t, st, threadA, "w1", minute)
	wantMailbox(t, "Claim after emptying", c.Mailbox, "m6")
}

func (s suite) testCommitTrims(t *testing.T) {
	const maxTurns = 3
	st := s.store(t, agent.Retention{MaxTurns: maxTurns})
	claim(t, st, threadA, "w1", minute)
	var turns [][]agent.Message
	for i, n := range []int{1, 2, 5, 1, 3, 2} {
		tn := turn(fmt.Sprintf("t%d", i), n)
		turns = append(turns, tn)
		commit(t, st, threadA, "w1", 0, tn)
		wantHistory(t, st, threadA, turns[max(0, len(turns)-maxTurns):]...)
	}
}

func (s suite) testRelease(t *testing.T) {
	st := s.store(t, agent.Retention{})
	ctx := t.Context()
	enqueue(t, st, inbound(threadA, "m1"), true)
	claim(t, st, threadA, "w1", minute)
	enqueue(t, st, inbound(threadA, "m2"), true)
	t1 := turn("t1", 2)
	commit(t, st, threadA, "w1", 1, t1)

	pending, err := st.Release(ctx, threadA, "w1", "")
	if err != nil || pending != 1 {
		t.Fatalf("Release with a pending message = %d, %v; want 1, nil", pending, err)
	}
	// The lease is kept, so nobody else answers m2 in parallel.
	_, err = st.Claim(ctx, threadA, "w2", minute)
	wantErr(t, "Claim after a Release that kept the lease", err, agent.ErrLeaseHeld)

	c := claim(t, st, threadA, "w1", minute)
	wantMailbox(t, "Claim for the next turn", c.Mailbox, "m2")
	t2 := turn("t2", 3)
	commit(t, st, threadA, "w1", 1, t2)
	pending, err = st.Release(ctx, threadA, "w1", "")
	if err != nil || pending != 0 {
		t.Fatalf("Release with an empty mailbox = %d, %v; want 0, nil", pending, err)
	}

	c = claim(t, st, threadA, "w2", minute)
	wantMailbox(t, "Claim by another owner", c.Mailbox)
	sameMessages(t, "Claim by another owner: history", c.History, slices.Concat(t1, t2))

	_, err = st.Release(ctx, threadA, "w1", "")
	wantErr(t, "Release by a non-holder", err, agent.ErrLeaseLost)
	_, err = st.Release(ctx, threadB, "w1", "")
	wantErr(t, "Release of an unclaimed session", err, agent.ErrLeaseLost)
	// w1's attempt changed nothing.
	commit(t, st, threadA, "w2", 0, nil)
}

func (s suite) testAbandon(t *testing.T) {
	st := s.store(t, agent.Retention{})
	ctx := t.Context()
	abandon := func(key agent.SessionKey, owner string) {
		t.Helper()
		if err := st.Abandon(ctx, key, owner); err != nil {
			t.Fatalf("Abandon(%v, %q): %v", key, owner, err)
		}
	}

	// Nobody holds it: nothing to do.
	abandon(threadA, "w1")

	enqueue(t, st, inbound(threadA, "m1"), true)
	enqueue(t, st, inbound(threadA, "m2"), true)
	claim(t, st, threadA, "w1", minute)

	// Someone else's Abandon leaves the lease alone.
	abandon(threadA, "w2")
	_, err := st.Claim(ctx, threadA, "w2", minute)
	wantErr(t, "Claim after a non-holder's Abandon", err, agent.ErrLeaseHeld)

	// The holder drops it even with messages waiting, where Release would
	// keep it, and the messages stay for whoever claims next.
	abandon(threadA, "w1")
	wantPending(t, st, threadA, 2)
	c := claim(t, st, threadA, "w2", minute)
	wantMailbox(t, "Claim after Abandon", c.Mailbox, "m1", "m2")

	// w1 is out: its writes fail and a second Abandon changes nothing.
	wantErr(t, "Commit after Abandon", st.Commit(ctx, threadA, "w1", 2, turn("late", 2), nil), agent.ErrLeaseLost)
	wantErr(t, "Renew after Abandon", st.Renew(ctx, threadA, "w1", minute), agent.ErrLeaseLost)
	abandon(threadA, "w1")
	_, err = st.Claim(ctx, threadA, "w3", minute)
	wantErr(t, "Claim after the old holder's second Abandon", err, agent.ErrLeaseHeld)
	commit(t, st, threadA, "w2", 2, turn("t1", 2))

	// Leases are per session: abandoning one thread keeps the other.
	claim(t, st, threadB, "w2", minute)
	abandon(threadA, "w2")
	claim(t, st, threadA, "w3", minute)
	_, err = st.Claim(ctx, threadB, "w3", minute)
	wantErr(t, "Claim of a thread whose neighbour was abandoned", err, agent.ErrLeaseHeld)
}

func wantWaiting(t *testing.T, st agent.Store, want ...agent.SessionKey) {
	t.Helper()
	got, err := st.Waiting(t.Context())
	if err != nil {
		t.Fatalf("Waiting: %v", err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Waiting = %v, want %v", got, want)
	}
}

func (s suite) testWaiting(t *testing.T) {
	st := s.store(t, agent.Retention{})
	other := s.store(t, agent.Retention{})
	ctx := t.Context()
	wantWaiting(t, st)

	// In the order of their String(), which Waiting sorts by.
	odd := agent.SessionKey{Platform: "x", Team: "a:b%", Chat: "c%3A:", Thread: ":"}
	want := []agent.SessionKey{
		chanA, threadA, threadB, chanB,
		{Platform: "telegram", Chat: "-1001234567890", Thread: "42"},
		{Platform: "x", Chat: "a:b"},
		{Platform: "x", Chat: "{c}", Thread: "}:s:"},
		odd,
		// Redis keys hold the channel and the session: here both have
		// a literal "}:s:" in them.
		{Platform: "x", Team: "}", Chat: "s", Thread: "t"},
	}
	if !slices.IsSortedFunc(want, func(a, b agent.SessionKey) int { return strings.Compare(a.String(), b.String()) }) {
		t.Fatal("test keys are not in String() order")
	}
	for i := range want {
		// Enqueued out of order, one of them twice.
		key := want[(i*5)%len(want)]
		enqueue(t, st, inbound(key, fmt.Sprintf("m%d", i)), true)
	}
	enqueue(t, st, inbound(odd, "again"), true)
	// Sessions with nothing in their mailbox are not waiting: one with a
	// lease and a history, one that only saw a command.
	quiet := agent.SessionKey{Platform: "slack", Team: "T1", Chat: "C9"}
	claim(t, st, quiet, "w1", minute)
	commit(t, st, quiet, "w1", 0, turn("t", 2))
	seen(t, st, inbound(agent.SessionKey{Platform: "slack", Team: "T1", Chat: "C8"}, "cmd"), true)

	wantWaiting(t, st, want...)
	wantWaiting(t, other)

	// Claiming does not take the messages out of the mailbox; a Commit
	// that consumes them all does.
	c := claim(t, st, threadA, "w1", minute)
	wantWaiting(t, st, want...)
	commit(t, st, threadA, "w1", len(c.Mailbox), turn("t1", 2))
	c = claim(t, st, odd, "w1", minute)
	commit(t, st, odd, "w1", len(c.Mailbox)-1, turn("t2", 2))
	wantWaiting(t, st, slices.DeleteFunc(slices.Clone(want), func(k agent.SessionKey) bool { return k == threadA })...)
	commit(t, st, odd, "w1", 1, nil)
	if _, err := st.Release(ctx, odd, "w1", ""); err != nil {
		t.Fatalf("Release: %v", err)
	}
	rest := slices.DeleteFunc(slices.Clone(want), func(k agent.SessionKey) bool { return k == threadA || k == odd })
	wantWaiting(t, st, rest...)

	enqueue(t, st, inbound(threadA, "m-new"), true)
	wantWaiting(t, st, slices.DeleteFunc(slices.Clone(want), func(k agent.SessionKey) bool { return k == odd })...)
	enqueue(t, other, inbound(chanB, "m-other"), true)
	wantWaiting(t, other, chanB)
}

func (s suite) testIsolation(t *testing.T) {
	st := s.store(t, agent.Retention{})
	keys := []agent.SessionKey{
		chanA, threadA, threadB, chanB,
		{Platform: "slack", Team: "T2", Chat: "C1"},
		{Platform: "telegram", Chat: "-1001234567890"},
		{Platform: "telegram", Chat: "-1001234567890", Thread: "42"},
		// Keys whose parts would collide if they were joined unescaped.
		{Platform: "x", Chat: "a:b"},
		{Platform: "x", Team: "a", Chat: "b"},
		{Platform: "x", Chat: "a%3Ab"},
		// Braces are Redis Cluster hash tag syntax.
		{Platform: "x", Chat: "{c}", Thread: "}t{"},
		{Platform: "x", Chat: "{c}"},
	}
	for i, key := range keys {
		enqueue(t, st, inbound(key, fmt.Sprintf("m%d", i)), true)
		enqueue(t, st, inbound(key, fmt.Sprintf("extra%d", i)), true)
		claim(t, st, key, fmt.Sprintf("w%d", i), minute)
		commit(t, st, key, fmt.Sprintf("w%d", i), 1, turn(key.String(), 2))
	}
	if err := st.Reset(t.Context(), keys[0]); err != nil {
		t.Fatalf("Reset: %v", err)
	}
	for i, key := range keys {
		wantPending(t, st, key, 1)
		if i == 0 {
			wantHistory(t, st, key)
		} else {
			wantHistory(t, st, key, turn(key.String(), 2))
		}
		c := claim(t, st, key, fmt.Sprintf("w%d", i), minute)
		wantMailbox(t, key.String(), c.Mailbox, fmt.Sprintf("extra%d", i))
		_, err := st.Claim(t.Context(), key, "other", minute)
		wantErr(t, "Claim by another owner", err, agent.ErrLeaseHeld)
	}
}

func (s suite) testReset(t *testing.T) {
	st := s.store(t, agent.Retention{})
	ctx := t.Context()
	if err := st.Reset(ctx, threadA); err != nil {
		t.Fatalf("Reset of an empty session: %v", err)
	}
	enqueue(t, st, inbound(threadA, "m1"), true)
	enqueue(t, st, inbound(threadA, "m2"), true)
	claim(t, st, threadA, "w1", minute)
	commit(t, st, threadA, "w1", 1, turn("t1", 3))

	if err := st.Reset(ctx, threadA); err != nil {
		t.Fatalf("Reset: %v", err)
	}
	wantHistory(t, st, threadA)
	wantPending(t, st, threadA, 1)
	_, err := st.Claim(ctx, threadA, "w2", minute)
	wantErr(t, "Claim after Reset", err, agent.ErrLeaseHeld)

	t2 := turn("t2", 2)
	commit(t, st, threadA, "w1", 1, t2)
	wantHistory(t, st, threadA, t2)
	// The message ID is still remembered: a reset is not a re-delivery.
	enqueue(t, st, inbound(threadA, "m1"), false)
}

func (s suite) testHistoryExpires(t *testing.T) {
	const ttl = time.Second
	st := s.store(t, agent.Retention{HistoryTTL: ttl})
	ctx := t.Context()
	enqueue(t, st, inbound(threadA, "m1"), true)
	claim(t, st, threadA, "w1", minute)
	t1, t2 := turn("t1", 2), turn("t2", 2)
	o1 := outbound("o1", inbound(threadA, "m1"))
	commitOut(t, st, threadA, "w1", 1, t1, o1)
	if _, err := st.Release(ctx, threadA, "w1", ""); err != nil {
		t.Fatalf("Release: %v", err)
	}

	time.Sleep(ttl * 6 / 10)
	// Activity keeps a session alive.
	claim(t, st, threadA, "w1", minute)
	commit(t, st, threadA, "w1", 0, t2)
	if _, err := st.Release(ctx, threadA, "w1", ""); err != nil {
		t.Fatalf("Release: %v", err)
	}
	enqueue(t, st, inbound(threadA, "m2"), true)
	time.Sleep(ttl * 6 / 10)
	wantHistory(t, st, threadA, t1, t2)
	wantPending(t, st, threadA, 1)
	wantWaiting(t, st, threadA)
	wantReady(t, st, 10, threadA)

	time.Sleep(ttl * 6 / 10)
	wantHistory(t, st, threadA)
	wantPending(t, st, threadA, 0)
	wantWaiting(t, st)
	wantReady(t, st, 10)
	c := claim(t, st, threadA, "w2", minute)
	if len(c.Mailbox) != 0 || len(c.History) != 0 || len(c.Outbox) != 0 {
		t.Fatalf("Claim of an expired session = %+v, want empty", c)
	}
	// A new turn starts a new history.
	t3 := turn("t3", 2)
	commit(t, st, threadA, "w2", 0, t3)
	wantHistory(t, st, threadA, t3)
}

func sameSettings(a, b agent.ChannelSettings) bool {
	return a.Version == b.Version && a.TimeZone == b.TimeZone && maps.EqualFunc(a.Tools, b.Tools, func(x, y agent.Rule) bool {
		return x.Mode == y.Mode && x.By == y.By && x.At.Equal(y.At)
	})
}

// rules returns policy rules set by one person at one time.
func rules(by string, modes map[string]agent.ToolMode) map[string]agent.Rule {
	at := time.Date(2025, 3, 4, 5, 6, 7, 890123456, time.UTC)
	out := make(map[string]agent.Rule, len(modes))
	for name, m := range modes {
		out[name] = agent.Rule{Mode: m, By: by, At: at}
	}
	return out
}

func (s suite) testSettings(t *testing.T) {
	st := s.store(t, agent.Retention{})
	ctx := t.Context()
	get := func(key agent.SessionKey, want agent.ChannelSettings) {
		t.Helper()
		got, err := st.Settings(ctx, key)
		if err != nil {
			t.Fatalf("Settings(%v): %v", key, err)
		}
		if !sameSettings(got, want) {
			t.Fatalf("Settings(%v) = %+v, want %+v", key, got, want)
		}
		// A claim reads them too (the stores here do), for the turn.
		c, err := st.Claim(ctx, key, "reader", minute)
		if err != nil {
			t.Fatalf("Claim(%v): %v", key, err)
		}
		if c.Settings == nil || !sameSettings(*c.Settings, want) {
			t.Fatalf("Claim(%v).Settings = %+v, want %+v", key, c.Settings, want)
		}
	}
	set := func(key agent.SessionKey, in, want agent.ChannelSettings) {
		t.Helper()
		got, err := st.SetSettings(ctx, key, in)
		if err != nil {
			t.Fatalf("SetSettings(%v, %+v): %v", key, in, err)
		}
		if !sameSettings(got, want) {
			t.Fatalf("SetSettings(%v, %+v) = %+v, want %+v", key, in, got, want)
		}
	}

	get(chanA, agent.ChannelSettings{})

	v1 := rules("slack:U1", map[string]agent.ToolMode{"shell": agent.ToolDeny, "group:read": agent.ToolAllow, "fetch": agent.ToolAsk, "default": agent.ToolAsk})
	set(chanA, agent.ChannelSettings{Tools: v1}, agent.ChannelSettings{Version: 1, Tools: v1})
	get(chanA, agent.ChannelSettings{Version: 1, Tools: v1})
	// A thread follows its channel's policy.
	get(threadA, agent.ChannelSettings{Version: 1, Tools: v1})

	for _, stale := range []int64{0, 2, 7, -1} {
		_, err := st.SetSettings(ctx, chanA, agent.ChannelSettings{Version: stale, Tools: rules("x", map[string]agent.ToolMode{"shell": agent.ToolAllow})})
		wantErr(t, fmt.Sprintf("SetSettings with version %d over 1", stale), err, agent.ErrVersionConflict)
	}
	get(chanA, agent.ChannelSettings{Version: 1, Tools: v1})

	// A write replaces the tool map; it does not merge.
	v2 := map[string]agent.Rule{"shell": {Mode: agent.ToolAsk, By: "cli:root", At: time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("X", 3600))}}
	set(chanA, agent.ChannelSettings{Version: 1, Tools: v2}, agent.ChannelSettings{Version: 2, Tools: v2})
	set(threadA, agent.ChannelSettings{Version: 2}, agent.ChannelSettings{Version: 3})
	get(chanA, agent.ChannelSettings{Version: 3})

	get(chanB, agent.ChannelSettings{})
	set(chanB, agent.ChannelSettings{Tools: v2}, agent.ChannelSettings{Version: 1, Tools: v2})
	get(chanA, agent.ChannelSettings{Version: 3})

	// The time zone is kept with the rules, and replaced with them.
	tokyo := agent.ChannelSettings{Version: 3, Tools: v1, TimeZone: "Asia/Tokyo"}
	set(chanA, tokyo, agent.ChannelSettings{Version: 4, Tools: v1, TimeZone: "Asia/Tokyo"})
	get(threadA, agent.ChannelSettings{Version: 4, Tools: v1, TimeZone: "Asia/Tokyo"})
	_, err := st.SetSettings(ctx, chanA, agent.ChannelSettings{Version: 3, TimeZone: "Europe/Paris"})
	wantErr(t, "SetSettings of a time zone with version 3 over 4", err, agent.ErrVersionConflict)
	set(chanA, agent.ChannelSettings{Version: 4, TimeZone: "America/Argentina/Buenos_Aires"},
		agent.ChannelSettings{Version: 5, TimeZone: "America/Argentina/Buenos_Aires"})
	get(chanA, agent.ChannelSettings{Version: 5, TimeZone: "America/Argentina/Buenos_Aires"})
	set(chanA, agent.ChannelSettings{Version: 5, Tools: v2}, agent.ChannelSettings{Version: 6, Tools: v2})
	get(chanA, agent.ChannelSettings{Version: 6, Tools: v2})
	get(chanB, agent.ChannelSettings{Version: 1, Tools: v2})
	get(agent.SessionKey{Platform: "telegram", Chat: "C1"}, agent.ChannelSettings{})
}

func (s suite) testRoundTrip(t *testing.T) {
	st := s.store(t, agent.Retention{})
	full := agent.Inbound{
		Key:       threadA,
		MessageID: "1700000000.000300",
		User:      agent.User{ID: "U123", Name: "Zoë Ünicode 🚢", External: true},
		Text:      "héllo 世界 🚢 <b>&amp;</b>\n\t\"quoted\" \\ back\u2028line %s {}",
		Files: []agent.File{
			{Name: "report ü.pdf", Path: "inbox/report ü.pdf", MIME: "application/pdf", Size: 123456789},
			{Name: "plain.txt"},
		},
		Addressed: true,
		Time:      time.Date(2025, 3, 4, 5, 6, 7, 890123456, time.FixedZone("X", 5*3600+1800)),
		ReplyTo:   "reply-42",
	}
	bare := agent.Inbound{Key: threadA, MessageID: "bare", Time: time.Unix(0, 0).UTC()}
	enqueue(t, st, full, true)
	enqueue(t, st, bare, true)
	c := claim(t, st, threadA, "w1", minute)
	if len(c.Mailbox) != 2 {
		t.Fatalf("mailbox has %d messages, want 2", len(c.Mailbox))
	}
	for i, want := range []agent.Inbound{full, bare} {
		got := c.Mailbox[i]
		if !got.Time.Equal(want.Time) {
			t.Errorf("Time = %v, want %v", got.Time, want.Time)
		}
		got.Time = want.Time
		if !reflect.DeepEqual(got, want) {
			t.Errorf("mailbox[%d] =\n%s\nwant\n%s", i, jsonString(got), jsonString(want))
		}
	}

	tn := []agent.Message{
		{Role: agent.RoleUser, Content: "lis le fichier « a<b>&c.txt » 世界"},
		{Role: agent.RoleAssistant, Content: "Je regarde.", ToolCalls: []agent.ToolCall{
			{ID: "call_1", Name: "read", Args: json.RawMessage(`{"path":"a<b>&c.txt","n":1,"nested":{"x":[1,2.5,{"y":"世界"}],"z":null,"t":true}}`)},
			{ID: "call_2", Name: "shell", Args: json.RawMessage(`{}`)},
		}},
		{Role: agent.RoleTool, ToolCallID: "call_1", ToolName: "read", Content: "contents ✓\x01"},
		{Role: agent.RoleTool, ToolCallID: "call_2", ToolName: "shell", Content: ""},
		{Role: agent.RoleAssistant, Content: "Voilà 🚢"},
	}
	commit(t, st, threadA, "w1", 2, tn)
	wantHistory(t, st, threadA, tn)
	c = claim(t, st, threadA, "w1", minute)
	sameMessages(t, "Claim history", c.History, tn)
}

func (s suite) testCanceled(t *testing.T) {
	st := s.store(t, agent.Retention{})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := st.Enqueue(ctx, inbound(threadA, "m1"))
	wantErr(t, "Enqueue with a canceled context", err, context.Canceled)
	_, err = st.Claim(ctx, threadA, "w1", minute)
	wantErr(t, "Claim with a canceled context", err, context.Canceled)
	_, err = st.Waiting(ctx)
	wantErr(t, "Waiting with a canceled context", err, context.Canceled)
	_, err = st.Ready(ctx, 10)
	wantErr(t, "Ready with a canceled context", err, context.Canceled)
	_, err = st.Boot(ctx, "web-0")
	wantErr(t, "Boot with a canceled context", err, context.Canceled)
	_, err = st.TryLease(ctx, "poller", "w1", minute)
	wantErr(t, "TryLease with a canceled context", err, context.Canceled)
	wantErr(t, "DropLease with a canceled context", st.DropLease(ctx, "poller", "w1"), context.Canceled)
	wantErr(t, "Delivered with a canceled context", st.Delivered(ctx, threadA, "o1"), context.Canceled)
	boot(t, st, "web-0", 1)
	wantPending(t, st, threadA, 0)
	claim(t, st, threadA, "w2", minute)
	wantErr(t, "Abandon with a canceled context", st.Abandon(ctx, threadA, "w2"), context.Canceled)
	_, err = st.Claim(t.Context(), threadA, "w3", minute)
	wantErr(t, "Claim after an Abandon with a canceled context", err, agent.ErrLeaseHeld)
}

// parallel runs fn(i) for i in [0, n) at once and waits for all of them.
func parallel(n int, fn func(i int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			fn(i)
		})
	}
	close(start)
	wg.Wait()
}

func (s suite) testConcurrentEnqueue(t *testing.T) {
	const workers, shared = 8, 20
	st := s.store(t, agent.Retention{})
	ctx := t.Context()
	var mu sync.Mutex
	added := map[string]int{}
	var errs []error
	parallel(workers, func(w int) {
		ids := []string{fmt.Sprintf("own-%d", w)}
		for i := range shared {
			ids = append(ids, fmt.Sprintf("shared-%d", (i+w)%shared))
		}
		for _, id := range ids {
			ok, err := st.Enqueue(ctx, inbound(threadA, id))
			mu.Lock()
			if err != nil {
				errs = append(errs, err)
			} else if ok {
				added[id]++
			}
			mu.Unlock()
		}
	})
	if len(errs) > 0 {
		t.Fatalf("Enqueue: %v", errors.Join(errs...))
	}
	if len(added) != workers+shared {
		t.Fatalf("%d distinct IDs added, want %d", len(added), workers+shared)
	}
	for id, n := range added {
		if n != 1 {
			t.Errorf("%s added %d times", id, n)
		}
	}
	wantPending(t, st, threadA, workers+shared)
	c := claim(t, st, threadA, "w1", minute)
	seen := map[string]bool{}
	for _, in := range c.Mailbox {
		if seen[in.MessageID] || added[in.MessageID] != 1 {
			t.Errorf("mailbox holds %q unexpectedly", in.MessageID)
		}
		seen[in.MessageID] = true
	}
}

func (s suite) testConcurrentClaim(t *testing.T) {
	const owners = 16
	st := s.store(t, agent.Retention{})
	enqueue(t, st, inbound(threadA, "m1"), true)
	errs := make([]error, owners)
	parallel(owners, func(i int) {
		_, errs[i] = st.Claim(t.Context(), threadA, fmt.Sprintf("w%d", i), minute)
	})
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Fatalf("both w%d and w%d claimed the session", winner, i)
		case err == nil:
			winner = i
		case !errors.Is(err, agent.ErrLeaseHeld):
			t.Fatalf("Claim by w%d: %v", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("nobody claimed the session")
	}
	commit(t, st, threadA, fmt.Sprintf("w%d", winner), 1, turn("won", 2))
}

func (s suite) testConcurrentSetSettings(t *testing.T) {
	const writers = 16
	st := s.store(t, agent.Retention{})
	for version := range int64(3) {
		results := make([]agent.ChannelSettings, writers)
		errs := make([]error, writers)
		parallel(writers, func(i int) {
			in := agent.ChannelSettings{Version: version, Tools: rules(fmt.Sprintf("w%d", i), map[string]agent.ToolMode{fmt.Sprintf("tool%d", i): agent.ToolAllow})}
			results[i], errs[i] = st.SetSettings(t.Context(), chanA, in)
		})
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil && winner >= 0:
				t.Fatalf("version %d: both writer %d and %d won", version, winner, i)
			case err == nil:
				winner = i
			case !errors.Is(err, agent.ErrVersionConflict):
				t.Fatalf("version %d: SetSettings by writer %d: %v", version, i, err)
			}
		}
		if winner < 0 {
			t.Fatalf("version %d: no writer won", version)
		}
		if results[winner].Version != version+1 {
			t.Fatalf("version %d: winner got version %d", version, results[winner].Version)
		}
		got, err := st.Settings(t.Context(), chanA)
		if err != nil {
			t.Fatal(err)
		}
		if !sameSettings(got, results[winner]) {
			t.Fatalf("version %d: stored %+v, winner wrote %+v", version, got, results[winner])
		}
	}
}

func (s suite) testActive(t *testing.T) {
	st := s.store(t, agent.Retention{})
	ctx := t.Context()
	wantActive := func(key agent.SessionKey, want bool) {
		t.Helper()
		got, err := st.Active(ctx, key)
		if err != nil {
			t.Fatalf("Active(%v): %v", key, err)
		}
		if got != want {
			t.Fatalf("Active(%v) = %v, want %v", key, got, want)
		}
	}
	wantActive(threadA, false)
	enqueue(t, st, inbound(threadA, "m1"), true)
	wantActive(threadA, true) // a message waits
	wantActive(threadB, false)
	wantActive(chanA, false) // the channel is not the thread
	claim(t, st, threadA, "w1", minute)
	commit(t, st, threadA, "w1", 1, turn("t1", 2))
	wantActive(threadA, true) // history, empty mailbox
	if err := st.Reset(ctx, threadA); err != nil {
		t.Fatal(err)
	}
	wantActive(threadA, false)
	if _, err := st.Seen(ctx, inbound(threadB, "c1")); err != nil {
		t.Fatal(err)
	}
	wantActive(threadB, false) // a command alone is no part in the thread
	if _, err := st.Active(ctx, agent.SessionKey{}); !errors.Is(err, agent.ErrInvalid) {
		t.Fatalf("Active with an empty key: %v", err)
	}
}

// The tests below are of agent.GovernStore.

func grant(platform string, kind agent.GrantKind, id, name string) agent.Grant {
	return agent.Grant{Platform: platform, Kind: kind, ID: id, Name: name, By: "cli:root",
		At: time.Date(2025, 3, 4, 5, 6, 7, 890123456, time.UTC)}
}

func wantAllowed(t *testing.T, st agent.Store, platform string, kind agent.GrantKind, id string, want bool) {
	t.Helper()
	got, err := st.Allowed(t.Context(), platform, kind, id)
	if err != nil {
		t.Fatalf("Allowed(%q, %q, %q): %v", platform, kind, id, err)
	}
	if got != want {
		t.Fatalf("Allowed(%q, %q, %q) = %v, want %v", platform, kind, id, got, want)
	}
}

func wantGrants(t *testing.T, st agent.Store, platform string, want ...agent.Grant) {
	t.Helper()
	got, err := st.Grants(t.Context(), platform)
	if err != nil {
		t.Fatalf("Grants(%q): %v", platform, err)
	}
	if !slices.EqualFunc(got, want, func(a, b agent.Grant) bool {
		return a.Platform == b.Platform && a.Kind == b.Kind && a.ID == b.ID && a.Name == b.Name && a.By == b.By && a.At.Equal(b.At)
	}) {
		t.Fatalf("Grants(%q) =\n%s\nwant\n%s", platform, jsonString(got), jsonString(want))
	}
}

func (s suite) testGrants(t *testing.T) {
	st := s.store(t, agent.Retention{})
	ctx := t.Context()
	wantGrants(t, st, "")
	wantAllowed(t, st, "telegram", agent.GrantUser, "42", false)

	var (
		tgAnn    = grant("telegram", agent.GrantUser, "42", "Ann")
		tgUser7  = grant("telegram", agent.GrantUser, "7", "")
		tgGroup  = grant("telegram", agent.GrantChat, "-1001234567890", "crew")
		slChan   = grant("slack", agent.GrantChat, "C1", "#general")
		slBob    = grant("slack", agent.GrantUser, "U1", "Bob")
		colon    = grant("x", agent.GrantUser, "a:b", "")
		escaped  = grant("x", agent.GrantUser, "a%3Ab", "")
		braces   = grant("x", agent.GrantUser, "{c}", "")
		platUser = grant("x:user", agent.GrantUser, "b", "") // x:user:user:b, were the parts joined plainly
	)
	for _, g := range []agent.Grant{tgAnn, tgUser7, tgGroup, slChan, slBob, colon, escaped, braces, platUser} {
		if err := st.Allow(ctx, g); err != nil {
			t.Fatalf("Allow(%+v): %v", g, err)
		}
		wantAllowed(t, st, g.Platform, g.Kind, g.ID, true)
	}
	// Another kind, another platform, part of an ID: not allowed.
	wantAllowed(t, st, "telegram", agent.GrantChat, "42", false)
	wantAllowed(t, st, "slack", agent.GrantUser, "42", false)
	wantAllowed(t, st, "telegram", agent.GrantUser, "4", false)
	wantAllowed(t, st, "x", agent.GrantUser, "a", false)
	wantAllowed(t, st, "x", agent.GrantChat, "a:b", false)
	wantAllowed(t, st, "x", agent.GrantUser, "user:b", false)
	wantAllowed(t, st, "x", agent.GrantUser, "c", false)

	// Allow replaces the subject's grant.
	tgAnn2 := grant("telegram", agent.GrantUser, "42", "Ann B.")
	tgAnn2.By, tgAnn2.At = "slack:U9", tgAnn2.At.Add(time.Hour)
	if err := st.Allow(ctx, tgAnn2); err != nil {
		t.Fatal(err)
	}
	wantGrants(t, st, "", slChan, slBob, tgGroup, tgAnn2, tgUser7, escaped, colon, braces, platUser)
	wantGrants(t, st, "telegram", tgGroup, tgAnn2, tgUser7)
	wantGrants(t, st, "x", escaped, colon, braces)
	wantGrants(t, st, "nowhere")

	revoke := func(platform string, kind agent.GrantKind, id string, want bool) {
		t.Helper()
		had, err := st.Revoke(ctx, platform, kind, id)
		if err != nil {
			t.Fatalf("Revoke(%q, %q, %q): %v", platform, kind, id, err)
		}
		if had != want {
			t.Fatalf("Revoke(%q, %q, %q) = %v, want %v", platform, kind, id, had, want)
		}
	}
	revoke("telegram", agent.GrantUser, "42", true)
	revoke("telegram", agent.GrantUser, "42", false)
	wantAllowed(t, st, "telegram", agent.GrantUser, "42", false)
	// Revoking another kind or a look-alike ID revokes nothing.
	revoke("telegram", agent.GrantChat, "7", false)
	revoke("x", agent.GrantUser, "a", false)
	revoke("x", agent.GrantUser, "user:b", false)
	wantAllowed(t, st, "telegram", agent.GrantUser, "7", true)
	revoke("x", agent.GrantUser, "a:b", true)
	wantAllowed(t, st, "x", agent.GrantUser, "a%3Ab", true)
	wantGrants(t, st, "", slChan, slBob, tgGroup, tgUser7, escaped, braces, platUser)
}

// pairing returns a request of telegram user id (or chat, for a negative
// id), created at created and expiring ttl later.
func pairing(code, platform string, kind agent.GrantKind, id string, created time.Time, ttl time.Duration) agent.Pairing {
	return agent.Pairing{Code: code, Platform: platform, Kind: kind, ID: id, Name: "Ann " + id,
		Chat: agent.SessionKey{Platform: platform, Chat: id}, Created: created.UTC(), Expires: created.Add(ttl).UTC()}
}

func samePairing(a, b agent.Pairing) bool {
	return a.Code == b.Code && a.Platform == b.Platform && a.Kind == b.Kind && a.ID == b.ID && a.Name == b.Name &&
		a.Chat == b.Chat && a.Created.Equal(b.Created) && a.Expires.Equal(b.Expires)
}

func pair(t *testing.T, st agent.Store, p agent.Pairing, wantCreated bool, want agent.Pairing) {
	t.Helper()
	got, created, err := st.Pair(t.Context(), p)
	if err != nil {
		t.Fatalf("Pair(%s): %v", p.Code, err)
	}
	if created != wantCreated || !samePairing(got, want) {
		t.Fatalf("Pair(%s) = %s, created %v; want %s, created %v", p.Code, jsonString(got), created, jsonString(want), wantCreated)
	}
}

func take(t *testing.T, st agent.Store, code string, want agent.Pairing) {
	t.Helper()
	got, err := st.TakePairing(t.Context(), code)
	if err != nil {
		t.Fatalf("TakePairing(%s): %v", code, err)
	}
	if !samePairing(got, want) {
		t.Fatalf("TakePairing(%s) = %s, want %s", code, jsonString(got), jsonString(want))
	}
}

func wantPairings(t *testing.T, st agent.Store, want ...agent.Pairing) {
	t.Helper()
	got, err := st.Pairings(t.Context())
	if err != nil {
		t.Fatalf("Pairings: %v", err)
	}
	if !slices.EqualFunc(got, want, samePairing) {
		t.Fatalf("Pairings =\n%s\nwant\n%s", jsonString(got), jsonString(want))
	}
}

func (s suite) testPairing(t *testing.T) {
	st := s.store(t, agent.Retention{})
	ctx := t.Context()
	now := time.Now()
	wantPairings(t, st)

	p1 := pairing("AAAA-0001", "telegram", agent.GrantUser, "42", now, minute)
	pair(t, st, p1, true, p1)
	// The same person asking again gets the request they have.
	pair(t, st, pairing("AAAA-0002", "telegram", agent.GrantUser, "42", now.Add(time.Second), minute), false, p1)
	p2 := pairing("AAAA-0003", "telegram", agent.GrantChat, "-100123", now.Add(2*time.Second), minute)
	pair(t, st, p2, true, p2)
	p3 := pairing("AAAA-0004", "slack", agent.GrantUser, "42", now.Add(-time.Second), minute)
	pair(t, st, p3, true, p3)
	// A code that is another live request's is refused.
	if _, created, err := st.Pair(ctx, pairing("AAAA-0001", "telegram", agent.GrantUser, "43", now, minute)); err == nil || created {
		t.Fatalf("Pair with another request's code = created %v, %v; want an error", created, err)
	}
	wantPairings(t, st, p3, p1, p2)

	_, err := st.TakePairing(ctx, "AAAA-0002")
	wantErr(t, "TakePairing of the code of a request that was not stored", err, agent.ErrNotFound)
	take(t, st, "AAAA-0001", p1)
	_, err = st.TakePairing(ctx, "AAAA-0001")
	wantErr(t, "TakePairing a second time", err, agent.ErrNotFound)
	_, err = st.TakePairing(ctx, "ZZZZ-9999")
	wantErr(t, "TakePairing of an unknown code", err, agent.ErrNotFound)
	_, err = st.TakePairing(ctx, "")
	wantErr(t, "TakePairing of an empty code", err, agent.ErrNotFound)
	wantPairings(t, st, p3, p2)

	// Once taken, the person may ask again, and gets a new code.
	p4 := pairing("AAAA-0005", "telegram", agent.GrantUser, "42", now.Add(3*time.Second), minute)
	pair(t, st, p4, true, p4)
	// Taking one request leaves the others.
	take(t, st, "AAAA-0003", p2)
	wantPairings(t, st, p3, p4)
	pair(t, st, pairing("AAAA-0006", "slack", agent.GrantUser, "42", now, minute), false, p3)
}

func (s suite) testPairingExpires(t *testing.T) {
	const ttl = time.Second
	st := s.store(t, agent.Retention{})
	ctx := t.Context()
	now := time.Now()
	short := pairing("BBBB-0001", "telegram", agent.GrantUser, "42", now, ttl)
	pair(t, st, short, true, short)
	long := pairing("BBBB-0002", "telegram", agent.GrantChat, "-100", now, minute)
	pair(t, st, long, true, long)
	pair(t, st, pairing("BBBB-0003", "telegram", agent.GrantUser, "42", now, minute), false, short)
	wantPairings(t, st, short, long)

	time.Sleep(ttl + 300*time.Millisecond)
	wantPairings(t, st, long)
	_, err := st.TakePairing(ctx, short.Code)
	wantErr(t, "TakePairing of an expired code", err, agent.ErrNotFound)

	// The expired request no longer stands for the person: a new one does.
	later := time.Now()
	renewed := pairing("BBBB-0004", "telegram", agent.GrantUser, "42", later, minute)
	pair(t, st, renewed, true, renewed)
	// The expired request's code is free again.
	reused := pairing(short.Code, "telegram", agent.GrantUser, "99", later.Add(time.Millisecond), minute)
	pair(t, st, reused, true, reused)
	wantPairings(t, st, long, renewed, reused)
	take(t, st, short.Code, reused)
	take(t, st, long.Code, long)
}

func (s suite) testConcurrentTakePairing(t *testing.T) {
	const takers = 16
	st := s.store(t, agent.Retention{})
	now := time.Now()
	for round := range 3 {
		p := pairing(fmt.Sprintf("CCCC-%04d", round), "telegram", agent.GrantUser, fmt.Sprint(round), now, minute)
		pair(t, st, p, true, p)
		got := make([]agent.Pairing, takers)
		errs := make([]error, takers)
		parallel(takers, func(i int) { got[i], errs[i] = st.TakePairing(t.Context(), p.Code) })
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil && winner >= 0:
				t.Fatalf("round %d: both taker %d and %d got the request", round, winner, i)
			case err == nil:
				winner = i
			case !errors.Is(err, agent.ErrNotFound):
				t.Fatalf("round %d: TakePairing by taker %d: %v", round, i, err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: nobody got the request", round)
		}
		if !samePairing(got[winner], p) {
			t.Fatalf("round %d: the winner got %s, want %s", round, jsonString(got[winner]), jsonString(p))
		}
	}
	wantPairings(t, st)
}

func (s suite) testConcurrentPair(t *testing.T) {
	const askers = 16
	st := s.store(t, agent.Retention{})
	now := time.Now()
	got := make([]agent.Pairing, askers)
	created := make([]bool, askers)
	errs := make([]error, askers)
	parallel(askers, func(i int) {
		got[i], created[i], errs[i] = st.Pair(t.Context(), pairing(fmt.Sprintf("DDDD-%04d", i), "telegram", agent.GrantUser, "42", now, minute))
	})
	winner := -1
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Pair by asker %d: %v", i, err)
		}
		if created[i] {
			if winner >= 0 {
				t.Fatalf("both asker %d and %d created a request", winner, i)
			}
			winner = i
		}
	}
	if winner < 0 {
		t.Fatal("no request was created")
	}
	for i := range got {
		if got[i].Code != got[winner].Code {
			t.Fatalf("asker %d was given code %s, the stored request has %s", i, got[i].Code, got[winner].Code)
		}
	}
	wantPairings(t, st, got[winner])
}

func once(t *testing.T, st agent.Store, name string, ttl time.Duration, want bool) {
	t.Helper()
	got, err := st.Once(t.Context(), name, ttl)
	if err != nil {
		t.Fatalf("Once(%q): %v", name, err)
	}
	if got != want {
		t.Fatalf("Once(%q) = %v, want %v", name, got, want)
	}
}

func (s suite) testOnce(t *testing.T) {
	const ttl = time.Second
	st := s.store(t, agent.Retention{})
	once(t, st, "refused:telegram:42:42", ttl, true)
	once(t, st, "refused:telegram:42:42", ttl, false)
	once(t, st, "refused:telegram:43:43", ttl, true)
	once(t, st, "long", minute, true)
	// Names that would collide if they were put in a key plainly.
	for _, name := range []string{"a:b", "a%3Ab", "{a}", "a}", "{", "a:b}"} {
		once(t, st, name, ttl, true)
	}
	once(t, st, "a:b", ttl, false)

	time.Sleep(ttl + 300*time.Millisecond)
	once(t, st, "refused:telegram:42:42", ttl, true)
	once(t, st, "refused:telegram:42:42", ttl, false)
	once(t, st, "a:b", ttl, true)
	once(t, st, "long", minute, false)

	const racers = 16
	first := make([]bool, racers)
	errs := make([]error, racers)
	parallel(racers, func(i int) { first[i], errs[i] = st.Once(t.Context(), "race", minute) })
	n := 0
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Once by racer %d: %v", i, err)
		}
		if first[i] {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d racers were first, want 1", n)
	}
}

// windowStart sleeps until just after the next window of length w (aligned
// to the Unix epoch) starts, so that a test has the whole window.
func windowStart(w time.Duration) {
	now := time.Now().UnixMilli()
	next := (now/w.Milliseconds() + 1) * w.Milliseconds()
	time.Sleep(time.Duration(next-now)*time.Millisecond + 30*time.Millisecond)
}

func hit(t *testing.T, st agent.Store, name string, window time.Duration, want int64) {
	t.Helper()
	got, err := st.Hit(t.Context(), name, window)
	if err != nil {
		t.Fatalf("Hit(%q, %v): %v", name, window, err)
	}
	if got != want {
		t.Fatalf("Hit(%q, %v) = %d, want %d", name, window, got, want)
	}
}

func (s suite) testHit(t *testing.T) {
	const window = time.Second
	st := s.store(t, agent.Retention{})
	windowStart(window)
	hit(t, st, "msgs:slack:U1", window, 1)
	hit(t, st, "msgs:slack:U1", window, 2)
	hit(t, st, "msgs:slack:U1", window, 3)
	hit(t, st, "msgs:slack:U2", window, 1)
	hit(t, st, "msgs:slack%3AU1", window, 1)
	// Windows of another length count apart.
	hit(t, st, "msgs:slack:U1", time.Hour, 1)

	const racers = 16
	counts := make([]int64, racers)
	errs := make([]error, racers)
	parallel(racers, func(i int) { counts[i], errs[i] = st.Hit(t.Context(), "race", window) })
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("Hit: %v", err)
	}
	slices.Sort(counts)
	for i, n := range counts {
		if n != int64(i+1) {
			t.Fatalf("concurrent Hit counts = %v, want 1 to %d", counts, racers)
		}
	}

	// The next window starts from one.
	windowStart(window)
	hit(t, st, "msgs:slack:U1", window, 1)
	hit(t, st, "msgs:slack:U1", window, 2)
	hit(t, st, "msgs:slack:U1", time.Hour, 2)
}

func (s suite) testUsage(t *testing.T) {
	st := s.store(t, agent.Retention{})
	ctx := t.Context()
	add := func(key agent.SessionKey, day string, tokens, want int64) {
		t.Helper()
		got, err := st.AddUsage(ctx, key, day, tokens)
		if err != nil {
			t.Fatalf("AddUsage(%v, %s, %d): %v", key, day, tokens, err)
		}
		if got != want {
			t.Fatalf("AddUsage(%v, %s, %d) = %d, want %d", key, day, tokens, got, want)
		}
	}
	use := func(key agent.SessionKey, day string, want int64) {
		t.Helper()
		got, err := st.Usage(ctx, key, day)
		if err != nil {
			t.Fatalf("Usage(%v, %s): %v", key, day, err)
		}
		if got != want {
			t.Fatalf("Usage(%v, %s) = %d, want %d", key, day, got, want)
		}
	}
	const day, next = "2025-03-04", "2025-03-05"
	use(chanA, day, 0)
	add(chanA, day, 100, 100)
	// A thread's tokens are its channel's.
	add(threadA, day, 50, 150)
	add(threadB, day, 0, 150)
	use(chanA, day, 150)
	use(threadB, day, 150)
	use(chanA, next, 0)
	add(chanA, next, 7, 7)
	use(chanA, day, 150)
	add(chanB, day, 1, 1)
	use(agent.SessionKey{Platform: "slack", Team: "T2", Chat: "C1"}, day, 0)
	use(agent.SessionKey{Platform: "telegram", Chat: "C1"}, day, 0)

	const adders = 16
	totals := make([]int64, adders)
	errs := make([]error, adders)
	parallel(adders, func(i int) { totals[i], errs[i] = st.AddUsage(ctx, chanB, next, 10) })
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("AddUsage: %v", err)
	}
	slices.Sort(totals)
	for i, n := range totals {
		if n != int64(10*(i+1)) {
			t.Fatalf("concurrent AddUsage totals = %v, want 10 to %d by 10", totals, 10*adders)
		}
	}
	use(chanB, next, 10*adders)
}

func sameApproval(a, b agent.Approval) bool {
	return a.ID == b.ID && a.Key == b.Key && a.CallID == b.CallID && a.Tool == b.Tool && a.Args == b.Args &&
		a.Requester == b.Requester && a.Asked.Equal(b.Asked) && a.Deadline.Equal(b.Deadline) && a.State == b.State &&
		a.DecidedBy == b.DecidedBy && a.DecidedAt.Equal(b.DecidedAt) && a.Always == b.Always
}

func wantApproval(t *testing.T, st agent.Store, want agent.Approval) {
	t.Helper()
	got, err := st.Approval(t.Context(), want.ID)
	if err != nil {
		t.Fatalf("Approval(%s): %v", want.ID, err)
	}
	if !sameApproval(got, want) {
		t.Fatalf("Approval(%s) =\n%s\nwant\n%s", want.ID, jsonString(got), jsonString(want))
	}
}

func newApproval(id string, deadline time.Time) agent.Approval {
	return agent.Approval{ID: id, Key: threadA, CallID: "call_1", Tool: "shell", Args: `{"cmd":"rm -rf <x> && echo 世界"}`,
		Requester: agent.User{ID: "U1", Name: "Ann"}, Asked: deadline.Add(-minute).UTC(), Deadline: deadline.UTC()}
}

func decide(t *testing.T, st agent.Store, id string, d agent.ApprovalDecision, wantDecided bool, want agent.Approval) agent.Approval {
	t.Helper()
	got, decided, err := st.DecideApproval(t.Context(), id, d)
	if err != nil {
		t.Fatalf("DecideApproval(%s, %s): %v", id, d.State, err)
	}
	if decided != wantDecided || !sameApproval(got, want) {
		t.Fatalf("DecideApproval(%s, %s) = decided %v,\n%s\nwant decided %v,\n%s", id, d.State, decided, jsonString(got), wantDecided, jsonString(want))
	}
	return got
}

func (s suite) testApproval(t *testing.T) {
	st := s.store(t, agent.Retention{})
	ctx := t.Context()
	now := time.Now().UTC()

	a := newApproval("0a1b2c3d4e5f607182", now.Add(minute))
	if err := st.PutApproval(ctx, a); err != nil {
		t.Fatalf("PutApproval: %v", err)
	}
	a.State = agent.ApprovalPending
	wantApproval(t, st, a)

	_, err := st.Approval(ctx, "unknown")
	wantErr(t, "Approval of an unknown ID", err, agent.ErrNotFound)
	_, err = st.Approval(ctx, "")
	wantErr(t, "Approval of an empty ID", err, agent.ErrNotFound)
	_, _, err = st.DecideApproval(ctx, "unknown", agent.ApprovalDecision{State: agent.ApprovalApproved, By: agent.User{ID: "U1"}})
	wantErr(t, "DecideApproval of an unknown ID", err, agent.ErrNotFound)

	// An ID is one request: storing it again fails and changes nothing.
	again := newApproval(a.ID, now.Add(time.Hour))
	again.Tool = "start"
	if err := st.PutApproval(ctx, again); err == nil {
		t.Fatal("PutApproval of an existing ID succeeded")
	}
	wantApproval(t, st, a)

	approved := a
	approved.State, approved.DecidedBy, approved.DecidedAt, approved.Always = agent.ApprovalApproved, agent.User{ID: "U2", Name: "Bob"}, now.Add(time.Second), true
	decide(t, st, a.ID, agent.ApprovalDecision{State: agent.ApprovalApproved, By: approved.DecidedBy, At: approved.DecidedAt, Always: true}, true, approved)
	// A second click finds it decided and gets the first decision.
	decide(t, st, a.ID, agent.ApprovalDecision{State: agent.ApprovalDenied, By: agent.User{ID: "U3"}, At: now.Add(2 * time.Second)}, false, approved)
	decide(t, st, a.ID, agent.ApprovalDecision{State: agent.ApprovalExpired}, false, approved)
	wantApproval(t, st, approved)

	// A decision without a time gets the store's.
	b := newApproval("b", now.Add(minute))
	if err := st.PutApproval(ctx, b); err != nil {
		t.Fatal(err)
	}
	got, decided, err := st.DecideApproval(ctx, b.ID, agent.ApprovalDecision{State: agent.ApprovalExpired})
	if err != nil || !decided || got.State != agent.ApprovalExpired || got.DecidedAt.Before(now.Add(-time.Minute)) || got.DecidedBy != (agent.User{}) {
		t.Fatalf("DecideApproval without a time = %s, decided %v, %v", jsonString(got), decided, err)
	}

	// After its deadline an approval is still there, so that a late click
	// is answered (the dispatcher turns it into an expiry).
	late := newApproval("late", now.Add(-time.Hour))
	if err := st.PutApproval(ctx, late); err != nil {
		t.Fatal(err)
	}
	late.State = agent.ApprovalPending
	wantApproval(t, st, late)
	denied := late
	denied.State, denied.DecidedBy, denied.DecidedAt = agent.ApprovalDenied, agent.User{ID: "U1"}, now
	decide(t, st, late.ID, agent.ApprovalDecision{State: agent.ApprovalDenied, By: agent.User{ID: "U1"}, At: now}, true, denied)

	// IDs that would collide if they were put in a key plainly.
	for _, id := range []string{"x:y", "x%3Ay", "{x}", "x}"} {
		c := newApproval(id, now.Add(minute))
		if err := st.PutApproval(ctx, c); err != nil {
			t.Fatalf("PutApproval(%q): %v", id, err)
		}
		c.State = agent.ApprovalPending
		wantApproval(t, st, c)
	}
	wantApproval(t, st, approved)
}

func (s suite) testConcurrentDecide(t *testing.T) {
	const clickers = 16
	st := s.store(t, agent.Retention{})
	for round := range 3 {
		a := newApproval(fmt.Sprintf("race-%d", round), time.Now().Add(minute))
		if err := st.PutApproval(t.Context(), a); err != nil {
			t.Fatal(err)
		}
		got := make([]agent.Approval, clickers)
		decided := make([]bool, clickers)
		errs := make([]error, clickers)
		parallel(clickers, func(i int) {
			d := agent.ApprovalDecision{State: agent.ApprovalApproved, By: agent.User{ID: fmt.Sprintf("U%d", i)}, At: time.Now().UTC()}
			if i%2 == 1 {
				d.State = agent.ApprovalDenied
			}
			got[i], decided[i], errs[i] = st.DecideApproval(t.Context(), a.ID, d)
		})
		winner := -1
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d: DecideApproval by clicker %d: %v", round, i, err)
			}
			if decided[i] {
				if winner >= 0 {
					t.Fatalf("round %d: both clicker %d and %d decided", round, winner, i)
				}
				winner = i
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: nobody decided", round)
		}
		w := got[winner]
		if w.DecidedBy.ID != fmt.Sprintf("U%d", winner) {
			t.Fatalf("round %d: clicker %d decided, the approval says %s", round, winner, w.DecidedBy.ID)
		}
		for i := range got {
			if !sameApproval(got[i], w) {
				t.Fatalf("round %d: clicker %d was told\n%s\nthe winner was told\n%s", round, i, jsonString(got[i]), jsonString(w))
			}
		}
		wantApproval(t, st, w)
	}
}

func audit(t *testing.T, st agent.Store, entries ...agent.AuditEntry) {
	t.Helper()
	for _, e := range entries {
		if err := st.Audit(t.Context(), e); err != nil {
			t.Fatalf("Audit(%s): %v", e.Action, err)
		}
	}
}

// auditLog returns what q selects and checks that every entry has an ID
// of its own.
func auditLog(t *testing.T, st agent.Store, q agent.AuditQuery) []agent.AuditEntry {
	t.Helper()
	got, err := st.AuditLog(t.Context(), q)
	if err != nil {
		t.Fatalf("AuditLog(%+v): %v", q, err)
	}
	ids := map[string]bool{}
	for _, e := range got {
		if e.ID == "" || ids[e.ID] {
			t.Fatalf("AuditLog(%+v): entry %q has an empty or repeated ID", q, e.ID)
		}
		ids[e.ID] = true
	}
	return got
}

// sameEntries compares entries but for their IDs.
func sameEntries(t *testing.T, q agent.AuditQuery, got, want []agent.AuditEntry) {
	t.Helper()
	if !slices.EqualFunc(got, want, func(a, b agent.AuditEntry) bool {
		a.ID, b.ID = "", ""
		eq := a.Time.Equal(b.Time)
		a.Time, b.Time = time.Time{}, time.Time{}
		return eq && a == b
	}) {
		t.Fatalf("AuditLog(%+v) =\n%s\nwant\n%s", q, jsonString(got), jsonString(want))
	}
}

func wantAudit(t *testing.T, st agent.Store, q agent.AuditQuery, want ...agent.AuditEntry) []agent.AuditEntry {
	t.Helper()
	got := auditLog(t, st, q)
	sameEntries(t, q, got, want)
	return got
}

func (s suite) testAudit(t *testing.T) {
	st := s.store(t, agent.Retention{})
	base := time.Now().UTC().Add(-time.Hour).Truncate(time.Millisecond)
	a, b := chanA.String(), chanB.String()
	e := []agent.AuditEntry{
		{Time: base, Action: agent.AuditPolicySet, Platform: "slack", Channel: a, User: "slack:U1", Outcome: "ok", Detail: "group:exec=deny"},
		{Time: base.Add(minute), Action: agent.AuditToolCall, Platform: "slack", Channel: b, User: "U2", Tool: "shell",
			Args: `{"cmd":"ls <a> && echo 世界"}`, Outcome: "ok", Duration: 1500 * time.Millisecond},
		{Time: base.Add(2 * minute), Action: agent.AuditAccessAllow, Platform: "telegram", User: "cli:root", Outcome: "ok", Detail: "user 42 (Ann)"},
		{Time: base.Add(3 * minute), Action: agent.AuditApprovalDecided, Platform: "slack", Channel: a, User: "U1", Tool: "fetch", Outcome: "approved", Detail: "0a1b"},
		{Time: base.Add(4 * minute), Action: agent.AuditBudget, Platform: "slack", Channel: a, User: "U3", Outcome: "tokens", Detail: "100 of 100 tokens today"},
	}
	wantAudit(t, st, agent.AuditQuery{})
	audit(t, st, e...)

	wantAudit(t, st, agent.AuditQuery{}, e...)
	wantAudit(t, st, agent.AuditQuery{Channel: a}, e[0], e[3], e[4])
	wantAudit(t, st, agent.AuditQuery{Channel: b}, e[1])
	wantAudit(t, st, agent.AuditQuery{Channel: "slack:T1:C9:"})
	wantAudit(t, st, agent.AuditQuery{Since: e[2].Time}, e[2], e[3], e[4])
	wantAudit(t, st, agent.AuditQuery{Since: e[2].Time.Add(time.Millisecond)}, e[3], e[4])
	wantAudit(t, st, agent.AuditQuery{Since: time.Now().Add(time.Hour)})
	// Limit keeps the newest, still oldest first.
	wantAudit(t, st, agent.AuditQuery{Limit: 2}, e[3], e[4])
	wantAudit(t, st, agent.AuditQuery{Limit: 1}, e[4])
	wantAudit(t, st, agent.AuditQuery{Limit: 9}, e...)
	wantAudit(t, st, agent.AuditQuery{Channel: a, Limit: 2}, e[3], e[4])
	wantAudit(t, st, agent.AuditQuery{Channel: a, Since: e[1].Time, Limit: 1}, e[4])
	wantAudit(t, st, agent.AuditQuery{Channel: a, Since: e[1].Time, Limit: 5}, e[3], e[4])
	all := auditLog(t, st, agent.AuditQuery{})

	// The store times an entry that has no time.
	before := time.Now()
	audit(t, st, agent.AuditEntry{Action: "test.untimed", User: "console"})
	got := auditLog(t, st, agent.AuditQuery{Limit: 1})
	if len(got) != 1 || got[0].Action != "test.untimed" || got[0].Time.Before(before.Add(-time.Second)) || got[0].Time.After(time.Now().Add(time.Second)) {
		t.Fatalf("entry without a time came back as %s", jsonString(got))
	}
	// An ID is the store's: one given is not kept, and the IDs so far are
	// unchanged.
	audit(t, st, agent.AuditEntry{ID: all[0].ID, Time: base, Action: "test.id"})
	got = auditLog(t, st, agent.AuditQuery{})
	if len(got) != 7 || got[6].ID == all[0].ID {
		t.Fatalf("entry with an ID of its own came back as %s", jsonString(got[len(got)-1]))
	}
	for i := range all {
		if got[i].ID != all[i].ID {
			t.Fatalf("entry %d has ID %s, before %s", i, got[i].ID, all[i].ID)
		}
	}
	// Since compares the entries' times, not when they were appended.
	wantAudit(t, st, agent.AuditQuery{Since: e[4].Time}, e[4], got[5])
}

func (s suite) testAuditPaging(t *testing.T) {
	const n = 250
	st := s.store(t, agent.Retention{})
	now := time.Now().UTC()
	var e []agent.AuditEntry
	for i := range n {
		ch := chanB
		if i%10 == 0 {
			ch = chanA
		}
		e = append(e, agent.AuditEntry{Time: now, Action: agent.AuditToolCall, Channel: ch.String(), Detail: fmt.Sprint(i)})
	}
	audit(t, st, e...)
	var everyTenth []agent.AuditEntry
	for i := 0; i < n; i += 10 {
		everyTenth = append(everyTenth, e[i])
	}
	wantAudit(t, st, agent.AuditQuery{Channel: chanA.String(), Limit: 20}, everyTenth[len(everyTenth)-20:]...)
	wantAudit(t, st, agent.AuditQuery{Channel: chanA.String()}, everyTenth...)
	wantAudit(t, st, agent.AuditQuery{Limit: 7}, e[n-7:]...)
	wantAudit(t, st, agent.AuditQuery{}, e...)
}

func (s suite) testAuditCap(t *testing.T) {
	const capacity = 5
	st := s.storeWith(t, Config{AuditCap: capacity})
	now := time.Now().UTC()
	var e []agent.AuditEntry
	for i := range 12 {
		ch := chanA
		if i%2 == 1 {
			ch = chanB
		}
		e = append(e, agent.AuditEntry{Time: now.Add(time.Duration(i) * time.Millisecond), Action: agent.AuditPolicySet, Channel: ch.String(), Detail: fmt.Sprint(i)})
		audit(t, st, e[i])
		wantAudit(t, st, agent.AuditQuery{}, e[max(0, i+1-capacity):]...)
	}
	wantAudit(t, st, agent.AuditQuery{Limit: 3}, e[9:]...)
	wantAudit(t, st, agent.AuditQuery{Channel: chanA.String()}, e[8], e[10])
	wantAudit(t, st, agent.AuditQuery{Limit: 100}, e[7:]...)
}

func (s suite) testConcurrentAudit(t *testing.T) {
	const writers, each = 8, 10
	st := s.store(t, agent.Retention{})
	errs := make([]error, writers)
	parallel(writers, func(w int) {
		for i := range each {
			if err := st.Audit(t.Context(), agent.AuditEntry{Action: "test.race", User: fmt.Sprint(w), Detail: fmt.Sprint(i)}); err != nil {
				errs[w] = err
				return
			}
		}
	})
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("Audit: %v", err)
	}
	got := auditLog(t, st, agent.AuditQuery{})
	if len(got) != writers*each {
		t.Fatalf("AuditLog has %d entries, want %d", len(got), writers*each)
	}
	// Each writer's entries are in the order it wrote them.
	next := map[string]int{}
	for _, e := range got {
		if e.Detail != fmt.Sprint(next[e.User]) {
			t.Fatalf("writer %s: entry %s came where %d was due", e.User, e.Detail, next[e.User])
		}
		next[e.User]++
	}
}

func (s suite) testGovernInvalid(t *testing.T) {
	st := s.store(t, agent.Retention{})
	ctx := t.Context()
	now := time.Now()
	const day = "2025-03-04"
	if err := st.PutApproval(ctx, newApproval("valid", now.Add(minute))); err != nil {
		t.Fatal(err)
	}
	noDeadline := newApproval("no-deadline", now)
	noDeadline.Deadline = time.Time{}
	decided := newApproval("decided", now.Add(minute))
	decided.State = agent.ApprovalApproved
	for _, tc := range []struct {
		what string
		err  error
	}{
		{"Allow without a platform", st.Allow(ctx, grant("", agent.GrantUser, "1", ""))},
		{"Allow of an unknown kind", st.Allow(ctx, grant("telegram", "admin", "1", ""))},
		{"Allow without an ID", st.Allow(ctx, grant("telegram", agent.GrantChat, "", ""))},
		{"Allowed without a platform", errOf(st.Allowed(ctx, "", agent.GrantUser, "1"))},
		{"Revoke without a kind", errOf(st.Revoke(ctx, "telegram", "", "1"))},
		{"Pair without a code", errOf3(st.Pair(ctx, pairing("", "telegram", agent.GrantUser, "1", now, minute)))},
		{"Pair of an unknown kind", errOf3(st.Pair(ctx, pairing("EEEE-0001", "telegram", "admin", "1", now, minute)))},
		{"Pair without an ID", errOf3(st.Pair(ctx, pairing("EEEE-0002", "telegram", agent.GrantUser, "", now, minute)))},
		{"Pair that has expired", errOf3(st.Pair(ctx, pairing("EEEE-0003", "telegram", agent.GrantUser, "1", now.Add(-2*minute), minute)))},
		{"Once without a name", errOf(st.Once(ctx, "", minute))},
		{"Once with a zero ttl", errOf(st.Once(ctx, "x", 0))},
		{"Hit without a name", errOf(st.Hit(ctx, "", minute))},
		{"Hit with a negative window", errOf(st.Hit(ctx, "x", -minute))},
		{"AddUsage with an invalid key", errOf(st.AddUsage(ctx, agent.SessionKey{Chat: "C1"}, day, 1))},
		{"AddUsage with a malformed day", errOf(st.AddUsage(ctx, chanA, "2025-3-4", 1))},
		{"AddUsage without a day", errOf(st.AddUsage(ctx, chanA, "", 1))},
		{"AddUsage of negative tokens", errOf(st.AddUsage(ctx, chanA, day, -1))},
		{"Usage with a malformed day", errOf(st.Usage(ctx, chanA, "today"))},
		{"PutApproval without an ID", st.PutApproval(ctx, newApproval("", now.Add(minute)))},
		{"PutApproval without a deadline", st.PutApproval(ctx, noDeadline)},
		{"PutApproval of a decided approval", st.PutApproval(ctx, decided)},
		{"DecideApproval to pending", errOf3(st.DecideApproval(ctx, "valid", agent.ApprovalDecision{State: agent.ApprovalPending}))},
		{"DecideApproval without a state", errOf3(st.DecideApproval(ctx, "valid", agent.ApprovalDecision{}))},
	} {
		wantErr(t, tc.what, tc.err, agent.ErrInvalid)
	}
	wantGrants(t, st, "")
	wantPairings(t, st)
	if n, err := st.Usage(ctx, chanA, day); err != nil || n != 0 {
		t.Fatalf("Usage after invalid adds = %d, %v", n, err)
	}
	for _, id := range []string{"no-deadline", "decided"} {
		_, err := st.Approval(ctx, id)
		wantErr(t, "Approval of "+id, err, agent.ErrNotFound)
	}
	valid := newApproval("valid", now.Add(minute))
	valid.State = agent.ApprovalPending
	wantApproval(t, st, valid)

	canceled, cancel := context.WithCancel(ctx)
	cancel()
	wantErr(t, "Allow with a canceled context", st.Allow(canceled, grant("telegram", agent.GrantUser, "1", "")), context.Canceled)
	wantErr(t, "Audit with a canceled context", st.Audit(canceled, agent.AuditEntry{Action: "test"}), context.Canceled)
	wantGrants(t, st, "")
	wantAudit(t, st, agent.AuditQuery{})
}

// errOf3 returns the error of a call that also returns two values.
func errOf3[T, U any](_ T, _ U, err error) error { return err }
