// Package modellimit keeps calls to a model endpoint within its limits:
// requests in flight, requests a minute and tokens a minute, shared by
// every replica through [Shared] (the Redis store) or kept by this
// process alone, and a server's Retry-After, which pauses every call.
// Calls wait in the order they came, one queue a process, so sessions
// are served fairly under the limit; a call that waits hears how many
// are ahead of it.
package modellimit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/firstmate/firstmate/agent"
)

// Config are an endpoint's limits; a zero field is no limit.
type Config struct {
	MaxConcurrent     int // requests in flight at once
	RequestsPerMinute int
	TokensPerMinute   int // prompt and completion, estimated before the call
}

func (c Config) none() bool {
	return c.MaxConcurrent <= 0 && c.RequestsPerMinute <= 0 && c.TokensPerMinute <= 0
}

// Shared keeps limits for all replicas. Each method is one round trip.
type Shared interface {
	// TakeSlot takes one of max slots for id until ttl passes, and
	// reports false when all are taken.
	TakeSlot(ctx context.Context, id string, max int, ttl time.Duration) (bool, error)
	// RenewSlots extends the slots of ids by ttl.
	RenewSlots(ctx context.Context, ids []string, ttl time.Duration) error
	// FreeSlot gives id's slot back.
	FreeSlot(ctx context.Context, id string) error
	// Allow spends n of the per-minute budget name, or, when it cannot,
	// spends nothing and says how long until it could.
	Allow(ctx context.Context, name string, perMinute, n int) (wait time.Duration, err error)
	// Pause makes every call wait until the time given; PausedUntil says
	// until when calls wait (the zero time: they do not).
	Pause(ctx context.Context, until time.Time) error
	PausedUntil(ctx context.Context) (time.Time, error)
}

// slotTTL is how long a shared slot stands without renewal: the slots of
// a replica that died come free within it.
const slotTTL = 30 * time.Second

// pollEvery is how often the head of the queue looks again while a shared
// limit is full.
const pollEvery = 250 * time.Millisecond

// pauseEvery is how often the shared pause is read: another replica's
// Retry-After reaches this one within it, at one round trip a second.
const pauseEvery = time.Second

// Limiter keeps calls within Config. Use [Limiter.Model] to wrap a model.
type Limiter struct {
	cfg    Config
	shared Shared
	log    *slog.Logger
	now    func() time.Time

	mu       sync.Mutex
	queue    []*waiter
	inFlight int
	tickets  uint64
	slots    map[string]struct{} // shared slots held here
	paused   time.Time           // local or seen from Shared
	rpm, tpm *rate.Limiter       // without Shared
	wake     chan struct{}       // closed when the head should look again
}

type waiter struct {
	ticket uint64        // the order it came in
	ready  chan struct{} // closed when the waiter is the head
}

// New returns a limiter for cfg. With shared nil the limits are this
// process's alone.
func New(cfg Config, shared Shared, log *slog.Logger) *Limiter {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	l := &Limiter{cfg: cfg, shared: shared, log: log, now: time.Now, slots: map[string]struct{}{}}
	if shared == nil {
		if cfg.RequestsPerMinute > 0 {
			l.rpm = rate.NewLimiter(rate.Limit(float64(cfg.RequestsPerMinute)/60), cfg.RequestsPerMinute)
		}
		if cfg.TokensPerMinute > 0 {
			l.tpm = rate.NewLimiter(rate.Limit(float64(cfg.TokensPerMinute)/60), cfg.TokensPerMinute)
		}
	}
	return l
}

// Model returns m with its calls kept within the limits, and paused when
// a server asked one of them to wait.
func (l *Limiter) Model(m agent.Model) agent.Model {
	return &limited{next: m, l: l}
}

// Pause makes every call wait d: a server asked for it (Retry-After on a
// 429). With Shared, every replica waits.
func (l *Limiter) Pause(d time.Duration) {
	if d <= 0 {
		return
	}
	until := l.now().Add(d)
	l.mu.Lock()
	if until.After(l.paused) {
		l.paused = until
	}
	l.mu.Unlock()
	if l.shared != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := l.shared.Pause(ctx, until); err != nil {
			l.log.Warn("model limits: could not share a pause", "err", err)
		}
	}
}

