package adapters

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// recorder is an edit function that remembers what it sent and when, and
// fails as told.
type recorder struct {
	mu    sync.Mutex
	texts []string
	times []time.Time
	fail  func(n int, text string) error // n counts calls from 1
	calls int
}

func (r *recorder) edit(ctx context.Context, text string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	if r.fail != nil {
		if err := r.fail(r.calls, text); err != nil {
			return err
		}
	}
	r.texts = append(r.texts, text)
	r.times = append(r.times, time.Now())
	return nil
}

func (r *recorder) sent() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.texts...)
}

func (r *recorder) sentAt() []time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Time(nil), r.times...)
}

func noRepeats(t *testing.T, texts []string) {
	t.Helper()
	for i := 1; i < len(texts); i++ {
		if texts[i] == texts[i-1] {
			t.Errorf("text %q sent twice in a row", texts[i])
		}
	}
}

func TestThrottleBurstCoalesces(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var r recorder
		th := NewThrottle(t.Context(), time.Second, r.edit)
		defer th.Close()
		for i := range 100 {
			th.Update(fmt.Sprint("text ", i))
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		got := r.sent()
		if len(got) == 0 || len(got) > 2 {
			t.Fatalf("100 updates gave %d edits: %q", len(got), got)
		}
		if got[len(got)-1] != "text 99" {
			t.Errorf("last edit %q, want the last text", got[len(got)-1])
		}
		noRepeats(t, got)
	})
}

func TestThrottleInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var r recorder
		th := NewThrottle(t.Context(), time.Second, r.edit)
		defer th.Close()
		start := time.Now()
		// An update every 100 ms for 10 s.
		for i := range 100 {
			th.Update(fmt.Sprint("tick ", i))
			time.Sleep(100 * time.Millisecond)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		times := r.sentAt()
		if len(times) < 9 || len(times) > 11 {
			t.Errorf("%d edits in 10 s at 1/s", len(times))
		}
		if !times[0].Equal(start) {
			t.Errorf("first edit waited %v; it should go at once", times[0].Sub(start))
		}
		for i := 1; i < len(times); i++ {
			if gap := times[i].Sub(times[i-1]); gap < time.Second {
				t.Errorf("edits %d and %d only %v apart", i-1, i, gap)
			}
		}
		got := r.sent()
		if got[len(got)-1] != "tick 99" {
			t.Errorf("last edit %q", got[len(got)-1])
		}
		noRepeats(t, got)
	})
}

func TestThrottleFlush(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var r recorder
		th := NewThrottle(t.Context(), 3*time.Second, r.edit)
		defer th.Close()
		th.Update("working · 0 s")
		synctest.Wait()
		th.Update("working · 1 s")
		th.Update("3 tools · 2 s")
		start := time.Now()
		if err := th.Flush(t.Context()); err != nil {
			t.Fatal(err)
		}
		if waited := time.Since(start); waited != 0 {
			t.Errorf("Flush waited %v for the interval", waited)
		}
		if got := r.sent(); len(got) != 2 || got[1] != "3 tools · 2 s" {
			t.Errorf("sent %q", got)
		}
		// Nothing new: Flush returns at once and sends nothing.
		if err := th.Flush(t.Context()); err != nil {
			t.Fatal(err)
		}
		// The same text again is not an edit.
		th.Update("working · 1 s")
		th.Update("3 tools · 2 s")
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if got := r.sent(); len(got) != 2 {
			t.Errorf("repeated text was sent again: %q", got)
		}
	})
}

func TestThrottleRateLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := recorder{fail: func(n int, text string) error {
			if n == 2 {
				// Like slack.RateLimitedError, wrapped.
				return fmt.Errorf("chat.update: %w", &RateLimitedError{After: 30 * time.Second, Err: errors.New("429")})
			}
			return nil
		}}
		th := NewThrottle(t.Context(), time.Second, r.edit)
		defer th.Close()
		start := time.Now()
		th.Update("a")
		synctest.Wait()
		time.Sleep(2 * time.Second)
		th.Update("b") // rate-limited
		synctest.Wait()
		time.Sleep(2 * time.Second)
		th.Update("c")
		th.Update("final")
		// Flush waits out the rate limit, then sends the final text.
		if err := th.Flush(t.Context()); err != nil {
			t.Fatal(err)
		}
		times := r.sentAt()
		if got := r.sent(); len(got) != 2 || got[0] != "a" || got[1] != "final" {
			t.Fatalf("sent %q", got)
		}
		if d := times[1].Sub(start); d < 32*time.Second {
			t.Errorf("retried %v after start, before the 30 s the 429 asked for", d)
		}
	})
}

