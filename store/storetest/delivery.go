package storetest

// The tests of the mailbox's order, the outbox, the ready set, boots and
// named leases: what lets a turn survive the process that ran it.

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/firstmate/firstmate/agent"
)

// seqMsg is a message whose ID is its seq, so that a mailbox's IDs show
// its order.
func seqMsg(key agent.SessionKey, seq string) agent.Inbound {
	in := inbound(key, seq)
	in.Seq = seq
	return in
}

// mailboxOf claims key for owner and returns the IDs in its mailbox. A
// claim by the holder resets what it claimed, so tests call it where that
// does not matter.
func mailboxOf(t *testing.T, st Store, key agent.SessionKey, owner string) []string {
	t.Helper()
	return ids(claim(t, st, key, owner, minute).Mailbox)
}

func wantIDs(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s = %q, want %q", what, got, want)
	}
}

func (s suite) testMailboxPlatformOrder(t *testing.T) {
	st := s.store(t, agent.Retention{})
	// Deliveries arrive out of order; two have no seq.
	for _, in := range []agent.Inbound{
		seqMsg(threadA, "0001"), seqMsg(threadA, "0003"),
		inbound(threadA, "x"), // no seq: after every seq
		seqMsg(threadA, "0002"), seqMsg(threadA, "0005"), seqMsg(threadA, "0004"),
		inbound(threadA, "y"),
		seqMsg(threadA, "0000"),
	} {
		enqueue(t, st, in, true)
	}
	// Equal seqs keep their arrival order.
	same := inbound(threadA, "0002-again")
	same.Seq = "0002"
	enqueue(t, st, same, true)
	enqueue(t, st, seqMsg(threadA, "0003"), false) // a duplicate moves nothing
	wantIDs(t, "mailbox", mailboxOf(t, st, threadA, "w1"),
		"0000", "0001", "0002", "0002-again", "0003", "0004", "0005", "x", "y")

	// Slack timestamps: the seq compares as bytes (the same as numbers
	// for a fixed width), whatever the server's locale says of '.'.
	for _, seq := range []string{"1700000001.000100", "1700000000.000900", "1700000000.001000", "1700000000.000100"} {
		enqueue(t, st, seqMsg(threadB, seq), true)
	}
	wantIDs(t, "mailbox of Slack timestamps", mailboxOf(t, st, threadB, "w1"),
		"1700000000.000100", "1700000000.000900", "1700000000.001000", "1700000001.000100")
}

func (s suite) testConcurrentOutOfOrder(t *testing.T) {
	const workers, n = 8, 80
	st := s.store(t, agent.Retention{})
	var want []string
	for i := range n {
		want = append(want, fmt.Sprintf("%04d", i))
	}
	var errs [workers]error
	parallel(workers, func(w int) {
		// Every worker delivers every message, in its own order: each
		// is added once, by whichever worker comes first.
		order := slices.Clone(want)
		rand.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, seq := range order {
			if _, err := st.Enqueue(t.Context(), seqMsg(threadA, seq)); err != nil {
				errs[w] = err
				return
			}
		}
	})
	if err := errors.Join(errs[:]...); err != nil {
		t.Fatal(err)
	}
	wantIDs(t, "mailbox", mailboxOf(t, st, threadA, "w1"), want...)
}

