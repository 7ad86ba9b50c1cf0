package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
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

// DispatcherConfig wires a Dispatcher. Store, Gate, Loop and Workspaces
// are required.
type DispatcherConfig struct {
	Store Sessions
	// Gate decides every power: who may talk to the bot, each turn's
	// policy and budgets, approvals, and the commands that govern.
	Gate  Gate
	Loop  *Loop
	Tools *tools.Set
	// Later runs the schedule commands (agent/schedules); nil: scheduling
	// is off here.
	Later      CommandRunner
	Platforms  map[string]Platform // by SessionKey.Platform
	Workspaces tools.Workspaces    // one per channel
	// MaxTurns bounds the turns in flight in this process, each a
	// goroutine while it runs (waiting on the model, a tool or the
	// platform's pace included); more wait in order. Default 4096.
	MaxTurns int
	LeaseTTL time.Duration // default 15s, renewed every third of it
	// ReadyEvery is how often the store is asked for sessions nobody
	// holds (a dead replica's, a turn handed back); default 2s.
	ReadyEvery time.Duration
	Grace      time.Duration // how long shutdown waits for running turns; default 10s
	// Owner is this process's lease owner: [Owner] of the replica's name
	// and its boot, so that a restarted replica takes its own leases back
	// at once. Empty: a random owner.
	Owner    string
	Limits   InputLimits
	Observer Observer // nil: none
	Logger   *slog.Logger
}

// InputLimits bound what a turn reads from its messages and attaches to
// its answer.
type InputLimits struct {
	// ContextTokens is the history budget sent to the model (estimated);
	// older whole turns are left out first. 0 or less: no trimming here
	// (the loop keeps its own budget, Loop.Limits).
	ContextTokens int
	// MaxInputBytes caps the text of one turn's input; default 64 KiB.
	MaxInputBytes int
	// MaxAttachBytes is the largest file an answer attaches; default
	// 50 MiB (Telegram's bot upload limit).
	MaxAttachBytes int64
}

