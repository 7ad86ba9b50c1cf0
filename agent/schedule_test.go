package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/agent/govern"
	"github.com/firstmate/firstmate/agent/schedules"
	"github.com/firstmate/firstmate/tools"
	"github.com/firstmate/firstmate/tools/schedule"
)

// inputs is a model that answers every turn "seen INPUT" and keeps the
// inputs it was given, in order.
type inputs struct {
	mu   sync.Mutex
	seen []string
}

func (m *inputs) Complete(_ context.Context, req *agent.Request) (*agent.Response, error) {
	in := lastUser(req)
	m.mu.Lock()
	m.seen = append(m.seen, in)
	m.mu.Unlock()
	return answerWith("seen " + in), nil
}

// with returns the inputs that contain s.
func (m *inputs) with(s string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, in := range m.seen {
		if strings.Contains(in, s) {
			out = append(out, in)
		}
	}
	return out
}

func scheduleStore(t *testing.T, st testStore) schedules.Store { return st }

// scheduler is a scheduler on st that looks for due schedules often.
func scheduler(t *testing.T, st testStore, cfg schedules.Config) *schedules.Scheduler {
	if cfg.Every == 0 {
		cfg.Every = 10 * time.Millisecond
	}
	return schedules.New(scheduleStore(t, st), cfg)
}

var ann = agent.User{ID: "U1", Name: "ann"}

// due is a one-shot schedule of ann's in keyA, due at at.
func due(id string, at time.Time, prompt string) schedules.Schedule {
	return schedules.Schedule{ID: id, Key: keyA, By: ann, Kind: schedule.Once, Prompt: prompt, Due: at.Truncate(time.Millisecond), Created: at.Add(-time.Hour)}
}

func addSchedule(t *testing.T, st testStore, s schedules.Schedule) {
	t.Helper()
	if err := scheduleStore(t, st).AddSchedule(t.Context(), s, 20); err != nil {
		t.Fatal(err)
	}
}

func schedulesOf(t *testing.T, st testStore, key agent.SessionKey) []schedules.Schedule {
	t.Helper()
	all, err := scheduleStore(t, st).Schedules(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	return all
}

// A schedule due while two replicas run on one store is posted once, as a
// message from the person who made it, marked as scheduled; and one whose
// claimer died after posting it is claimed again when its lease ends and
// not posted a second time.
func TestScheduleFiresOnceAcrossReplicas(t *testing.T) {
	st := openStore(t)
	// A replica claimed s2 and posted it, then died before finishing.
	addSchedule(t, st, due("s2", time.Now(), "look at the graphs"))
	claimed, err := scheduleStore(t, st).ClaimSchedules(t.Context(), "dead#1", 300*time.Millisecond, 10)
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim as the dead replica: %v, %v", claimed, err)
	}
	in := agent.Inbound{Key: keyA, MessageID: claimed[0].MessageID(), User: ann, Text: "[scheduled by ann] look at the graphs", Addressed: true}
	if _, err := st.Enqueue(t.Context(), in); err != nil {
		t.Fatal(err)
	}

	m := &inputs{}
	for range 2 {
		startHarness(t, st, hcfg{Loop: &agent.Loop{Model: m}, ReadyEvery: 50 * time.Millisecond,
			Scheduler: scheduler(t, st, schedules.Config{})})
	}
	addSchedule(t, st, due("s1", time.Now(), "check the deploy"))
	waitFor(t, func() bool { return len(m.with("check the deploy")) > 0 })
	waitFor(t, func() bool { return len(m.with("look at the graphs")) > 0 })
	waitFor(t, func() bool { return len(schedulesOf(t, st, keyA)) == 0 }) // taken over and finished
	time.Sleep(300 * time.Millisecond)                                    // time for a second posting, were there one

	got := m.with("check the deploy")
	if len(got) != 1 {
		t.Fatalf("posted %d times: %q", len(got), got)
	}
	if !strings.HasPrefix(got[0], "[ann] [scheduled by ann at ") || !strings.HasSuffix(got[0], "; schedule s1, once] check the deploy") {
		t.Errorf("the turn read %q", got[0])
	}
	if got := m.with("look at the graphs"); len(got) != 1 {
		t.Fatalf("the dead replica's schedule was posted %d times: %q", len(got), got)
	}
}