func TestThrottleRateLimitWithoutDuration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := recorder{fail: func(n int, text string) error {
			if n == 1 {
				return &RateLimitedError{}
			}
			return nil
		}}
		th := NewThrottle(t.Context(), 2*time.Second, r.edit)
		defer th.Close()
		start := time.Now()
		th.Update("a")
		if err := th.Flush(t.Context()); err != nil {
			t.Fatal(err)
		}
		if times := r.sentAt(); len(times) != 1 || times[0].Sub(start) != 2*time.Second {
			t.Errorf("a 429 without Retry-After should wait one interval; sent at %v", times)
		}
	})
}

func TestThrottleEditError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		broken := errors.New("message_not_found")
		failing := true
		var mu sync.Mutex
		r := recorder{fail: func(n int, text string) error {
			mu.Lock()
			defer mu.Unlock()
			if failing {
				return broken
			}
			return nil
		}}
		th := NewThrottle(t.Context(), time.Second, r.edit)
		defer th.Close()
		th.Update("a")
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if r.calls != 1 {
			t.Errorf("a failed text was retried: %d calls", r.calls)
		}
		// Flush tries the failed text once more and reports the error.
		if err := th.Flush(t.Context()); !errors.Is(err, broken) {
			t.Errorf("Flush = %v, want the edit's error", err)
		}
		mu.Lock()
		failing = false
		mu.Unlock()
		if err := th.Flush(t.Context()); err != nil {
			t.Errorf("Flush after recovery = %v", err)
		}
		if got := r.sent(); len(got) != 1 || got[0] != "a" {
			t.Errorf("sent %q", got)
		}
	})
}

func TestThrottleFlushDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := recorder{fail: func(n int, text string) error {
			return &RateLimitedError{After: time.Hour}
		}}
		th := NewThrottle(t.Context(), time.Second, r.edit)
		th.Update("final")
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		if err := th.Flush(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Flush = %v", err)
		}
		th.Close()
		th.Close() // twice is fine
		if err := th.Flush(t.Context()); !errors.Is(err, ErrClosed) {
			t.Errorf("Flush after Close = %v", err)
		}
		th.Update("ignored")
	})
}

func TestThrottleEmptyText(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var r recorder
		th := NewThrottle(t.Context(), time.Second, r.edit)
		defer th.Close()
		th.Update("")
		if err := th.Flush(t.Context()); err != nil {
			t.Fatal(err)
		}
		th.Update("x")
		th.Update("")
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if got := r.sent(); len(got) > 1 || len(got) == 1 && got[0] != "x" {
			t.Errorf("sent %q", got)
		}
	})
}

func TestThrottleCloseDuringEdit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		started := make(chan struct{})
		th := NewThrottle(t.Context(), time.Second, func(ctx context.Context, text string) error {
			close(started)
			<-ctx.Done() // a platform call that hangs until cancelled
			return ctx.Err()
		})
		th.Update("a")
		<-started
		flushed := make(chan error)
		go func() { flushed <- th.Flush(context.Background()) }()
		synctest.Wait()
		th.Close()
		if err := <-flushed; !errors.Is(err, ErrClosed) {
			t.Errorf("Flush during Close = %v", err)
		}
	})
}

func TestThrottleParentCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		var r recorder
		th := NewThrottle(ctx, time.Second, r.edit)
		cancel()
		synctest.Wait()
		th.Update("late")
		th.Close() // returns: the goroutine already ended
		if got := r.sent(); len(got) != 0 {
			t.Errorf("sent %q after the context ended", got)
		}
	})
}

// TestThrottleNoLeak checks with the real scheduler that Close leaves no
// goroutine behind (synctest checks the same inside its bubbles).
func TestThrottleNoLeak(t *testing.T) {
	before := runtime.NumGoroutine()
	var r recorder
	throttles := make([]*Throttle, 50)
	for i := range throttles {
		throttles[i] = NewThrottle(t.Context(), time.Millisecond, r.edit)
		for j := range 10 {
			throttles[i].Update(fmt.Sprint(i, j))
		}
	}
	for _, th := range throttles {
		if err := th.Flush(t.Context()); err != nil {
			t.Fatal(err)
		}
		th.Close()
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("%d goroutines before, %d after Close", before, n)
	}
}

func TestRetryAfter(t *testing.T) {
	err := fmt.Errorf("edit: %w", &RateLimitedError{After: 7 * time.Second, Err: errors.New("ratelimited")})
	if d, ok := RetryAfter(err); !ok || d != 7*time.Second {
		t.Errorf("RetryAfter = %v, %v", d, ok)
	}
	if _, ok := RetryAfter(errors.New("other")); ok {
		t.Error("plain error is rate-limited")
	}
	if _, ok := RetryAfter(nil); ok {
		t.Error("nil is rate-limited")
	}
	if err.Error() != "edit: rate limited, retry after 7s: ratelimited" {
		t.Errorf("message %q", err.Error())
	}
}