// Dispatcher turns inbound messages into turns: it records and deduplicates
// each message, answers chat commands, and runs one turn per session at a
// time (a lease in the store), different sessions at once, up to MaxTurns.
// A turn that waits (on the model, a tool, the platform) holds a goroutine
// and nothing else; what is scarce is bounded where it is spent (the
// model's limits, the sandbox). Messages that arrive while a session's
// turn runs wait in its mailbox and form the next turn.
type Dispatcher struct {
	cfg   DispatcherConfig
	owner string
	log   *slog.Logger

	mu       sync.Mutex
	sessions map[SessionKey]*session // queued or running in this process
	queue    []SessionKey
	closing  bool
	idle     chan struct{}              // closed (and replaced) when a session goes idle
	retries  map[SessionKey]*time.Timer // sessions to look at again later

	// Workers: one goroutine per session in flight, started when a
	// session is queued and ended when the queue is empty; nworkers run,
	// parked of them wait for an answer to be shown (a platform's pace),
	// and do not count against MaxTurns.
	workers  sync.WaitGroup
	workCtx  context.Context
	nworkers int
	parked   int
	replies  sync.WaitGroup // command replies in flight; Add only under mu while !closing
	leases   leases         // of the running turns, renewed by renewLeases
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

// DefaultMaxTurns is MaxTurns when none is set: a replica holds a whole
// team's conversations at once.
const DefaultMaxTurns = 4096

// NewDispatcher returns a dispatcher; call Run to start it.
func NewDispatcher(cfg DispatcherConfig) *Dispatcher {
	if cfg.MaxTurns <= 0 {
		cfg.MaxTurns = DefaultMaxTurns
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
	if cfg.Limits.MaxAttachBytes <= 0 {
		cfg.Limits.MaxAttachBytes = 50 << 20
	}
	if cfg.Limits.MaxInputBytes <= 0 {
		cfg.Limits.MaxInputBytes = 64 << 10
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	owner := cfg.Owner
	if owner == "" {
		owner = newOwnerID()
	}
	d := &Dispatcher{cfg: cfg, owner: owner, log: log, sessions: map[SessionKey]*session{},
		idle: make(chan struct{}), retries: map[SessionKey]*time.Timer{}}
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
	in.Approval = "" // only the dispatcher makes entries that resume
	adm, err := d.cfg.Gate.Receive(ctx, in)
	if err != nil {
		return fmt.Errorf("check access: %w", err)
	}
	if !adm.OK {
		if adm.Tell != "" {
			d.reply(ctx, in, Notice{Text: adm.Tell})
		}
		return nil // nothing of theirs is kept
	}
	if len(in.Files) == 0 {
		knows := func(name string) bool {
			if d.cfg.Tools == nil {
				return false
			}
			_, ok := d.cfg.Tools.Now().PowerOf(name)
			return ok
		}
		if cmd, args, ok := ParseCommand(in.Text, knows); ok {
			return d.command(ctx, cmd, args, in)
		}
	}
	_, err = d.Enqueue(ctx, in)
	return err
}

// Enqueue records in in its session's mailbox, deduplicated by its ID,
// and schedules the session: for what is posted on someone's behalf after
// the gate let it (a schedule that came due), and the entries that resume
// an approval.
func (d *Dispatcher) Enqueue(ctx context.Context, in Inbound) (bool, error) {
	added, err := d.cfg.Store.Enqueue(ctx, in)
	if err != nil {
		return false, fmt.Errorf("record message: %w", err)
	}
	if added {
		d.schedule(in.Key)
	}
	return added, nil
}

// Admit implements [Submitter]: the gate's answer, its refusal told.
func (d *Dispatcher) Admit(ctx context.Context, in Inbound) (bool, error) {
	if err := in.Validate(); err != nil {
		return false, err
	}
	adm, err := d.cfg.Gate.Admit(ctx, in)
	if err == nil && !adm.OK && adm.Tell != "" {
		d.reply(ctx, in, Notice{Text: adm.Tell})
	}
	return adm.OK, err
}

// Policy implements [Submitter] through the gate.
func (d *Dispatcher) Policy(ctx context.Context, chat SessionKey, u User) (PolicyView, error) {
	return d.cfg.Gate.Policy(ctx, chat, u)
}

// SetPolicy implements [Submitter] through the gate.
func (d *Dispatcher) SetPolicy(ctx context.Context, chat SessionKey, u User, change PolicyChange) (PolicyView, error) {
	return d.cfg.Gate.SetPolicy(ctx, chat, u, change)
}

// Decide implements [Submitter]: the gate decides the click, and a decided
// approval resumes the turn that asked, as an entry of its session's
// mailbox (whichever replica runs it). The entry's ID is the approval's,
// so a second click, or a retry after a store failure, resumes it once.
func (d *Dispatcher) Decide(ctx context.Context, dec Decision) (Decided, error) {
	res, err := d.cfg.Gate.Decide(ctx, dec)
	if err != nil || res.Approval.ID == "" || res.Approval.State == ApprovalPending {
		return res, err
	}
	a := res.Approval
	in := Inbound{Key: a.Key, MessageID: "approval:" + a.ID, User: a.DecidedBy, Addressed: true, Approval: a.ID, Time: time.Now().UTC()}
	if in.User.ID == "" {
		in.User = dec.User
	}
	if _, err := d.Enqueue(ctx, in); err != nil {
		return res, fmt.Errorf("resume after the decision: %w", err)
	}
	return res, nil
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
	d.log.Info("dispatcher started", "owner", d.owner, "max_turns", d.cfg.MaxTurns)
	// Turns run on past ctx, for the grace: so do their leases, renewed
	// until the turns are over.
	var renewer sync.WaitGroup
	defer renewer.Wait()
	turnCtx, cancelTurns := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancelTurns(nil)
	renewer.Go(func() { d.renewLeases(turnCtx) })
	var watcher sync.WaitGroup
	defer watcher.Wait()
	watcher.Go(func() { d.watchReady(ctx) })
	d.mu.Lock()
	d.workCtx = turnCtx
	d.spawnLocked()
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
	d.spawnLocked()
	return true
}

// spawnLocked starts workers for the queued sessions, up to MaxTurns
// running (parked ones not counted). d.mu must be held.
func (d *Dispatcher) spawnLocked() {
	for n := len(d.queue); n > 0 && d.nworkers-d.parked < d.cfg.MaxTurns && !d.closing && d.workCtx != nil; n-- {
		d.nworkers++
		d.workers.Go(func() { d.work(d.workCtx) })
	}
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

// park tells the dispatcher that this turn's worker waits for the
// platform to show its answer; another session may start meanwhile.
func (d *Dispatcher) park() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.parked++
	d.spawnLocked()
}

// unpark ends a park; a worker too many ends when its session does.
func (d *Dispatcher) unpark() {
	d.mu.Lock()
	d.parked--
	d.mu.Unlock()
}

// work runs queued sessions until the queue is empty or there are more
// workers running than MaxTurns.
func (d *Dispatcher) work(ctx context.Context) {
	for {
		d.mu.Lock()
		if len(d.queue) == 0 || d.closing || d.nworkers-d.parked > d.cfg.MaxTurns {
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
	owner := d.owner
	for {
		claimed := time.Now()
		claim, err := d.cfg.Store.Claim(ctx, key, owner, d.cfg.LeaseTTL)
		if errors.Is(err, ErrLeaseHeld) {
			// Another worker runs the session and finds these messages when
			// it releases; if it died instead, its lease expires and the
			// retry takes over.
			d.retryLater(key, d.cfg.LeaseTTL/3)
			return
		}
		if err != nil {
			log.Error("claim session", "err", err)
			d.retryLater(key, d.cfg.LeaseTTL/3)
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
				d.release(bg, key, shown, log) // marks it shown
			}
			d.abandon(bg, key, log)
			return
		}
		pending, err := d.release(bg, key, shown, log)
		if err != nil {
			log.Error("release session", "err", err)
			d.retryLater(key, d.cfg.LeaseTTL/3)
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

func (d *Dispatcher) abandon(ctx context.Context, key SessionKey, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := d.cfg.Store.Abandon(ctx, key, d.owner); err != nil {
		log.Warn("abandon lease; it expires on its own", "err", err)
	}
}

// newID names a turn, its outbox entry and its log lines.
func newID() string {
	var b [9]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (d *Dispatcher) thread(key SessionKey, trigger Inbound) Thread {
	if p, ok := d.cfg.Platforms[key.Platform]; ok {
		return p.Thread(key, trigger)
	}
	d.log.Warn("no platform to answer on", "platform", key.Platform)
	return nil
}
