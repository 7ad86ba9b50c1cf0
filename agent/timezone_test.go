package agent_test

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/agent/govern"
	"github.com/firstmate/firstmate/agent/schedules"
	"github.com/firstmate/firstmate/tools"
	"github.com/firstmate/firstmate/tools/schedule"
)

func loadZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Skip("no time zone data:", err)
	}
	return loc
}

// ask submits in and returns the reply it gets in its thread.
func ask(t *testing.T, h *harness, in agent.Inbound) string {
	t.Helper()
	_, _, before := h.p.final(in.Key)
	h.submit(t, in)
	got := notices(t, h, in.Key, len(before)+1)
	return got[len(before)]
}

var seq atomic.Int64

// from is a message of user's in keyA, with an ID of its own.
func from(user agent.User, text string) agent.Inbound {
	in := inbound(keyA, fmt.Sprintf("tz%d", seq.Add(1)), text)
	in.User = user
	return in
}

var root = agent.User{ID: "U9", Name: "root"}

func zoneOf(t *testing.T, st testStore) string {
	t.Helper()
	cs, err := st.Settings(t.Context(), keyA.Channel())
	if err != nil {
		t.Fatal(err)
	}
	return cs.TimeZone
}

func TestParseTimeZone(t *testing.T) {
	loadZone(t, "Asia/Tokyo")
	for _, tc := range []struct {
		in, want string // want "": refused
	}{
		{"Asia/Tokyo", "Asia/Tokyo"},
		{" Europe/Paris ", "Europe/Paris"},
		{"UTC", "UTC"},
		{"utc", "UTC"},
		{"Etc/GMT+9", "Etc/GMT+9"},
		{"America/Argentina/Buenos_Aires", "America/Argentina/Buenos_Aires"},
		{"", ""},
		{"   ", ""},
		{"Local", ""},
		{"local", ""},
		{"../../etc/passwd", ""},
		{"/etc/passwd", ""},
		{"/usr/share/zoneinfo/Asia/Tokyo", ""},
		{"Asia/../Asia/Tokyo", ""},
		{"Asia//Tokyo", ""},
		{"Asia/Tokyo/", ""},
		{`Asia\Tokyo`, ""},
		{"Asia/Tokyo\x00", ""},
		{"Asia/Tokyo; rm -rf /", ""},
		{"Mars/Olympus_Mons", ""},
		{"zone.tab", ""},
		{"Asia/Tokyo" + strings.Repeat("A", 100), ""},
		{strings.Repeat("A", 100000), ""},
	} {
		loc, err := agent.ParseTimeZone(tc.in)
		switch {
		case tc.want == "" && (err == nil || !errors.Is(err, agent.ErrBadTimeZone)):
			t.Errorf("ParseTimeZone(%.40q) = %v, %v; want ErrBadTimeZone", tc.in, loc, err)
		case tc.want == "" && len(err.Error()) > 200:
			t.Errorf("ParseTimeZone(%.40q): the error repeats the input: %d bytes", tc.in, len(err.Error()))
		case tc.want != "" && (err != nil || loc.String() != tc.want):
			t.Errorf("ParseTimeZone(%q) = %v, %v; want %s", tc.in, loc, err, tc.want)
		}
	}
}

