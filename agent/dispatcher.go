package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/firstmate/firstmate/tools"
)

var (
	// ErrStopped is the cause of a turn cancelled by the stop command.
	ErrStopped = errors.New("stopped from the thread")
	// ErrShutdown is the cause of a turn cancelled because firstmate is
	// shutting down and the grace period ran out, and what Submit returns
	// once shutdown began (the adapter must not acknowledge the message;
	// the platform delivers it again, to this process after a restart or
	// to another replica).
	ErrShutdown = errors.New("shutting down")
)

// DispatcherConfig wires a Dispatcher. Store, Loop and WorkspaceDir are
// required.
type DispatcherConfig struct {
	Store Store
	Loop  *Loop
	Tools *tools.Set
	// Policy is the configured tool policy every channel starts from;
	// admins' rules per channel are in the store.
	Policy PolicyDefaults
	// Access is each platform's access rule, by SessionKey.Platform; a
	// platform without one (the terminal) is open.
	Access map[string]Access
	// Admins reports whether a user is one of the bot's admins.
	Admins          func(platform, userID string) bool
	Budgets         Budgets
	ApprovalTimeout time.Duration // default 5m
	PairingTTL      time.Duration // how long a pairing code is valid; default 1h
	WorkspaceDir    string        // one sub-directory per channel
	Workspace       []tools.WorkspaceOption
	Platforms       map[string]Platform // by SessionKey.Platform
	Workers         int                 // sessions run in parallel; default 8
	LeaseTTL        time.Duration       // default 15s, renewed every third of it
	// Replica names this process among replicas (its host or pod, and
	// port): with the store's boot counter it makes the lease owner, so a
	// restarted replica takes its own leases back at once. Empty: a random
	// owner.
	Replica string
	// Owner, if set, is the lease owner itself ([Owner] of the replica and
	// a boot the caller took), and Replica is not used.
	Owner string
	// ReadyEvery is how often the store is asked for sessions nobody
	// holds (a dead replica's, a turn handed back); default 2s.
	ReadyEvery time.Duration
	Observer   Observer      // nil: none
	Grace      time.Duration // how long shutdown waits for running turns; default 10s
	// ContextTokens is the history budget sent to the model (estimated);
	// older whole turns are left out. 0 means no limit.
	ContextTokens int
	// MaxInputBytes caps the text of one turn's input; default 64 KiB.
	MaxInputBytes int
	// MaxAttachBytes is the largest file an answer attaches; default
	// 50 MiB (Telegram's bot upload limit).
	MaxAttachBytes int64
	ModelName      string // shown by the status command
	Logger         *slog.Logger

	// Scheduler, if set, keeps schedules (the schedule commands, and the
	// tools of package tools/schedule built over it); Run posts them when
	// they are due. nil: no scheduling.
	Scheduler *Scheduler
}

// Dispatcher turns inbound messages into turns: it records and deduplicates
// each message, answers chat commands, and runs one turn per session at a
// time (a lease in the store), different sessions in parallel on a bounded
// number of workers. Messages that arrive while a session's turn runs wait
// in its mailbox and form the next turn.
type Dispatcher struct {
	cfg   DispatcherConfig
	owner string
	log   *slog.Logger

	mu       sync.Mutex
	cond     *sync.Cond
	sessions map[SessionKey]*session // queued or running in this process
	queue    []SessionKey
	closing  bool
	idle     chan struct{}              // closed (and replaced) when a session goes idle
	retries  map[SessionKey]*time.Timer // sessions to look at again later

	// Workers: nworkers run, parked of them wait for a person (an
	// approval); while parked, another worker takes their place.
	workers  sync.WaitGroup
	workCtx  context.Context
	nworkers int
	parked   int
	// approvals waiting in this process, by ID: Decide wakes them.
	approvals map[string]chan struct{}

	replies sync.WaitGroup // command replies in flight; Add only under mu while !closing
}

type session struct {
	running bool
	again   bool // a message arrived after the running turn claimed its mailbox
	held    bool // queued again with its lease kept: messages wait (see work)
	stop    bool // stop was asked before the turn could be cancelled
	claimed int  // mailbox entries the running turn answers
	started time.Time
	cancel  context.CancelCauseFunc
}

// retryDelay is how long a session waits before it is looked at again
// after its lease was held elsewhere or the store failed.
func (d *Dispatcher) retryDelay() time.Duration { return d.cfg.LeaseTTL / 3 }

