// The gate's role: settings, grants, pairing, approvals, the audit log
// and usage counters.

package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/agent/govern"
)

func (s suite) testGrants(t *testing.T) {
	st := s.store(t, agent.Retention{})
	ctx := t.Context()
	wantGrants(t, st, "")
	wantAllowed(t, st, "telegram", govern.GrantUser, "42", false)

	var (
		tgAnn    = grant("telegram", govern.GrantUser, "42", "Ann")
		tgUser7  = grant("telegram", govern.GrantUser, "7", "")
		tgGroup  = grant("telegram", govern.GrantChat, "-1001234567890", "crew")
		slChan   = grant("slack", govern.GrantChat, "C1", "#general")
		slBob    = grant("slack", govern.GrantUser, "U1", "Bob")
		colon    = grant("x", govern.GrantUser, "a:b", "")
		escaped  = grant("x", govern.GrantUser, "a%3Ab", "")
		braces   = grant("x", govern.GrantUser, "{c}", "")
		platUser = grant("x:user", govern.GrantUser, "b", "") // x:user:user:b, were the parts joined plainly
	)
	for _, g := range []govern.Grant{tgAnn, tgUser7, tgGroup, slChan, slBob, colon, escaped, braces, platUser} {
		if err := st.Allow(ctx, g); err != nil {
			t.Fatalf("Allow(%+v): %v", g, err)
		}
		wantAllowed(t, st, g.Platform, g.Kind, g.ID, true)
	}
	// Another kind, another platform, part of an ID: not allowed.
	wantAllowed(t, st, "telegram", govern.GrantChat, "42", false)
	wantAllowed(t, st, "slack", govern.GrantUser, "42", false)
	wantAllowed(t, st, "telegram", govern.GrantUser, "4", false)
	wantAllowed(t, st, "x", govern.GrantUser, "a", false)
	wantAllowed(t, st, "x", govern.GrantChat, "a:b", false)
	wantAllowed(t, st, "x", govern.GrantUser, "user:b", false)
	wantAllowed(t, st, "x", govern.GrantUser, "c", false)

	// Allow replaces the subject's grant.
	tgAnn2 := grant("telegram", govern.GrantUser, "42", "Ann B.")
	tgAnn2.By, tgAnn2.At = "slack:U9", tgAnn2.At.Add(time.Hour)
	if err := st.Allow(ctx, tgAnn2); err != nil {
		t.Fatal(err)
	}
	wantGrants(t, st, "", slChan, slBob, tgGroup, tgAnn2, tgUser7, escaped, colon, braces, platUser)
	wantGrants(t, st, "telegram", tgGroup, tgAnn2, tgUser7)
	wantGrants(t, st, "x", escaped, colon, braces)
	wantGrants(t, st, "nowhere")

	revoke := func(platform string, kind govern.GrantKind, id string, want bool) {
		t.Helper()
		had, err := st.Revoke(ctx, platform, kind, id)
		if err != nil {
			t.Fatalf("Revoke(%q, %q, %q): %v", platform, kind, id, err)
		}
		if had != want {
			t.Fatalf("Revoke(%q, %q, %q) = %v, want %v", platform, kind, id, had, want)
		}
	}
	revoke("telegram", govern.GrantUser, "42", true)
	revoke("telegram", govern.GrantUser, "42", false)
	wantAllowed(t, st, "telegram", govern.GrantUser, "42", false)
	// Revoking another kind or a look-alike ID revokes nothing.
	revoke("telegram", govern.GrantChat, "7", false)
	revoke("x", govern.GrantUser, "a", false)
	revoke("x", govern.GrantUser, "user:b", false)
	wantAllowed(t, st, "telegram", govern.GrantUser, "7", true)
	revoke("x", govern.GrantUser, "a:b", true)
	wantAllowed(t, st, "x", govern.GrantUser, "a%3Ab", true)
	wantGrants(t, st, "", slChan, slBob, tgGroup, tgUser7, escaped, braces, platUser)
}