// What fell due while firstmate was down fires when it starts, once: a
// one-shot, and a cron that would have fired several times, which is then
// due at its next time after now.
func TestScheduleDueWhileDownFiresOnStart(t *testing.T) {
	st := openStore(t)
	now := time.Now()
	addSchedule(t, st, due("once", now.Add(-2*time.Hour), "missed reminder"))
	cron := due("daily", now.Add(-72*time.Hour), "daily report")
	cron.Kind, cron.Cron, cron.TZ = schedule.Cron, "0 9 * * *", "UTC"
	addSchedule(t, st, cron)

	m := &inputs{}
	startHarness(t, st, hcfg{Loop: &agent.Loop{Model: m}, Scheduler: scheduler(t, st, schedules.Config{})})
	waitFor(t, func() bool { return len(m.with("missed reminder")) == 1 && len(m.with("daily report")) == 1 })
	waitFor(t, func() bool {
		all := schedulesOf(t, st, keyA)
		return len(all) == 1 && all[0].Owner == ""
	})
	time.Sleep(200 * time.Millisecond)
	if a, b := m.with("missed reminder"), m.with("daily report"); len(a) != 1 || len(b) != 1 {
		t.Fatalf("posted %q and %q; want each once", a, b)
	}
	next := schedulesOf(t, st, keyA)[0]
	c, err := schedule.ParseCron("0 9 * * *", time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	if want := c.Next(time.Now()); next.ID != "daily" || !next.Due.Equal(want) {
		t.Errorf("after firing, %s is due %v; want daily at %v", next.ID, next.Due, want)
	}
	if got := m.with("daily report")[0]; !strings.Contains(got, `schedule daily, cron "0 9 * * *", UTC] daily report`) {
		t.Errorf("the cron's turn read %q", got)
	}
}

// A schedule made before firstmate stopped, due while it was down, fires
// once when it is back.
func TestScheduleMadeBeforeARestart(t *testing.T) {
	st := openStore(t)
	m := &inputs{}
	h := startHarness(t, st, hcfg{Loop: &agent.Loop{Model: m}, Scheduler: scheduler(t, st, schedules.Config{})})
	h.submit(t, inbound(keyA, "c1", "schedule in 1s back online?"))
	notices(t, h, keyA, 1)
	h.stop()
	time.Sleep(1500 * time.Millisecond) // it falls due while nothing runs
	if len(m.with("back online?")) != 0 {
		t.Fatal("fired while stopped")
	}
	startHarness(t, st, hcfg{Loop: &agent.Loop{Model: m}, Scheduler: scheduler(t, st, schedules.Config{})})
	waitFor(t, func() bool { return len(m.with("back online?")) == 1 })
	waitFor(t, func() bool { return len(schedulesOf(t, st, keyA)) == 0 })
	time.Sleep(200 * time.Millisecond)
	if got := m.with("back online?"); len(got) != 1 {
		t.Fatalf("fired %d times", len(got))
	}
}

// A cron keeps firing: each firing posts a message of its own (its ID
// has the due time), and the schedule is due again at the next time.
func TestScheduleCronReschedules(t *testing.T) {
	st := openStore(t)
	m := &inputs{}
	h := startHarness(t, st, hcfg{Loop: &agent.Loop{Model: m}, Scheduler: scheduler(t, st, schedules.Config{})})
	h.submit(t, inbound(keyA, "c1", `schedule cron "*/5 * * * *" tidy up`))
	waitFor(t, func() bool { return len(schedulesOf(t, st, keyA)) == 1 })
	sch := schedulesOf(t, st, keyA)[0]
	if sch.Kind != schedule.Cron || sch.Cron != "*/5 * * * *" || sch.Due.Minute()%5 != 0 || !sch.Due.After(time.Now()) {
		t.Fatalf("stored %+v", sch)
	}
	// Make it due twice, as time would: each time it fires once and moves
	// on to its next five minutes.
	ss := scheduleStore(t, st)
	for i := range 2 {
		if _, err := ss.RemoveSchedule(t.Context(), keyA, sch.ID); err != nil {
			t.Fatal(err)
		}
		sch.Due = time.Now().Add(-time.Duration(10*(i+1)) * time.Minute).Truncate(time.Minute)
		if err := ss.AddSchedule(t.Context(), sch, 20); err != nil {
			t.Fatal(err)
		}
		waitFor(t, func() bool { return len(m.with("tidy up")) == i+1 })
		waitFor(t, func() bool { all := schedulesOf(t, st, keyA); return len(all) == 1 && all[0].Due.After(time.Now()) })
	}
	after := schedulesOf(t, st, keyA)[0]
	if after.Due.Minute()%5 != 0 || time.Until(after.Due) > 5*time.Minute {
		t.Errorf("next due %v; want the next five minutes", after.Due)
	}
	if got := m.with("tidy up"); len(got) != 2 {
		t.Errorf("inputs %q; want two firings", got)
	}
}

// notices waits for n notices in key's thread and returns them.
func notices(t *testing.T, h *harness, key agent.SessionKey, n int) []string {
	t.Helper()
	waitFor(t, func() bool { _, _, ns := h.p.final(key); return len(ns) >= n })
	_, _, ns := h.p.final(key)
	return ns
}

// A channel holds at most its limit of schedules, its threads together.
func TestScheduleLimit(t *testing.T) {
	st := openStore(t)
	h := startHarness(t, st, hcfg{Loop: &agent.Loop{Model: &inputs{}},
		Scheduler: scheduler(t, st, schedules.Config{PerChannel: 2})})
	h.submit(t, inbound(keyA, "c1", "schedule in 1h one"))
	notices(t, h, keyA, 1)
	h.submit(t, inbound(keyB, "c2", "schedule in 2h two"))
	notices(t, h, keyB, 1)
	h.submit(t, inbound(keyA, "c3", "schedule at 23:59 three"))
	got := notices(t, h, keyA, 2)
	if !strings.HasPrefix(got[0], "Scheduled ") || got[1] != "This channel has 2 schedules and waits, its most; remove one first (schedules lists them)." {
		t.Fatalf("notices %q", got)
	}
	if n := len(schedulesOf(t, st, keyA)); n != 2 {
		t.Fatalf("%d schedules stored; want 2", n)
	}
}

// Only the person who made a schedule, or an admin, removes it; admins
// see everyone's, others their own.
func TestUnscheduleOwnerOrAdmin(t *testing.T) {
	st := openStore(t)
	h := startHarness(t, st, hcfg{Loop: &agent.Loop{Model: &inputs{}}, Admins: func(_, id string) bool { return id == "U9" },
		Scheduler: scheduler(t, st, schedules.Config{})})
	h.submit(t, inbound(keyA, "c1", "schedule in 90m check the deploy"))
	notices(t, h, keyA, 1)
	id := schedulesOf(t, st, keyA)[0].ID

	bob := func(msgID, text string) agent.Inbound {
		in := inbound(keyB, msgID, text)
		in.User = agent.User{ID: "U2", Name: "bob"}
		return in
	}
	admin := func(msgID, text string) agent.Inbound {
		in := inbound(keyB, msgID, text)
		in.User = agent.User{ID: "U9", Name: "root"}
		return in
	}
	h.submit(t, bob("c2", "schedules"))
	h.submit(t, bob("c3", "unschedule "+id))
	got := notices(t, h, keyB, 2)
	slices.Sort(got)
	if got[0] != "No schedules of yours in this channel.\n(and 1 by other people, which only they and admins see)\nThis channel's time zone: UTC." ||
		got[1] != "Only its maker or an admin can remove a schedule: "+id+" was made by ann." {
		t.Fatalf("bob was told %q", got)
	}
	if len(schedulesOf(t, st, keyA)) != 1 {
		t.Fatal("bob removed ann's schedule")
	}
	h.submit(t, admin("c4", "schedules"))
	got = notices(t, h, keyB, 3)
	if !slices.ContainsFunc(got, func(s string) bool {
		return strings.HasPrefix(s, id+" · once, ") && strings.Contains(s, `by ann · in another thread · "check the deploy"`)
	}) {
		t.Fatalf("the admin's list: %q", got)
	}
	h.submit(t, admin("c5", "unschedule "+id))
	got = notices(t, h, keyB, 4)
	if !slices.ContainsFunc(got, func(s string) bool { return strings.HasPrefix(s, "Removed "+id) }) || len(schedulesOf(t, st, keyA)) != 0 {
		t.Fatalf("the admin could not remove it: %q", got)
	}

	// Ann removes her own; an ID of no schedule is said to be none.
	h.submit(t, inbound(keyA, "c6", "schedule in 2h again"))
	notices(t, h, keyA, 2)
	id = schedulesOf(t, st, keyA)[0].ID
	h.submit(t, inbound(keyA, "c7", "unschedule "+id))
	h.submit(t, inbound(keyA, "c8", "unschedule zzzzzz"))
	got = notices(t, h, keyA, 4)
	slices.Sort(got)
	if !strings.HasPrefix(got[0], "Removed "+id) || got[3] != `This channel has no schedule "zzzzzz"; schedules lists them.` {
		t.Fatalf("ann was told %q", got)
	}
	if all := schedulesOf(t, st, keyA); len(all) != 0 {
		t.Fatalf("left %+v", all)
	}
	// Each change is in the audit log.
	if n := len(auditOf(t, st, govern.AuditScheduleAdd)); n != 2 {
		t.Errorf("%d schedule.add entries; want 2", n)
	}
	if n := len(auditOf(t, st, govern.AuditScheduleRemove)); n != 2 {
		t.Errorf("%d schedule.remove entries; want 2", n)
	}
}

// scripted answers each turn from the function for its number (from 0),
// given the turn's input; a function may call tools (then it is called
// again with the results, the same turn number).
type scripted struct {
	mu    sync.Mutex
	turns []string
	f     func(turn int, req *agent.Request) *agent.Response
}

func (m *scripted) Complete(_ context.Context, req *agent.Request) (*agent.Response, error) {
	m.mu.Lock()
	last := req.Messages[len(req.Messages)-1]
	if last.Role == agent.RoleUser {
		m.turns = append(m.turns, last.Content)
	}
	n := len(m.turns) - 1
	m.mu.Unlock()
	return m.f(n, req), nil
}

func (m *scripted) inputs() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.turns)
}

