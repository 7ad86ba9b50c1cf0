// Package storetest is the conformance suite for Store. store/redis and
// store/local both run it, so the dispatcher sees one behaviour whichever
// store the operator picked: the suite, not either implementation, is the
// reference for what Store's comments mean in the corner cases.
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
// And for govern.Store:
//
//   - Names from outside (grant IDs, Once names, CountMessage's authors and
//     messages, approval and pairing IDs) are opaque: "a:b", "a%3Ab" and
//     "{a}" are three names, and a grant's platform, kind and ID never run
//     into each other.
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
//   - CountMessage counts each window length apart: a person's per-minute
//     and per-hour counts do not add up. It remembers a message as its
//     author's (a name counted for one person is not counted for another),
//     for its dedup whatever the window; a message delivered again is not
//     counted, nor told of, and is answered with the count of the window it
//     arrives in.
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
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/agent/govern"
	"github.com/firstmate/firstmate/agent/schedules"
	"github.com/firstmate/firstmate/tools"
)

// Store is every role a store of firstmate's plays, as both stores do:
// the dispatcher's sessions, the gate's governance, schedules, the
// background jobs' board, and the named leases and boot counts of
// replicas. The suite checks each role in a file of its own.
type Store interface {
	agent.Sessions
	govern.Store
	schedules.Store
	tools.JobBoard
	// Boot returns the next boot number of a replica (1 for its first
	// start): with the replica's name it makes an agent.Owner unique to
	// one process's life.
	Boot(ctx context.Context, replica string) (int64, error)
	// TryLease takes or renews a named lease (one Telegram poller among
	// replicas) for owner, for ttl, and reports whether owner holds it.
	TryLease(ctx context.Context, name, owner string, ttl time.Duration) (bool, error)
	// DropLease gives up a named lease if owner holds it.
	DropLease(ctx context.Context, name, owner string) error
	Close() error
}

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
func Run(t *testing.T, open func(t *testing.T, c Config) Store) {
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
		{"CountMessage", s.testCountMessage},
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
	open func(*testing.T, Config) Store
}

// store opens a store with retention ret and closes it when t ends.
func (s suite) store(t *testing.T, ret agent.Retention) Store {
	t.Helper()
	return s.storeWith(t, Config{Retention: ret})
}

// storeWith opens a store configured by c and closes it when t ends.
func (s suite) storeWith(t *testing.T, c Config) Store {
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

func enqueue(t *testing.T, st Store, in agent.Inbound, want bool) {
	t.Helper()
	added, err := st.Enqueue(t.Context(), in)
	if err != nil {
		t.Fatalf("Enqueue(%v, %q): %v", in.Key, in.MessageID, err)
	}
	if added != want {
		t.Fatalf("Enqueue(%v, %q) added = %v, want %v", in.Key, in.MessageID, added, want)
	}
}

func claim(t *testing.T, st Store, key agent.SessionKey, owner string, ttl time.Duration) *agent.Claim {
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

func commit(t *testing.T, st Store, key agent.SessionKey, owner string, consumed int, turn []agent.Message) {
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

func wantPending(t *testing.T, st Store, key agent.SessionKey, want int) {
	t.Helper()
	n, err := st.Pending(t.Context(), key)
	if err != nil {
		t.Fatalf("Pending(%v): %v", key, err)
	}
	if n != want {
		t.Fatalf("Pending(%v) = %d, want %d", key, n, want)
	}
}

func wantHistory(t *testing.T, st Store, key agent.SessionKey, want ...[]agent.Message) {
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
