// The dispatcher's role: sessions (mailbox, lease, history, outbox) and
// the channel settings read with a claim.

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
	"github.com/firstmate/firstmate/agent/govern"
)

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

func seen(t *testing.T, st Store, in agent.Inbound, want bool) {
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

func wantWaiting(t *testing.T, st Store, want ...agent.SessionKey) {
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

// The tests below are of govern.Store.

func grant(platform string, kind govern.GrantKind, id, name string) govern.Grant {
	return govern.Grant{Platform: platform, Kind: kind, ID: id, Name: name, By: "cli:root",
		At: time.Date(2025, 3, 4, 5, 6, 7, 890123456, time.UTC)}
}

func wantAllowed(t *testing.T, st Store, platform string, kind govern.GrantKind, id string, want bool) {
	t.Helper()
	got, err := st.Allowed(t.Context(), platform, kind, id)
	if err != nil {
		t.Fatalf("Allowed(%q, %q, %q): %v", platform, kind, id, err)
	}
	if got != want {
		t.Fatalf("Allowed(%q, %q, %q) = %v, want %v", platform, kind, id, got, want)
	}
}

func wantGrants(t *testing.T, st Store, platform string, want ...govern.Grant) {
	t.Helper()
	got, err := st.Grants(t.Context(), platform)
	if err != nil {
		t.Fatalf("Grants(%q): %v", platform, err)
	}
	if !slices.EqualFunc(got, want, func(a, b govern.Grant) bool {
		return a.Platform == b.Platform && a.Kind == b.Kind && a.ID == b.ID && a.Name == b.Name && a.By == b.By && a.At.Equal(b.At)
	}) {
		t.Fatalf("Grants(%q) =\n%s\nwant\n%s", platform, jsonString(got), jsonString(want))
	}
}