// NewDispatcher returns a dispatcher; call Run to start its workers.
func NewDispatcher(cfg DispatcherConfig) *Dispatcher {
	if cfg.Workers <= 0 {
		cfg.Workers = 8
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = 15 * time.Second
	}
	if cfg.ReadyEvery <= 0 {
		cfg.ReadyEvery = 2 * time.Second
	}
	if cfg.Grace <= 0 {
		cfg.Grace = 10 * time.Second
	}
	if cfg.MaxAttachBytes <= 0 {
		cfg.MaxAttachBytes = 50 << 20
	}
	if cfg.MaxInputBytes <= 0 {
		cfg.MaxInputBytes = 64 << 10
	}
	if cfg.ApprovalTimeout <= 0 {
		cfg.ApprovalTimeout = 5 * time.Minute
	}
	if cfg.PairingTTL <= 0 {
		cfg.PairingTTL = time.Hour
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	d := &Dispatcher{cfg: cfg, owner: newOwnerID(), log: log, sessions: map[SessionKey]*session{},
		idle: make(chan struct{}), retries: map[SessionKey]*time.Timer{}, approvals: map[string]chan struct{}{}}
	d.cond = sync.NewCond(&d.mu)
	if cfg.Scheduler != nil {
		cfg.Scheduler.bind(d)
	}
	return d
}

// newOwnerID names this process as a lease owner: readable in Redis, and
// unique even for two processes with one PID in different containers.
func newOwnerID() string {
	host, _ := os.Hostname()
	var b [6]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// Submit records in and returns once it is durable and deduplicated; only
// then may the adapter acknowledge the platform. The turn runs later, on a
// worker. Messages that are not addressed to the bot are ignored. After
// shutdown began it returns ErrShutdown and records nothing.
func (d *Dispatcher) Submit(ctx context.Context, in Inbound) error {
	if err := in.Validate(); err != nil {
		return err
	}
	if d.isClosing() {
		return ErrShutdown
	}
	if !in.Addressed {
		if !in.FollowUp {
			return nil
		}
		active, err := d.cfg.Store.Active(ctx, in.Key)
		if err != nil {
			return fmt.Errorf("check thread: %w", err)
		}
		if !active {
			return nil // people talking in a thread the bot is not part of
		}
		in.Addressed = true
	}
	if ok, err := d.admit(ctx, in); err != nil || !ok {
		if err != nil {
			return fmt.Errorf("check access: %w", err)
		}
		return nil // told once; nothing of theirs is kept
	}
	if over, err := d.overRate(ctx, in); err != nil || over {
		if err != nil {
			return fmt.Errorf("count messages: %w", err)
		}
		return nil
	}
	if len(in.Files) == 0 {
		if cmd, args, ok := ParseCommand(in.Text); ok {
			return d.command(ctx, cmd, args, in)
		}
	}
	added, err := d.cfg.Store.Enqueue(ctx, in)
	if err != nil {
		return fmt.Errorf("record message: %w", err)
	}
	if added {
		d.schedule(in.Key)
	}
	return nil
}

func (d *Dispatcher) isClosing() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.closing
}

// Stop cancels the session's turn if this process runs it or is about to
// (queued, or between claiming its mailbox and starting).
func (d *Dispatcher) Stop(key SessionKey) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.sessions[key]
	if s == nil {
		return false
	}
	if s.cancel != nil {
		s.cancel(ErrStopped)
	} else {
		s.stop = true
	}
	return true
}