// pairing returns a request of telegram user id (or chat, for a negative
// id), created at created and expiring ttl later.
func pairing(code, platform string, kind govern.GrantKind, id string, created time.Time, ttl time.Duration) govern.Pairing {
	return govern.Pairing{Code: code, Platform: platform, Kind: kind, ID: id, Name: "Ann " + id,
		Chat: agent.SessionKey{Platform: platform, Chat: id}, Created: created.UTC(), Expires: created.Add(ttl).UTC()}
}

func samePairing(a, b govern.Pairing) bool {
	return a.Code == b.Code && a.Platform == b.Platform && a.Kind == b.Kind && a.ID == b.ID && a.Name == b.Name &&
		a.Chat == b.Chat && a.Created.Equal(b.Created) && a.Expires.Equal(b.Expires)
}

func pair(t *testing.T, st Store, p govern.Pairing, wantCreated bool, want govern.Pairing) {
	t.Helper()
	got, created, err := st.Pair(t.Context(), p)
	if err != nil {
		t.Fatalf("Pair(%s): %v", p.Code, err)
	}
	if created != wantCreated || !samePairing(got, want) {
		t.Fatalf("Pair(%s) = %s, created %v; want %s, created %v", p.Code, jsonString(got), created, jsonString(want), wantCreated)
	}
}

func take(t *testing.T, st Store, code string, want govern.Pairing) {
	t.Helper()
	got, err := st.TakePairing(t.Context(), code)
	if err != nil {
		t.Fatalf("TakePairing(%s): %v", code, err)
	}
	if !samePairing(got, want) {
		t.Fatalf("TakePairing(%s) = %s, want %s", code, jsonString(got), jsonString(want))
	}
}

