package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/tools"
)

// board returns the store under test as a job board: every store is one.
func (s suite) board(t *testing.T) tools.JobBoard {
	t.Helper()
	st := s.store(t, agent.Retention{})
	b, ok := st.(tools.JobBoard)
	if !ok {
		t.Fatalf("%T does not implement tools.JobBoard", st)
	}
	return b
}

func (s suite) testJobBoard(t *testing.T) {
	ctx := context.Background()
	b := s.board(t)
	const space, other = "slack_T1_C1", "telegram_42"

	jobs, err := b.Jobs(ctx, space)
	if err != nil || len(jobs) != 0 {
		t.Fatalf("Jobs on an empty board = %v, %v; want none", jobs, err)
	}
	// IDs count from 1 in each space.
	for i, want := range []struct {
		space string
		id    int
	}{{space, 1}, {space, 2}, {other, 1}, {space, 3}} {
		id, err := b.NextJobID(ctx, want.space)
		if err != nil || id != want.id {
			t.Fatalf("NextJobID #%d in %s = %d, %v; want %d", i, want.space, id, err, want.id)
		}
	}

	started := time.Now().Truncate(time.Millisecond)
	j1 := tools.Job{ID: 1, Owner: "web-0#3", Command: "npm run dev", Log: ".jobs/1.log", Started: started, Seen: started,
		Session: "slack:T1:C1:1700000000.000100", User: "U2", UserName: "Ann Ö"}
	j2 := tools.Job{ID: 2, Owner: "web-1#1", Command: "make", Log: ".jobs/2.log", Started: started, Seen: started}
	for _, j := range []tools.Job{j2, j1} {
		if err := b.PutJob(ctx, space, j); err != nil {
			t.Fatalf("PutJob: %v", err)
		}
	}
	wantJobs(t, b, space, j1, j2)
	wantJobs(t, b, other)

	// A request to stop is seen by Jobs, and an owner's update does not
	// wipe it out.
	if err := b.AskStop(ctx, space, 1, "slack:U2"); err != nil {
		t.Fatalf("AskStop: %v", err)
	}
	j1.Seen = started.Add(time.Second)
	j1.Tail = []string{"listening on :3000"}
	if err := b.PutJob(ctx, space, j1); err != nil {
		t.Fatalf("PutJob: %v", err)
	}
	asked := j1
	asked.StopAsked = "slack:U2"
	wantJobs(t, b, space, asked, j2)

	// Asking to stop a job the board does not hold says so.
	for _, c := range []struct {
		space string
		id    int
	}{{space, 9}, {other, 1}, {"nowhere", 1}} {
		if err := b.AskStop(ctx, c.space, c.id, "slack:U2"); !errors.Is(err, tools.ErrNoJob) {
			t.Errorf("AskStop(%s, %d) = %v; want ErrNoJob", c.space, c.id, err)
		}
	}

	// The end of a job is kept; dropping one takes its request with it.
	j2.State, j2.Ended = "exit code 0", started.Add(2*time.Second)
	if err := b.PutJob(ctx, space, j2); err != nil {
		t.Fatalf("PutJob: %v", err)
	}
	if err := b.DropJob(ctx, space, 1); err != nil {
		t.Fatalf("DropJob: %v", err)
	}
	wantJobs(t, b, space, j2)
	if err := b.PutJob(ctx, space, j1); err != nil {
		t.Fatalf("PutJob: %v", err)
	}
	wantJobs(t, b, space, j1, j2) // no request left behind from before
	if err := b.DropJob(ctx, space, 42); err != nil {
		t.Errorf("DropJob of a job never there = %v; want nil", err)
	}
	// A dropped ID is not handed out again.
	if id, err := b.NextJobID(ctx, space); err != nil || id != 4 {
		t.Errorf("NextJobID after drops = %d, %v; want 4", id, err)
	}

	for _, bad := range []string{"", string(make([]byte, 600))} {
		if _, err := b.NextJobID(ctx, bad); err == nil {
			t.Errorf("NextJobID(%q…) = nil error; want one", bad[:min(len(bad), 8)])
		}
		if err := b.PutJob(ctx, bad, j1); err == nil {
			t.Errorf("PutJob on a bad space = nil error")
		}
	}
}

// testJobBoardConcurrent hands out IDs from many goroutines at once: none
// twice.
func (s suite) testJobBoardConcurrent(t *testing.T) {
	ctx := context.Background()
	b := s.board(t)
	const n = 40
	var (
		mu  sync.Mutex
		got = map[int]bool{}
	)
	parallel(n, func(i int) {
		id, err := b.NextJobID(ctx, "space")
		if err == nil {
			err = b.PutJob(ctx, "space", tools.Job{ID: id, Command: fmt.Sprint(i)})
		}
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			t.Errorf("goroutine %d: %v", i, err)
		}
		if got[id] {
			t.Errorf("ID %d handed out twice", id)
		}
		got[id] = true
	})
	if jobs, err := b.Jobs(ctx, "space"); err != nil || len(jobs) != n {
		t.Errorf("Jobs = %d jobs, %v; want %d", len(jobs), err, n)
	}
}

func wantJobs(t *testing.T, b tools.JobBoard, space string, want ...tools.Job) {
	t.Helper()
	got, err := b.Jobs(context.Background(), space)
	if err != nil {
		t.Fatalf("Jobs(%s): %v", space, err)
	}
	if len(got) != len(want) {
		t.Fatalf("Jobs(%s) = %d jobs %+v; want %d", space, len(got), got, len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.ID != w.ID || g.Owner != w.Owner || g.Command != w.Command || g.Log != w.Log || g.State != w.State ||
			g.StopAsked != w.StopAsked || !g.Started.Equal(w.Started) || !g.Seen.Equal(w.Seen) || !g.Ended.Equal(w.Ended) ||
			fmt.Sprint(g.Tail) != fmt.Sprint(w.Tail) || g.Session != w.Session || g.User != w.User || g.UserName != w.UserName {
			t.Errorf("Jobs(%s)[%d] = %+v; want %+v", space, i, g, w)
		}
	}
}