// WaitIdle blocks until this process has nothing queued or running for key.
func (d *Dispatcher) WaitIdle(ctx context.Context, key SessionKey) error {
	for {
		d.mu.Lock()
		_, busy := d.sessions[key]
		ch := d.idle
		d.mu.Unlock()
		if !busy {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Run picks up the sessions that have messages waiting (recorded before a
// restart), starts the workers and blocks until ctx is done. Then it stops
// taking work, gives running turns the grace period to finish, cancels the
// rest and returns when every worker and command reply has stopped.
func (d *Dispatcher) Run(ctx context.Context) error {
	if d.cfg.Owner != "" {
		d.mu.Lock()
		d.owner = d.cfg.Owner
		d.mu.Unlock()
	} else if d.cfg.Replica != "" {
		if boot, err := d.cfg.Store.Boot(ctx, d.cfg.Replica); err != nil {
			d.log.Error("count this replica's boots; its leases from before a crash expire on their own", "err", err)
		} else {
			d.mu.Lock()
			d.owner = Owner(d.cfg.Replica, boot)
			d.mu.Unlock()
		}
	}
	d.log.Info("dispatcher started", "owner", d.ownerID(), "workers", d.cfg.Workers)
	turnCtx, cancelTurns := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancelTurns(nil)
	var watcher sync.WaitGroup
	defer watcher.Wait()
	watcher.Go(func() { d.watchReady(ctx) })
	if d.cfg.Scheduler != nil {
		watcher.Go(func() { d.watchSchedules(ctx, d.cfg.Scheduler) })
	}
	d.mu.Lock()
	d.workCtx = turnCtx
	for range d.cfg.Workers {
		d.nworkers++
		d.workers.Go(func() { d.work(turnCtx) })
	}
	d.mu.Unlock()
	if waiting, err := d.cfg.Store.Waiting(ctx); err != nil {
		d.log.Error("list sessions with waiting messages", "err", err)
	} else {
		if len(waiting) > 0 {
			d.log.Info("picking up waiting sessions", "count", len(waiting))
		}
		for _, key := range waiting {
			d.schedule(key)
		}
	}
	<-ctx.Done()
	d.mu.Lock()
	d.closing = true
	for key, t := range d.retries {
		t.Stop()
		delete(d.retries, key)
	}
	// Sessions queued again with their lease kept (see work) will not be
	// taken from the queue now: let their leases go, so that another
	// replica takes them at once.
	var held []SessionKey
	for key, s := range d.sessions {
		if s.held && !s.running {
			held = append(held, key)
		}
	}
	d.cond.Broadcast()
	d.mu.Unlock()
	for _, key := range held {
		d.abandon(context.WithoutCancel(ctx), key, d.log.With("session", key.String()))
	}

	done := make(chan struct{})
	go func() { d.workers.Wait(); close(done) }()
	timer := time.NewTimer(d.cfg.Grace)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		d.log.Warn("cancelling running turns at shutdown", "grace", d.cfg.Grace)
		cancelTurns(ErrShutdown)
		<-done
	}
	d.replies.Wait()
	return nil
}

// ownerID is this process's lease owner.
func (d *Dispatcher) ownerID() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.owner
}

// watchReady polls the store for sessions with work and no live lease
// (their holder died, or handed them back at shutdown) and takes them, so
// none waits for a restart or a new message.
func (d *Dispatcher) watchReady(ctx context.Context) {
	t := time.NewTicker(d.cfg.ReadyEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		keys, err := d.cfg.Store.Ready(ctx, 256)
		if err != nil {
			if ctx.Err() == nil {
				d.log.Warn("list ready sessions", "err", err)
			}
			continue
		}
		for _, key := range keys {
			if d.scheduleNew(key) {
				d.log.Info("taking over a session nobody holds", "session", key.String())
				if d.cfg.Observer != nil {
					d.cfg.Observer.TakenOver()
				}
			}
		}
	}
}

// scheduleNew schedules key unless this process has it already; it reports
// whether it did.
func (d *Dispatcher) scheduleNew(key SessionKey) bool {
	d.mu.Lock()
	_, known := d.sessions[key]
	d.mu.Unlock()
	if known {
		return false
	}
	return d.schedule(key)
}

// schedule queues key for a worker unless it is queued already; if its turn
// is running, the worker is told to look at the mailbox again afterwards.
// It reports whether key was newly queued.
func (d *Dispatcher) schedule(key SessionKey) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closing {
		return false // the messages are durable; another replica or the next start takes them
	}
	if t, ok := d.retries[key]; ok {
		t.Stop()
		delete(d.retries, key)
	}
	if s, ok := d.sessions[key]; ok {
		if s.running {
			s.again = true
		}
		return false
	}
	d.sessions[key] = &session{}
	d.queue = append(d.queue, key)
	d.cond.Signal()
	return true
}

// retryLater looks at key again after delay: its lease was held by another
// worker that may have died, or the store failed.
func (d *Dispatcher) retryLater(key SessionKey, delay time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closing {
		return
	}
	if _, ok := d.retries[key]; ok {
		return
	}
	d.retries[key] = time.AfterFunc(delay, func() {
		d.mu.Lock()
		delete(d.retries, key)
		d.mu.Unlock()
		d.schedule(key)
	})
}

// park tells the dispatcher that this turn's worker waits for a person; a
// new worker takes its place so the others' turns do not wait.
func (d *Dispatcher) park() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.parked++
	if d.nworkers-d.parked < d.cfg.Workers && !d.closing && d.workCtx != nil {
		d.nworkers++
		d.workers.Go(func() { d.work(d.workCtx) })
	}
}