func wantPairings(t *testing.T, st Store, want ...govern.Pairing) {
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

	p1 := pairing("AAAA-0001", "telegram", govern.GrantUser, "42", now, minute)
	pair(t, st, p1, true, p1)
	// The same person asking again gets the request they have.
	pair(t, st, pairing("AAAA-0002", "telegram", govern.GrantUser, "42", now.Add(time.Second), minute), false, p1)
	p2 := pairing("AAAA-0003", "telegram", govern.GrantChat, "-100123", now.Add(2*time.Second), minute)
	pair(t, st, p2, true, p2)
	p3 := pairing("AAAA-0004", "slack", govern.GrantUser, "42", now.Add(-time.Second), minute)
	pair(t, st, p3, true, p3)
	// A code that is another live request's is refused.
	if _, created, err := st.Pair(ctx, pairing("AAAA-0001", "telegram", govern.GrantUser, "43", now, minute)); err == nil || created {
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
	p4 := pairing("AAAA-0005", "telegram", govern.GrantUser, "42", now.Add(3*time.Second), minute)
	pair(t, st, p4, true, p4)
	// Taking one request leaves the others.
	take(t, st, "AAAA-0003", p2)
	wantPairings(t, st, p3, p4)
	pair(t, st, pairing("AAAA-0006", "slack", govern.GrantUser, "42", now, minute), false, p3)
}

func (s suite) testPairingExpires(t *testing.T) {
	const ttl = time.Second
	st := s.store(t, agent.Retention{})
	ctx := t.Context()
	now := time.Now()
	short := pairing("BBBB-0001", "telegram", govern.GrantUser, "42", now, ttl)
	pair(t, st, short, true, short)
	long := pairing("BBBB-0002", "telegram", govern.GrantChat, "-100", now, minute)
	pair(t, st, long, true, long)
	pair(t, st, pairing("BBBB-0003", "telegram", govern.GrantUser, "42", now, minute), false, short)
	wantPairings(t, st, short, long)

	time.Sleep(ttl + 300*time.Millisecond)
	wantPairings(t, st, long)
	_, err := st.TakePairing(ctx, short.Code)
	wantErr(t, "TakePairing of an expired code", err, agent.ErrNotFound)

	// The expired request no longer stands for the person: a new one does.
	later := time.Now()
	renewed := pairing("BBBB-0004", "telegram", govern.GrantUser, "42", later, minute)
	pair(t, st, renewed, true, renewed)
	// The expired request's code is free again.
	reused := pairing(short.Code, "telegram", govern.GrantUser, "99", later.Add(time.Millisecond), minute)
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
		p := pairing(fmt.Sprintf("CCCC-%04d", round), "telegram", govern.GrantUser, fmt.Sprint(round), now, minute)
		pair(t, st, p, true, p)
		got := make([]govern.Pairing, takers)
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
	got := make([]govern.Pairing, askers)
	created := make([]bool, askers)
	errs := make([]error, askers)
	parallel(askers, func(i int) {
		got[i], created[i], errs[i] = st.Pair(t.Context(), pairing(fmt.Sprintf("DDDD-%04d", i), "telegram", govern.GrantUser, "42", now, minute))
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

func once(t *testing.T, st Store, name string, ttl time.Duration, want bool) {
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

// countMessage calls CountMessage with a limit of 2 and wants want.
func countMessage(t *testing.T, st Store, who, message string, window, dedup time.Duration, want govern.MessageCount) {
	t.Helper()
	got, err := st.CountMessage(t.Context(), who, message, 2, window, dedup)
	if err != nil {
		t.Fatalf("CountMessage(%q, %q, %v, %v): %v", who, message, window, dedup, err)
	}
	if got != want {
		t.Fatalf("CountMessage(%q, %q, %v, %v) = %+v, want %+v", who, message, window, dedup, got, want)
	}
}

func (s suite) testCountMessage(t *testing.T) {
	const window, dedup = time.Second, time.Second
	st := s.store(t, agent.Retention{})
	counted := func(n int64) govern.MessageCount { return govern.MessageCount{N: n, First: true} }
	again := func(n int64) govern.MessageCount { return govern.MessageCount{N: n} }
	told := govern.MessageCount{N: 3, First: true, Tell: true}
	// Messages are named by chat and ID, as the gate names them.
	const ann, m1, m1elsewhere = "slack:U1", "slack:T1:C1::1.1", "slack:T1:C2::1.1"
	windowStart(window)
	countMessage(t, st, ann, m1, window, minute, counted(1))
	countMessage(t, st, ann, m1, window, minute, again(1)) // delivered again
	// The same ID in another chat is another message.
	countMessage(t, st, ann, m1elsewhere, window, minute, counted(2))
	// The message past the limit is told of, once: not when it is
	// delivered again, nor for the ones after it.
	countMessage(t, st, ann, "slack:T1:C1::1.3", window, minute, told)
	countMessage(t, st, ann, "slack:T1:C1::1.3", window, minute, again(3))
	countMessage(t, st, ann, "slack:T1:C1::1.4", window, minute, counted(4))
	countMessage(t, st, ann, "slack:T1:C1::1.5", window, minute, counted(5))
	// A window of another length counts apart.
	countMessage(t, st, ann, "slack:T1:C1::1.6", time.Hour, minute, counted(1))
	// Another person, one message of Ann's by name: counted apart.
	countMessage(t, st, "slack:U2", m1, window, minute, counted(1))
	// Names that would collide if they were put in a key plainly.
	for _, who := range []string{"slack%3AU1", "slack:U1:", "{slack:U1}", "slack}"} {
		countMessage(t, st, who, m1, window, minute, counted(1))
	}
	for i, msg := range []string{"slack:T1:C1:", ":1.1", "{slack:T1:C1::1.1}", "slack%3AT1%3AC1%3A%3A1.1"} {
		want := counted(int64(i + 1))
		if i == 2 {
			want = told
		}
		countMessage(t, st, "slack:U3", msg, window, minute, want)
	}
	// A mark with a shorter dedup (under an hour's window, which outlasts
	// the test).
	countMessage(t, st, "telegram:7", "telegram:7::1", time.Hour, dedup, counted(1))
	countMessage(t, st, "telegram:7", "telegram:7::1", time.Hour, dedup, again(1))

	time.Sleep(dedup + 300*time.Millisecond)
	// Once its mark expired, a message delivered again is counted again.
	countMessage(t, st, "telegram:7", "telegram:7::1", time.Hour, dedup, counted(2))
	// A new window starts from one, and tells again.
	windowStart(window)
	countMessage(t, st, ann, "slack:T1:C1::2.1", window, minute, counted(1))
	countMessage(t, st, ann, m1, window, minute, again(1)) // its mark outlives its window
	countMessage(t, st, ann, "slack:T1:C1::2.2", window, minute, counted(2))
	countMessage(t, st, ann, "slack:T1:C1::2.3", window, minute, told)

	// Of racers with distinct messages, one is told; of racers with one
	// message, one counts it.
	const racers = 16
	got := make([]govern.MessageCount, racers)
	errs := make([]error, racers)
	windowStart(window)
	parallel(racers, func(i int) {
		got[i], errs[i] = st.CountMessage(t.Context(), "race", fmt.Sprint("m", i), 2, window, minute)
	})
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("CountMessage: %v", err)
	}
	var ns []int64
	tells := 0
	for _, c := range got {
		ns = append(ns, c.N)
		if c.Tell {
			tells++
		}
	}
	slices.Sort(ns)
	for i, n := range ns {
		if n != int64(i+1) {
			t.Fatalf("concurrent counts = %v, want 1 to %d", ns, racers)
		}
	}
	if tells != 1 {
		t.Fatalf("%d racers were told, want 1", tells)
	}
	parallel(racers, func(i int) { got[i], errs[i] = st.CountMessage(t.Context(), "race", "one", 2, window, minute) })
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("CountMessage: %v", err)
	}
	firsts := 0
	for _, c := range got {
		if c.First {
			firsts++
		}
	}
	if firsts != 1 {
		t.Fatalf("%d racers counted one message, want 1", firsts)
	}
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
		a.DecidedBy == b.DecidedBy && a.DecidedAt.Equal(b.DecidedAt) && a.Always == b.Always && a.Why == b.Why &&
		jsonString(a.Authors) == jsonString(b.Authors) && jsonString(a.Calls) == jsonString(b.Calls)
}

func wantApproval(t *testing.T, st Store, want agent.Approval) {
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
		Requester: agent.User{ID: "U1", Name: "Ann"}, Authors: []agent.User{{ID: "U0", Name: "Zed"}, {ID: "U1", Name: "Ann"}},
		Asked: deadline.Add(-minute).UTC(), Deadline: deadline.UTC(),
		Calls: []agent.ToolCall{{ID: "call_1", Name: "shell", Args: json.RawMessage(`{"cmd":"rm -rf <x> && echo 世界"}`)}, {ID: "call_2", Name: "read", Args: json.RawMessage(`{"path":"a"}`)}}}
}

func decide(t *testing.T, st Store, id string, d govern.ApprovalDecision, wantDecided bool, want agent.Approval) agent.Approval {
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
	_, _, err = st.DecideApproval(ctx, "unknown", govern.ApprovalDecision{State: agent.ApprovalApproved, By: agent.User{ID: "U1"}})
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
	decide(t, st, a.ID, govern.ApprovalDecision{State: agent.ApprovalApproved, By: approved.DecidedBy, At: approved.DecidedAt, Always: true}, true, approved)
	// A second click finds it decided and gets the first decision.
	decide(t, st, a.ID, govern.ApprovalDecision{State: agent.ApprovalDenied, By: agent.User{ID: "U3"}, At: now.Add(2 * time.Second)}, false, approved)
	decide(t, st, a.ID, govern.ApprovalDecision{State: agent.ApprovalExpired}, false, approved)
	wantApproval(t, st, approved)

	// A decision without a time gets the store's.
	b := newApproval("b", now.Add(minute))
	if err := st.PutApproval(ctx, b); err != nil {
		t.Fatal(err)
	}
	got, decided, err := st.DecideApproval(ctx, b.ID, govern.ApprovalDecision{State: agent.ApprovalExpired})
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
	decide(t, st, late.ID, govern.ApprovalDecision{State: agent.ApprovalDenied, By: agent.User{ID: "U1"}, At: now}, true, denied)

	// A decision made without a click keeps why.
	void := newApproval("void", now.Add(minute))
	if err := st.PutApproval(ctx, void); err != nil {
		t.Fatal(err)
	}
	voided := void
	voided.State, voided.DecidedAt, voided.Why = agent.ApprovalDenied, now, "Zed, who asked, may no longer talk to me here"
	decide(t, st, void.ID, govern.ApprovalDecision{State: agent.ApprovalDenied, At: now, Why: voided.Why}, true, voided)
	wantApproval(t, st, voided)

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
			d := govern.ApprovalDecision{State: agent.ApprovalApproved, By: agent.User{ID: fmt.Sprintf("U%d", i)}, At: time.Now().UTC()}
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

func audit(t *testing.T, st Store, entries ...govern.AuditEntry) {
	t.Helper()
	for _, e := range entries {
		if err := st.Audit(t.Context(), e); err != nil {
			t.Fatalf("Audit(%s): %v", e.Action, err)
		}
	}
}

// auditLog returns what q selects and checks that every entry has an ID
// of its own.
func auditLog(t *testing.T, st Store, q govern.AuditQuery) []govern.AuditEntry {
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
func sameEntries(t *testing.T, q govern.AuditQuery, got, want []govern.AuditEntry) {
	t.Helper()
	if !slices.EqualFunc(got, want, func(a, b govern.AuditEntry) bool {
		a.ID, b.ID = "", ""
		eq := a.Time.Equal(b.Time)
		a.Time, b.Time = time.Time{}, time.Time{}
		return eq && a == b
	}) {
		t.Fatalf("AuditLog(%+v) =\n%s\nwant\n%s", q, jsonString(got), jsonString(want))
	}
}

func wantAudit(t *testing.T, st Store, q govern.AuditQuery, want ...govern.AuditEntry) []govern.AuditEntry {
	t.Helper()
	got := auditLog(t, st, q)
	sameEntries(t, q, got, want)
	return got
}

func (s suite) testAudit(t *testing.T) {
	st := s.store(t, agent.Retention{})
	base := time.Now().UTC().Add(-time.Hour).Truncate(time.Millisecond)
	a, b := chanA.String(), chanB.String()
	e := []govern.AuditEntry{
		{Time: base, Action: govern.AuditPolicySet, Platform: "slack", Channel: a, User: "slack:U1", Outcome: "ok", Detail: "group:exec=deny"},
		{Time: base.Add(minute), Action: govern.AuditToolCall, Platform: "slack", Channel: b, User: "U2", Tool: "shell",
			Args: `{"cmd":"ls <a> && echo 世界"}`, Outcome: "ok", Duration: 1500 * time.Millisecond},
		{Time: base.Add(2 * minute), Action: govern.AuditAccessAllow, Platform: "telegram", User: "cli:root", Outcome: "ok", Detail: "user 42 (Ann)"},
		{Time: base.Add(3 * minute), Action: govern.AuditApprovalDecided, Platform: "slack", Channel: a, User: "U1", Tool: "fetch", Outcome: "approved", Detail: "0a1b"},
		{Time: base.Add(4 * minute), Action: govern.AuditBudget, Platform: "slack", Channel: a, User: "U3", Outcome: "tokens", Detail: "100 of 100 tokens today"},
	}
	wantAudit(t, st, govern.AuditQuery{})
	audit(t, st, e...)

	wantAudit(t, st, govern.AuditQuery{}, e...)
	wantAudit(t, st, govern.AuditQuery{Channel: a}, e[0], e[3], e[4])
	wantAudit(t, st, govern.AuditQuery{Channel: b}, e[1])
	wantAudit(t, st, govern.AuditQuery{Channel: "slack:T1:C9:"})
	wantAudit(t, st, govern.AuditQuery{Since: e[2].Time}, e[2], e[3], e[4])
	wantAudit(t, st, govern.AuditQuery{Since: e[2].Time.Add(time.Millisecond)}, e[3], e[4])
	wantAudit(t, st, govern.AuditQuery{Since: time.Now().Add(time.Hour)})
	// Limit keeps the newest, still oldest first.
	wantAudit(t, st, govern.AuditQuery{Limit: 2}, e[3], e[4])
	wantAudit(t, st, govern.AuditQuery{Limit: 1}, e[4])
	wantAudit(t, st, govern.AuditQuery{Limit: 9}, e...)
	wantAudit(t, st, govern.AuditQuery{Channel: a, Limit: 2}, e[3], e[4])
	wantAudit(t, st, govern.AuditQuery{Channel: a, Since: e[1].Time, Limit: 1}, e[4])
	wantAudit(t, st, govern.AuditQuery{Channel: a, Since: e[1].Time, Limit: 5}, e[3], e[4])
	all := auditLog(t, st, govern.AuditQuery{})

	// The store times an entry that has no time.
	before := time.Now()
	audit(t, st, govern.AuditEntry{Action: "test.untimed", User: "console"})
	got := auditLog(t, st, govern.AuditQuery{Limit: 1})
	if len(got) != 1 || got[0].Action != "test.untimed" || got[0].Time.Before(before.Add(-time.Second)) || got[0].Time.After(time.Now().Add(time.Second)) {
		t.Fatalf("entry without a time came back as %s", jsonString(got))
	}
	// An ID is the store's: one given is not kept, and the IDs so far are
	// unchanged.
	audit(t, st, govern.AuditEntry{ID: all[0].ID, Time: base, Action: "test.id"})
	got = auditLog(t, st, govern.AuditQuery{})
	if len(got) != 7 || got[6].ID == all[0].ID {
		t.Fatalf("entry with an ID of its own came back as %s", jsonString(got[len(got)-1]))
	}
	for i := range all {
		if got[i].ID != all[i].ID {
			t.Fatalf("entry %d has ID %s, before %s", i, got[i].ID, all[i].ID)
		}
	}
	// Since compares the entries' times, not when they were appended.
	wantAudit(t, st, govern.AuditQuery{Since: e[4].Time}, e[4], got[5])
}

func (s suite) testAuditPaging(t *testing.T) {
	const n = 250
	st := s.store(t, agent.Retention{})
	now := time.Now().UTC()
	var e []govern.AuditEntry
	for i := range n {
		ch := chanB
		if i%10 == 0 {
			ch = chanA
		}
		e = append(e, govern.AuditEntry{Time: now, Action: govern.AuditToolCall, Channel: ch.String(), Detail: fmt.Sprint(i)})
	}
	audit(t, st, e...)
	var everyTenth []govern.AuditEntry
	for i := 0; i < n; i += 10 {
		everyTenth = append(everyTenth, e[i])
	}
	wantAudit(t, st, govern.AuditQuery{Channel: chanA.String(), Limit: 20}, everyTenth[len(everyTenth)-20:]...)
	wantAudit(t, st, govern.AuditQuery{Channel: chanA.String()}, everyTenth...)
	wantAudit(t, st, govern.AuditQuery{Limit: 7}, e[n-7:]...)
	wantAudit(t, st, govern.AuditQuery{}, e...)
}

func (s suite) testAuditCap(t *testing.T) {
	const capacity = 5
	st := s.storeWith(t, Config{AuditCap: capacity})
	now := time.Now().UTC()
	var e []govern.AuditEntry
	for i := range 12 {
		ch := chanA
		if i%2 == 1 {
			ch = chanB
		}
		e = append(e, govern.AuditEntry{Time: now.Add(time.Duration(i) * time.Millisecond), Action: govern.AuditPolicySet, Channel: ch.String(), Detail: fmt.Sprint(i)})
		audit(t, st, e[i])
		wantAudit(t, st, govern.AuditQuery{}, e[max(0, i+1-capacity):]...)
	}
	wantAudit(t, st, govern.AuditQuery{Limit: 3}, e[9:]...)
	wantAudit(t, st, govern.AuditQuery{Channel: chanA.String()}, e[8], e[10])
	wantAudit(t, st, govern.AuditQuery{Limit: 100}, e[7:]...)
}

func (s suite) testConcurrentAudit(t *testing.T) {
	const writers, each = 8, 10
	st := s.store(t, agent.Retention{})
	errs := make([]error, writers)
	parallel(writers, func(w int) {
		for i := range each {
			if err := st.Audit(t.Context(), govern.AuditEntry{Action: "test.race", User: fmt.Sprint(w), Detail: fmt.Sprint(i)}); err != nil {
				errs[w] = err
				return
			}
		}
	})
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("Audit: %v", err)
	}
	got := auditLog(t, st, govern.AuditQuery{})
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
		{"Allow without a platform", st.Allow(ctx, grant("", govern.GrantUser, "1", ""))},
		{"Allow of an unknown kind", st.Allow(ctx, grant("telegram", "admin", "1", ""))},
		{"Allow without an ID", st.Allow(ctx, grant("telegram", govern.GrantChat, "", ""))},
		{"Allowed without a platform", errOf(st.Allowed(ctx, "", govern.GrantUser, "1"))},
		{"Revoke without a kind", errOf(st.Revoke(ctx, "telegram", "", "1"))},
		{"Pair without a code", errOf3(st.Pair(ctx, pairing("", "telegram", govern.GrantUser, "1", now, minute)))},
		{"Pair of an unknown kind", errOf3(st.Pair(ctx, pairing("EEEE-0001", "telegram", "admin", "1", now, minute)))},
		{"Pair without an ID", errOf3(st.Pair(ctx, pairing("EEEE-0002", "telegram", govern.GrantUser, "", now, minute)))},
		{"Pair that has expired", errOf3(st.Pair(ctx, pairing("EEEE-0003", "telegram", govern.GrantUser, "1", now.Add(-2*minute), minute)))},
		{"Once without a name", errOf(st.Once(ctx, "", minute))},
		{"Once with a zero ttl", errOf(st.Once(ctx, "x", 0))},
		{"CountMessage without an author", errOf(st.CountMessage(ctx, "", "m", 1, minute, minute))},
		{"CountMessage without a message", errOf(st.CountMessage(ctx, "slack:U1", "", 1, minute, minute))},
		{"CountMessage with a negative limit", errOf(st.CountMessage(ctx, "slack:U1", "m", -1, minute, minute))},
		{"CountMessage with a zero window", errOf(st.CountMessage(ctx, "slack:U1", "m", 1, 0, minute))},
		{"CountMessage with a zero dedup", errOf(st.CountMessage(ctx, "slack:U1", "m", 1, minute, 0))},
		{"AddUsage with an invalid key", errOf(st.AddUsage(ctx, agent.SessionKey{Chat: "C1"}, day, 1))},
		{"AddUsage with a malformed day", errOf(st.AddUsage(ctx, chanA, "2025-3-4", 1))},
		{"AddUsage without a day", errOf(st.AddUsage(ctx, chanA, "", 1))},
		{"AddUsage of negative tokens", errOf(st.AddUsage(ctx, chanA, day, -1))},
		{"Usage with a malformed day", errOf(st.Usage(ctx, chanA, "today"))},
		{"PutApproval without an ID", st.PutApproval(ctx, newApproval("", now.Add(minute)))},
		{"PutApproval without a deadline", st.PutApproval(ctx, noDeadline)},
		{"PutApproval of a decided approval", st.PutApproval(ctx, decided)},
		{"DecideApproval to pending", errOf3(st.DecideApproval(ctx, "valid", govern.ApprovalDecision{State: agent.ApprovalPending}))},
		{"DecideApproval without a state", errOf3(st.DecideApproval(ctx, "valid", govern.ApprovalDecision{}))},
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
	wantErr(t, "Allow with a canceled context", st.Allow(canceled, grant("telegram", govern.GrantUser, "1", "")), context.Canceled)
	wantErr(t, "Audit with a canceled context", st.Audit(canceled, govern.AuditEntry{Action: "test"}), context.Canceled)
	wantGrants(t, st, "")
	wantAudit(t, st, govern.AuditQuery{})
}

// errOf3 returns the error of a call that also returns two values.
func errOf3[T, U any](_ T, _ U, err error) error { return err }