// Anyone sees the channel's zone; only an admin sets or clears it, and
// only to a zone of the zone database. Each change is audited.
func TestTimeZoneCommand(t *testing.T) {
	loadZone(t, "Asia/Tokyo")
	st := openStore(t)
	ny := loadZone(t, "America/New_York")
	h := startHarness(t, st, hcfg{Loop: &agent.Loop{Model: &inputs{}}, Admins: func(_, id string) bool { return id == "U9" },
		Scheduler: scheduler(t, st, schedules.Config{Location: ny})})

	if got := ask(t, h, from(ann, "timezone")); !strings.HasPrefix(got, "This channel's time zone is America/New_York, the default.") {
		t.Fatalf("timezone: %q", got)
	}
	// Not an admin: refused, and nothing changes.
	for _, text := range []string{"timezone Asia/Tokyo", "timezone default", "/timezone ../../etc/passwd"} {
		if got := ask(t, h, from(ann, text)); got != "Only an admin can change this channel's time zone. Send timezone to see it." {
			t.Errorf("%s by a non-admin: %q", text, got)
		}
	}
	if z := zoneOf(t, st); z != "" {
		t.Fatalf("a non-admin set the zone to %q", z)
	}
	if n := len(auditOf(t, st, govern.AuditTimeZoneRefused)); n != 3 {
		t.Errorf("%d timezone.refused entries; want 3", n)
	}

	// Garbage is refused, saying what to write.
	long := strings.Repeat("A", 5000)
	for _, tc := range []struct{ text, want string }{
		{"timezone Local", "Local is the server's own zone, not one a channel can have; name the zone, such as Europe/Paris."},
		{"timezone ../../etc/passwd", `"../../etc/passwd" is not a time zone; use an IANA name such as UTC, Europe/Paris or Asia/Tokyo.`},
		{"timezone Mars/Olympus_Mons", `"Mars/Olympus_Mons" is not a time zone; use an IANA name such as UTC, Europe/Paris or Asia/Tokyo.`},
		{"/timezone " + long, `"` + long[:40] + `…" is not a time zone; use an IANA name such as UTC, Europe/Paris or Asia/Tokyo.`},
	} {
		if got := ask(t, h, from(root, tc.text)); got != tc.want {
			t.Errorf("%.40s: %q; want %q", tc.text, got, tc.want)
		}
	}
	if z := zoneOf(t, st); z != "" {
		t.Fatalf("an invalid zone was stored: %q", z)
	}
	// A sentence that starts with the word is for the model.
	h.submit(t, from(ann, "timezone of the meeting is unclear"))
	h.idle(t, keyA)

	if got := ask(t, h, from(root, "timezone Asia/Tokyo")); !strings.HasPrefix(got, "Saved. This channel's time zone is Asia/Tokyo (the default is America/New_York).") {
		t.Fatalf("timezone Asia/Tokyo: %q", got)
	}
	if z := zoneOf(t, st); z != "Asia/Tokyo" {
		t.Fatalf("stored zone %q", z)
	}
	if got := ask(t, h, from(ann, "timezone")); !strings.HasPrefix(got, "This channel's time zone is Asia/Tokyo (the default is America/New_York).") {
		t.Fatalf("timezone after setting: %q", got)
	}
	// A policy change keeps the zone, and the zone the policy.
	if got := ask(t, h, from(root, "tools echo=deny")); !strings.HasPrefix(got, "Saved.") {
		t.Fatalf("tools echo=deny: %q", got)
	}
	ask(t, h, from(root, "timezone utc"))
	cs, err := st.Settings(t.Context(), keyA)
	if err != nil || cs.TimeZone != "UTC" || cs.Tools["echo"].Mode != agent.ToolDeny {
		t.Fatalf("settings %+v, %v", cs, err)
	}
	if got := ask(t, h, from(root, "timezone default")); !strings.HasPrefix(got, "Saved. This channel's time zone is America/New_York, the default.") {
		t.Fatalf("timezone default: %q", got)
	}
	if cs, _ := st.Settings(t.Context(), keyA); cs.TimeZone != "" || cs.Tools["echo"].Mode != agent.ToolDeny {
		t.Fatalf("settings after clearing %+v", cs)
	}

	set := auditOf(t, st, govern.AuditTimeZoneSet)
	if len(set) != 3 {
		t.Fatalf("timezone.set entries %+v; want 3", set)
	}
	if e := set[0]; e.User != "test:U9" || e.Channel != keyA.Channel().String() || e.Detail != "time_zone=Asia/Tokyo" || e.Outcome != "ok" {
		t.Errorf("audit entry %+v", e)
	}
	if e := set[2]; e.Detail != "time_zone=default (was UTC)" {
		t.Errorf("audit entry of clearing %+v", e)
	}
}