// Run renews the shared slots held here and reads the shared pause until
// ctx ends. Without Shared it returns at once.
func (l *Limiter) Run(ctx context.Context) {
	if l.shared == nil {
		return
	}
	renew := time.NewTicker(slotTTL / 3)
	defer renew.Stop()
	poll := time.NewTicker(pauseEvery)
	defer poll.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-renew.C:
			l.mu.Lock()
			ids := make([]string, 0, len(l.slots))
			for id := range l.slots {
				ids = append(ids, id)
			}
			l.mu.Unlock()
			if len(ids) > 0 {
				if err := l.shared.RenewSlots(ctx, ids, slotTTL); err != nil && ctx.Err() == nil {
					l.log.Warn("model limits: renewing slots", "err", err)
				}
			}
		case <-poll.C:
			until, err := l.shared.PausedUntil(ctx)
			if err != nil {
				continue
			}
			l.mu.Lock()
			if until.After(l.paused) {
				l.paused = until
			}
			l.mu.Unlock()
		}
	}
}

// acquire waits for a call of about tokens to be allowed. ahead, if set,
// hears how many calls wait before this one whenever that changes. The
// release function gives back what the call held, with the tokens it
// really used (0: the estimate stands).
func (l *Limiter) acquire(ctx context.Context, tokens int, ahead func(int)) (release func(used int), err error) {
	l.mu.Lock()
	l.tickets++
	w := &waiter{ticket: l.tickets, ready: make(chan struct{})}
	l.queue = append(l.queue, w)
	if len(l.queue) == 1 {
		close(w.ready)
	}
	pos := len(l.queue) - 1
	l.mu.Unlock()
	defer l.leave(w)
	for told := 0; ; {
		if ahead != nil && pos != told {
			ahead(pos) // 0 when it moves on: it no longer waits for others
			told = pos
		}
		var tick <-chan time.Time
		if ahead != nil {
			tick = time.After(2 * time.Second)
		}
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-w.ready:
		case <-tick:
			// Not the head yet: where it stands now, roughly (those
			// before it that gave up still count).
			l.mu.Lock()
			pos = int(w.ticket - l.queue[0].ticket)
			l.mu.Unlock()
			continue
		}
		if ahead != nil && told != 0 {
			ahead(0)
		}
		break
	}
	// The head: wait until every limit allows the call.
	for {
		wait, release, err := l.try(ctx, tokens)
		if err != nil {
			return nil, err
		}
		if release != nil {
			return release, nil
		}
		l.mu.Lock()
		wake := l.wake
		if wake == nil {
			wake = make(chan struct{})
			l.wake = wake
		}
		l.mu.Unlock()
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, context.Cause(ctx)
		case <-t.C:
		case <-wake:
			t.Stop()
		}
	}
}

// leave takes w off the queue and lets the next waiter be the head.
func (l *Limiter) leave(w *waiter) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, q := range l.queue {
		if q == w {
			l.queue = append(l.queue[:i], l.queue[i+1:]...)
			if i == 0 && len(l.queue) > 0 {
				close(l.queue[0].ready)
			}
			break
		}
	}
	if len(l.queue) == 0 {
		l.queue = nil
	}
}