// unpark ends a park; a worker too many ends once it is idle.
func (d *Dispatcher) unpark() {
	d.mu.Lock()
	d.parked--
	d.cond.Broadcast()
	d.mu.Unlock()
}

func (d *Dispatcher) work(ctx context.Context) {
	for {
		d.mu.Lock()
		for len(d.queue) == 0 && !d.closing && d.nworkers-d.parked <= d.cfg.Workers {
			d.cond.Wait()
		}
		if d.closing || d.nworkers-d.parked > d.cfg.Workers {
			d.nworkers--
			d.mu.Unlock()
			return
		}
		key := d.queue[0]
		if d.queue = d.queue[1:]; len(d.queue) == 0 {
			d.queue = nil // let go of the array a burst grew
		}
		s := d.sessions[key]
		s.running, s.held = true, false
		d.mu.Unlock()

		for {
			more := d.runSession(ctx, key, s)
			d.mu.Lock()
			if more && !d.closing && len(d.queue) > 0 {
				// Other sessions wait for a worker: this one, its lease
				// kept, goes behind them, so that on a busy replica every
				// session gets its turns in its turn, not the ones that
				// answer quickest.
				s.running, s.held, s.again = false, true, false
				d.queue = append(d.queue, key)
				d.mu.Unlock()
				break
			}
			if (more || s.again) && !d.closing {
				s.again = false
				d.mu.Unlock()
				continue
			}
			if more {
				// Shutting down with the lease kept: let it go at once.
				d.mu.Unlock()
				d.abandon(context.WithoutCancel(ctx), key, d.log.With("session", key.String()))
				d.mu.Lock()
			}
			delete(d.sessions, key)
			if len(d.sessions) == 0 {
				// A Go map keeps the room it grew to: after a burst of
				// thousands of sessions, let it go.
				d.sessions = map[SessionKey]*session{}
			}
			close(d.idle)
			d.idle = make(chan struct{})
			d.mu.Unlock()
			break
		}
	}
}

// runSession runs turns for key while its mailbox has messages and this
// process holds the lease, or until other sessions wait for a worker: then
// it reports more, the lease kept and messages waiting.
func (d *Dispatcher) runSession(ctx context.Context, key SessionKey, s *session) (more bool) {
	log := d.log.With("session", key.String())
	// Store calls after the turn must work even when ctx was cancelled.
	bg := context.WithoutCancel(ctx)
	owner := d.ownerID()
	for {
		claimed := time.Now()
		claim, err := d.cfg.Store.Claim(ctx, key, owner, d.cfg.LeaseTTL)
		if errors.Is(err, ErrLeaseHeld) {
			// Another worker runs the session and finds these messages when
			// it releases; if it died instead, its lease expires and the
			// retry takes over.
			d.retryLater(key, d.retryDelay())
			return
		}
		if err != nil {
			log.Error("claim session", "err", err)
			d.retryLater(key, d.retryDelay())
			return
		}
		// Answers a holder committed but did not show (it died, or the
		// platform was down) go out first, in order.
		for _, out := range claim.Outbox {
			d.redeliver(bg, key, out, log)
		}
		shown := "" // the turn's answer, shown and not marked yet
		if len(claim.Mailbox) > 0 {
			var res turnResult
			switch res, shown = d.turn(ctx, key, s, claim, claimed, log); res {
			case turnLeaseLost:
				return
			case turnNotSaved, turnHandedOver:
				d.abandon(bg, key, log)
				return
			}
		}
		if d.isClosing() {
			// Let the next start (or another replica) take the session at
			// once; its mailbox is kept.
			if shown != "" {
				d.markShown(bg, key, shown, log)
			}
			d.abandon(bg, key, log)
			return
		}
		pending, err := d.release(bg, key, owner, shown, log)
		if err != nil {
			log.Error("release session", "err", err)
			d.retryLater(key, d.retryDelay())
			return
		}
		if pending == 0 {
			return false
		}
		d.mu.Lock()
		others := len(d.queue) > 0
		d.mu.Unlock()
		if others {
			return true
		}
	}
}

