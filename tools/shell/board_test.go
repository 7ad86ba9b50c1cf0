//go:build linux

package shell

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/firstmate/firstmate/tools"
	"github.com/firstmate/firstmate/tools/files"
)

// replica is a second Shell over the same board and workspaces, as another
// firstmate replica with shared storage would be.
func (e *env) replica(cfg Config) *env {
	e.t.Helper()
	cfg.Sandbox = e.sb
	sh := New(cfg)
	e.t.Cleanup(sh.Close)
	return &env{t: e.t, sh: sh, sb: e.sb, ws: e.ws, set: tools.NewSet(append(sh.Tools(), files.All(files.Options{})...))}
}

// A job started on one replica is listed, with its output, on another, and
// stopped from there: the request goes through the board to the owner,
// which kills it and writes the end.
func TestJobsAcrossReplicas(t *testing.T) {
	board := newMemBoard()
	beat := JobLimits{Beat: 250 * time.Millisecond, PerChannel: 2}
	a := newEnv(t, Config{Board: board, Owner: "web-0#1", Jobs: beat})
	b := a.replica(Config{Board: board, Owner: "web-1#1", Jobs: beat})

	a.must(a.ws, "start", map[string]any{"command": "echo serving on 8080; sleep 60"})
	waitFor(t, "replica b to see the job's output", func() bool {
		text := b.must(b.ws, "jobs", map[string]any{}).Text
		return strings.Contains(text, "job 1 · running on web-0#1") && strings.Contains(text, "    serving on 8080")
	})
	// The limit counts the jobs of every replica, and IDs go on from the
	// board's.
	res := b.must(b.ws, "start", map[string]any{"command": "sleep 60"})
	if !strings.Contains(res.Text, "Started job 2") {
		t.Fatalf("start on b = %q", res.Text)
	}
	if _, err := a.call(a.ws, "start", map[string]any{"command": "sleep 60"}); err == nil || !strings.Contains(err.Error(), "already runs 2 jobs") {
		t.Fatalf("a third job across replicas, limit 2: %v", err)
	}

	res = b.must(b.ws, "stop", map[string]any{"id": "1"})
	if !strings.Contains(res.Text, "Stopped job 1 (it ran on web-0#1)") {
		t.Fatalf("stop from b = %q", res.Text)
	}
	if n := a.sh.jobs.runningHere(); n != 0 {
		t.Errorf("replica a still runs %d jobs after the stop; want 0", n)
	}
	list := a.must(a.ws, "jobs", map[string]any{}).Text
	if !strings.Contains(list, "job 1 · stopped") || !strings.Contains(list, "job 2 · running on web-1#1") {
		t.Fatalf("jobs on a = %q", list)
	}
	// And the other way round.
	if res := a.must(a.ws, "stop", map[string]any{"id": "2"}); !strings.Contains(res.Text, "Stopped job 2 (it ran on web-1#1)") {
		t.Fatalf("stop from a = %q", res.Text)
	}
	if res := b.must(b.ws, "stop", map[string]any{"id": "2"}); !strings.Contains(res.Text, "had already ended") {
		t.Fatalf("second stop = %q", res.Text)
	}
}

// A job records on the board the conversation and the person that started
// it, so that whoever guards it and whoever lists it knows whose it is.
func TestJobRecordsWhoStartedIt(t *testing.T) {
	e := newEnv(t, Config{})
	by := tools.Call{Session: "slack:T1:C1:1700000000.000100", User: "U2", UserName: "Ann", ID: "call_1"}
	if _, err := e.callAs(by, e.ws, "start", map[string]any{"command": "sleep 60"}); err != nil {
		t.Fatal(err)
	}
	jobs, err := e.sh.jobs.board.Jobs(context.Background(), space(e.ws))
	if err != nil || len(jobs) != 1 {
		t.Fatalf("board = %+v, %v", jobs, err)
	}
	if j := jobs[0]; j.Session != by.Session || j.User != by.User || j.UserName != by.UserName {
		t.Fatalf("the job's record = %+v; want it started by %+v", j, by)
	}
}