func (s suite) testEnqueueAfterClaimed(t *testing.T) {
	st := s.store(t, agent.Retention{})
	ctx := t.Context()
	for _, seq := range []string{"0005", "0006", "0007"} {
		enqueue(t, st, seqMsg(threadA, seq), true)
	}
	c := claim(t, st, threadA, "w1", minute)
	wantMailbox(t, "Claim", c.Mailbox, "0005", "0006", "0007")

	// The turn answers 5, 6 and 7; earlier messages that arrive now go
	// after them, in order among themselves.
	for _, seq := range []string{"0001", "0009", "0004"} {
		enqueue(t, st, seqMsg(threadA, seq), true)
	}
	// A Commit of part of what was claimed keeps the rest claimed.
	commit(t, st, threadA, "w1", 1, turn("t5", 2))
	enqueue(t, st, seqMsg(threadA, "0002"), true)
	commit(t, st, threadA, "w1", 2, turn("t67", 2))
	wantPending(t, st, threadA, 4)
	// Nothing is claimed now, so an earlier message goes first.
	enqueue(t, st, seqMsg(threadA, "0000"), true)

	// Claiming again claims the whole mailbox.
	c = claim(t, st, threadA, "w1", minute)
	wantMailbox(t, "second Claim", c.Mailbox, "0000", "0001", "0002", "0004", "0009")
	enqueue(t, st, seqMsg(threadA, "0003"), true)
	// Commit(5) removes exactly the five it claimed: 3 is answered next,
	// and none is answered twice.
	commit(t, st, threadA, "w1", len(c.Mailbox), turn("t2", 2))
	c = claim(t, st, threadA, "w1", minute)
	wantMailbox(t, "third Claim", c.Mailbox, "0003")

	// Release (which keeps the lease while messages wait) forgets what
	// was claimed: the holder claims again and sees the new order.
	if n, err := st.Release(ctx, threadA, "w1", ""); err != nil || n != 1 {
		t.Fatalf("Release = %d, %v; want 1, nil", n, err)
	}
	enqueue(t, st, seqMsg(threadA, "0002b"), true)
	c = claim(t, st, threadA, "w1", minute)
	wantMailbox(t, "Claim after Release", c.Mailbox, "0002b", "0003")

	// So does Abandon.
	if err := st.Abandon(ctx, threadA, "w1"); err != nil {
		t.Fatal(err)
	}
	enqueue(t, st, seqMsg(threadA, "0002a"), true)
	c = claim(t, st, threadA, "w2", 300*time.Millisecond)
	wantMailbox(t, "Claim after Abandon", c.Mailbox, "0002a", "0002b", "0003")

	// And a lease that expired: its holder is gone.
	time.Sleep(600 * time.Millisecond)
	enqueue(t, st, seqMsg(threadA, "0001z"), true)
	c = claim(t, st, threadA, "w3", minute)
	wantMailbox(t, "Claim after the lease expired", c.Mailbox, "0001z", "0002a", "0002b", "0003")

	// An earlier message never goes before what a Claim handed out, even
	// when the whole mailbox was: it goes last.
	enqueue(t, st, seqMsg(threadA, "0000z"), true)
	commit(t, st, threadA, "w3", 4, turn("t3", 2))
	c = claim(t, st, threadA, "w3", minute)
	wantMailbox(t, "Claim after consuming all that was claimed", c.Mailbox, "0000z")
}

// outbound returns an answer to trigger with every field set.
func outbound(id string, trigger agent.Inbound) agent.Outbound {
	return agent.Outbound{
		ID:      id,
		Trigger: trigger,
		Answer:  "answer " + id + " « <b>&amp;</b> » 🚢",
		Files:   []string{"out/report ü.pdf", "b.txt"},
		Steps:   3,
		Tools:   2,
		Took:    1234567890 * time.Nanosecond,
	}
}

func wantOutbox(t *testing.T, what string, got []agent.Outbound, want ...agent.Outbound) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s outbox has %d entries, want %d:\n%s", what, len(got), len(want), jsonString(got))
	}
	for i := range want {
		g, w := got[i], want[i]
		if !g.Trigger.Time.Equal(w.Trigger.Time) {
			t.Fatalf("%s outbox[%d] trigger time = %v, want %v", what, i, g.Trigger.Time, w.Trigger.Time)
		}
		g.Trigger.Time = w.Trigger.Time
		if !reflect.DeepEqual(g, w) {
			t.Fatalf("%s outbox[%d] =\n%s\nwant\n%s", what, i, jsonString(g), jsonString(w))
		}
	}
}

func commitOut(t *testing.T, st Store, key agent.SessionKey, owner string, consumed int, tn []agent.Message, out agent.Outbound) {
	t.Helper()
	if err := st.Commit(t.Context(), key, owner, consumed, tn, &out); err != nil {
		t.Fatalf("Commit(%v, %q, %d, %q): %v", key, owner, consumed, out.ID, err)
	}
}

func delivered(t *testing.T, st Store, key agent.SessionKey, id string) {
	t.Helper()
	if err := st.Delivered(t.Context(), key, id); err != nil {
		t.Fatalf("Delivered(%v, %q): %v", key, id, err)
	}
}