// release ends owner's hold on the session unless messages wait, and
// marks the answer shown (if any) in the same call. Until the mark is made,
// whoever holds the session next shows the answer again: a store that is
// down for a while is waited for, as a commit is.
func (d *Dispatcher) release(ctx context.Context, key SessionKey, owner, shown string, log *slog.Logger) (int, error) {
	wait := 100 * time.Millisecond
	for until := time.Now().Add(2 * d.cfg.LeaseTTL); ; {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		pending, err := d.cfg.Store.Release(rctx, key, owner, shown)
		cancel()
		// A lost lease is reported after the mark, which needs none.
		if err == nil || shown == "" || errors.Is(err, ErrLeaseLost) || errors.Is(err, ErrInvalid) {
			return pending, err
		}
		if time.Now().Add(wait).After(until) {
			log.Error("could not mark the answer shown; it may be shown again", "err", err)
			return pending, err
		}
		log.Warn("release and mark the answer shown; retrying", "err", err, "in", wait)
		time.Sleep(wait)
		wait = min(wait*2, 2*time.Second)
	}
}

func (d *Dispatcher) abandon(ctx context.Context, key SessionKey, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := d.cfg.Store.Abandon(ctx, key, d.ownerID()); err != nil {
		log.Warn("abandon lease; it expires on its own", "err", err)
	}
}

type turnResult int

const (
	turnDone       turnResult = iota
	turnLeaseLost             // another worker owns the session now
	turnNotSaved              // the store kept failing; the mailbox is still there
	turnHandedOver            // shutdown cut it short; the mailbox is still there
)

