package shell

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/firstmate/firstmate/tools"
	"github.com/firstmate/firstmate/tools/sandbox"
)

// JobLimits bound background jobs.
type JobLimits struct {
	PerChannel int           // running jobs per channel (default 3)
	Lifetime   time.Duration // a job is stopped after this (default 1 h)
	LogSize    int64         // a job's log starts over past this (default 8 MiB)
	// CPU is the CPU time a channel's jobs may use together in a day
	// (those started in the last 24 hours, on any replica); past it they
	// are stopped and no job starts (default 1 h).
	CPU time.Duration
	// Beat is how often this replica writes its running jobs to the board
	// (their output's last lines, that they are alive), looks for
	// requests to stop them and asks the guard whether they may go on
	// (default 2 s). A running job whose owner has
	// not written for lostAfter beats is shown as lost.
	Beat time.Duration
}

func (l JobLimits) withDefaults() JobLimits {
	if l.PerChannel <= 0 {
		l.PerChannel = 3
	}
	if l.Lifetime <= 0 {
		l.Lifetime = time.Hour
	}
	l.Lifetime = min(l.Lifetime, sandbox.MaxTimeout*4)
	if l.LogSize <= 0 {
		l.LogSize = 8 << 20
	}
	if l.Beat <= 0 {
		l.Beat = 2 * time.Second
	}
	if l.CPU <= 0 {
		l.CPU = time.Hour
	}
	return l
}

// keepEnded is how many ended jobs a channel's list keeps.
const keepEnded = 10

// lostAfter is how many beats a running job's owner may miss before the
// job is shown as lost: its replica died (and the job with it: a sandbox
// dies with the process that started it) or cannot reach the store.
const lostAfter = 6

// boardWait bounds how long a write to the board may take.
const boardWait = 5 * time.Second

type job struct {
	id      int
	space   string // the board's name for its workspace
	dir     string // the workspace it belongs to
	command string
	log     string // workspace-relative
	started time.Time
	by      tools.Call // the conversation and person that started it
	proc    *sandbox.Process
	out     *logWriter
	done    chan struct{}

	mu      sync.Mutex
	state   string // "" while running
	ended   time.Time
	stopped string        // who stopped it, if someone did
	cpu     time.Duration // its processes' CPU time at the last look
	// why is why firstmate stopped it (the workspace over its quota, the
	// channel's CPU time spent, the guard's refusal), if it did; refused
	// says the guard refused it, so the guard hears of the end.
	why     string
	refused bool
	// undecided is set while the guard fails to decide (not refuses), so
	// that an outage is logged once, not at every beat.
	undecided bool
}

func (j *job) status() (state string, running bool, took time.Duration) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.state == "" {
		return "running", true, time.Since(j.started)
	}
	return j.state, false, j.ended.Sub(j.started)
}

// record is what the board holds of j.
func (j *job) record(owner string) tools.Job {
	j.mu.Lock()
	defer j.mu.Unlock()
	return tools.Job{ID: j.id, Owner: owner, Command: j.command, Log: j.log, Started: j.started,
		Seen: time.Now(), Ended: j.ended, State: j.state, Tail: j.out.lastLines(5), CPU: j.cpu,
		Session: j.by.Session, User: j.by.User, UserName: j.by.UserName}
}

// stopFor stops j for a reason of firstmate's own: the first one given is
// the one its end records.
func (j *job) stopFor(why string, refused bool) {
	j.mu.Lock()
	if j.why == "" {
		j.why, j.refused = why, refused
	}
	j.mu.Unlock()
	j.proc.Kill()
}

// stopping says whether j was told to stop, by firstmate or by someone
// (it may not have ended yet).
func (j *job) stopping() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.why != "" || j.stopped != ""
}

// kill stops j on behalf of by.
func (j *job) kill(by string) {
	j.mu.Lock()
	if j.stopped == "" {
		j.stopped = by
	}
	j.mu.Unlock()
	j.proc.Kill()
}

