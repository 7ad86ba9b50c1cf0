//go:build linux

package shell

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/firstmate/firstmate/tools"
)

// fakeGuard decides by the job's conversation, as a policy decides by its
// channel, and remembers what it was asked and told.
type fakeGuard struct {
	mu      sync.Mutex
	deny    map[string]error // session → what MayRun returns
	asked   map[string]int   // session → MayRun calls
	stopped []stopNote
}

type stopNote struct {
	job tools.Job
	why string
}

func newFakeGuard() *fakeGuard {
	return &fakeGuard{deny: map[string]error{}, asked: map[string]int{}}
}

func (g *fakeGuard) MayRun(_ context.Context, j tools.Job) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.asked[j.Session]++
	return g.deny[j.Session]
}

func (g *fakeGuard) Stopped(_ context.Context, j tools.Job, why string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.stopped = append(g.stopped, stopNote{j, why})
}

func (g *fakeGuard) set(session string, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.deny[session] = err
}

func (g *fakeGuard) askedOf(session string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.asked[session]
}

func (g *fakeGuard) notes() []stopNote {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]stopNote(nil), g.stopped...)
}

// sleeper is a job whose processes can be found on the host: a loop of
// sleeps of a length no other process uses (other runs of these tests may
// share the machine).
func sleeper() (command, marker string) {
	secs := fmt.Sprint(100_000 + rand.IntN(900_000))
	return "while :; do sleep " + secs + "; done", "sleep\x00" + secs + "\x00"
}

// processesWith counts the host's processes whose command line holds
// marker: a sandbox's PID namespace hides them from each other, not from
// the host.
func processesWith(t *testing.T, marker string) int {
	t.Helper()
	dirs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range dirs {
		if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(marker)) {
			n++
		}
	}
	return n
}

func boardJob(t *testing.T, e *env, ws *tools.Workspace, id int) tools.Job {
	t.Helper()
	jobs, err := e.sh.jobs.board.Jobs(context.Background(), space(ws))
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if j.ID == id {
			return j
		}
	}
	t.Fatalf("the board has no job %d: %+v", id, jobs)
	return tools.Job{}
}

