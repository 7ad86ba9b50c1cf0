package storetest

// The tests of schedules.Store. Beyond its comments they pin down:
//
//   - A channel's schedules are those made in any of its threads; the
//     limit counts them together, firing ones included. Another channel's
//     schedule is not found by ID.
//   - Due times are kept to the millisecond; a schedule due in the same
//     millisecond as the store's clock is due.
//   - ClaimSchedules leaves Due as it was and sets Owner and Lease (to the
//     millisecond); Schedules shows both. A claim by the same owner of a
//     schedule whose lease ended is a claim like any other.
//   - FinishSchedule needs the owner of the latest claim: an earlier
//     claimer whose lease ended and was claimed again gets ErrLeaseLost,
//     and so does anyone finishing a pending schedule.
//   - An ID already stored, an empty ID, a zero Due, a schedule given in a
//     firing state, a limit <= 0 and an invalid key are agent.ErrInvalid,
//     and store nothing.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/agent/schedules"
	"github.com/firstmate/firstmate/tools/schedule"
)

// schedules returns the store under test as a schedule store: every store
// is one.
func (s suite) schedules(t *testing.T) schedules.Store {
	t.Helper()
	st := s.store(t, agent.Retention{})
	ss, ok := st.(schedules.Store)
	if !ok {
		t.Fatalf("%T does not implement schedules.Store", st)
	}
	return ss
}

// aSchedule is a one-shot schedule of key, due at due.
func aSchedule(id string, key agent.SessionKey, due time.Time) schedules.Schedule {
	return schedules.Schedule{ID: id, Key: key, By: agent.User{ID: "U1", Name: "ann"}, Kind: schedule.Once,
		Prompt: "prompt of " + id, Due: due.Truncate(time.Millisecond), Created: time.Unix(1700000000, 0).UTC()}
}

func sameSchedule(a, b schedules.Schedule) bool {
	return a.ID == b.ID && a.Key == b.Key && a.By == b.By && a.Kind == b.Kind && a.Prompt == b.Prompt && a.Cron == b.Cron &&
		a.TZ == b.TZ && a.Job == b.Job && a.Space == b.Space && a.Due.Equal(b.Due) && a.Until.Equal(b.Until) &&
		a.Created.Equal(b.Created) && a.Owner == b.Owner && a.Lease.Equal(b.Lease)
}

func wantSchedules(t *testing.T, ss schedules.Store, channel agent.SessionKey, want ...schedules.Schedule) []schedules.Schedule {
	t.Helper()
	got, err := ss.Schedules(t.Context(), channel)
	if err != nil {
		t.Fatalf("Schedules(%v): %v", channel, err)
	}
	if len(got) != len(want) {
		t.Fatalf("Schedules(%v) = %d schedules %s; want %d %s", channel, len(got), jsonString(got), len(want), jsonString(want))
	}
	for i := range want {
		if !sameSchedule(got[i], want[i]) {
			t.Fatalf("Schedules(%v)[%d] = %s; want %s", channel, i, jsonString(got[i]), jsonString(want[i]))
		}
	}
	return got
}

func claimSchedules(t *testing.T, ss schedules.Store, owner string, ttl time.Duration, limit int) []schedules.Schedule {
	t.Helper()
	got, err := ss.ClaimSchedules(t.Context(), owner, ttl, limit)
	if err != nil {
		t.Fatalf("ClaimSchedules(%q): %v", owner, err)
	}
	return got
}

func scheduleIDs(all []schedules.Schedule) []string {
	out := make([]string, len(all))
	for i, s := range all {
		out[i] = s.ID
	}
	return out
}

