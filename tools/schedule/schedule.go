// Package schedule gives the agent work that runs later. `schedule` posts
// a prompt into the thread it was made in, once (in a while, at a time) or
// on a cron, as a new message from the person who asked; `schedules` lists
// them and `unschedule` removes one. `wait` and `wait_for_job` are active
// waits: the turn ends, holding no worker, and the thread is resumed by a
// new turn after a delay or when a background job ends, with the job's
// result.
//
// The tools know no agent: they act through a [Scheduler], which the
// agent implements over its store, for the conversation and the person of
// the call they serve ([tools.CallFrom]).
package schedule

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/firstmate/firstmate/tools"
)

// Kind is what a schedule is.
type Kind string

const (
	Once Kind = "once" // a prompt posted once (in, at)
	Cron Kind = "cron" // a prompt posted on a cron
	Wait Kind = "wait" // a turn's wait: the thread resumes after a delay
	Job  Kind = "job"  // a turn's wait for a background job to end
)

// Plan is a schedule to make.
type Plan struct {
	Kind   Kind
	Prompt string // what is posted (a wait's note)
	When   When   // Once and Cron: when it fires
	// Wait is how long a Wait waits, and the most a Job waits (0: the
	// longest allowed).
	Wait  time.Duration
	Job   int    // Job: the job's ID on the channel's board
	Space string // Job: the board's space (the workspace's)
}

// Entry is a schedule as the tools show it.
type Entry struct {
	ID     string
	Kind   Kind
	Prompt string
	Due    time.Time // its next firing (a job wait: its next look at the job)
	Until  time.Time // a job wait gives up then
	Cron   string
	TZ     string // a cron's time zone, which its fields are read in
	Job    int
	By     string // who made it: a name, else a platform ID
	Mine   bool   // made by the person the list is for
	// Elsewhere marks a schedule of another thread of the channel.
	Elsewhere bool
	Firing    bool // being posted right now
	// Loc is the time zone its times are shown in: its channel's now
	// (a cron made before the channel's changed keeps its own, TZ).
	// UTC if nil.
	Loc *time.Location
}

func (e Entry) loc() *time.Location {
	if e.Loc == nil {
		return time.UTC
	}
	return e.Loc
}

// Line describes e in one line, its times in e.Loc.
func (e Entry) Line() string {
	loc := e.loc()
	var b strings.Builder
	b.WriteString(e.ID + " · ")
	at := e.Due.In(loc).Format(Layout)
	switch e.Kind {
	case Cron:
		fmt.Fprintf(&b, "cron %q (%s), next %s", e.Cron, e.TZ, at)
	case Wait:
		fmt.Fprintf(&b, "a wait, wakes %s", at)
	case Job:
		fmt.Fprintf(&b, "waits for job %d (at most until %s)", e.Job, e.Until.In(loc).Format(Layout))
	default:
		fmt.Fprintf(&b, "once, %s", at)
	}
	if e.Firing {
		b.WriteString(" (firing now)")
	}
	b.WriteString(" · by " + e.By)
	if e.Elsewhere {
		b.WriteString(" · in another thread")
	}
	if p := oneLine(e.Prompt, 80); p != "" {
		fmt.Fprintf(&b, " · %q", p)
	}
	return b.String()
}

// Scheduler keeps schedules. Each call acts for the conversation and the
// person of call; the agent implements it over its store.
type Scheduler interface {
	// Schedule makes a schedule in call's conversation, in call's
	// person's name. An error wrapping ErrBadWhen, or one about the
	// channel's limit, says what to change.
	Schedule(ctx context.Context, call tools.Call, p Plan) (Entry, error)
	// List returns the schedules of call's channel that call's person
	// may see (their own; an admin, all), soonest first, how many others
	// there are, and the channel's time zone.
	List(ctx context.Context, call tools.Call) (Listing, error)
	// Unschedule removes the channel's schedule id if call's person made
	// it or is an admin here.
	Unschedule(ctx context.Context, call tools.Call, id string) (Entry, error)
}