func toolCall(name, args string) *agent.Response {
	return &agent.Response{Message: agent.Message{Role: agent.RoleAssistant,
		ToolCalls: []agent.ToolCall{{ID: "c1", Name: name, Args: json.RawMessage(args)}}}}
}

// lastTool is the newest tool result the request holds.
func lastTool(req *agent.Request) string {
	if m := req.Messages[len(req.Messages)-1]; m.Role == agent.RoleTool {
		return m.Content
	}
	return ""
}

// A turn that waits for a background job holds no worker; when the job
// ends, a new turn in the same thread reads its state and last lines.
func TestWaitForJobResumesThread(t *testing.T) {
	st := openStore(t)
	var board tools.JobBoard = st
	space := tools.DirName(keyA.Channel().String())
	started := time.Now()
	job := tools.Job{ID: 1, Owner: "r1#1", Command: "make test", Log: ".jobs/1.log", Started: started, Seen: started}
	if err := board.PutJob(t.Context(), space, job); err != nil {
		t.Fatal(err)
	}
	sched := scheduler(t, st, schedules.Config{JobPoll: 20 * time.Millisecond, Jobs: board})
	set := tools.NewSet(schedule.Tools(schedule.Config{Scheduler: sched, Jobs: board, MinInterval: 5 * time.Minute, MaxWait: 24 * time.Hour}))
	var waitResult string
	m := &scripted{f: func(turn int, req *agent.Request) *agent.Response {
		switch {
		case turn == 0 && lastTool(req) == "":
			return toolCall("wait_for_job", `{"id":"1","note":"tell them how the tests went"}`)
		case turn == 0:
			waitResult = lastTool(req)
			return answerWith("waiting for the tests")
		}
		return answerWith("the tests passed")
	}}
	h := startHarness(t, st, hcfg{Loop: &agent.Loop{Model: m}, Tools: set, Scheduler: sched})
	h.submit(t, inbound(keyA, "m1", "run the tests and tell me"))
	waitFor(t, func() bool { a, _, _ := h.p.final(keyA); return len(a) == 1 })
	if !strings.HasPrefix(waitResult, "Waiting for job 1: this conversation resumes when it ends") {
		t.Fatalf("wait_for_job said %q", waitResult)
	}
	all := schedulesOf(t, st, keyA)
	if len(all) != 1 || all[0].Kind != schedule.Job || all[0].By != ann || all[0].Key != keyA {
		t.Fatalf("stored %+v", all)
	}
	time.Sleep(100 * time.Millisecond) // a few looks at the running job
	if n := len(m.inputs()); n != 1 {
		t.Fatalf("%d turns while the job runs; want 1", n)
	}

	job.State, job.Ended, job.Seen, job.Tail = "exit code 0", started.Add(95*time.Second), time.Now(), []string{"PASS", "ok  \tpkg\t1.2s"}
	if err := board.PutJob(t.Context(), space, job); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { a, _, _ := h.p.final(keyA); return len(a) == 2 })
	woke := m.inputs()[1]
	for _, want := range []string{"[ann] [woken: job 1 ended: exit code 0, after 1m35s. Command: make test. Log: .jobs/1.log. Last lines of its output:",
		"\n    PASS\n    ok  \tpkg\t1.2s]", "\ntell them how the tests went"} {
		if !strings.Contains(woke, want) {
			t.Errorf("the woken turn read %q; want %q in it", woke, want)
		}
	}
	// The scheduler deletes the wait once it has posted it, which the
	// turn it posted may beat: waited on, not looked at once.
	waitFor(t, func() bool { return len(schedulesOf(t, st, keyA)) == 0 })
}