// turn runs one turn over the claimed mailbox and commits it.
func (d *Dispatcher) turn(ctx context.Context, key SessionKey, s *session, claim *Claim, claimed time.Time, log *slog.Logger) (res turnResult, shown string) {
	start := time.Now()
	// The turn's ID is its outbox entry's: every log line of the turn
	// carries it, and so does what the answer's delivery logs.
	turnID := newApprovalID()
	log = log.With("turn", turnID)
	trigger := claim.Mailbox[len(claim.Mailbox)-1]
	th := d.thread(key, trigger)
	if c, ok := th.(io.Closer); ok {
		// However the turn ends (even without an answer: a lost lease),
		// the thread lets go of what it holds for it.
		defer c.Close()
	}

	turnCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	d.mu.Lock()
	s.cancel, s.started, s.claimed = cancel, start, len(claim.Mailbox)
	if s.stop {
		s.stop = false
		cancel(ErrStopped)
	}
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		s.cancel = nil
		d.mu.Unlock()
	}()
	var renewed atomic.Int64 // when the lease was last made good, Unix ns
	renewed.Store(claimed.UnixNano())
	renewDone := d.keepLease(turnCtx, key, cancel, &renewed, log)

	ids := make([]string, len(claim.Mailbox))
	for i, m := range claim.Mailbox {
		ids[i] = m.MessageID
	}
	emit(turnCtx, th, TurnStarted{Key: key, MessageIDs: ids}, log)

	var out *Outcome
	ws, err := tools.OpenWorkspace(d.cfg.WorkspaceDir, key.Channel().String(), d.cfg.Workspace...)
	if err != nil {
		log.Error("open workspace", "err", err)
	} else {
		// Open until the answer is shown: its attachments are read from it.
		defer ws.Close()
		d.download(turnCtx, key, claim.Mailbox, ws, log)
	}
	input := inputMessage(claim.Mailbox, d.cfg.MaxInputBytes)
	if len(claim.History) == 0 && key.Thread != "" {
		input.Content = d.withThreadContext(turnCtx, key, trigger, input.Content, log)
	}
	var pol *Policy
	if err == nil {
		// Read at every turn (with the claim, where the store can): an
		// admin's change applies from the next one, on every replica.
		if claim.Settings != nil {
			pol = NewPolicy(key, d.cfg.Policy, *claim.Settings)
		} else if pol, err = d.policy(turnCtx, key); err != nil && turnCtx.Err() != nil {
			err = context.Cause(turnCtx) // stopped before it began
		} else if err != nil {
			// Without its policy the turn cannot run safely, and failing it
			// would consume the messages: hand it back, like a failing
			// commit, for the next holder once the store answers.
			cancel(nil)
			<-renewDone
			log.Error("read the channel's policy; handing the turn back", "err", err)
			if d.cfg.Observer != nil {
				d.cfg.Observer.TurnDone(key.Platform, OutcomeNotSaved, time.Since(start))
			}
			return turnNotSaved, ""
		}
	}
	bud := d.newBudget(key, trigger.User, log)
	if err == nil {
		history := TrimHistory(RepairHistory(claim.History), d.cfg.ContextTokens)
		out, err = d.cfg.Loop.Run(turnCtx, &Turn{Key: key, User: trigger.User, History: history, Input: input, Tools: d.cfg.Tools, Mode: pol.Mode,
			Workspace: ws, Thread: th, Approve: d.approver(key, th, trigger.User, log),
			BeforeModel: bud.before, AfterModel: bud.after, ToolDone: d.toolAudit(key, trigger.User)})
	} else {
		out = &Outcome{Messages: []Message{input}}
	}
	cancel(nil)
	<-renewDone
	took := time.Since(start)
	done := func(outcome string) {
		if d.cfg.Observer != nil {
			d.cfg.Observer.TurnDone(key.Platform, outcome, took)
		}
	}
	if errors.Is(context.Cause(turnCtx), ErrLeaseLost) {
		log.Warn("lease lost mid-turn; another worker takes the session over")
		bud.flush(context.WithoutCancel(ctx), Spent{})
		done(OutcomeLeaseLost)
		return turnLeaseLost, ""
	}
	if errors.Is(err, ErrShutdown) {
		// Handed back, not answered: the messages stay in the mailbox and
		// the turn is done again by another replica or after the restart.
		log.Info("shutting down mid-turn; handing the session back", "steps", out.Steps, "tools", out.ToolCalls, "took", took)
		bud.flush(context.WithoutCancel(ctx), Spent{})
		// Say so where the progress stopped, so that nobody wonders or
		// sends it again; the answer comes from the next holder.
		nctx, ncancel := context.WithTimeout(context.WithoutCancel(ctx), handOverNote)
		emit(nctx, th, Notice{Text: handedOverText(out.ToolCalls)}, log)
		ncancel()
		done(OutcomeHandedOver)
		return turnHandedOver, ""
	}

	// The turn is over, whatever ctx says now: commit it, with what to
	// show, so the history stays whole, the mailbox entries are not
	// answered twice, and the answer survives a crash before it is shown.
	bg := context.WithoutCancel(ctx)
	ob := &Outbound{ID: turnID, Trigger: trigger, Steps: out.Steps, Tools: out.ToolCalls, Took: took, Spent: bud.spent()}
	if err != nil {
		ob.Failure = d.userMessage(err)
		log.Warn("turn failed", "err", err, "steps", out.Steps, "tools", out.ToolCalls, "took", took)
	} else {
		ob.Answer = out.Answer
		ob.Files = dedupe(out.Files)
		log.Info("turn done", "steps", out.Steps, "tools", out.ToolCalls, "took", took,
			"prompt_tokens", out.Usage.PromptTokens, "completion_tokens", out.Usage.CompletionTokens)
	}
	until := time.Unix(0, renewed.Load()).Add(d.cfg.LeaseTTL)
	commitErr := d.commit(bg, key, len(claim.Mailbox), out.Messages, ob, until, log)
	if commitErr != nil {
		// The tokens were spent all the same.
		bud.flush(bg, ob.Spent)
	}
	if errors.Is(commitErr, ErrLeaseLost) {
		log.Warn("lease lost before commit; another worker takes the session over")
		done(OutcomeLeaseLost)
		return turnLeaseLost, ""
	}
	if commitErr != nil {
		// Nothing is shown: the messages are still in the mailbox, and
		// whoever holds the session next answers them, once.
		log.Error("commit kept failing while the lease lasted; the turn is done again later", "err", commitErr)
		done(OutcomeNotSaved)
		return turnNotSaved, ""
	}
	switch {
	case errors.Is(err, ErrStopped):
		done(OutcomeStopped)
	case err != nil:
		done(OutcomeFailed)
	default:
		done(OutcomeAnswered)
	}
	// Showing may wait for the chat's pace (a Slack DM takes a post a
	// second) or a 429: meanwhile this worker serves other sessions, and
	// the lease is kept, so that nobody else shows the answer too.
	showCtx, showDone := context.WithCancelCause(bg)
	renewDone = d.keepLease(showCtx, key, showDone, &renewed, log)
	d.park()
	d.emitOutbound(bg, th, ws, *ob, err, log)
	d.unpark()
	showDone(nil)
	<-renewDone
	// Marked shown by the release that follows, in the same round trip.
	return turnDone, ob.ID
}