// Config sets up the tools.
type Config struct {
	Scheduler Scheduler
	// Jobs is the background jobs' board that wait_for_job reads; nil
	// leaves that tool out.
	Jobs tools.JobBoard
	// What the descriptions tell the model: the configured time zone
	// (of the channels that set none of their own), the least time
	// between two firings of a cron, and the longest wait.
	TimeZone    string
	MinInterval time.Duration
	MaxWait     time.Duration
}

// Names are the tools this package provides, sorted.
var Names = []string{"schedule", "schedules", "unschedule", "wait", "wait_for_job"}

// Unavailable names the tools called names (of [Names]) as known but not
// offered, and why: policy still governs them.
func Unavailable(why string, names ...string) []tools.SetOption {
	opts := make([]tools.SetOption, len(names))
	for i, n := range names {
		opts[i] = tools.WithUnavailable(n, tools.PowerLater, why)
	}
	return opts
}

// Tools returns the tools over cfg.Scheduler.
func Tools(cfg Config) []tools.Tool {
	if cfg.TimeZone == "" {
		cfg.TimeZone = "UTC"
	}
	t := &toolset{cfg: cfg}
	out := []tools.Tool{
		tools.New("schedule", tools.PowerLater, fmt.Sprintf(scheduleDesc, cfg.TimeZone, Round(cfg.MinInterval)), t.schedule),
		tools.New("schedules", tools.PowerLater, schedulesDesc, t.list),
		tools.New("unschedule", tools.PowerLater, unscheduleDesc, t.unschedule),
		tools.New("wait", tools.PowerLater, fmt.Sprintf(waitDesc, Round(cfg.MaxWait)), t.wait),
	}
	if cfg.Jobs != nil {
		out = append(out, tools.New("wait_for_job", tools.PowerLater, fmt.Sprintf(waitJobDesc, Round(cfg.MaxWait)), t.waitJob))
	}
	return out
}

type toolset struct{ cfg Config }

// call is the call ctx carries; the tools act for a conversation, so one
// made outside the agent loop cannot run.
func call(ctx context.Context) (tools.Call, error) {
	c, ok := tools.CallFrom(ctx)
	if !ok || c.Session == "" {
		return tools.Call{}, errors.New("this tool works only in a conversation")
	}
	return c, nil
}

const scheduleDesc = "Post a prompt into this conversation later, starting a new turn of yours (marked [scheduled by NAME …]): " +
	"a reminder, a check later, recurring work. Give exactly one of in, at or cron (times in the channel's time zone, default %[1]s; " +
	"cron at most once every %[2]s). " +
	"Write the prompt as the instruction you will need then."

type scheduleArgs struct {
	Prompt string `json:"prompt" jsonschema:"what to post: the instruction for the turn it starts"`
	In     string `json:"in,omitempty" jsonschema:"a duration from now, such as 90m, 2h or 1d"`
	At     string `json:"at,omitempty" jsonschema:"a time: RFC 3339, or 2025-03-04 09:00 or 09:00 in the channel's time zone"`
	Cron   string `json:"cron,omitempty" jsonschema:"five cron fields (minute hour day-of-month month day-of-week), such as 0 9 * * 1-5"`
}

func (t *toolset) schedule(ctx context.Context, _ *tools.Workspace, a scheduleArgs) (tools.Result, error) {
	c, err := call(ctx)
	if err != nil {
		return tools.Result{}, err
	}
	if strings.TrimSpace(a.Prompt) == "" {
		return tools.Result{}, errors.New("prompt is empty: say what to post when it fires")
	}
	p := Plan{Kind: Once, Prompt: strings.TrimSpace(a.Prompt), When: When{In: a.In, At: a.At, Cron: a.Cron}}
	if strings.TrimSpace(a.Cron) != "" {
		p.Kind = Cron
	}
	e, err := t.cfg.Scheduler.Schedule(ctx, c, p)
	if err != nil {
		return tools.Result{}, err
	}
	return tools.Result{Text: Made(e), Summary: "scheduled " + e.ID}, nil
}