// A wait of a duration resumes the thread after it, with the note.
func TestWaitResumesThread(t *testing.T) {
	st := openStore(t)
	sched := scheduler(t, st, schedules.Config{})
	set := tools.NewSet(schedule.Tools(schedule.Config{Scheduler: sched}))
	m := &scripted{f: func(turn int, req *agent.Request) *agent.Response {
		if turn == 0 && lastTool(req) == "" {
			return toolCall("wait", `{"duration":"200ms","note":"check the deploy finished"}`)
		}
		return answerWith("ok")
	}}
	h := startHarness(t, st, hcfg{Loop: &agent.Loop{Model: m}, Tools: set, Scheduler: sched})
	h.submit(t, inbound(keyA, "m1", "deploy, then check"))
	waitFor(t, func() bool { return len(m.inputs()) == 2 })
	if woke := m.inputs()[1]; !strings.HasPrefix(woke, "[ann] [woken: the wait of 200ms asked for at ") || !strings.HasSuffix(woke, "]\ncheck the deploy finished") {
		t.Errorf("the woken turn read %q", woke)
	}
}

// The tool refuses what it cannot schedule, saying why.
func TestScheduleRefusesBadArguments(t *testing.T) {
	st := openStore(t)
	sched := scheduler(t, st, schedules.Config{})
	call := tools.Call{Session: keyA.String(), User: "U1", UserName: "ann"}
	past := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	for _, tc := range []struct {
		when schedule.When
		want string
	}{
		{schedule.When{In: "90m", Cron: "0 9 * * *"}, "give exactly one of in, at and cron, not in and cron"},
		{schedule.When{In: "1h", At: past, Cron: "0 9 * * *"}, "not in and at and cron"},
		{schedule.When{}, "say when, with exactly one of in"},
		{schedule.When{At: past}, "is in the past"},
		{schedule.When{At: "tomorrow"}, `at "tomorrow" is not a time`},
		{schedule.When{In: "soon"}, `"soon" is not a duration`},
		{schedule.When{In: "-5m"}, "not a positive duration"},
		{schedule.When{Cron: "0 9 * *"}, "has 4 fields; write five"},
		{schedule.When{Cron: "61 9 * * *"}, `cron "61 9 * * *": `},
		{schedule.When{Cron: "@daily x y z w"}, "no @descriptors"},
		{schedule.When{Cron: "* * * * *"}, "can fire 1m apart; the least allowed is 5m"},
		{schedule.When{Cron: "0 0 30 2 *"}, "never fires"},
		{schedule.When{In: "400d"}, "more than 8784h ahead"},
	} {
		_, err := sched.Schedule(t.Context(), call, schedule.Plan{Kind: schedule.Once, Prompt: "x", When: tc.when})
		if !errors.Is(err, schedule.ErrBadWhen) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err = %v; want ErrBadWhen saying %q", tc.when, err, tc.want)
		}
	}
	if _, err := sched.Schedule(t.Context(), call, schedule.Plan{Kind: schedule.Once, When: schedule.When{In: "1h"}}); err == nil {
		t.Error("a schedule without a prompt was made")
	}
	if all := schedulesOf(t, st, keyA); len(all) != 0 {
		t.Fatalf("stored %+v", all)
	}

	// Through the loop, the model reads the refusal as the tool's result.
	set := tools.NewSet(schedule.Tools(schedule.Config{Scheduler: sched}))
	var result string
	m := &scripted{f: func(turn int, req *agent.Request) *agent.Response {
		if lastTool(req) == "" {
			return toolCall("schedule", `{"prompt":"check","in":"90m","at":"`+past+`"}`)
		}
		result = lastTool(req)
		return answerWith("sorry")
	}}
	h := startHarness(t, st, hcfg{Loop: &agent.Loop{Model: m}, Tools: set, Scheduler: sched})
	h.submit(t, inbound(keyA, "m1", "remind me"))
	h.idle(t, keyA)
	if result != "error: cannot schedule that: give exactly one of in, at and cron, not in and at" {
		t.Errorf("the model read %q", result)
	}
}

