package shell

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
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
	// QuotaEvery is how often the workspace of a running job is measured;
	// a job that takes it over its quota is stopped (default 10 s).
	QuotaEvery time.Duration
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
	if l.QuotaEvery <= 0 {
		l.QuotaEvery = 10 * time.Second
	}
	return l
}

// keepEnded is how many ended jobs a channel's list keeps.
const keepEnded = 10

type job struct {
	id      int
	dir     string // the workspace it belongs to
	command string
	log     string // workspace-relative
	started time.Time
	proc    *sandbox.Process
	out     *logWriter
	done    chan struct{}

	mu      sync.Mutex
	state   string // "" while running
	ended   time.Time
	stopped bool
	over    bool // stopped for taking the workspace over its quota
}

func (j *job) status() (state string, running bool, took time.Duration) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.state == "" {
		return "running", true, time.Since(j.started)
	}
	return j.state, false, j.ended.Sub(j.started)
}

type jobs struct {
	sb     *sandbox.Sandbox
	limits JobLimits
	quota  func(dir string) bool // measures dir; true if it is over its quota
	ctx    context.Context       // ends every job at close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu   sync.Mutex
	next int
	all  []*job
}

func newJobs(sb *sandbox.Sandbox, l JobLimits, overQuota func(dir string) bool) *jobs {
	ctx, cancel := context.WithCancel(context.Background())
	return &jobs{sb: sb, limits: l, quota: overQuota, ctx: ctx, cancel: cancel}
}

func (js *jobs) close() {
	js.cancel()
	js.wg.Wait()
}

const startDesc = "Start a long-running command (a dev server, a watcher, a long build) in the background, in its own " +
	"sandbox like shell's, detached from this turn. Its output goes to the log file it names in the workspace. " +
	"Use jobs to see how it is doing and stop to end it."

type startArgs struct {
	Command string `json:"command" jsonschema:"the command line, run by sh -c in /workspace"`
}

func (js *jobs) start(_ context.Context, ws *tools.Workspace, a startArgs) (tools.Result, error) {
	if strings.TrimSpace(a.Command) == "" {
		return tools.Result{}, errors.New("command is empty")
	}
	dir := ws.Dir()
	js.mu.Lock()
	if js.ctx.Err() != nil {
		js.mu.Unlock()
		return tools.Result{}, errors.New("shutting down: no new jobs")
	}
	running := 0
	for _, j := range js.all {
		if _, r, _ := j.status(); r && j.dir == dir {
			running++
		}
	}
	if running >= js.limits.PerChannel {
		js.mu.Unlock()
		return tools.Result{}, fmt.Errorf("this channel already runs %d jobs, its limit; stop one first (see jobs)", running)
	}
	js.next++
	id := js.next
	js.mu.Unlock()

	logPath := fmt.Sprintf(".jobs/%d.log", id)
	f, err := ws.Create(logPath)
	if err != nil {
		return tools.Result{}, fmt.Errorf("cannot create the job's log: %w", err)
	}
	out := &logWriter{f: f, max: js.limits.LogSize}
	l := js.sb.Limits()
	l.Timeout = js.limits.Lifetime
	p, err := js.sb.Start(js.ctx, sandbox.Command{Dir: dir, Script: a.Command, Limits: l}, out)
	if err != nil {
		f.Close()
		return tools.Result{}, err
	}
	j := &job{id: id, dir: dir, command: a.Command, log: logPath, started: time.Now(), proc: p, out: out, done: make(chan struct{})}
	js.mu.Lock()
	js.all = append(js.all, j)
	js.prune(dir)
	js.mu.Unlock()
	js.wg.Add(2)
	go js.watch(j)
	go js.police(j)

	text := fmt.Sprintf("Started job %d: %s\nIts output goes to %s. It is stopped after %s, or with stop.", id, a.Command, logPath, js.limits.Lifetime)
	if js.sb.Kind() == sandbox.KindHost {
		text = hostWarning + "\n" + text
	}
	return tools.Result{Text: text, Summary: fmt.Sprintf("job %d started: %s", id, oneLine(a.Command, 60))}, nil
}