// try asks every limit once: it returns how long to wait before asking
// again, or the release of a call that may start now.
func (l *Limiter) try(ctx context.Context, tokens int) (time.Duration, func(int), error) {
	now := l.now()
	l.mu.Lock()
	paused := l.paused
	full := l.cfg.MaxConcurrent > 0 && l.inFlight >= l.cfg.MaxConcurrent
	l.mu.Unlock()
	if paused.After(now) {
		return paused.Sub(now), nil, nil
	}
	if full {
		return time.Minute, nil, nil // a release wakes the head
	}
	tokens = max(tokens, 1)
	if l.cfg.TokensPerMinute > 0 {
		tokens = min(tokens, l.cfg.TokensPerMinute) // a call larger than a minute's budget waits for a whole one
	}
	var slot string
	if l.shared != nil {
		if l.cfg.MaxConcurrent > 0 {
			slot = newSlotID()
			ok, err := l.shared.TakeSlot(ctx, slot, l.cfg.MaxConcurrent, slotTTL)
			if err != nil {
				return 0, nil, l.failed(err)
			}
			if !ok {
				return pollEvery, nil, nil
			}
		}
		free := func() {
			if slot != "" {
				l.freeSlot(slot)
			}
		}
		if l.cfg.RequestsPerMinute > 0 {
			wait, err := l.shared.Allow(ctx, "requests", l.cfg.RequestsPerMinute, 1)
			if err != nil || wait > 0 {
				free()
				if err != nil {
					return 0, nil, l.failed(err)
				}
				return wait, nil, nil
			}
		}
		if l.cfg.TokensPerMinute > 0 {
			wait, err := l.shared.Allow(ctx, "tokens", l.cfg.TokensPerMinute, tokens)
			if err != nil || wait > 0 {
				free()
				if err != nil {
					return 0, nil, l.failed(err)
				}
				return wait, nil, nil
			}
		}
	} else {
		var held []*rate.Reservation
		for _, b := range []struct {
			lim *rate.Limiter
			n   int
		}{{l.rpm, 1}, {l.tpm, tokens}} {
			if b.lim == nil {
				continue
			}
			r := b.lim.ReserveN(now, b.n)
			if d := r.DelayFrom(now); !r.OK() || d > 0 {
				r.CancelAt(now)
				for _, h := range held {
					h.CancelAt(now)
				}
				return max(d, pollEvery), nil, nil
			}
			held = append(held, r)
		}
	}
	l.mu.Lock()
	l.inFlight++
	if slot != "" {
		l.slots[slot] = struct{}{}
	}
	l.mu.Unlock()
	estimate := tokens
	return 0, func(used int) {
		l.mu.Lock()
		l.inFlight--
		delete(l.slots, slot)
		if l.wake != nil {
			close(l.wake)
			l.wake = nil
		}
		l.mu.Unlock()
		if slot != "" {
			l.freeSlot(slot)
		}
		if extra := used - estimate; extra > 0 && l.cfg.TokensPerMinute > 0 {
			l.spend(extra)
		}
	}, nil
}

// spend counts tokens a call used past its estimate.
func (l *Limiter) spend(n int) {
	if l.shared == nil {
		l.tpm.ReserveN(l.now(), min(n, l.cfg.TokensPerMinute))
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	// Spent whether or not the budget had room: the tokens were used.
	if _, err := l.shared.Allow(ctx, "tokens", l.cfg.TokensPerMinute, min(n, l.cfg.TokensPerMinute)); err != nil {
		l.log.Debug("model limits: counting tokens past the estimate", "err", err)
	}
}

func (l *Limiter) freeSlot(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := l.shared.FreeSlot(ctx, id); err != nil {
		l.log.Warn("model limits: freeing a slot; it frees itself", "in", slotTTL, "err", err)
	}
}

// ErrLimitsUnavailable wraps a failure to read the shared limits: the call
// is not made, rather than made past them.
var ErrLimitsUnavailable = errors.New("the model's shared limits could not be read")

// newSlotID names one call's shared slot.
func newSlotID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (l *Limiter) failed(err error) error {
	return &agent.ModelError{Err: errors.Join(ErrLimitsUnavailable, err), Attempts: 0}
}

// limited is a model whose calls pass a Limiter.
type limited struct {
	next agent.Model
	l    *Limiter
}

func (m *limited) Complete(ctx context.Context, req *agent.Request) (*agent.Response, error) {
	if m.l.cfg.none() {
		// Nothing to count: only a pause a server asked for.
		if err := m.l.waitPause(ctx); err != nil {
			return nil, err
		}
		return m.pauseOn429(m.next.Complete(ctx, req))
	}
	release, err := m.l.acquire(ctx, agent.EstimateRequestTokens(req), req.OnQueued)
	if err != nil {
		return nil, err
	}
	resp, err := m.next.Complete(ctx, req)
	used := 0
	if resp != nil {
		used = resp.Usage.PromptTokens + resp.Usage.CompletionTokens
	}
	release(used)
	return m.pauseOn429(resp, err)
}

// pauseOn429 pauses every call when the server asked the last one to
// wait and it gave up.
func (m *limited) pauseOn429(resp *agent.Response, err error) (*agent.Response, error) {
	var me *agent.ModelError
	if errors.As(err, &me) && me.RetryAfter > 0 {
		m.l.Pause(me.RetryAfter)
	}
	return resp, err
}

// waitPause waits out a pause.
func (l *Limiter) waitPause(ctx context.Context) error {
	l.mu.Lock()
	until := l.paused
	l.mu.Unlock()
	d := until.Sub(l.now())
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}