type jobs struct {
	sb     *sandbox.Sandbox
	limits JobLimits
	quota  *quota // admits jobs and stops those that take the workspace over its quota
	board  tools.JobBoard
	owner  string         // this replica, as the board names it
	guard  tools.JobGuard // nil: every job may run
	log    *slog.Logger
	ctx    context.Context // ends every job at close
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// beating starts beat with the first job: a shell that never starts
	// one (or only describes its tools) runs no goroutine.
	beating sync.Once
	// cpuOf reads the CPU time a job's process tree used: treeCPU, or a
	// test's clock.
	cpuOf func(pid int) time.Duration

	mu    sync.Mutex
	local map[*job]bool // the jobs running on this replica
}

func newJobs(cfg Config, overQuota *quota) *jobs {
	ctx, cancel := context.WithCancel(context.Background())
	js := &jobs{sb: cfg.Sandbox, limits: cfg.Jobs.withDefaults(), quota: overQuota, board: cfg.Board, owner: cfg.Owner,
		guard: cfg.Guard, log: cfg.Logger, ctx: ctx, cancel: cancel, local: map[*job]bool{}, cpuOf: treeCPU}
	if js.board == nil {
		js.board = newMemBoard()
	}
	if js.owner == "" {
		js.owner, _ = os.Hostname()
		js.owner += "#" + strconv.Itoa(os.Getpid())
	}
	if js.log == nil {
		js.log = slog.New(slog.DiscardHandler)
	}
	return js
}

func (js *jobs) close() {
	js.cancel()
	js.wg.Wait()
}

// space is the board's name for ws: its directory's name, which is
// tools.JobSpace of the channel's name (the workspace holds only its
// directory).
func space(ws *tools.Workspace) string { return filepath.Base(ws.Dir()) }

func (js *jobs) lost(j tools.Job) bool {
	return j.Running() && time.Since(j.Seen) > lostAfter*js.limits.Beat
}

// running counts the jobs of a space that run, on any replica.
func (js *jobs) running(all []tools.Job) int {
	n := 0
	for _, j := range all {
		if j.Running() && !js.lost(j) {
			n++
		}
	}
	return n
}

const startDesc = "Start a long-running command (a dev server, a watcher, a long build) in the background, in its own " +
	"sandbox like shell's, detached from this turn. Its output goes to the log file it names in the workspace. " +
	"Use jobs to see how it is doing and stop to end it; to go on when it ends without waiting in this turn, use wait_for_job where it is offered."

type startArgs struct {
	Command string `json:"command" jsonschema:"the command line, run by sh -c in /workspace"`
}