// A commit adds the tokens its turn spent to the channel's count: once,
// however often it is sent, and only if it commits. They are not kept in
// the outbox.
func (s suite) testCommitSpent(t *testing.T) {
	st := s.store(t, agent.Retention{})
	ctx := t.Context()
	const day = "2025-03-04"
	used := func(what string, want int64) {
		t.Helper()
		got, err := st.Usage(ctx, chanA, day)
		if err != nil || got != want {
			t.Fatalf("%s: Usage = %d, %v; want %d", what, got, err, want)
		}
	}
	if _, err := st.AddUsage(ctx, chanA, day, 30); err != nil {
		t.Fatal(err)
	}
	trigger := inbound(threadA, "m1")
	enqueue(t, st, trigger, true)
	claim(t, st, threadA, "w1", minute)
	o1 := outbound("o1", trigger)
	o1.Spent = agent.Spent{Day: day, Tokens: 120}
	commitOut(t, st, threadA, "w1", 1, turn("t1", 2), o1)
	used("after the commit", 150)
	commitOut(t, st, threadA, "w1", 1, turn("t1", 2), o1) // its reply was lost: sent again
	used("after the same commit again", 150)

	o2 := outbound("o2", trigger)
	o2.Spent = agent.Spent{Day: day, Tokens: 5}
	wantErr(t, "Commit by a non-holder", st.Commit(ctx, threadA, "w2", 0, nil, &o2), agent.ErrLeaseLost)
	for _, bad := range []agent.Spent{{Day: "2025-3-4", Tokens: 5}, {Day: "", Tokens: 5}, {Day: day, Tokens: -5}} {
		o2.Spent = bad
		wantErr(t, fmt.Sprintf("Commit of %+v", bad), st.Commit(ctx, threadA, "w1", 0, nil, &o2), agent.ErrInvalid)
	}
	used("after commits that failed", 150)

	c := claim(t, st, threadA, "w1", minute)
	if len(c.Outbox) != 1 || c.Outbox[0].ID != "o1" || c.Outbox[0].Spent != (agent.Spent{}) {
		t.Fatalf("outbox %+v, want o1 without what it spent", c.Outbox)
	}
}

func (s suite) testOutbox(t *testing.T) {
	st := s.store(t, agent.Retention{})
	ctx := t.Context()
	trigger := inbound(threadA, "m1")
	trigger.Seq = "0001"
	trigger.Time = time.Date(2025, 3, 4, 5, 6, 7, 890123456, time.FixedZone("X", 5*3600+1800))
	trigger.Files = []agent.File{{Name: "a.txt", Path: "inbox/a.txt", Size: 3}}
	enqueue(t, st, trigger, true)
	c := claim(t, st, threadA, "w1", minute)
	wantOutbox(t, "first Claim", c.Outbox)

	// The answer is committed with the turn that consumed its message.
	o1 := outbound("o1", trigger)
	t1 := turn("t1", 2)
	commitOut(t, st, threadA, "w1", 1, t1, o1)
	wantPending(t, st, threadA, 0)
	wantHistory(t, st, threadA, t1)
	o2 := agent.Outbound{ID: "o2", Trigger: inbound(threadA, "m2"), Failure: "the model is rate-limited"}
	commitOut(t, st, threadA, "w1", 0, nil, o2)
	c = claim(t, st, threadA, "w1", minute)
	wantOutbox(t, "Claim", c.Outbox, o1, o2)

	// Fenced like the rest of a Commit, and checked.
	err := st.Commit(ctx, threadA, "w2", 0, turn("intruder", 2), &agent.Outbound{ID: "o3"})
	wantErr(t, "Commit with an outbox entry by a non-holder", err, agent.ErrLeaseLost)
	err = st.Commit(ctx, threadA, "w1", 0, turn("t", 2), &agent.Outbound{Answer: "no ID"})
	wantErr(t, "Commit of an outbox entry without ID", err, agent.ErrInvalid)
	wantHistory(t, st, threadA, t1)

	// Another session's entry with the same ID is its own.
	enqueue(t, st, inbound(threadB, "n1"), true)
	claim(t, st, threadB, "w1", minute)
	ob := outbound("o1", inbound(threadB, "n1"))
	commitOut(t, st, threadB, "w1", 1, nil, ob)

	// Delivered needs no lease: whoever showed the entry says so.
	if _, err := st.Release(ctx, threadA, "w1", ""); err != nil {
		t.Fatal(err)
	}
	delivered(t, st, threadA, "o1")
	delivered(t, st, threadA, "o1") // again: it is gone, not an error
	delivered(t, st, threadA, "nope")
	delivered(t, st, chanB, "o1") // a session that never had one
	c = claim(t, st, threadA, "w2", minute)
	wantOutbox(t, "Claim after Delivered", c.Outbox, o2)
	c = claim(t, st, threadB, "w1", minute)
	wantOutbox(t, "the other session's Claim", c.Outbox, ob)

	// A release marks the answer its holder showed, in the same call; a
	// holder that lost the lease meanwhile still marks it.
	ob2 := outbound("o2", inbound(threadB, "n2"))
	commitOut(t, st, threadB, "w1", 0, nil, ob2)
	if n, err := st.Release(ctx, threadB, "w1", "o1"); err != nil || n != 0 {
		t.Fatalf("Release with the answer shown = %d, %v; want 0, nil", n, err)
	}
	c = claim(t, st, threadB, "w2", minute)
	wantOutbox(t, "Claim after a Release that marked o1", c.Outbox, ob2)
	_, err = st.Release(ctx, threadB, "w1", "o2")
	wantErr(t, "Release by a holder that lost the lease", err, agent.ErrLeaseLost)
	c = claim(t, st, threadB, "w2", minute)
	wantOutbox(t, "Claim after a lost holder's Release marked o2", c.Outbox)

	// Reset forgets the history, not what is still to be shown.
	if err := st.Reset(ctx, threadA); err != nil {
		t.Fatal(err)
	}
	c = claim(t, st, threadA, "w2", minute)
	wantOutbox(t, "Claim after Reset", c.Outbox, o2)
	delivered(t, st, threadA, "o2")
	c = claim(t, st, threadA, "w2", minute)
	wantOutbox(t, "Claim after delivering everything", c.Outbox)
}