func (s suite) testSchedules(t *testing.T) {
	ctx := t.Context()
	ss := s.schedules(t)
	wantSchedules(t, ss, chanA)
	now := time.Now()
	later := aSchedule("later", threadA, now.Add(2*time.Hour))
	soon := aSchedule("soon", threadB, now.Add(time.Hour))
	cron := aSchedule("cron", chanA, now.Add(3*time.Hour))
	cron.Kind, cron.Cron, cron.TZ = schedule.Cron, "0 9 * * 1-5", "Europe/Paris"
	job := aSchedule("job", threadA, now.Add(5*time.Second))
	job.Kind, job.Job, job.Space, job.Until = schedule.Job, 3, "slack_T1_C1", now.Add(24*time.Hour).Truncate(time.Millisecond)
	other := aSchedule("other", chanB, now.Add(time.Minute))
	for _, sch := range []schedules.Schedule{later, soon, cron, job, other} {
		if err := ss.AddSchedule(ctx, sch, 4); err != nil {
			t.Fatalf("AddSchedule(%s): %v", sch.ID, err)
		}
	}
	// The channel's threads together, soonest first; a thread's key lists
	// its channel's.
	wantSchedules(t, ss, chanA, job, soon, later, cron)
	wantSchedules(t, ss, threadB, job, soon, later, cron)
	wantSchedules(t, ss, chanB, other)

	// The limit counts the channel's threads together.
	full := aSchedule("full", threadB, now.Add(time.Hour))
	wantErr(t, "AddSchedule over the limit", ss.AddSchedule(ctx, full, 4), schedules.ErrScheduleLimit)
	if err := ss.AddSchedule(ctx, full, 5); err != nil {
		t.Fatalf("AddSchedule under a higher limit: %v", err)
	}
	// An ID is taken whatever the channel.
	dup := aSchedule("other", chanA, now.Add(time.Hour))
	wantErr(t, "AddSchedule of a taken ID", ss.AddSchedule(ctx, dup, 99), agent.ErrInvalid)
	wantSchedules(t, ss, chanB, other)

	// Remove: only the channel's own, once.
	if _, err := ss.RemoveSchedule(ctx, chanA, "other"); !errors.Is(err, agent.ErrNotFound) {
		t.Fatalf("RemoveSchedule of another channel's = %v; want ErrNotFound", err)
	}
	got, err := ss.RemoveSchedule(ctx, threadA, "soon")
	if err != nil || !sameSchedule(got, soon) {
		t.Fatalf("RemoveSchedule = %s, %v; want %s", jsonString(got), err, jsonString(soon))
	}
	if _, err := ss.RemoveSchedule(ctx, chanA, "soon"); !errors.Is(err, agent.ErrNotFound) {
		t.Fatalf("RemoveSchedule twice = %v; want ErrNotFound", err)
	}
	wantSchedules(t, ss, chanA, job, full, later, cron)
	// Removing makes room again.
	if err := ss.AddSchedule(ctx, soon, 4); !errors.Is(err, schedules.ErrScheduleLimit) {
		t.Fatalf("AddSchedule at the limit = %v", err)
	}
	if _, err := ss.RemoveSchedule(ctx, chanA, "full"); err != nil {
		t.Fatal(err)
	}
	if err := ss.AddSchedule(ctx, soon, 4); err != nil {
		t.Fatalf("AddSchedule after a removal: %v", err)
	}
	for _, id := range []string{"job", "soon", "later", "cron"} {
		if _, err := ss.RemoveSchedule(ctx, chanA, id); err != nil {
			t.Fatalf("RemoveSchedule(%s): %v", id, err)
		}
	}
	wantSchedules(t, ss, chanA)
	if got := claimSchedules(t, ss, "w1", minute, 10); len(got) != 0 {
		t.Fatalf("ClaimSchedules with nothing due claimed %q", scheduleIDs(got))
	}
}