// The command reads when and what in the forms people write.
func TestScheduleCommandForms(t *testing.T) {
	st := openStore(t)
	loc, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Skip("no time zone data:", err)
	}
	h := startHarness(t, st, hcfg{Loop: &agent.Loop{Model: &inputs{}},
		Scheduler: scheduler(t, st, schedules.Config{Location: loc})})
	next := time.Now().In(loc).AddDate(0, 0, 2)
	day := next.Format("2006-01-02")
	for i, text := range []string{
		"schedule in 1d2h check the deploy",
		"schedule at " + day + " 09:30 post the notes",
		"schedule at " + day + "T10:00:00+01:00 exact",
		"schedule cron 0 9 * * 1-5 standup reminder",
		`/schedule cron '30 8 * * *' quoted cron`,
	} {
		h.submit(t, inbound(keyA, "c"+string(rune('a'+i)), text))
	}
	notices(t, h, keyA, 5)
	byPrompt := map[string]schedules.Schedule{}
	for _, s := range schedulesOf(t, st, keyA) {
		byPrompt[s.Prompt] = s
	}
	if s := byPrompt["check the deploy"]; time.Until(s.Due) < 25*time.Hour || time.Until(s.Due) > 26*time.Hour {
		t.Errorf("in 1d2h: due %v", s.Due)
	}
	if s := byPrompt["post the notes"]; s.Due.In(loc).Format("2006-01-02 15:04") != day+" 09:30" {
		t.Errorf("at %s 09:30 (Paris): due %v", day, s.Due.In(loc))
	}
	if s := byPrompt["exact"]; s.Due.UTC().Format("15:04") != "09:00" {
		t.Errorf("at with an offset: due %v", s.Due.UTC())
	}
	if s := byPrompt["standup reminder"]; s.Cron != "0 9 * * 1-5" || s.TZ != "Europe/Paris" || s.Due.In(loc).Hour() != 9 {
		t.Errorf("cron: %+v", s)
	}
	if s := byPrompt["quoted cron"]; s.Cron != "30 8 * * *" {
		t.Errorf("quoted cron: %+v", s)
	}
	// A sentence that starts with the word is for the model.
	m := &inputs{}
	h2 := startHarness(t, openStore(t), hcfg{Loop: &agent.Loop{Model: m}})
	h2.submit(t, inbound(keyA, "m1", "schedule a meeting with Bob"))
	h2.idle(t, keyA)
	if len(m.with("schedule a meeting")) != 1 {
		t.Error("a sentence starting with schedule was taken for the command")
	}
}

