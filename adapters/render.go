package adapters

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/firstmate/firstmate/agent"
)

// Timings of what people see, the same on every platform.
const (
	// refreshEdits is how many edit intervals a progress message (or a
	// draft) that shows a running tool goes before its timer is brought up
	// to date; drafts also fade after 30 s without one.
	refreshEdits = 5
	// answerTries bounds the attempts to post one part of an answer when
	// the platform fails for another reason than a rate limit.
	answerTries = 3
	// livePending marks a live answer that is still being written.
	livePending = " …"
	// minRetry is the least wait after a 429, for a platform that asks for
	// none: a refused call is never tried again in a spin.
	minRetry = 100 * time.Millisecond
)

// Renderer shows turns on surfaces. It is the one implementation, for every
// platform, of what a person sees of a turn: a sign of life, one progress
// message, the answer as it is written, the answer, files, errors and an
// end mark.
//
// Each turn has one writer goroutine that makes the platform calls in order
// of what matters: the answer (and files, notices, errors) first, then
// keep-alives, the live answer, the end mark, and progress last. Calls are
// paced by the surface's token buckets; decoration leaves tokens in them
// for answers, so an answer goes out at once even right after a progress
// post. A 429 empties the buckets of the call for as long as the platform
// asked. Nothing is dropped but progress edits that a newer one replaced,
// and a progress message that was not posted yet when the answer came.
//
// After the answer the writer still sets the end mark and the progress
// summary; the Renderer owns those writers and Close waits for them.
type Renderer struct {
	mode Mode
	log  *slog.Logger

	ctx    context.Context // the writers'; cancelled by Close when its wait ends
	cancel context.CancelFunc

	mu      sync.Mutex
	closed  bool
	writers int           // writers running
	idle    chan struct{} // closed (and replaced) when the last writer stops
}

// NewRenderer returns a renderer that shows progress as mode says.
func NewRenderer(mode Mode, log *slog.Logger) *Renderer {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Renderer{mode: mode, log: log, ctx: ctx, cancel: cancel, idle: make(chan struct{})}
}

// Thread returns the agent.Thread of one turn (or one command's reply)
// on s. The dispatcher closes it when the turn is over.
func (r *Renderer) Thread(s Surface) agent.Thread {
	return newTurn(r, s)
}

// Close waits until every turn has shown what it still had to (an end
// mark, a progress summary), or until ctx ends, when the rest is
// abandoned. Turns that start after Close show nothing.
func (r *Renderer) Close(ctx context.Context) {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	if r.Wait(ctx) != nil {
		r.cancel()
		r.Wait(context.Background())
	}
	r.cancel()
}