func (s suite) testScheduleClaim(t *testing.T) {
	ctx := t.Context()
	ss := s.schedules(t)
	now := time.Now()
	a := aSchedule("a", threadA, now.Add(-time.Hour))
	b := aSchedule("b", threadB, now.Add(-time.Minute))
	c := aSchedule("c", chanB, now.Add(-time.Second))
	future := aSchedule("future", chanA, now.Add(time.Hour))
	for _, sch := range []schedules.Schedule{c, future, a, b} {
		if err := ss.AddSchedule(ctx, sch, 10); err != nil {
			t.Fatal(err)
		}
	}
	// Most overdue first, up to the limit; due times stay.
	before := time.Now()
	got := claimSchedules(t, ss, "w1", minute, 2)
	if !slices.Equal(scheduleIDs(got), []string{"a", "b"}) {
		t.Fatalf("ClaimSchedules(limit 2) = %q; want a, b", scheduleIDs(got))
	}
	for i, want := range []schedules.Schedule{a, b} {
		g := got[i]
		if g.Owner != "w1" || g.Lease.Before(before.Add(minute-time.Second)) || g.Lease.After(time.Now().Add(minute+time.Second)) {
			t.Errorf("claimed %s: owner %q lease %v; want w1 and about a minute from now", g.ID, g.Owner, g.Lease)
		}
		want.Owner, want.Lease = g.Owner, g.Lease
		if !sameSchedule(g, want) {
			t.Errorf("claimed %s; want %s", jsonString(g), jsonString(want))
		}
	}
	// Schedules shows the firing state.
	wantSchedules(t, ss, chanA, got[0], got[1], future)
	// What is claimed is not claimed again while its lease lasts.
	if got := claimSchedules(t, ss, "w2", minute, 10); !slices.Equal(scheduleIDs(got), []string{"c"}) {
		t.Fatalf("second ClaimSchedules = %q; want c", scheduleIDs(got))
	}
	if got := claimSchedules(t, ss, "w2", minute, 10); len(got) != 0 {
		t.Fatalf("third ClaimSchedules = %q; want none", scheduleIDs(got))
	}

	// Finish: only the claimer; rescheduled (a cron) or deleted.
	wantErr(t, "FinishSchedule by another owner", ss.FinishSchedule(ctx, got0(got, a), "w2", time.Time{}), agent.ErrLeaseLost)
	wantErr(t, "FinishSchedule of a pending schedule", ss.FinishSchedule(ctx, future, "w1", time.Time{}), agent.ErrLeaseLost)
	next := time.Now().Add(2 * time.Hour).Truncate(time.Millisecond)
	if err := ss.FinishSchedule(ctx, got[0], "w1", next); err != nil {
		t.Fatalf("FinishSchedule with next: %v", err)
	}
	if err := ss.FinishSchedule(ctx, got[1], "w1", time.Time{}); err != nil {
		t.Fatalf("FinishSchedule without next: %v", err)
	}
	wantErr(t, "FinishSchedule twice", ss.FinishSchedule(ctx, got[1], "w1", time.Time{}), agent.ErrNotFound)
	wantErr(t, "FinishSchedule after it is pending again", ss.FinishSchedule(ctx, got[0], "w1", next), agent.ErrLeaseLost)
	rescheduled := a
	rescheduled.Due = next
	wantSchedules(t, ss, chanA, future, rescheduled)

	// A firing schedule that is removed is gone for its claimer too.
	if _, err := ss.RemoveSchedule(ctx, chanB, "c"); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "FinishSchedule of a removed schedule", ss.FinishSchedule(ctx, c, "w2", time.Time{}), agent.ErrNotFound)
	wantSchedules(t, ss, chanB)
}

// got0 is the claimed copy of want in got.
func got0(got []schedules.Schedule, want schedules.Schedule) schedules.Schedule {
	for _, g := range got {
		if g.ID == want.ID {
			return g
		}
	}
	return want
}

// testScheduleLeaseExpires: a schedule whose claimer died is claimed again
// once its lease ends, with its due time as it was (so its message ID is
// the same), and the dead claimer can no longer finish it.
func (s suite) testScheduleLeaseExpires(t *testing.T) {
	ctx := t.Context()
	ss := s.schedules(t)
	a := aSchedule("a", threadA, time.Now().Add(-time.Second))
	if err := ss.AddSchedule(ctx, a, 10); err != nil {
		t.Fatal(err)
	}
	const ttl = 300 * time.Millisecond
	first := claimSchedules(t, ss, "dead", ttl, 10)
	if len(first) != 1 {
		t.Fatalf("ClaimSchedules = %q; want a", scheduleIDs(first))
	}
	if got := claimSchedules(t, ss, "w2", ttl, 10); len(got) != 0 {
		t.Fatalf("ClaimSchedules within the lease = %q", scheduleIDs(got))
	}
	time.Sleep(ttl + 100*time.Millisecond)
	again := claimSchedules(t, ss, "w2", minute, 10)
	if len(again) != 1 || again[0].Owner != "w2" || !again[0].Due.Equal(a.Due) {
		t.Fatalf("ClaimSchedules after the lease = %s; want a, owned by w2, due as before", jsonString(again))
	}
	wantErr(t, "FinishSchedule by the dead claimer", ss.FinishSchedule(ctx, first[0], "dead", time.Time{}), agent.ErrLeaseLost)
	if err := ss.FinishSchedule(ctx, again[0], "w2", time.Time{}); err != nil {
		t.Fatal(err)
	}
	wantSchedules(t, ss, threadA)
}