func (js *jobs) start(ctx context.Context, ws *tools.Workspace, a startArgs) (tools.Result, error) {
	if strings.TrimSpace(a.Command) == "" {
		return tools.Result{}, errors.New("command is empty")
	}
	if js.ctx.Err() != nil {
		return tools.Result{}, errors.New("shutting down: no new jobs")
	}
	by, _ := tools.CallFrom(ctx)
	if err := js.mayStart(ctx, tools.Job{Owner: js.owner, Command: a.Command, Started: time.Now(),
		Session: by.Session, User: by.User, UserName: by.UserName}); err != nil {
		return tools.Result{}, err
	}
	dir, sp := ws.Dir(), space(ws)
	adm := js.quota.admit(dir)
	if adm.frozen {
		return tools.Result{}, fmt.Errorf("%w, so no job was started: %s", ErrOverQuota, adm.frozenNote())
	}
	all, err := js.board.Jobs(ctx, sp)
	if err != nil {
		return tools.Result{}, fmt.Errorf("cannot see this channel's jobs, so no job was started: %w", err)
	}
	if js.cpuUsed(all, nil) >= js.limits.CPU {
		return tools.Result{}, fmt.Errorf("%s, so no job was started; it frees up as the day's jobs age past 24 hours", js.cpuSpent())
	}
	running := js.running(all)
	if running >= js.limits.PerChannel {
		return tools.Result{}, fmt.Errorf("this channel already runs %d jobs, its limit; stop one first (see jobs)", running)
	}
	id, err := js.board.NextJobID(ctx, sp)
	if err != nil {
		return tools.Result{}, fmt.Errorf("cannot number the job, so it was not started: %w", err)
	}

	logPath := fmt.Sprintf(".jobs/%d.log", id)
	f, err := ws.Create(logPath)
	if err != nil {
		return tools.Result{}, fmt.Errorf("cannot create the job's log: %w", err)
	}
	out := &logWriter{f: f, max: js.limits.LogSize}
	l := js.sb.Limits()
	l.Timeout = js.limits.Lifetime
	c := sandbox.Command{Dir: dir, Script: a.Command, Limits: l}
	adm.apply(&c) // the largest file it may write is what the workspace has left
	p, err := js.sb.Start(js.ctx, c, out)
	if err != nil {
		f.Close()
		return tools.Result{}, err
	}
	j := &job{id: id, space: sp, dir: dir, command: a.Command, log: logPath, started: time.Now(), by: by, proc: p, out: out, done: make(chan struct{})}
	if err := js.board.PutJob(ctx, sp, j.record(js.owner)); err != nil {
		// A job nobody could see or stop from another replica must not run.
		j.proc.Kill()
		j.proc.Wait()
		out.close()
		return tools.Result{}, fmt.Errorf("cannot record the job, so it was stopped: %w", err)
	}
	js.mu.Lock()
	js.local[j] = true
	js.mu.Unlock()
	js.beating.Do(func() {
		js.wg.Add(1)
		go js.beat()
	})
	js.prune(ctx, sp, all)
	js.wg.Add(2)
	go js.watch(j)
	go js.police(j, adm)

	text := fmt.Sprintf("Started job %d: %s\nIts output goes to %s. It is stopped after %s, or with stop.", id, a.Command, logPath, js.limits.Lifetime)
	if js.sb.Kind() == sandbox.KindHost {
		text = hostWarning + "\n" + text
	}
	return tools.Result{Text: text, Summary: fmt.Sprintf("job %d started: %s", id, oneLine(a.Command, 60))}, nil
}

// watch waits for the job to end, records how, and tells the board.
func (js *jobs) watch(j *job) {
	defer js.wg.Done()
	defer close(j.done)
	res, err := j.proc.Wait()
	j.out.close()
	j.mu.Lock()
	j.ended = time.Now()
	j.cpu = max(j.cpu, res.CPU)
	switch {
	case j.why != "":
		j.state = "stopped: " + j.why
	case j.stopped != "":
		j.state = "stopped"
	case js.ctx.Err() != nil:
		j.state = "ended when firstmate stopped"
	case res.TimedOut:
		j.state = fmt.Sprintf("stopped at its %s lifetime", js.limits.Lifetime)
	case err != nil:
		j.state = "failed: " + err.Error()
	default:
		j.state = res.Status(js.limits.Lifetime)
	}
	refused, why := j.refused, j.why
	j.mu.Unlock()
	// The board must hear of the end even at shutdown, when js.ctx is done;
	// if it cannot, the job shows as lost once its beats stop.
	ctx, cancel := context.WithTimeout(context.Background(), boardWait)
	rec := j.record(js.owner)
	js.board.PutJob(ctx, j.space, rec)
	cancel()
	if refused {
		ctx, cancel := context.WithTimeout(context.Background(), boardWait)
		js.guard.Stopped(ctx, rec, why)
		cancel()
	}
	js.mu.Lock()
	delete(js.local, j)
	js.mu.Unlock()
}

// beat writes this replica's running jobs to the board every Beat, so other
// replicas see their output and that they are alive, and stops those that
// someone asked to stop from another replica, those the guard no longer
// lets run, and all of a channel's once its CPU time is spent.
func (js *jobs) beat() {
	defer js.wg.Done()
	t := time.NewTicker(js.limits.Beat)
	defer t.Stop()
	for {
		select {
		case <-js.ctx.Done():
			return
		case <-t.C:
		}
		js.mu.Lock()
		bySpace := map[string][]*job{}
		for j := range js.local {
			bySpace[j.space] = append(bySpace[j.space], j)
		}
		js.mu.Unlock()
		for sp, mine := range bySpace {
			js.beatSpace(sp, mine)
		}
	}
}