// Made tells the person (or the model) what a new schedule will do.
func Made(e Entry) string {
	loc := e.loc()
	at := e.Due.In(loc).Format(Layout)
	switch e.Kind {
	case Cron:
		return fmt.Sprintf("Scheduled %s: cron %q (%s), first at %s. It posts %q here each time. Remove it with: unschedule %s", e.ID, e.Cron, e.TZ, at, oneLine(e.Prompt, 200), e.ID)
	case Wait:
		return fmt.Sprintf("Waiting: this conversation resumes at %s (wait %s). End this turn now, saying in a line what you wait for; "+
			"your next turn starts with your note.", at, e.ID)
	case Job:
		return fmt.Sprintf("Waiting for job %d: this conversation resumes when it ends, or at %s at the latest (wait %s). End this turn now, "+
			"saying in a line what you wait for; your next turn starts with the job's state and the last lines of its output.", e.Job, e.Until.In(loc).Format(Layout), e.ID)
	}
	return fmt.Sprintf("Scheduled %s: at %s (in %s) it posts %q here. Remove it with: unschedule %s", e.ID, at, Round(time.Until(e.Due)), oneLine(e.Prompt, 200), e.ID)
}

const schedulesDesc = "List this channel's schedules and waits (id, when, who made them, what they post) and its time zone. " +
	"People see their own; admins see all."

type noArgs struct{}

func (t *toolset) list(ctx context.Context, _ *tools.Workspace, _ noArgs) (tools.Result, error) {
	c, err := call(ctx)
	if err != nil {
		return tools.Result{}, err
	}
	l, err := t.cfg.Scheduler.List(ctx, c)
	if err != nil {
		return tools.Result{}, err
	}
	return tools.Result{Text: l.String(), Summary: fmt.Sprintf("%d schedules", len(l.Entries))}, nil
}

// Listing is what a person may see of a channel's schedules.
type Listing struct {
	Entries []Entry // theirs; an admin's, all
	Others  int     // how many more there are, by other people
	// Loc is the channel's time zone: crons made now and times written
	// without an offset are read in it. UTC if nil.
	Loc *time.Location
}

// String describes the entries, one a line, how many others there are,
// and the channel's time zone.
func (l Listing) String() string {
	var b strings.Builder
	if len(l.Entries) == 0 {
		b.WriteString("No schedules")
		if l.Others > 0 {
			b.WriteString(" of yours")
		}
		b.WriteString(" in this channel.")
	}
	for i, e := range l.Entries {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.Line())
	}
	if l.Others > 0 {
		fmt.Fprintf(&b, "\n(and %d by other people, which only they and admins see)", l.Others)
	}
	loc := l.Loc
	if loc == nil {
		loc = time.UTC
	}
	fmt.Fprintf(&b, "\nThis channel's time zone: %s.", loc)
	return b.String()
}

const unscheduleDesc = "Remove a schedule or a wait of this channel, by its id (schedules lists them). Its maker or an admin can."

type unscheduleArgs struct {
	ID string `json:"id" jsonschema:"the schedule's id, as schedule and schedules show it"`
}

func (t *toolset) unschedule(ctx context.Context, _ *tools.Workspace, a unscheduleArgs) (tools.Result, error) {
	c, err := call(ctx)
	if err != nil {
		return tools.Result{}, err
	}
	e, err := t.cfg.Scheduler.Unschedule(ctx, c, strings.TrimSpace(a.ID))
	if err != nil {
		return tools.Result{}, err
	}
	return tools.Result{Text: "Removed " + e.Line(), Summary: "unscheduled " + e.ID}, nil
}

const waitDesc = "Check back later without holding anything up: this conversation resumes with a new turn of yours after the " +
	"duration (at most %s), starting with your note. Then end your turn with a line saying what you wait for."

type waitArgs struct {
	Duration string `json:"duration" jsonschema:"how long to wait, such as 10m or 2h"`
	Note     string `json:"note,omitempty" jsonschema:"what to do when woken: your next turn starts with it"`
}

func (t *toolset) wait(ctx context.Context, _ *tools.Workspace, a waitArgs) (tools.Result, error) {
	c, err := call(ctx)
	if err != nil {
		return tools.Result{}, err
	}
	d, err := ParseDuration(a.Duration)
	if err != nil {
		return tools.Result{}, fmt.Errorf("%w: duration: %v", ErrBadWhen, err)
	}
	e, err := t.cfg.Scheduler.Schedule(ctx, c, Plan{Kind: Wait, Wait: d, Prompt: strings.TrimSpace(a.Note)})
	if err != nil {
		return tools.Result{}, err
	}
	return tools.Result{Text: Made(e), Summary: "waiting " + Round(d)}, nil
}

