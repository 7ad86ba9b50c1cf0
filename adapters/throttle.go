package adapters

import (
	"context"
	"errors"
	"sync"
	"time"
)

// RateLimited is an error that says when to try again: a Slack 429's
// Retry-After, Telegram's parameters.retry_after. Platform errors are
// wrapped in a [RateLimitedError] (or any type with this method) so that
// [Throttle] can honour them.
type RateLimited interface {
	error
	RetryAfter() time.Duration
}

// RateLimitedError wraps a platform's rate-limit error.
type RateLimitedError struct {
	After time.Duration
	Err   error
}

func (e *RateLimitedError) Error() string {
	msg := "rate limited, retry after " + e.After.String()
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// RetryAfter implements [RateLimited].
func (e *RateLimitedError) RetryAfter() time.Duration { return e.After }

func (e *RateLimitedError) Unwrap() error { return e.Err }

// RetryAfter reports whether err is (or wraps) a [RateLimited] error, and
// how long it asks to wait.
func RetryAfter(err error) (time.Duration, bool) {
	var rl RateLimited
	if errors.As(err, &rl) {
		return rl.RetryAfter(), true
	}
	return 0, false
}

// minRetry is the least wait after a rate-limit error.
const minRetry = 100 * time.Millisecond

// ErrClosed is returned by Flush on a closed [Throttle].
var ErrClosed = errors.New("throttle closed")

// EditFunc replaces a message's text. It may post the message on its first
// call. A [RateLimited] error delays the next edit; any other error gives up
// on that text until a newer one (or Flush) comes.
type EditFunc func(ctx context.Context, text string) error

// Throttle coalesces the edits of one message. Update records the text the
// message should show; one goroutine, owned by the Throttle, calls the edit
// function at most once per interval, always with the latest text, and
// never twice in a row with the same text. Flush sends the latest text at
// once and waits for it. Close stops the goroutine and waits for it.
//
// The first text goes out at once; later ones wait for the interval since
// the previous edit began, and for as long as a rate-limit error asked.
// Empty text is never sent.
type Throttle struct {
	interval time.Duration
	edit     EditFunc

	mu       sync.Mutex
	want     string
	seq      uint64 // counts changes of want
	sent     string // the text the message shows
	failed   uint64 // seq of a text whose edit failed; not retried unless flushed
	waiters  []*flushWaiter
	closed   bool
	wake     chan struct{}
	stop     context.CancelFunc
	finished chan struct{}
}

type flushWaiter struct {
	seq uint64
	err chan error // buffered: the loop never blocks on it
}

// NewThrottle starts the goroutine that edits through edit, no more often
// than once per interval. ctx bounds its work (and is what edit receives):
// use one that outlives the turn, so a stopped turn still gets its final
// text. Close it with Close.
func NewThrottle(ctx context.Context, interval time.Duration, edit EditFunc) *Throttle {
	ctx, stop := context.WithCancel(ctx)
	t := &Throttle{
		interval: interval,
		edit:     edit,
		wake:     make(chan struct{}, 1),
		stop:     stop,
		finished: make(chan struct{}),
	}
	go t.run(ctx)
	return t
}

// Update sets the text the message should show. It never blocks on the
// platform.
func (t *Throttle) Update(text string) {
	t.mu.Lock()
	if t.closed || text == t.want {
		t.mu.Unlock()
		return
	}
	t.want = text
	t.seq++
	t.mu.Unlock()
	t.poke()
}

// Flush sends the latest text now, without waiting for the interval (but
// waiting out a rate limit), and returns once it is sent: nil, the edit's
// error, or ctx's error if ctx ends first.
func (t *Throttle) Flush(ctx context.Context) error {
	t.mu.Lock()
	if !t.pendingLocked(true) {
		t.mu.Unlock()
		return nil
	}
	if t.closed {
		t.mu.Unlock()
		return ErrClosed
	}
	w := &flushWaiter{seq: t.seq, err: make(chan error, 1)}
	t.waiters = append(t.waiters, w)
	t.mu.Unlock()
	t.poke()
	select {
	case err := <-w.err:
		return err
	case <-ctx.Done():
		t.mu.Lock()
		t.removeWaiterLocked(w)
		t.mu.Unlock()
		// The loop may have answered in the meantime.
		select {
		case err := <-w.err:
			return err
		default:
			return ctx.Err()
		}
	}
}

// Close stops the goroutine, abandoning an edit in flight and any text not
// sent yet (Flush first to deliver it), and waits for it to end. Closing
// again does nothing.
func (t *Throttle) Close() {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	t.stop()
	<-t.finished
}

func (t *Throttle) poke() {
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// pendingLocked: the latest text still has to be sent. A text whose edit
// failed is pending only for a flush.
func (t *Throttle) pendingLocked(flush bool) bool {
	if t.want == "" || t.want == t.sent {
		return false
	}
	return flush || t.failed != t.seq
}

func (t *Throttle) removeWaiterLocked(w *flushWaiter) {
	for i, x := range t.waiters {
		if x == w {
			t.waiters = append(t.waiters[:i], t.waiters[i+1:]...)
			return
		}
	}
}

// answerLocked resolves the flushes that wanted a text no newer than seq.
func (t *Throttle) answerLocked(seq uint64, err error) {
	kept := t.waiters[:0]
	for _, w := range t.waiters {
		if w.seq <= seq {
			w.err <- err
		} else {
			kept = append(kept, w)
		}
	}
	clear(t.waiters[len(kept):])
	t.waiters = kept
}

func (t *Throttle) run(ctx context.Context) {
	defer close(t.finished)
	var (
		nextEdit  time.Time // the interval since the last edit began
		nextRetry time.Time // what a rate limit asked for
		timer     *time.Timer
	)
	defer func() {
		if timer != nil {
			timer.Stop()
		}
		t.mu.Lock()
		t.answerLocked(^uint64(0), ErrClosed)
		t.mu.Unlock()
	}()
	for {
		t.mu.Lock()
		flushing := len(t.waiters) > 0
		if !t.pendingLocked(flushing) {
			// Nothing to send: every flush is answered.
			t.answerLocked(t.seq, nil)
		}
		pending := t.pendingLocked(flushing)
		text, seq := t.want, t.seq
		t.mu.Unlock()

		var wait <-chan time.Time
		if pending {
			gate := nextRetry
			if !flushing && nextEdit.After(gate) {
				gate = nextEdit
			}
			if d := time.Until(gate); d > 0 {
				if timer == nil {
					timer = time.NewTimer(d)
				} else {
					timer.Reset(d)
				}
				wait = timer.C
			} else {
				began := time.Now()
				err := t.edit(ctx, text)
				if ctx.Err() != nil {
					return
				}
				nextEdit = began.Add(t.interval)
				t.mu.Lock()
				switch after, limited := RetryAfter(err); {
				case err == nil:
					t.sent = text
					if t.failed == seq {
						t.failed = 0
					}
					t.answerLocked(seq, nil)
				case limited:
					// A 429 means the limit is reached: wait at least one
					// interval, and never spin on a zero Retry-After.
					after = max(after, t.interval, minRetry)
					nextRetry = time.Now().Add(after)
				default:
					t.failed = seq
					t.answerLocked(seq, err)
				}
				t.mu.Unlock()
				continue
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.wake:
		case <-wait:
		}
	}
}