func (js *jobs) beatSpace(sp string, mine []*job) {
	// Before the board: a board that cannot be read must not keep a job
	// running that the guard refuses.
	js.guardJobs(mine)
	ctx, cancel := context.WithTimeout(js.ctx, boardWait)
	defer cancel()
	all, err := js.board.Jobs(ctx, sp)
	if err != nil {
		return // the next beat tries again
	}
	asked := map[int]string{}
	for _, r := range all {
		if r.StopAsked != "" && r.Owner == js.owner {
			asked[r.ID] = r.StopAsked
		}
	}
	for _, j := range mine {
		if cpu := js.cpuOf(j.proc.Pid()); cpu > 0 {
			j.mu.Lock()
			j.cpu = max(j.cpu, cpu)
			j.mu.Unlock()
		}
	}
	spent := js.cpuUsed(all, mine) >= js.limits.CPU
	for _, j := range mine {
		if _, running, _ := j.status(); !running || j.stopping() {
			// Its end is watch's to write: a beat's record of it running
			// could land after it.
			continue
		}
		if by := asked[j.id]; by != "" {
			j.kill(by) // watch writes the end
			continue
		}
		if spent {
			j.stopFor(js.cpuSpent(), false)
			continue
		}
		js.board.PutJob(ctx, sp, j.record(js.owner))
	}
}

// mayStart asks the guard whether the job described by j may start.
func (js *jobs) mayStart(ctx context.Context, j tools.Job) error {
	if js.guard == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, boardWait)
	defer cancel()
	err := js.guard.MayRun(ctx, j)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, tools.ErrNotPermitted):
		return fmt.Errorf("%w, so no job was started", err)
	}
	return fmt.Errorf("cannot check that this channel may run the job, so it was not started: %w", err)
}

// guardJobs asks the guard whether each of mine may still run, and stops
// those it refuses. One that it fails to decide on goes on running.
func (js *jobs) guardJobs(mine []*job) {
	if js.guard == nil {
		return
	}
	for _, j := range mine {
		if _, running, _ := j.status(); !running || j.stopping() {
			continue
		}
		ctx, cancel := context.WithTimeout(js.ctx, boardWait)
		err := js.guard.MayRun(ctx, j.record(js.owner))
		cancel()
		if errors.Is(err, tools.ErrNotPermitted) {
			j.stopFor(err.Error(), true) // watch writes the end and tells the guard
			continue
		}
		j.mu.Lock()
		was := j.undecided
		j.undecided = err != nil
		j.mu.Unlock()
		if err != nil && !was && js.ctx.Err() == nil {
			js.log.Warn("cannot check that a job may still run; it goes on", "space", j.space, "job", j.id, "err", err)
		}
	}
}

// cpuDay is the window the channel's job CPU time is counted over.
const cpuDay = 24 * time.Hour

// cpuUsed is the CPU time of a space's jobs started in the last day: the
// board's figures, with this replica's fresher ones for its own jobs.
func (js *jobs) cpuUsed(all []tools.Job, mine []*job) time.Duration {
	fresh := map[int]time.Duration{}
	for _, j := range mine {
		j.mu.Lock()
		fresh[j.id] = j.cpu
		j.mu.Unlock()
	}
	var sum time.Duration
	for _, r := range all {
		if time.Since(r.Started) > cpuDay {
			continue
		}
		sum += max(r.CPU, fresh[r.ID])
	}
	return sum
}

func (js *jobs) cpuSpent() string {
	return fmt.Sprintf("this channel's jobs used their %s of CPU time for the day", round(js.limits.CPU))
}

// police stops the job as soon as the workspace goes over its quota while
// it runs (quota.guard samples statfs, and walks only near a cap).
func (js *jobs) police(j *job, adm admission) {
	defer js.wg.Done()
	if js.quota.guard(j.done, adm) {
		j.stopFor("it took the workspace over its quota", false)
	}
}