const waitJobDesc = "Resume when a background job (see start) ends, without holding anything up: a new turn of yours starts " +
	"with the job's state, its last lines of output and your note (after max at the latest, at most %s). Then end your turn with a " +
	"line saying what you wait for."

type waitJobArgs struct {
	ID   string `json:"id" jsonschema:"the job's id, as start and jobs show it"`
	Note string `json:"note,omitempty" jsonschema:"what to do when woken: your next turn starts with it"`
	Max  string `json:"max,omitempty" jsonschema:"the longest to wait, such as 2h; default the most allowed"`
}

func (t *toolset) waitJob(ctx context.Context, ws *tools.Workspace, a waitJobArgs) (tools.Result, error) {
	c, err := call(ctx)
	if err != nil {
		return tools.Result{}, err
	}
	id, err := tools.ParseJobID(a.ID)
	if err != nil {
		return tools.Result{}, err
	}
	var most time.Duration
	if strings.TrimSpace(a.Max) != "" {
		if most, err = ParseDuration(a.Max); err != nil {
			return tools.Result{}, fmt.Errorf("%w: max: %v", ErrBadWhen, err)
		}
	}
	// The shell names a workspace's board after its directory.
	space := filepath.Base(ws.Dir())
	all, err := t.cfg.Jobs.Jobs(ctx, space)
	if err != nil {
		return tools.Result{}, fmt.Errorf("cannot see this channel's jobs: %w", err)
	}
	var job *tools.Job
	for i := range all {
		if all[i].ID == id {
			job = &all[i]
		}
	}
	now := time.Now()
	switch {
	case job == nil:
		return tools.Result{}, fmt.Errorf("this channel has no job %d; jobs lists them", id)
	case Ended(*job, now):
		// Nothing to wait for: the result is here now.
		return tools.Result{Text: "No need to wait: " + JobReport(*job, now), Summary: fmt.Sprintf("job %d had ended", id)}, nil
	}
	e, err := t.cfg.Scheduler.Schedule(ctx, c, Plan{Kind: Job, Job: id, Space: space, Wait: most, Prompt: strings.TrimSpace(a.Note)})
	if err != nil {
		return tools.Result{}, err
	}
	return tools.Result{Text: Made(e), Summary: fmt.Sprintf("waiting for job %d", id)}, nil
}

// LostAfter is how long a running job's replica may go without a word
// before a wait takes the job for lost (its replica died, and the job with
// it). The shell writes every few seconds.
const LostAfter = 2 * time.Minute

// Ended reports whether a wait for j is over: j ended, or its replica
// stopped answering.
func Ended(j tools.Job, now time.Time) bool {
	return !j.Running() || now.Sub(j.Seen) > LostAfter
}

// JobReport says how j stands, with the last lines of its output: what a
// turn woken by its end starts with.
func JobReport(j tools.Job, now time.Time) string {
	var b strings.Builder
	switch {
	case !j.Running():
		fmt.Fprintf(&b, "job %d ended: %s, after %s", j.ID, j.State, Round(j.Ended.Sub(j.Started)))
	case now.Sub(j.Seen) > LostAfter:
		fmt.Fprintf(&b, "job %d was lost: its replica (%s) stopped answering %s ago, and its processes ended with it", j.ID, j.Owner, Round(now.Sub(j.Seen)))
	default:
		fmt.Fprintf(&b, "job %d is still running, for %s", j.ID, Round(now.Sub(j.Started)))
	}
	fmt.Fprintf(&b, ". Command: %s. Log: %s.", oneLine(j.Command, 200), j.Log)
	if len(j.Tail) > 0 {
		b.WriteString(" Last lines of its output:")
		for _, l := range j.Tail {
			b.WriteString("\n    " + l)
		}
	} else {
		b.WriteString(" It printed nothing (or nothing recently).")
	}
	return b.String()
}

func oneLine(s string, n int) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i] + " …"
	}
	if r := []rune(s); len(r) > n {
		s = string(r[:n-1]) + "…"
	}
	return s
}