func wantReady(t *testing.T, st Store, limit int, want ...agent.SessionKey) {
	t.Helper()
	got, err := st.Ready(t.Context(), limit)
	if err != nil {
		t.Fatalf("Ready(%d): %v", limit, err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Ready(%d) = %v, want %v", limit, got, want)
	}
}

func release(t *testing.T, st Store, key agent.SessionKey, owner string, want int) {
	t.Helper()
	n, err := st.Release(t.Context(), key, owner, "")
	if err != nil || n != want {
		t.Fatalf("Release(%v, %q) = %d, %v; want %d, nil", key, owner, n, err, want)
	}
}

func (s suite) testReady(t *testing.T) {
	const ttl = 500 * time.Millisecond
	st := s.store(t, agent.Retention{})
	other := s.store(t, agent.Retention{})
	ctx := t.Context()
	wantReady(t, st, 10)

	// Longest waiting first: in the order the sessions got mail, however
	// their keys sort.
	enqueue(t, st, inbound(threadB, "b1"), true)
	enqueue(t, st, inbound(chanB, "c1"), true)
	enqueue(t, st, inbound(threadA, "a1"), true)
	enqueue(t, st, inbound(threadB, "b2"), true) // keeps its place
	wantReady(t, st, 10, threadB, chanB, threadA)
	wantReady(t, st, 2, threadB, chanB)
	wantReady(t, st, 0)
	wantReady(t, other, 10)

	// A session with a lease is not ready, however long it waited: its
	// turn runs.
	claim(t, st, threadB, "w1", minute)
	claim(t, st, chanB, "w2", ttl)
	wantReady(t, st, 10, threadA)
	wantReady(t, st, 1, threadA)

	// Nor is one with nothing to do: a turn consumed its mail.
	claim(t, st, threadA, "w3", minute)
	commit(t, st, threadA, "w3", 1, turn("t1", 2))
	release(t, st, threadA, "w3", 0)
	wantReady(t, st, 10)
	// A session with history but no mail is no different.
	claim(t, st, chanA, "w4", minute)
	commit(t, st, chanA, "w4", 0, turn("t2", 2))
	release(t, st, chanA, "w4", 0)
	wantReady(t, st, 10)

	// A session whose answer is committed but not shown is ready once
	// its lease is gone: the next holder shows it.
	enqueue(t, st, inbound(threadA, "a2"), true)
	claim(t, st, threadA, "w3", minute)
	commitOut(t, st, threadA, "w3", 1, turn("t3", 2), outbound("o1", inbound(threadA, "a2")))
	wantReady(t, st, 10)
	release(t, st, threadA, "w3", 0)
	wantReady(t, st, 10, threadA)

	// The holder of chanB died: once its lease expires, chanB is ready
	// again, still ahead of threadA.
	time.Sleep(ttl + 300*time.Millisecond)
	wantReady(t, st, 10, chanB, threadA)

	// A worker handing back a turn at shutdown makes it ready at once.
	if err := st.Abandon(ctx, threadB, "w1"); err != nil {
		t.Fatal(err)
	}
	wantReady(t, st, 10, threadB, chanB, threadA)

	delivered(t, st, threadA, "o1")
	wantReady(t, st, 10, threadB, chanB)
	// A session that emptied and gets mail again waits from then on.
	enqueue(t, st, inbound(threadA, "a3"), true)
	wantReady(t, st, 10, threadB, chanB, threadA)
	c := claim(t, st, threadB, "w5", minute)
	commit(t, st, threadB, "w5", len(c.Mailbox), turn("t4", 2))
	release(t, st, threadB, "w5", 0)
	wantReady(t, st, 10, chanB, threadA)
	enqueue(t, st, inbound(threadB, "b3"), true)
	wantReady(t, st, 10, chanB, threadA, threadB)
	wantReady(t, other, 10)
}

func (s suite) testReadyManyIdle(t *testing.T) {
	const idle = 300
	st := s.store(t, agent.Retention{})
	// Idle sessions: some had a turn, some only history. None is ready.
	var errs [8]error
	parallel(len(errs), func(w int) {
		for i := w; i < idle; i += len(errs) {
			key := agent.SessionKey{Platform: "telegram", Chat: fmt.Sprint(-1000 - i)}
			errs[w] = errors.Join(errs[w], func() error {
				ctx := t.Context()
				if i%2 == 0 {
					if _, err := st.Enqueue(ctx, inbound(key, "m")); err != nil {
						return err
					}
				}
				c, err := st.Claim(ctx, key, "w", minute)
				if err != nil {
					return err
				}
				if err := st.Commit(ctx, key, "w", len(c.Mailbox), turn("t", 2), nil); err != nil {
					return err
				}
				_, err = st.Release(ctx, key, "w", "")
				return err
			}())
		}
	})
	if err := errors.Join(errs[:]...); err != nil {
		t.Fatal(err)
	}
	enqueue(t, st, inbound(threadA, "a1"), true)
	enqueue(t, st, inbound(chanB, "c1"), true)
	enqueue(t, st, inbound(threadB, "b1"), true)
	wantReady(t, st, 10, threadA, chanB, threadB)
	wantReady(t, st, 2, threadA, chanB)
	wantReady(t, st, 10, threadA, chanB, threadB)
}

// testReadyConcurrent checks that a session with mail is never dropped
// from the ready set by a Ready that ran at the same time as its Enqueue:
// sessions are filled and emptied while Ready runs in a loop, and after each
// round every session has one message, which Ready must list.
func (s suite) testReadyConcurrent(t *testing.T) {
	const sessions, rounds, churn, pollers = 16, 4, 6, 3
	st := s.store(t, agent.Retention{})
	ctx := t.Context()
	keys := make([]agent.SessionKey, sessions)
	for w := range keys {
		keys[w] = agent.SessionKey{Platform: "slack", Team: "T1", Chat: "C1", Thread: fmt.Sprint(w)}
	}
	byString := func(a, b agent.SessionKey) int { return strings.Compare(a.String(), b.String()) }
	slices.SortFunc(keys, byString)
	// empty consumes a session's mail and drops its lease.
	empty := func(key agent.SessionKey, owner string) error {
		c, err := st.Claim(ctx, key, owner, minute)
		if err == nil {
			err = st.Commit(ctx, key, owner, len(c.Mailbox), nil, nil)
		}
		if err == nil {
			_, err = st.Release(ctx, key, owner, "")
		}
		return err
	}
	for r := range rounds {
		var (
			stop     atomic.Bool
			wg       sync.WaitGroup
			pollErrs [pollers]error
		)
		for p := range pollers {
			wg.Go(func() {
				for !stop.Load() {
					if _, err := st.Ready(ctx, 100); err != nil {
						pollErrs[p] = err
						return
					}
				}
			})
		}
		var errs [sessions]error
		parallel(sessions, func(w int) {
			owner := fmt.Sprintf("w%d", w)
			for i := range churn + 1 {
				if _, err := st.Enqueue(ctx, inbound(keys[w], fmt.Sprintf("%d-%d-%d", r, w, i))); err != nil {
					errs[w] = err
					return
				}
				if i == churn {
					return // the last message stays
				}
				if err := empty(keys[w], owner); err != nil {
					errs[w] = err
					return
				}
			}
		})
		stop.Store(true)
		wg.Wait()
		if err := errors.Join(append(errs[:], pollErrs[:]...)...); err != nil {
			t.Fatal(err)
		}
		got, err := st.Ready(ctx, 100)
		if err != nil {
			t.Fatal(err)
		}
		slices.SortFunc(got, byString)
		if !slices.Equal(got, keys) {
			t.Fatalf("round %d: Ready = %v, want every session: %v", r, got, keys)
		}
		for _, key := range keys {
			if err := empty(key, "drain"); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func (s suite) testClaimEarlierBoot(t *testing.T) {
	st := s.store(t, agent.Retention{})
	ctx := t.Context()
	held := func(owner string) {
		t.Helper()
		_, err := st.Claim(ctx, threadA, owner, minute)
		wantErr(t, fmt.Sprintf("Claim by %q", owner), err, agent.ErrLeaseHeld)
	}
	enqueue(t, st, inbound(threadA, "m1"), true)
	boot1, boot2 := agent.Owner("web-0:8080", 1), agent.Owner("web-0:8080", 2)
	claim(t, st, threadA, boot1, minute)

	// The replica restarted: its new life takes over at once.
	c := claim(t, st, threadA, boot2, minute)
	wantMailbox(t, "Claim by the next boot", c.Mailbox, "m1")
	// The old life is fenced off: the owner string is the token.
	wantErr(t, "Commit by the earlier boot", st.Commit(ctx, threadA, boot1, 1, turn("late", 2), nil), agent.ErrLeaseLost)
	wantErr(t, "Renew by the earlier boot", st.Renew(ctx, threadA, boot1, minute), agent.ErrLeaseLost)
	_, err := st.Release(ctx, threadA, boot1, "")
	wantErr(t, "Release by the earlier boot", err, agent.ErrLeaseLost)
	if err := st.Abandon(ctx, threadA, boot1); err != nil {
		t.Fatal(err)
	}
	// Nobody else takes it: an earlier boot, another replica, a replica
	// whose name starts the same, owners of another form.
	held(boot1)
	held(agent.Owner("web-1:8080", 9))
	held(agent.Owner("web-0:808", 9))
	held(agent.Owner("web-0:8080#2", 3))
	held("web-0:8080")
	held("web-0:8080#")
	held("web-0:8080#x")
	held("w1")
	wantPending(t, st, threadA, 1)

	// Boots compare as numbers.
	boot10 := agent.Owner("web-0:8080", 10)
	claim(t, st, threadA, boot10, minute)
	held(boot2)
	commit(t, st, threadA, boot10, 1, turn("t1", 2))
	wantHistory(t, st, threadA, turn("t1", 2))

	// A holder not written REPLICA#BOOT is never taken over.
	claim(t, st, threadB, "w1", minute)
	_, err = st.Claim(ctx, threadB, "w1#2", minute)
	wantErr(t, "Claim by \"w1#2\" of a lease held by \"w1\"", err, agent.ErrLeaseHeld)
}

// A Commit sent again with the same outbox entry (its reply was lost and
// the client or the dispatcher retried) changes nothing the second time:
// no message consumed twice, no turn or answer added twice.
func (s suite) testCommitTwice(t *testing.T) {
	st := s.store(t, agent.Retention{})
	m1 := inbound(threadA, "m1")
	enqueue(t, st, m1, true)
	claim(t, st, threadA, "w1", minute)
	o1 := outbound("o1", m1)
	t1 := turn("t1", 2)
	commitOut(t, st, threadA, "w1", 1, t1, o1)
	enqueue(t, st, inbound(threadA, "m2"), true) // arrived meanwhile
	commitOut(t, st, threadA, "w1", 1, t1, o1)
	wantPending(t, st, threadA, 1)
	wantHistory(t, st, threadA, t1)
	c := claim(t, st, threadA, "w1", minute)
	wantOutbox(t, "Claim after a repeated Commit", c.Outbox, o1)
	// The next turn's commit is its own.
	o2 := outbound("o2", inbound(threadA, "m2"))
	t2 := turn("t2", 2)
	commitOut(t, st, threadA, "w1", 1, t2, o2)
	wantPending(t, st, threadA, 0)
	wantHistory(t, st, threadA, t1, t2)
}
