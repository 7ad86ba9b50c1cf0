package adapters

import (
	"math"
	"sync"
	"time"
)

// Pace is what a platform allows in one conversation: the token buckets a
// message takes from, and how often things may change.
type Pace struct {
	// Posts are the buckets a new message (and a file) takes a token from,
	// shared by every turn there: first the one a 429 holds (the
	// conversation's own, or the method's where the platform limits per
	// method), then any the platform sets overall. Edits are the buckets of
	// an edit and of a draft.
	Posts, Edits []*Bucket
	// EditEvery is the least time between two edits of one message, two
	// drafts or two status lines; 0 means a second.
	EditEvery time.Duration
	// LiveAfter is how long an answer is written before it shows as it
	// grows (a stream, a draft, a live message): a quicker one arrives
	// whole, in one call. 0 shows it at once (a terminal).
	LiveAfter time.Duration
	// LiveAnswer lets an answer that takes longer than LiveAfter to write
	// be posted at its first words and edited as it grows, where the
	// platform has no [Streamer] or [Drafter] (or they failed).
	LiveAnswer bool
	// StreamEvery paces a [Streamer]'s appends; 0 sends each piece at once.
	StreamEvery time.Duration
	// TypingEvery renews a [Typer]'s indicator; StatusEvery a [Statuser]'s
	// line.
	TypingEvery, StatusEvery time.Duration
	// SignOfLife is how long a turn that has started no tool goes before
	// its progress message appears, on a surface with neither a [Typer]
	// nor a [Statuser]: people expect a sign within a second. 0 shows the
	// progress message only with the first tool.
	SignOfLife time.Duration
}

func (p Pace) editEvery() time.Duration {
	if p.EditEvery <= 0 {
		return time.Second
	}
	return p.EditEvery
}

// Bucket is a token bucket: a message takes a token; tokens come back at a
// steady rate up to the burst. A 429 empties it until the time the platform
// asked for. It is safe for concurrent use; the turns of one conversation
// share its buckets.
type Bucket struct {
	rate  float64 // tokens a second
	burst float64

	mu      sync.Mutex
	tokens  float64
	last    time.Time
	blocked time.Time // a 429: nothing before this
}

// NewBucket returns a full bucket that refills one token every `every`, up
// to burst.
func NewBucket(every time.Duration, burst int) *Bucket {
	b := float64(max(burst, 1))
	return &Bucket{rate: float64(time.Second) / float64(every), burst: b, tokens: b}
}

// reserve is what decoration (progress, a live answer) must leave in a
// bucket: tokens kept for answers, which may come at any moment and must
// not wait behind a progress edit.
func (b *Bucket) reserve() float64 {
	return math.Min(b.burst, math.Max(2, b.burst/2))
}

func (b *Bucket) refillLocked(now time.Time) {
	if !b.last.IsZero() && now.After(b.last) {
		b.tokens = math.Min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	}
	if now.After(b.last) {
		b.last = now
	}
}

// delay is how long until the bucket holds need tokens (0: now).
func (b *Bucket) delay(now time.Time, need float64) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	if now.Before(b.blocked) {
		return b.blocked.Sub(now)
	}
	b.refillLocked(now)
	if b.tokens >= need {
		return 0
	}
	return time.Duration((need - b.tokens) / b.rate * float64(time.Second))
}

// take spends a token. Two turns may both have seen one left: the bucket
// then goes into debt, and the next message waits for it.
func (b *Bucket) take(now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refillLocked(now)
	b.tokens--
}

// block holds the bucket until until: the platform said 429. Then one
// call may go at once (the one that was refused), and the bucket refills
// from there, so decoration backs off a little longer than the platform
// asked while an answer goes exactly when it allowed.
func (b *Bucket) block(until time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if until.After(b.blocked) {
		b.blocked = until
	}
	b.tokens = math.Min(b.tokens, 1)
	b.last = b.blocked
}

// full reports whether the bucket is as good as a new one, so a set of
// buckets may forget it.
func (b *Bucket) full(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if now.Before(b.blocked) {
		return false
	}
	b.refillLocked(now)
	return b.tokens >= b.burst
}

// Buckets keeps one bucket per conversation (a chat, a channel), made on
// first use. Once there are many, the ones that refilled are forgotten
// every minute, so the set does not grow with every chat the bot ever saw.
type Buckets struct {
	every time.Duration
	burst int

	mu    sync.Mutex
	m     map[string]*Bucket
	sweep *time.Timer // set while a sweep is due
}

// NewBuckets returns a set of buckets that each refill one token every
// `every`, up to burst.
func NewBuckets(every time.Duration, burst int) *Buckets {
	return &Buckets{every: every, burst: burst, m: map[string]*Bucket{}}
}

// sweepAbove is how many buckets the set holds before it sweeps.
const sweepAbove = 1024

// Get returns key's bucket.
func (s *Buckets) Get(key string) *Bucket {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.m[key]
	if !ok {
		b = NewBucket(s.every, s.burst)
		s.m[key] = b
		if len(s.m) > sweepAbove && s.sweep == nil {
			// On a timer, not on the next Get: after a burst there may
			// be none for a long time.
			s.sweep = time.AfterFunc(time.Minute, s.forget)
		}
	}
	return b
}

// forget drops the buckets that refilled, into a new map: a Go map keeps
// the room it grew to.
func (s *Buckets) forget() {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	kept := map[string]*Bucket{}
	for k, b := range s.m {
		if !b.full(now) {
			kept[k] = b
		}
	}
	s.m = kept
	s.sweep = nil
	if len(s.m) > sweepAbove {
		s.sweep = time.AfterFunc(time.Minute, s.forget)
	}
}

// delayOf is how long until every bucket in bs can give a token;
// decoration asks for each bucket's reserve on top.
func delayOf(bs []*Bucket, now time.Time, decoration bool) time.Duration {
	var d time.Duration
	for _, b := range bs {
		need := 1.0
		if decoration {
			need = b.reserve()
		}
		d = max(d, b.delay(now, need))
	}
	return d
}

func takeAll(bs []*Bucket, now time.Time) {
	for _, b := range bs {
		b.take(now)
	}
}

// block holds the first bucket of bs after a 429: the conversation's (or
// the method's), not every chat's.
func block(bs []*Bucket, until time.Time) {
	if len(bs) > 0 {
		bs[0].block(until)
	}
}