// show delivers an outbox entry in th and marks it delivered. Showing may
// wait out a platform's rate limits (adapters give up after a few minutes)
// and upload files. An entry that cannot be shown is still marked: the
// renderer has tried what it could, and trying forever would hold the
// session.
func (d *Dispatcher) show(ctx context.Context, key SessionKey, th Thread, ws *tools.Workspace, ob Outbound, cause error, log *slog.Logger) {
	d.emitOutbound(ctx, th, ws, ob, cause, log)
	d.markShown(ctx, key, ob.ID, log)
}

// emitOutbound shows an outbox entry in th.
func (d *Dispatcher) emitOutbound(ctx context.Context, th Thread, ws *tools.Workspace, ob Outbound, cause error, log *slog.Logger) {
	ectx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	var err error
	if th != nil {
		if ob.Failure != "" {
			err = th.Emit(ectx, Failed{Message: ob.Failure, Err: cause})
		} else {
			var files []Attachment
			if ws != nil {
				files = attachments(ws, ob.Files, d.cfg.MaxAttachBytes)
			}
			err = th.Emit(ectx, Answer{Text: ob.Answer, Files: files, Steps: ob.Steps, Tools: ob.Tools, Took: ob.Took})
		}
	}
	if err != nil {
		log.Warn("showing the answer failed", "err", err)
	}
	if d.cfg.Observer != nil {
		d.cfg.Observer.Delivered(err == nil)
	}
}

// markShown marks an outbox entry delivered. Until it is marked, whoever
// holds the session next shows it again: a store that is down for a while
// is waited for, as a commit is.
func (d *Dispatcher) markShown(ctx context.Context, key SessionKey, id string, log *slog.Logger) {
	wait := 100 * time.Millisecond
	for until := time.Now().Add(2 * d.cfg.LeaseTTL); ; {
		mctx, mcancel := context.WithTimeout(ctx, 5*time.Second)
		derr := d.cfg.Store.Delivered(mctx, key, id)
		mcancel()
		if derr == nil {
			return
		}
		if time.Now().Add(wait).After(until) {
			log.Error("could not mark the answer shown; it may be shown again", "err", derr)
			return
		}
		log.Warn("mark answer delivered; retrying", "err", derr, "in", wait)
		time.Sleep(wait)
		wait = min(wait*2, 2*time.Second)
	}
}

// redeliver shows an answer that a holder committed but did not show.
func (d *Dispatcher) redeliver(ctx context.Context, key SessionKey, ob Outbound, log *slog.Logger) {
	log = log.With("turn", ob.ID)
	log.Info("showing an answer committed by an earlier holder", "answers", ob.Trigger.MessageID)
	th := d.thread(key, ob.Trigger)
	if c, ok := th.(io.Closer); ok {
		defer c.Close()
	}
	var ws *tools.Workspace
	if len(ob.Files) > 0 {
		var err error
		if ws, err = tools.OpenWorkspace(d.cfg.WorkspaceDir, key.Channel().String(), d.cfg.Workspace...); err != nil {
			log.Warn("open workspace for attachments", "err", err)
		} else {
			defer ws.Close()
		}
	}
	d.show(ctx, key, th, ws, ob, nil, log)
}