// watch waits for the job to end and records how.
func (js *jobs) watch(j *job) {
	defer js.wg.Done()
	defer close(j.done)
	res, err := j.proc.Wait()
	j.out.close()
	j.mu.Lock()
	defer j.mu.Unlock()
	j.ended = time.Now()
	switch {
	case j.over:
		j.state = "stopped: it took the workspace over its quota"
	case j.stopped:
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
}

// police stops the job if the workspace goes over its quota while it runs
// (the shell checks after each command; a job has no end to check after).
func (js *jobs) police(j *job) {
	defer js.wg.Done()
	t := time.NewTicker(js.limits.QuotaEvery)
	defer t.Stop()
	for {
		select {
		case <-j.done:
			return
		case <-t.C:
			if js.quota(j.dir) {
				j.mu.Lock()
				j.over = true
				j.mu.Unlock()
				j.proc.Kill()
				return
			}
		}
	}
}

// prune drops the oldest ended jobs of dir past keepEnded. js.mu is held.
func (js *jobs) prune(dir string) {
	ended := 0
	for i := len(js.all) - 1; i >= 0; i-- {
		j := js.all[i]
		if _, r, _ := j.status(); r || j.dir != dir {
			continue
		}
		if ended++; ended > keepEnded {
			js.all = slices.Delete(js.all, i, i+1)
		}
	}
}

const jobsDesc = "List this channel's background jobs: id, state, how long they ran, the command, and the last lines of their output."

type jobsArgs struct{}

func (js *jobs) list(_ context.Context, ws *tools.Workspace, _ jobsArgs) (tools.Result, error) {
	js.mu.Lock()
	var mine []*job
	for _, j := range js.all {
		if j.dir == ws.Dir() {
			mine = append(mine, j)
		}
	}
	js.mu.Unlock()
	if len(mine) == 0 {
		return tools.Result{Text: "No background jobs in this channel.", Summary: "no jobs"}, nil
	}
	var b strings.Builder
	running := 0
	for _, j := range mine {
		state, r, took := j.status()
		if r {
			running++
		}
		fmt.Fprintf(&b, "job %d · %s · %s · %s · log %s\n", j.id, state, round(took), oneLine(j.command, 120), j.log)
		for _, line := range j.out.lastLines(5) {
			fmt.Fprintf(&b, "    %s\n", line)
		}
	}
	return tools.Result{Text: b.String(), Summary: fmt.Sprintf("%d jobs, %d running", len(mine), running)}, nil
}

const stopDesc = "Stop a background job of this channel, and every process it started."

type stopArgs struct {
	ID string `json:"id" jsonschema:"the job's id, as jobs and start show it"`
}

func (js *jobs) stop(ctx context.Context, ws *tools.Workspace, a stopArgs) (tools.Result, error) {
	id, err := strconv.Atoi(strings.TrimPrefix(strings.TrimSpace(a.ID), "job "))
	if err != nil {
		return tools.Result{}, fmt.Errorf("%q is not a job id; jobs lists them", a.ID)
	}
	js.mu.Lock()
	var j *job
	for _, c := range js.all {
		if c.id == id && c.dir == ws.Dir() {
			j = c
		}
	}
	js.mu.Unlock()
	if j == nil {
		return tools.Result{}, fmt.Errorf("this channel has no job %d; jobs lists them", id)
	}
	if state, r, _ := j.status(); !r {
		return tools.Result{Text: fmt.Sprintf("Job %d had already ended: %s.", id, state), Summary: fmt.Sprintf("job %d had ended", id)}, nil
	}
	j.mu.Lock()
	j.stopped = true
	j.mu.Unlock()
	j.proc.Kill()
	select {
	case <-j.done:
	case <-ctx.Done():
		return tools.Result{}, ctx.Err()
	}
	_, _, took := j.status()
	return tools.Result{Text: fmt.Sprintf("Stopped job %d after %s.", id, round(took)), Summary: fmt.Sprintf("job %d stopped", id)}, nil
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