// prune drops a space's oldest ended jobs past keepEnded from the board.
// all is the space's board as start read it, before the new job.
func (js *jobs) prune(ctx context.Context, sp string, all []tools.Job) {
	ended := 0
	for i := len(all) - 1; i >= 0; i-- {
		if all[i].Running() {
			continue
		}
		if ended++; ended > keepEnded {
			js.board.DropJob(ctx, sp, all[i].ID)
		}
	}
}

// mine returns this replica's job id of space sp, if it runs here.
func (js *jobs) mine(sp string, id int) *job {
	js.mu.Lock()
	defer js.mu.Unlock()
	for j := range js.local {
		if j.space == sp && j.id == id {
			return j
		}
	}
	return nil
}

// describe is how jobs and stop name the state of r.
func (js *jobs) describe(r tools.Job) (state string, took time.Duration) {
	switch {
	case !r.Running():
		return r.State, r.Ended.Sub(r.Started)
	case js.lost(r):
		return fmt.Sprintf("lost: its replica (%s) stopped answering %s ago", r.Owner, round(time.Since(r.Seen))), r.Seen.Sub(r.Started)
	case r.Owner != js.owner:
		return "running on " + r.Owner, time.Since(r.Started)
	}
	return "running", time.Since(r.Started)
}

const jobsDesc = "List this channel's background jobs: id, state, how long they ran, the command, and the last lines of their output."

type jobsArgs struct{}

func (js *jobs) list(ctx context.Context, ws *tools.Workspace, _ jobsArgs) (tools.Result, error) {
	sp := space(ws)
	all, err := js.board.Jobs(ctx, sp)
	if err != nil {
		return tools.Result{}, fmt.Errorf("cannot list this channel's jobs: %w", err)
	}
	if len(all) == 0 {
		return tools.Result{Text: "No background jobs in this channel.", Summary: "no jobs"}, nil
	}
	var b strings.Builder
	running := 0
	for _, r := range all {
		state, took := js.describe(r)
		tail := r.Tail
		if j := js.mine(sp, r.ID); j != nil {
			// Fresher than the board's, which is a beat old.
			tail = j.out.lastLines(5)
			state, _, took = j.status()
		}
		if r.Running() && !js.lost(r) {
			running++
		}
		fmt.Fprintf(&b, "job %d · %s · %s · %s · log %s\n", r.ID, state, round(took), oneLine(r.Command, 120), r.Log)
		for _, line := range tail {
			fmt.Fprintf(&b, "    %s\n", line)
		}
	}
	return tools.Result{Text: b.String(), Summary: fmt.Sprintf("%d jobs, %d running", len(all), running)}, nil
}

const stopDesc = "Stop a background job of this channel, and every process it started."

type stopArgs struct {
	ID string `json:"id" jsonschema:"the job's id, as jobs and start show it"`
}

func (js *jobs) stop(ctx context.Context, ws *tools.Workspace, a stopArgs) (tools.Result, error) {
	id, err := tools.ParseJobID(a.ID)
	if err != nil {
		return tools.Result{}, err
	}
	sp := space(ws)
	if j := js.mine(sp, id); j != nil {
		return js.stopHere(ctx, j)
	}
	all, err := js.board.Jobs(ctx, sp)
	if err != nil {
		return tools.Result{}, fmt.Errorf("cannot see this channel's jobs: %w", err)
	}
	var r *tools.Job
	for i := range all {
		if all[i].ID == id {
			r = &all[i]
		}
	}
	switch {
	case r == nil:
		return tools.Result{}, fmt.Errorf("this channel has no job %d; jobs lists them", id)
	case !r.Running():
		return tools.Result{Text: fmt.Sprintf("Job %d had already ended: %s.", id, r.State), Summary: fmt.Sprintf("job %d had ended", id)}, nil
	case js.lost(*r):
		// Its replica is gone, and its processes went with it.
		state, _ := js.describe(*r)
		r.State, r.Ended = state, r.Seen
		if err := js.board.PutJob(ctx, sp, *r); err != nil {
			return tools.Result{}, err
		}
		return tools.Result{Text: fmt.Sprintf("Job %d is not running: %s; its processes ended with it.", id, state),
			Summary: fmt.Sprintf("job %d was lost", id)}, nil
	}
	return js.stopThere(ctx, sp, *r)
}