// A cron made in a channel whose zone is Asia/Tokyo is read in Tokyo's
// time, fires at it, is listed in it, and keeps it when the channel's
// zone changes; a time without an offset is Tokyo's too; clearing the
// zone brings back the configured one.
func TestScheduleInTheChannelsZone(t *testing.T) {
	tokyo := loadZone(t, "Asia/Tokyo")
	paris := loadZone(t, "Europe/Paris")
	ny := loadZone(t, "America/New_York")
	st := openStore(t)
	m := &inputs{}
	sched := scheduler(t, st, schedules.Config{Location: ny})
	h := startHarness(t, st, hcfg{Loop: &agent.Loop{Model: m}, Admins: func(_, id string) bool { return id == "U9" },
		Scheduler: sched})
	ask(t, h, from(root, "timezone Asia/Tokyo"))

	if got := ask(t, h, from(ann, "schedule")); !strings.Contains(got, "Times are in Asia/Tokyo, this channel's time zone") {
		t.Errorf("usage: %q", got)
	}
	made := ask(t, h, from(ann, "schedule cron 0 9 * * * standup"))
	all := schedulesOf(t, st, keyA)
	if len(all) != 1 {
		t.Fatalf("stored %+v (%q)", all, made)
	}
	cron := all[0]
	if cron.TZ != "Asia/Tokyo" || cron.Due.In(tokyo).Format("15:04") != "09:00" || !cron.Due.After(time.Now()) || time.Until(cron.Due) > 24*time.Hour {
		t.Fatalf("stored %+v; want due at the next 09:00 in Tokyo", cron)
	}
	if want := fmt.Sprintf(`cron "0 9 * * *" (Asia/Tokyo), first at %s 09:00 JST.`, cron.Due.In(tokyo).Format("2006-01-02")); !strings.Contains(made, want) {
		t.Errorf("made: %q; want %q in it", made, want)
	}
	ask(t, h, from(ann, "schedule at 09:30 coffee"))
	var once schedules.Schedule
	for _, s := range schedulesOf(t, st, keyA) {
		if s.Prompt == "coffee" {
			once = s
		}
	}
	if once.Due.In(tokyo).Format("15:04") != "09:30" || once.TZ != "" {
		t.Errorf("at 09:30 in Tokyo: %+v (%v)", once, once.Due.In(tokyo))
	}
	list := ask(t, h, from(ann, "schedules"))
	for _, want := range []string{
		fmt.Sprintf(`%s · cron "0 9 * * *" (Asia/Tokyo), next %s 09:00 JST`, cron.ID, cron.Due.In(tokyo).Format("2006-01-02")),
		fmt.Sprintf(`%s · once, %s 09:30 JST`, once.ID, once.Due.In(tokyo).Format("2006-01-02")),
		"This channel's time zone: Asia/Tokyo.",
	} {
		if !strings.Contains(list, want) {
			t.Errorf("schedules: %q; want %q in it", list, want)
		}
	}

	// The model's tools read and show the channel's zone too.
	call := tools.Call{Session: keyA.String(), User: ann.ID, UserName: ann.Name}
	l, err := sched.List(t.Context(), call)
	if err != nil || l.Loc.String() != "Asia/Tokyo" || len(l.Entries) != 2 {
		t.Fatalf("List: %+v, %v", l, err)
	}
	e, err := sched.Schedule(t.Context(), call, schedule.Plan{Kind: schedule.Cron, Prompt: "lunch", When: schedule.When{Cron: "0 12 * * 1-5"}})
	if err != nil || e.TZ != "Asia/Tokyo" || e.Due.In(tokyo).Format("15:04") != "12:00" || !strings.Contains(schedule.Made(e), " 12:00 JST") {
		t.Fatalf("the tool's cron: %+v, %v", e, err)
	}
	removed, err := sched.Unschedule(t.Context(), call, e.ID)
	if err != nil || !strings.Contains(removed.Line(), " 12:00 JST") {
		t.Fatalf("the tool's unschedule: %q, %v", removed.Line(), err)
	}
	if got := ask(t, h, from(ann, "unschedule "+once.ID)); !strings.Contains(got, " 09:30 JST") {
		t.Errorf("unschedule: %q", got)
	}

	// It fires at Tokyo's 09:00: made due now, it posts once and is due
	// at the next 09:00 in Tokyo.
	fire := func(sch schedules.Schedule, n int) schedules.Schedule {
		t.Helper()
		ss := scheduleStore(t, st)
		if _, err := ss.RemoveSchedule(t.Context(), keyA, sch.ID); err != nil {
			t.Fatal(err)
		}
		// Each firing a due time of its own: the message ID has it.
		sch.Due = time.Now().Add(-time.Duration(10*n) * time.Minute).Truncate(time.Minute)
		if err := ss.AddSchedule(t.Context(), sch, 20); err != nil {
			t.Fatal(err)
		}
		waitFor(t, func() bool { return len(m.with("standup")) == n })
		waitFor(t, func() bool { all := schedulesOf(t, st, keyA); return len(all) == 1 && all[0].Due.After(time.Now()) })
		return schedulesOf(t, st, keyA)[0]
	}
	c, err := schedule.ParseCron("0 9 * * *", tokyo)
	if err != nil {
		t.Fatal(err)
	}
	next := fire(cron, 1)
	if want := c.Next(time.Now()); !next.Due.Equal(want) || next.Due.In(tokyo).Format("15:04") != "09:00" {
		t.Errorf("after firing, due %v; want %v", next.Due.In(tokyo), want)
	}
	if got := m.with("standup")[0]; !strings.Contains(got, `cron "0 9 * * *", Asia/Tokyo] standup`) || !strings.Contains(got, " JST; schedule ") {
		t.Errorf("the turn read %q", got)
	}

	// The channel moves to Paris: the cron keeps Tokyo's 09:00, shown
	// in Paris time.
	ask(t, h, from(root, "timezone Europe/Paris"))
	next = fire(next, 2)
	if want := c.Next(time.Now()); !next.Due.Equal(want) || next.TZ != "Asia/Tokyo" {
		t.Errorf("after the channel's zone changed, due %v (%s); want %v", next.Due.In(tokyo), next.TZ, want)
	}
	list = ask(t, h, from(ann, "schedules"))
	parisTime := next.Due.In(paris).Format(schedule.Layout)
	if want := fmt.Sprintf(`cron "0 9 * * *" (Asia/Tokyo), next %s`, parisTime); !strings.Contains(list, want) || !strings.Contains(list, "This channel's time zone: Europe/Paris.") {
		t.Errorf("schedules: %q; want %q in it", list, want)
	}

	// Cleared: the configured zone, and a new cron is read in it.
	ask(t, h, from(root, "timezone default"))
	ask(t, h, from(ann, "schedule cron 30 7 * * * news"))
	n := 0
	for _, s := range schedulesOf(t, st, keyA) {
		if s.Prompt == "news" {
			n++
			if s.TZ != "America/New_York" || s.Due.In(ny).Format("15:04") != "07:30" {
				t.Errorf("a cron after clearing: %+v", s)
			}
		}
	}
	if n != 1 {
		t.Errorf("%d crons made after clearing; want 1", n)
	}
	if got := ask(t, h, from(ann, "schedules")); !strings.Contains(got, "This channel's time zone: America/New_York.") {
		t.Errorf("schedules after clearing: %q", got)
	}
}