func dedupe(paths []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, p := range paths {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

// attachments describes the files a turn attached, each opened through the
// workspace (with its checks) when the thread uploads it.
// handOverNote bounds how long a turn handed back at shutdown waits for its
// note to be shown: shutdown is waiting on it.
const handOverNote = 3 * time.Second

// handedOverText is the note a turn handed back at shutdown leaves in its
// thread.
func handedOverText(tools int) string {
	done := ""
	if tools > 0 {
		done = fmt.Sprintf(" after %d tool %s", tools, plural(tools, "call", "calls"))
	}
	return "⏸ Interrupted by a restart" + done + ". Your message is kept: the work starts over in a moment, nothing to send again."
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func attachments(ws *tools.Workspace, paths []string, max int64) []Attachment {
	var out []Attachment
	seen := map[string]bool{}
	for _, p := range paths {
		if seen[p] {
			continue
		}
		seen[p] = true
		out = append(out, Attachment{Path: p, Open: func() (io.ReadCloser, int64, error) {
			return openAttachment(ws, p, max)
		}})
	}
	return out
}

// openAttachment opens a file to upload once, checks it on that
// descriptor, and reads no more than the size it checked: a command that
// grows the file after the check (send_file's, or this one) cannot make
// the upload larger.
func openAttachment(ws *tools.Workspace, p string, max int64) (io.ReadCloser, int64, error) {
	f, fi, err := ws.OpenRead(p)
	if err != nil {
		return nil, 0, err
	}
	if fi.Size() > max {
		f.Close()
		return nil, 0, fmt.Errorf("%s is %s, over the %s an attachment may be", p, tools.FormatSize(fi.Size()), tools.FormatSize(max))
	}
	return limitedFile{io.LimitReader(f, fi.Size()), f}, fi.Size(), nil
}

type limitedFile struct {
	io.Reader
	io.Closer
}

// download saves the files that came with the mailbox's messages into the
// workspace, when the platform can fetch them. A file that fails keeps its
// error, which the turn's input tells the model.
func (d *Dispatcher) download(ctx context.Context, key SessionKey, mailbox []Inbound, ws *tools.Workspace, log *slog.Logger) {
	dl, ok := d.cfg.Platforms[key.Platform].(Downloader)
	if !ok {
		return
	}
	for i := range mailbox {
		for j := range mailbox[i].Files {
			f := &mailbox[i].Files[j]
			if f.Path != "" || f.Error != "" {
				continue
			}
			path, err := dl.Download(ctx, *f, ws)
			if err != nil {
				log.Warn("download file", "file", f.Name, "err", err)
				f.Error = err.Error()
				continue
			}
			f.Path = path
		}
	}
}

// withThreadContext prepends the thread's earlier messages, when the
// platform can read them, to the first turn of a session that starts inside
// an existing thread.
func (d *Dispatcher) withThreadContext(ctx context.Context, key SessionKey, trigger Inbound, input string, log *slog.Logger) string {
	r, ok := d.cfg.Platforms[key.Platform].(ThreadReader)
	if !ok {
		return input
	}
	earlier, err := r.EarlierMessages(ctx, key, trigger)
	if err != nil {
		log.Warn("read earlier thread messages", "err", err)
		return input
	}
	if earlier = strings.TrimSpace(earlier); earlier == "" {
		return input
	}
	max := d.cfg.MaxInputBytes / 2
	if len(earlier) > max {
		// Keep the newest part: it is what the question is about.
		cut := len(earlier) - max
		for cut < len(earlier) && earlier[cut]&0xC0 == 0x80 {
			cut++
		}
		earlier = "[earlier messages cut]\n" + earlier[cut:]
	}
	return "[Earlier messages in this thread, for context]\n" + earlier + "\n\n[The message to answer]\n" + input
}

// commit saves a turn. A store that fails (a Redis failover takes seconds)
// is retried with backoff while the lease lasts: after that another holder
// may have taken the session, and the owner check would refuse anyway. A
// lost lease is final at once.
func (d *Dispatcher) commit(ctx context.Context, key SessionKey, consumed int, msgs []Message, ob *Outbound, until time.Time, log *slog.Logger) error {
	wait := 100 * time.Millisecond
	for {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := d.cfg.Store.Commit(cctx, key, d.ownerID(), consumed, msgs, ob)
		cancel()
		if err == nil || errors.Is(err, ErrLeaseLost) || errors.Is(err, ErrInvalid) {
			return err
		}
		if time.Now().Add(wait).After(until) {
			return err
		}
		log.Warn("commit failed; retrying while the lease lasts", "err", err, "in", wait)
		time.Sleep(wait)
		wait = min(wait*2, 2*time.Second)
	}
}

// keepLease renews the session lease until ctx ends; losing it cancels the
// turn with ErrLeaseLost. The returned channel closes when it has stopped.
func (d *Dispatcher) keepLease(ctx context.Context, key SessionKey, cancel context.CancelCauseFunc, renewed *atomic.Int64, log *slog.Logger) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(d.cfg.LeaseTTL / 3)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				asked := time.Now()
				err := d.cfg.Store.Renew(ctx, key, d.ownerID(), d.cfg.LeaseTTL)
				if err == nil {
					renewed.Store(asked.UnixNano())
				}
				if errors.Is(err, ErrLeaseLost) {
					cancel(ErrLeaseLost)
					return
				}
				if err != nil && ctx.Err() == nil {
					log.Warn("renew lease", "err", err) // try again next tick
				}
			}
		}
	}()
	return done
}

func (d *Dispatcher) thread(key SessionKey, trigger Inbound) Thread {
	if p, ok := d.cfg.Platforms[key.Platform]; ok {
		return p.Thread(key, trigger)
	}
	d.log.Warn("no platform to answer on", "platform", key.Platform)
	return nil
}