// A job that was allowed when it started is stopped, whole sandbox and
// all, within a beat or so of its channel losing the power to run it; the
// board says why, the guard is told once, and a job of another channel
// that may still run goes on.
func TestGuardStopsARunningJob(t *testing.T) {
	g := newFakeGuard()
	e := newEnv(t, Config{Guard: g, Jobs: JobLimits{Beat: 50 * time.Millisecond}})
	ann := tools.Call{Session: "slack:T1:C1:1700000000.000100", User: "U1", UserName: "Ann"}
	bob := tools.Call{Session: "slack:T1:C2:", User: "U2", UserName: "Bob"}
	other := e.open("C2")
	cmd, marker := sleeper()
	if _, err := e.callAs(ann, e.ws, "start", map[string]any{"command": cmd}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.callAs(bob, other, "start", map[string]any{"command": "sleep 600"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the job's processes to run", func() bool { return processesWith(t, marker) > 0 })
	// Allowed, it runs on across beats.
	waitFor(t, "a few beats that allow it", func() bool { return g.askedOf(ann.Session) >= 4 })
	if n := e.sh.jobs.runningHere(); n != 2 {
		t.Fatalf("%d jobs run while the guard allows them; want 2", n)
	}

	const why = "exec is denied in this channel"
	g.set(ann.Session, tools.NotPermitted(why))
	waitFor(t, "the refused job to be stopped, its processes gone and the guard told", func() bool {
		return processesWith(t, marker) == 0 && boardJob(t, e, e.ws, 1).State == "stopped: "+why && len(g.notes()) == 1
	})
	notes := g.notes()
	if n := notes[0]; n.why != why || n.job.ID != 1 || n.job.Session != ann.Session || n.job.State != "stopped: "+why || n.job.Running() {
		t.Fatalf("the guard was told %+v", n)
	}
	if list := e.must(e.ws, "jobs", map[string]any{}).Text; !strings.Contains(list, "job 1 · stopped: "+why) {
		t.Fatalf("jobs = %q", list)
	}

	// The other channel's job goes on, beat after beat, and the stopped
	// job is not reported again.
	seen := g.askedOf(bob.Session)
	waitFor(t, "more beats of the other channel's job", func() bool { return g.askedOf(bob.Session) >= seen+4 })
	if j := boardJob(t, e, other, 1); !j.Running() {
		t.Fatalf("the other channel's job = %+v; want it running", j)
	}
	if n := len(g.notes()); n != 1 {
		t.Fatalf("the guard was told of %d stops; want 1", n)
	}
}

// A guard that cannot decide (its store is down) is not a refusal: the job
// goes on, the failure is logged once rather than at every beat, and a
// refusal once it can decide again still stops the job.
func TestGuardThatCannotDecideKillsNothing(t *testing.T) {
	g := newFakeGuard()
	var logged syncBuffer
	e := newEnv(t, Config{Guard: g, Jobs: JobLimits{Beat: 50 * time.Millisecond}, Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	ann := tools.Call{Session: "slack:T1:C1:", User: "U1", UserName: "Ann"}
	cmd, marker := sleeper()
	if _, err := e.callAs(ann, e.ws, "start", map[string]any{"command": cmd}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the job's processes to run", func() bool { return processesWith(t, marker) > 0 })

	g.set(ann.Session, errDown)
	seen := g.askedOf(ann.Session)
	waitFor(t, "beats that cannot decide", func() bool {
		if processesWith(t, marker) == 0 || !boardJob(t, e, e.ws, 1).Running() || e.sh.jobs.runningHere() != 1 {
			t.Fatalf("a guard that could not decide stopped the job: %+v", boardJob(t, e, e.ws, 1))
		}
		return g.askedOf(ann.Session) >= seen+6
	})
	if n := len(g.notes()); n != 0 {
		t.Fatalf("the guard was told of %d stops", n)
	}
	if n := strings.Count(logged.String(), "cannot check that a job may still run"); n != 1 || !strings.Contains(logged.String(), "store is down") {
		t.Fatalf("logged %d times; want once, with the cause:\n%s", n, logged.String())
	}

	g.set(ann.Session, fmt.Errorf("the policy says no: %w", tools.ErrNotPermitted))
	waitFor(t, "the job to be stopped once refused", func() bool {
		return processesWith(t, marker) == 0 && strings.HasPrefix(boardJob(t, e, e.ws, 1).State, "stopped: the policy says no")
	})
}

// A start the guard refuses starts nothing: no process, no job on the
// board, no ID used up; one it cannot decide on is refused too, and says
// so.
func TestGuardRefusesAStart(t *testing.T) {
	g := newFakeGuard()
	e := newEnv(t, Config{Guard: g})
	ann := tools.Call{Session: "slack:T1:C1:", User: "U1", UserName: "Ann"}
	cmd, marker := sleeper()

	g.set(ann.Session, tools.NotPermitted("exec is denied in this channel"))
	_, err := e.callAs(ann, e.ws, "start", map[string]any{"command": cmd})
	if err == nil || !strings.Contains(err.Error(), "exec is denied in this channel, so no job was started") {
		t.Fatalf("a refused start: %v", err)
	}
	g.set(ann.Session, errDown)
	_, err = e.callAs(ann, e.ws, "start", map[string]any{"command": cmd})
	if err == nil || !strings.Contains(err.Error(), "not started: store is down") {
		t.Fatalf("a start the guard cannot decide on: %v", err)
	}
	if n := e.sh.jobs.runningHere(); n != 0 {
		t.Fatalf("%d jobs run after refused starts", n)
	}
	if n := processesWith(t, marker); n != 0 {
		t.Fatalf("%d processes of a refused job run", n)
	}
	if jobs, _ := e.sh.jobs.board.Jobs(context.Background(), space(e.ws)); len(jobs) != 0 {
		t.Fatalf("the board holds %+v after refused starts", jobs)
	}
	if _, err := os.Stat(filepath.Join(e.ws.Dir(), ".jobs")); err == nil {
		t.Fatal("a refused start created a log")
	}
	if n := g.askedOf(ann.Session); n != 2 {
		t.Fatalf("the guard was asked %d times; want once a start", n)
	}

	g.set(ann.Session, nil)
	res, err := e.callAs(ann, e.ws, "start", map[string]any{"command": "true"})
	if err != nil || !strings.Contains(res.Text, "Started job 1") {
		t.Fatalf("an allowed start = %q, %v; want job 1", res.Text, err)
	}
}

// syncBuffer is a log's destination that the beat writes while the test
// reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A beat that runs while a refused job dies must not write it as running
// after its end is recorded: the job has left this replica, so nothing
// would write it again, and the board would show it running until it was
// taken for lost. slowBoard holds such a write back until the end is in,
// the worst order.
func TestGuardStopIsTheLastWord(t *testing.T) {
	g := newFakeGuard()
	board := &slowBoard{JobBoard: newMemBoard(), guard: g, ended: make(chan struct{})}
	e := newEnv(t, Config{Guard: g, Board: board, Jobs: JobLimits{Beat: 50 * time.Millisecond}})
	ann := tools.Call{Session: "slack:T1:C1:", User: "U1", UserName: "Ann"}
	cmd, marker := sleeper()
	if _, err := e.callAs(ann, e.ws, "start", map[string]any{"command": cmd}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a beat that allows it", func() bool { return g.askedOf(ann.Session) >= 2 })
	g.set(ann.Session, tools.NotPermitted("exec is denied in this channel"))
	waitFor(t, "the job to end and the board's writes to land", func() bool {
		return processesWith(t, marker) == 0 && e.sh.jobs.runningHere() == 0 && board.inFlight.Load() == 0
	})
	if j := boardJob(t, e, e.ws, 1); j.State != "stopped: exec is denied in this channel" {
		t.Fatalf("the board says %+v; want it stopped", j)
	}
}

// slowBoard delays a write of a job as running, once its conversation is
// refused, until a write of its end has landed.
type slowBoard struct {
	tools.JobBoard
	guard    *fakeGuard
	ended    chan struct{}
	endOnce  sync.Once
	inFlight atomic.Int32
}

func (b *slowBoard) PutJob(ctx context.Context, space string, j tools.Job) error {
	b.inFlight.Add(1)
	defer b.inFlight.Add(-1)
	b.guard.mu.Lock()
	refused := b.guard.deny[j.Session] != nil
	b.guard.mu.Unlock()
	if refused && j.Running() {
		select {
		case <-b.ended:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	err := b.JobBoard.PutJob(ctx, space, j)
	if !j.Running() {
		b.endOnce.Do(func() { close(b.ended) })
	}
	return err
}