// A schedule is power spent later, and asks the gate when it comes due: it
// posts nothing where work later is denied since it was made, or when its
// maker may no longer talk to the bot; either is audited, and the
// schedule is done.
func TestScheduleAsksTheGateWhenDue(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, st testStore)
		why   string
	}{
		{"later denied", func(t *testing.T, st testStore) {
			if _, err := govern.ChangePolicy(t.Context(), st, keyA, "test:U9", agent.PolicyChange{Version: -1, Set: map[string]agent.ToolMode{"group:later": agent.ToolDeny}}, nil); err != nil {
				t.Fatal(err)
			}
		}, "work later is denied"},
		{"maker revoked", func(t *testing.T, st testStore) {
			if _, err := govern.RevokeAccess(t.Context(), st, "test", govern.GrantUser, ann.ID, "cli:op"); err != nil {
				t.Fatal(err)
			}
		}, "may no longer talk to me here"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := openStore(t)
			if err := govern.AllowAccess(t.Context(), st, govern.Grant{Platform: "test", Kind: govern.GrantUser, ID: ann.ID, By: "cli:op"}); err != nil {
				t.Fatal(err)
			}
			addSchedule(t, st, due("s1", time.Now().Add(300*time.Millisecond), "post the report"))
			tc.setup(t, st)
			m := &inputs{}
			startHarness(t, st, hcfg{Loop: &agent.Loop{Model: m}, Access: map[string]govern.Access{"test": {Mode: govern.AccessAllowlist}},
				Scheduler: scheduler(t, st, schedules.Config{})})
			waitFor(t, func() bool { return len(schedulesOf(t, st, keyA)) == 0 })
			if got := m.with("post the report"); len(got) != 0 {
				t.Fatalf("posted %q", got)
			}
			skipped := auditOf(t, st, govern.AuditScheduleSkipped)
			if len(skipped) != 1 || !strings.Contains(skipped[0].Detail, tc.why) {
				t.Fatalf("audited %+v", skipped)
			}
		})
	}
}
