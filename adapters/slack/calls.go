package slack

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/slack-go/slack"
	"golang.org/x/time/rate"

	"github.com/firstmate/firstmate/adapters"
)

// limiter paces our own Web API traffic so Slack rarely has to refuse it:
// chat.postMessage about one a second per channel (short bursts allowed),
// chat.update within Tier 3 (about 50 a minute) per workspace.
type limiter struct {
	mu     sync.Mutex
	posts  map[string]*rate.Limiter // per channel
	update *rate.Limiter
}

func newLimiter() *limiter {
	return &limiter{posts: map[string]*rate.Limiter{}, update: rate.NewLimiter(rate.Every(1200*time.Millisecond), 5)}
}

func (l *limiter) post(ctx context.Context, channel string) error {
	l.mu.Lock()
	lim, ok := l.posts[channel]
	if !ok {
		lim = rate.NewLimiter(rate.Every(time.Second), 3)
		l.posts[channel] = lim
	}
	l.mu.Unlock()
	return lim.Wait(ctx)
}

func (l *limiter) edit(ctx context.Context) error { return l.update.Wait(ctx) }

// maxRateWait bounds how long one call waits out Slack's 429s in total
// before it gives up; an answer is worth waiting for, a stuck thread not.
const maxRateWait = 3 * time.Minute

// retry runs call until it succeeds, fails with something other than a
// rate limit, or the waits Slack asks for exceed maxRateWait. A 429 is
// never the end of an answer.
func retry(ctx context.Context, call func() error) error {
	var waited time.Duration
	for {
		err := call()
		var rl *slack.RateLimitedError
		if !errors.As(err, &rl) {
			return err
		}
		wait := max(rl.RetryAfter, time.Second)
		if waited+wait > maxRateWait {
			return &adapters.RateLimitedError{After: rl.RetryAfter, Err: err}
		}
		waited += wait
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}