// stopHere stops a job that runs on this replica.
func (js *jobs) stopHere(ctx context.Context, j *job) (tools.Result, error) {
	if state, r, _ := j.status(); !r {
		return tools.Result{Text: fmt.Sprintf("Job %d had already ended: %s.", j.id, state), Summary: fmt.Sprintf("job %d had ended", j.id)}, nil
	}
	j.kill(js.owner)
	select {
	case <-j.done:
	case <-ctx.Done():
		return tools.Result{}, ctx.Err()
	}
	_, _, took := j.status()
	return tools.Result{Text: fmt.Sprintf("Stopped job %d after %s.", j.id, round(took)), Summary: fmt.Sprintf("job %d stopped", j.id)}, nil
}

// stopThere asks the replica that runs r to stop it, and waits a few beats
// for it to say the job ended.
func (js *jobs) stopThere(ctx context.Context, sp string, r tools.Job) (tools.Result, error) {
	if err := js.board.AskStop(ctx, sp, r.ID, js.owner); err != nil {
		return tools.Result{}, fmt.Errorf("cannot ask %s to stop job %d: %w", r.Owner, r.ID, err)
	}
	wait := time.NewTimer(3*js.limits.Beat + boardWait)
	defer wait.Stop()
	poll := time.NewTicker(min(js.limits.Beat/4, 250*time.Millisecond))
	defer poll.Stop()
	for {
		select {
		case <-ctx.Done():
			return tools.Result{}, ctx.Err()
		case <-wait.C:
			return tools.Result{Text: fmt.Sprintf("Asked %s, the replica running job %d, to stop it; it has not confirmed yet. jobs shows when it has.", r.Owner, r.ID),
				Summary: fmt.Sprintf("job %d: stop asked", r.ID)}, nil
		case <-poll.C:
		}
		all, err := js.board.Jobs(ctx, sp)
		if err != nil {
			continue
		}
		for _, now := range all {
			if now.ID == r.ID && !now.Running() {
				return tools.Result{Text: fmt.Sprintf("Stopped job %d (it ran on %s) after %s.", r.ID, r.Owner, round(now.Ended.Sub(now.Started))),
					Summary: fmt.Sprintf("job %d stopped", r.ID)}, nil
			}
		}
	}
}

// logWriter writes a job's output to its log, starting the file over when
// it reaches max, and keeps the last lines for jobs to show.
type logWriter struct {
	mu      sync.Mutex
	f       *os.File
	max     int64
	written int64
	last    []byte // the tail of the output, at most lastBytes
}

const lastBytes = 2048

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.last = append(w.last, p...)
	if len(w.last) > lastBytes {
		w.last = append(w.last[:0:0], w.last[len(w.last)-lastBytes:]...)
	}
	if w.f == nil {
		return len(p), nil
	}
	if w.written+int64(len(p)) > w.max {
		note := fmt.Sprintf("[log started over: it reached %s]\n", tools.FormatSize(w.max))
		if err := w.f.Truncate(0); err == nil {
			w.f.Seek(0, 0)
			n, _ := w.f.WriteString(note)
			w.written = int64(n)
		}
	}
	n, err := w.f.Write(p)
	w.written += int64(n)
	if err != nil {
		// A log that cannot be written must not stop the job.
		w.f.Close()
		w.f = nil
	}
	return len(p), nil
}

func (w *logWriter) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f != nil {
		w.f.Close()
		w.f = nil
	}
}

func (w *logWriter) lastLines(n int) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	lines := strings.Split(strings.TrimRight(string(bytes.ToValidUTF8(w.last, []byte("?"))), "\n"), "\n")
	if len(lines) == 1 && lines[0] == "" {
		return nil
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	for i, l := range lines {
		lines[i] = oneLine(l, 200)
	}
	return lines
}