// Wait blocks until no turn has anything left to show, or ctx ends. A
// terminal waits so that a turn's summary line comes before the next
// prompt.
func (r *Renderer) Wait(ctx context.Context) error {
	for {
		r.mu.Lock()
		n, idle := r.writers, r.idle
		r.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-idle:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (r *Renderer) writerDone() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writers--
	if r.writers == 0 {
		close(r.idle)
		r.idle = make(chan struct{})
	}
}

// ErrClosed is what a turn's Emit returns once its renderer is closed.
var ErrClosed = errors.New("renderer closed")

// turn renders one turn. Emit records what happened and wakes the writer,
// which owns every platform call; Emit waits only for the answer (and
// notices and errors) to be shown.
type turn struct {
	r    *Renderer
	s    Surface
	pace Pace
	mode Mode

	wake chan struct{}
	// parked says the writer has no goroutine: it waits for a poke (an
	// Emit, Close, its timer, a bucket's token, the renderer's end) to
	// start one again. A turn that waits on the model holds no stack.
	parked atomic.Bool
	timer  *time.Timer // pokes the writer when its wait is over; the writer's own
	// unwatch stops the renderer's end from poking the writer, once it is
	// done: the renderer outlives its turns.
	unwatch func() bool

	mu   sync.Mutex
	pass pass // the writer's place in its buckets' queues
	// The platform's abilities; one is set to nil for the rest of the turn
	// when it turns out not to work here.
	typer    Typer
	status   Statuser
	drafter  Drafter
	streamer Streamer
	reactor  Reactor
	uploader Uploader
	stepper  Stepper

	running  bool      // the writer runs
	closed   bool      // the dispatcher is done with the turn
	closedAt time.Time // when
	ended    bool      // the answer (or the failure) is known: what is left comes after it
	begun    time.Time
	progress Progress

	sign   signState
	prog   progState
	draft  draftState
	live   liveState
	outbox []*delivery
	end    *Reaction // the mark still to set at the end
}

// signState is the sign of life: typing, a status line, 👀.
type signState struct {
	typingNext time.Time // next renewal of the typing indicator; zero: none
	statusWant string    // the status line to show
	statusShow string    // the status line shown
	statusAt   time.Time // when it was set
	eyes       bool      // 👀 is wanted on the message being answered
	eyesOn     bool      // 👀 is there
}

// keptMessage is a message the writer keeps showing the latest text: the
// progress message, the live answer.
type keptMessage struct {
	id       MessageID // once posted
	shown    string
	editedAt time.Time
}

// progState is the progress message (or the lines of a Stepper).
type progState struct {
	keptMessage
	failed   string    // a text whose post or edit failed: not tried again until it changes
	wanted   bool      // the message should exist: a tool ran, or the turn went on past the sign of life
	appearAt time.Time // the sign of life is due; zero: none
	dropped  bool      // the answer came first: no progress message now
	stepped  int       // calls a Stepper has shown
	summed   bool      // a Stepper's summary line is written
}

// draftState is a Drafter's one draft: progress, then the answer.
type draftState struct {
	shown string
	at    time.Time
}

// liveState is the answer as the model writes it.
type liveState struct {
	written strings.Builder // every step's text, steps a paragraph apart
	step    int             // where the latest step's text starts in written
	first   time.Time       // the first text
	msg     keptMessage     // the live message
	stream  Stream
	sent    int // bytes of written the stream has (or is being sent)
	sentAt  time.Time
	broken  bool // the stream failed: the answer is posted whole
	gone    bool // the live message can no longer be edited
}

func newTurn(r *Renderer, s Surface) *turn {
	t := &turn{r: r, s: s, pace: s.Pace(), mode: r.mode, wake: make(chan struct{}, 1)}
	t.pass.wake = t.poke
	t.typer, _ = s.(Typer)
	t.status, _ = s.(Statuser)
	t.drafter, _ = s.(Drafter)
	t.streamer, _ = s.(Streamer)
	t.reactor, _ = s.(Reactor)
	t.uploader, _ = s.(Uploader)
	t.stepper, _ = s.(Stepper)
	return t
}

func (t *turn) poke() {
	select {
	case t.wake <- struct{}{}:
	default:
	}
	if t.parked.CompareAndSwap(true, false) {
		go t.write(t.r.ctx)
	}
}

// startLocked starts the writer if it is not running.
func (t *turn) startLocked() error {
	if t.running {
		return nil
	}
	t.r.mu.Lock()
	defer t.r.mu.Unlock()
	if t.r.closed {
		return ErrClosed
	}
	t.running = true
	t.r.writers++
	t.unwatch = context.AfterFunc(t.r.ctx, t.poke) // a parked writer sees the end too
	go t.write(t.r.ctx)
	return nil
}

// write runs the writer until it parks or is done; done, the writer is
// the renderer's no more.
func (t *turn) write(ctx context.Context) {
	if t.run(ctx) {
		t.pass.cancel() // the writer's own: no lock
		t.unwatch()
		if t.timer != nil {
			t.timer.Stop()
		}
		t.r.writerDone()
	}
}

// Emit implements agent.Thread.
func (t *turn) Emit(ctx context.Context, ev agent.Event) error {
	t.mu.Lock()
	if err := t.startLocked(); err != nil {
		t.mu.Unlock()
		return err
	}
	now := time.Now()
	var wait *batch
	quiet := false // nothing the writer shows changed: it need not look
	switch ev := ev.(type) {
	case agent.TurnStarted:
		t.progress.Apply(ev, now)
		t.begin(now)
	case agent.ToolStarted, agent.ApprovalNeeded:
		if t.begun.IsZero() {
			t.begin(now)
		}
		t.progress.Apply(ev, now)
		t.prog.wanted = true
		if ts, ok := ev.(agent.ToolStarted); ok {
			t.sign.statusWant = "is running " + oneLine(ts.Name, 40) + "…"
		} else {
			t.sign.statusWant = "is waiting for approval…"
		}
		// The next step's text is a new paragraph of the live answer.
		if t.live.written.Len() > t.live.step {
			t.live.written.WriteString("\n\n")
			t.live.step = t.live.written.Len()
		}
	case agent.ToolFinished:
		// Shown with the next edit the pace allows; a turn that answers
		// before then shows it in its summary.
		t.progress.Apply(ev, now)
	case agent.Queued:
		// The person sees that the model is busy, and how busy: in the
		// progress message and the status line, as the pace allows.
		if t.progress.Apply(ev, now) && ev.Ahead > 0 {
			if t.begun.IsZero() {
				t.begin(now)
			}
			t.prog.wanted = true
			t.sign.statusWant = "is waiting for the model (" + plural(ev.Ahead, "conversation", "conversations") + " ahead)…"
		}
	case agent.TextDelta:
		changed := t.progress.Apply(ev, now)
		if ev.Text != "" && !t.ended {
			first := t.live.first.IsZero()
			if first {
				t.live.first = now
			}
			step := t.live.written.Len() == t.live.step
			t.live.written.WriteString(ev.Text)
			// A model streams its answer a few characters at a time. Until
			// the answer shows as it is written (LiveAfter), the writer
			// needs to hear only of the first piece of each step.
			quiet = !changed && !first && !step && now.Before(t.live.first.Add(t.pace.LiveAfter))
		}
	case agent.Answer:
		t.progress.Apply(ev, now)
		wait = t.answer(ctx, ev)
	case agent.Failed:
		t.progress.Apply(ev, now)
		wait = t.fail(ctx, ev)
	case agent.Notice:
		text := Text{Body: ev.Text}
		if ev.Policy != nil && t.asks() {
			text = PolicyScreen(ev.Text, *ev.Policy)
		}
		wait = t.deliver(ctx, []*delivery{{parts: t.s.Format(text)}})
	}
	if ev, ok := ev.(agent.ApprovalNeeded); ok && ev.ID != "" {
		wait = t.ask(ctx, ev)
	}
	t.mu.Unlock()
	if !quiet {
		t.poke()
	}
	if wait == nil {
		return nil
	}
	select {
	case <-wait.done:
		t.mu.Lock()
		defer t.mu.Unlock()
		return wait.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close implements io.Closer: the dispatcher is done with the turn. The
// writer finishes what is left (an end mark, a progress summary) and stops.
func (t *turn) Close() error {
	t.mu.Lock()
	t.closed, t.closedAt = true, time.Now()
	if !t.ended && t.running {
		// Closed without an answer (the lease was lost; another worker
		// answers): stop the keep-alives and end an open stream.
		t.endLocked()
		if t.streaming() {
			t.deliver(context.WithoutCancel(t.r.ctx), []*delivery{{stopLive: true, streamed: true}})
		}
	}
	t.mu.Unlock()
	t.poke()
	return nil
}

// begin sets up the sign of life.
func (t *turn) begin(now time.Time) {
	t.begun = now
	switch {
	case t.status != nil:
		t.sign.statusWant = "is working on it…"
	case t.typer != nil:
		t.sign.typingNext = now
	case t.mode == ModeOff && t.reactor != nil:
		t.sign.eyes = true
	}
	if t.status == nil && t.typer == nil && t.pace.SignOfLife > 0 {
		t.prog.appearAt = now.Add(t.pace.SignOfLife)
	}
}

// asks reports whether the surface shows buttons.
func (t *turn) asks() bool {
	a, ok := t.s.(Asker)
	return ok && a.ShowsButtons()
}

// ask ends the turn with an approval question and its buttons: the turn
// waits for nobody, and the click, whoever receives it, replaces the
// question with its outcome (HandleClick). A surface without buttons
// shows the question, and the person answers it as that surface lets
// them (the terminal reads a line).
func (t *turn) ask(ctx context.Context, ev agent.ApprovalNeeded) *batch {
	t.endLocked()
	_, typed := t.s.(TypedAnswers)
	text := ApprovalText(ev)
	if typed {
		text = approvalText(ev, math.MaxInt)
	}
	if !t.asks() {
		text.Buttons = nil
		if !typed {
			text.Body += " (This chat cannot show buttons, so it cannot be approved here.)"
		}
	}
	parts := t.s.Format(text)
	parts[0].Reply = true
	ds := []*delivery{{parts: parts, stopLive: t.streaming()}}
	if f, ok := ApprovalFile(ev); ok && !typed {
		ds = append(ds, &delivery{file: &f})
	}
	return t.deliver(ctx, ds)
}

func (t *turn) plain(text string) []Part {
	return t.s.Format(Text{Body: text})
}

// deliver queues ds as one batch and returns it.
func (t *turn) deliver(ctx context.Context, ds []*delivery) *batch {
	b := &batch{left: len(ds), done: make(chan struct{})}
	for _, d := range ds {
		d.ctx, d.batch = ctx, b
	}
	t.outbox = append(t.outbox, ds...)
	if len(ds) == 0 {
		close(b.done)
	} else if ctx.Done() != nil {
		// A delivery whose Emit gave up leaves its bucket's queue at once,
		// not when its turn for a token comes.
		b.stop = context.AfterFunc(ctx, t.poke)
	}
	return b
}

// run is the writer: it makes the turn's platform calls one at a time, the
// most urgent first, until the turn is closed and nothing is left (done),
// or until it has nothing to do before a poke: then it parks, its timer
// armed for what comes due, and its goroutine ends.
func (t *turn) run(ctx context.Context) (done bool) {
	for {
		if err := ctx.Err(); err != nil {
			t.mu.Lock()
			t.abandonLocked(err)
			t.mu.Unlock()
			return true
		}
		t.mu.Lock()
		act, wait := t.next(time.Now())
		if act == nil && wait == 0 && t.closed {
			t.abandonLocked(ErrClosed)
			t.mu.Unlock()
			return true
		}
		t.mu.Unlock()
		if act != nil {
			act(ctx)
			continue
		}
		if wait > 0 && wait < paced {
			if t.timer == nil {
				t.timer = time.AfterFunc(wait, t.poke)
			} else {
				t.timer.Reset(wait)
			}
		}
		t.parked.Store(true)
		// A poke between the look above and parking: its wake is here.
		select {
		case <-t.wake:
			if t.parked.CompareAndSwap(true, false) {
				continue
			}
			return false // the poke started the writer again already
		default:
			return false
		}
	}
}

// abandonLocked fails what is still queued: the writer stops.
func (t *turn) abandonLocked(err error) {
	for _, d := range t.outbox {
		d.batch.finish(err)
	}
	t.outbox = nil
}

// paced is the wait of a call whose pass waits in its buckets' queues: the
// bucket that gives it its last token wakes the writer.
const paced = time.Duration(math.MaxInt64)

// next returns the next call to make, or how long until one may be made (0
// and no call: nothing to do until Emit or Close wakes the writer; paced:
// until a bucket does).
func (t *turn) next(now time.Time) (func(context.Context), time.Duration) {
	t.pass.begin()
	act, wait := t.pick(now)
	if act == nil {
		t.pass.end()
	}
	return act, wait
}

// pick is next's choice, most urgent first.
func (t *turn) pick(now time.Time) (func(context.Context), time.Duration) {
	w := waiter{}
	// What a person must get comes first.
	for len(t.outbox) > 0 {
		d := t.outbox[0]
		if err := d.ctx.Err(); err != nil {
			t.outbox = t.outbox[1:]
			d.batch.finish(err)
			continue
		}
		act, wait := t.nextDelivery(d, now)
		if act != nil {
			return act, 0
		}
		w.at(wait)
		break
	}
	// Keep-alives use no message budget: they go even while an answer
	// waits for a token.
	act, wait := t.nextSign(now)
	if act != nil {
		return act, 0
	}
	w.at(wait)
	if len(t.outbox) > 0 {
		return nil, w.d
	}
	if t.ended && t.end != nil {
		mark := *t.end
		t.end = nil
		return func(ctx context.Context) { t.react(ctx, mark) }, 0
	}
	for _, step := range []func(time.Time) (func(context.Context), time.Duration){t.nextLive, t.nextProgress} {
		act, wait := step(now)
		if act != nil {
			return act, 0
		}
		if t.closed {
			// Tidying up after the answer (a progress summary) waits for a
			// budget that many turns share (Slack's edits, per workspace):
			// after a while the message is left as it is rather than
			// holding this turn, and the budget, any longer.
			left := t.closedAt.Add(tidyPatience).Sub(now)
			queued := wait == paced
			if queued {
				wait = t.pass.eta()
			}
			if left <= 0 || wait > left {
				if queued {
					t.pass.cancel()
				}
				continue
			}
			if queued {
				// Woken by the bucket, or at the end of its patience if
				// answers keep coming first.
				wait = left
			}
		}
		w.at(wait)
	}
	return nil, w.d
}

// tidyPatience is how long a finished turn's writer waits for a token to
// tidy up (a progress summary) before it leaves the message as it is.
const tidyPatience = 5 * time.Second

// waiter keeps the soonest of several waits.
type waiter struct{ d time.Duration }

func (w *waiter) at(d time.Duration) {
	if d > 0 && (w.d == 0 || d < w.d) {
		w.d = d
	}
}