// A job whose replica died (its beats stopped) is shown as lost, no longer
// counts against the limit, and stop marks it ended.
func TestJobOfDeadReplicaIsLost(t *testing.T) {
	board := newMemBoard()
	e := newEnv(t, Config{Board: board, Owner: "web-1#1", Jobs: JobLimits{Beat: 50 * time.Millisecond, PerChannel: 1}})
	ctx := context.Background()
	sp := space(e.ws)
	id, _ := board.NextJobID(ctx, sp)
	seen := time.Now().Add(-time.Minute)
	board.PutJob(ctx, sp, tools.Job{ID: id, Owner: "web-0#1", Command: "npm run dev", Log: ".jobs/1.log", Started: seen.Add(-time.Hour), Seen: seen})

	list := e.must(e.ws, "jobs", map[string]any{}).Text
	if !strings.Contains(list, "job 1 · lost: its replica (web-0#1) stopped answering") {
		t.Fatalf("jobs = %q", list)
	}
	if res := e.must(e.ws, "start", map[string]any{"command": "true"}); !strings.Contains(res.Text, "Started job 2") {
		t.Fatalf("a lost job counted against the limit: %q", res.Text)
	}
	res := e.must(e.ws, "stop", map[string]any{"id": "1"})
	if !strings.Contains(res.Text, "not running: lost") {
		t.Fatalf("stop = %q", res.Text)
	}
	jobs, _ := board.Jobs(ctx, sp)
	if jobs[0].Running() {
		t.Fatalf("the lost job is still running on the board: %+v", jobs[0])
	}
}

// A replica that cannot reach the board starts no job (nobody could see or
// stop it) and says why.
func TestJobNeedsTheBoard(t *testing.T) {
	e := newEnv(t, Config{Board: brokenBoard{}})
	_, err := e.call(e.ws, "start", map[string]any{"command": "sleep 60"})
	if err == nil || !strings.Contains(err.Error(), "store is down") {
		t.Fatalf("start with the board down: %v", err)
	}
	if n := e.sh.jobs.runningHere(); n != 0 {
		t.Fatalf("%d jobs run with the board down", n)
	}
	if _, err := e.call(e.ws, "jobs", map[string]any{}); err == nil || !strings.Contains(err.Error(), "store is down") {
		t.Fatalf("jobs with the board down: %v", err)
	}
}

func (js *jobs) runningHere() int {
	js.mu.Lock()
	defer js.mu.Unlock()
	return len(js.local)
}

type brokenBoard struct{ tools.JobBoard }

func (brokenBoard) Jobs(context.Context, string) ([]tools.Job, error) { return nil, errDown }

type downErr struct{}

func (downErr) Error() string { return "store is down" }

var errDown = downErr{}

// A channel's jobs share a CPU time budget: a job that spins is stopped
// when the channel's jobs have used it, and no job starts until it frees
// up.
func TestJobsCPUBudget(t *testing.T) {
	e := newEnv(t, Config{Jobs: JobLimits{CPU: time.Second, Beat: 100 * time.Millisecond}})
	// The job's CPU time is the test's to say: a busy machine gives a
	// niced job no second of CPU in any given wall time (treeCPU reading
	// a real process tree is TestTreeCPU's).
	var cpu atomic.Int64
	e.sh.jobs.cpuOf = func(int) time.Duration { return time.Duration(cpu.Load()) }
	e.must(e.ws, "start", map[string]any{"command": "sleep 600"})
	cpu.Store(int64(600 * time.Millisecond))
	waitFor(t, "a beat to see the job's 600ms", func() bool {
		jobs, _ := e.sh.jobs.board.Jobs(context.Background(), space(e.ws))
		return len(jobs) == 1 && jobs[0].CPU == 600*time.Millisecond
	})
	if list := e.must(e.ws, "jobs", map[string]any{}).Text; !strings.Contains(list, "job 1 · running") {
		t.Fatalf("under its budget, jobs = %q", list)
	}
	cpu.Store(int64(1100 * time.Millisecond))
	waitFor(t, "the job to be stopped for its CPU time", func() bool {
		return strings.Contains(e.must(e.ws, "jobs", map[string]any{}).Text, "job 1 · stopped: this channel's jobs used their 1s of CPU time for the day")
	})
	jobs, _ := e.sh.jobs.board.Jobs(context.Background(), space(e.ws))
	if jobs[0].Running() || jobs[0].CPU != 1100*time.Millisecond {
		t.Errorf("the stopped job: %+v; want it ended with the 1.1s it used", jobs[0])
	}
	_, err := e.call(e.ws, "start", map[string]any{"command": "true"})
	if err == nil || !strings.Contains(err.Error(), "used their 1s of CPU time") {
		t.Fatalf("start with the budget spent: %v", err)
	}
	// Another channel has its own.
	cpu.Store(0)
	if res := e.must(e.open("C2"), "start", map[string]any{"command": "true"}); !strings.Contains(res.Text, "Started job 1") {
		t.Fatalf("another channel's start = %q", res.Text)
	}
}