// testScheduleConcurrentClaim: replicas claiming at once each get
// different schedules, and together all of the due ones.
func (s suite) testScheduleConcurrentClaim(t *testing.T) {
	ctx := t.Context()
	ss := s.schedules(t)
	const n, claimers = 30, 8
	past := time.Now().Add(-time.Minute)
	for i := range n {
		key := threadA
		key.Thread = fmt.Sprint(i % 3)
		if err := ss.AddSchedule(ctx, aSchedule(fmt.Sprintf("s%02d", i), key, past.Add(time.Duration(i)*time.Millisecond)), n); err != nil {
			t.Fatal(err)
		}
	}
	var (
		mu  sync.Mutex
		got = map[string]string{}
	)
	parallel(claimers, func(i int) {
		owner := fmt.Sprintf("w%d", i)
		for range 3 {
			claimed, err := ss.ClaimSchedules(ctx, owner, minute, 4)
			mu.Lock()
			if err != nil {
				t.Errorf("%s: %v", owner, err)
			}
			for _, c := range claimed {
				if prev, ok := got[c.ID]; ok {
					t.Errorf("%s claimed by %s and %s", c.ID, prev, owner)
				}
				got[c.ID] = owner
			}
			mu.Unlock()
		}
	})
	for rest := claimSchedules(t, ss, "last", minute, n); len(rest) > 0; rest = claimSchedules(t, ss, "last", minute, n) {
		for _, c := range rest {
			if prev, ok := got[c.ID]; ok {
				t.Errorf("%s claimed by %s and last", c.ID, prev)
			}
			got[c.ID] = "last"
		}
	}
	if len(got) != n {
		t.Errorf("%d schedules claimed; want %d", len(got), n)
	}
}

func (s suite) testScheduleInvalid(t *testing.T) {
	ctx := context.Background()
	ss := s.schedules(t)
	due := time.Now().Add(-time.Minute)
	good := aSchedule("good", threadA, due)
	for name, bad := range map[string]schedules.Schedule{
		"no ID":  aSchedule("", threadA, due),
		"no key": aSchedule("x", agent.SessionKey{Platform: "slack"}, due),
		"no due": aSchedule("x", threadA, time.Time{}),
		"firing": func() schedules.Schedule { s := aSchedule("x", threadA, due); s.Owner = "w1"; return s }(),
	} {
		wantErr(t, "AddSchedule "+name, ss.AddSchedule(ctx, bad, 10), agent.ErrInvalid)
	}
	wantErr(t, "AddSchedule with limit 0", ss.AddSchedule(ctx, good, 0), agent.ErrInvalid)
	wantSchedules(t, ss, chanA)
	_, err := ss.Schedules(ctx, agent.SessionKey{})
	wantErr(t, "Schedules of no channel", err, agent.ErrInvalid)
	_, err = ss.RemoveSchedule(ctx, agent.SessionKey{}, "x")
	wantErr(t, "RemoveSchedule of no channel", err, agent.ErrInvalid)
	_, err = ss.RemoveSchedule(ctx, chanA, "")
	wantErr(t, "RemoveSchedule of no ID", err, agent.ErrNotFound)
	for name, args := range map[string]struct {
		owner string
		ttl   time.Duration
		limit int
	}{"no owner": {"", minute, 1}, "no ttl": {"w", 0, 1}, "no limit": {"w", minute, 0}} {
		_, err := ss.ClaimSchedules(ctx, args.owner, args.ttl, args.limit)
		wantErr(t, "ClaimSchedules "+name, err, agent.ErrInvalid)
	}
	wantErr(t, "FinishSchedule without owner", ss.FinishSchedule(ctx, good, "", time.Time{}), agent.ErrInvalid)
	wantErr(t, "FinishSchedule without ID", ss.FinishSchedule(ctx, aSchedule("", threadA, due), "w", time.Time{}), agent.ErrInvalid)
}
