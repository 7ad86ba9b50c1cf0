package schedule

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/firstmate/firstmate/tools"
)

// memScheduler keeps plans in memory, as a store would.
type memScheduler struct{ plans []Plan }

func (m *memScheduler) Schedule(_ context.Context, c tools.Call, p Plan) (Entry, error) {
	m.plans = append(m.plans, p)
	return Entry{ID: "abc234", Kind: p.Kind, Prompt: p.Prompt, Job: p.Job, Due: time.Now().Add(time.Hour), Until: time.Now().Add(p.Wait), By: c.UserName, Mine: true}, nil
}

func (m *memScheduler) List(context.Context, tools.Call) (Listing, error) { return Listing{}, nil }

func (m *memScheduler) Unschedule(context.Context, tools.Call, string) (Entry, error) {
	return Entry{}, nil
}

// memBoard is a job board of one space.
type memBoard struct{ jobs []tools.Job }

func (b *memBoard) NextJobID(context.Context, string) (int, error)     { return len(b.jobs) + 1, nil }
func (b *memBoard) PutJob(context.Context, string, tools.Job) error    { return nil }
func (b *memBoard) AskStop(context.Context, string, int, string) error { return nil }
func (b *memBoard) DropJob(context.Context, string, int) error         { return nil }
func (b *memBoard) Jobs(context.Context, string) ([]tools.Job, error) {
	return b.jobs, nil
}

func callTool(t *testing.T, set *tools.Set, ctx context.Context, name, args string) (string, error) {
	t.Helper()
	dir := t.TempDir()
	ws, err := tools.OpenWorkspace(dir, "slack:T1:C1:")
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	res, err := set.Call(ctx, ws, name, json.RawMessage(args))
	return res.Text, err
}

func TestToolsNeedACall(t *testing.T) {
	set := tools.NewSet(Tools(Config{Scheduler: &memScheduler{}, Jobs: &memBoard{}}))
	if got := set.Names(); strings.Join(got, ",") != strings.Join(Names, ",") {
		t.Fatalf("tools %q; want %q", got, Names)
	}
	text, err := callTool(t, set, context.Background(), "schedule", `{"prompt":"x","in":"1h"}`)
	if err == nil || !strings.Contains(text, "works only in a conversation") {
		t.Fatalf("a call outside a conversation: %q, %v", text, err)
	}
}

func TestWaitForJob(t *testing.T) {
	now := time.Now()
	board := &memBoard{jobs: []tools.Job{
		{ID: 1, Command: "make", Log: ".jobs/1.log", Started: now.Add(-time.Minute), Seen: now},
		{ID: 2, Command: "make test", Log: ".jobs/2.log", Started: now.Add(-time.Minute), Seen: now.Add(-time.Second), Ended: now.Add(-time.Second),
			State: "exit code 1", Tail: []string{"FAIL"}},
	}}
	s := &memScheduler{}
	set := tools.NewSet(Tools(Config{Scheduler: s, Jobs: board, MaxWait: 24 * time.Hour}))
	ctx := tools.WithCall(context.Background(), tools.Call{Session: "slack:T1:C1:", User: "U1", UserName: "ann"})

	// A job that ended needs no wait: its result is the answer.
	text, err := callTool(t, set, ctx, "wait_for_job", `{"id":"2"}`)
	if err != nil || !strings.HasPrefix(text, "No need to wait: job 2 ended: exit code 1, after 59s.") || !strings.HasSuffix(text, "\n    FAIL") {
		t.Fatalf("wait for an ended job: %q, %v", text, err)
	}
	if _, err := callTool(t, set, ctx, "wait_for_job", `{"id":"9"}`); err == nil {
		t.Fatal("a wait for no job was made")
	}
	if _, err := callTool(t, set, ctx, "wait_for_job", `{"id":"1","max":"forever"}`); err == nil {
		t.Fatal("a wait with a bad max was made")
	}
	if len(s.plans) != 0 {
		t.Fatalf("plans %+v", s.plans)
	}
	text, err = callTool(t, set, ctx, "wait_for_job", `{"id":"job 1","note":"deploy it","max":"2h"}`)
	if err != nil || !strings.HasPrefix(text, "Waiting for job 1:") {
		t.Fatalf("wait for a running job: %q, %v", text, err)
	}
	space := filepath.Base(filepath.Join(os.TempDir(), tools.DirName("slack:T1:C1:")))
	if p := s.plans[0]; p.Kind != Job || p.Job != 1 || p.Space != space || p.Wait != 2*time.Hour || p.Prompt != "deploy it" {
		t.Fatalf("plan %+v", p)
	}
}

// Times are shown in the entry's zone (its channel's), a cron with the
// zone its fields are read in, and a listing names the channel's zone.
func TestTimesShownInTheChannelsZone(t *testing.T) {
	tokyo, err := time.LoadLocation("Asia/Tokyo")
	if err != nil {
		t.Skip("no time zone data:", err)
	}
	due := time.Date(2025, 3, 4, 0, 0, 0, 0, time.UTC) // 09:00 in Tokyo
	cron := Entry{ID: "abc234", Kind: Cron, Cron: "0 9 * * *", TZ: "Asia/Tokyo", Due: due, By: "ann", Prompt: "standup", Loc: tokyo}
	if got, want := cron.Line(), `abc234 · cron "0 9 * * *" (Asia/Tokyo), next 2025-03-04 09:00 JST · by ann · "standup"`; got != want {
		t.Errorf("Line() = %q; want %q", got, want)
	}
	// A cron made for Tokyo, listed after the channel moved to UTC.
	cron.Loc = nil
	if got, want := cron.Line(), `abc234 · cron "0 9 * * *" (Asia/Tokyo), next 2025-03-04 00:00 UTC · by ann · "standup"`; got != want {
		t.Errorf("Line() without a zone = %q; want %q", got, want)
	}
	once := Entry{ID: "def567", Kind: Once, Due: due.Add(30 * time.Minute), By: "bob", Prompt: "deploy", Loc: tokyo}
	if got := Made(once); !strings.HasPrefix(got, "Scheduled def567: at 2025-03-04 09:30 JST (in ") {
		t.Errorf("Made() = %q", got)
	}
	l := Listing{Entries: []Entry{once}, Others: 2, Loc: tokyo}
	if got, want := l.String(), "def567 · once, 2025-03-04 09:30 JST · by bob · \"deploy\"\n(and 2 by other people, which only they and admins see)\nThis channel's time zone: Asia/Tokyo."; got != want {
		t.Errorf("String() = %q; want %q", got, want)
	}
	if got, want := (Listing{}).String(), "No schedules in this channel.\nThis channel's time zone: UTC."; got != want {
		t.Errorf("an empty listing: %q; want %q", got, want)
	}
}
