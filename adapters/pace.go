package adapters

import (
	"math"
	"slices"
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

// paceMu guards every bucket and every pass. A pass goes from one
// bucket's queue to the next one's, and a cancelled pass gives tokens back
// to several: one lock keeps that free of lock orders. What it guards is a
// few arithmetic steps per platform call.
var paceMu sync.Mutex

// Bucket is a token bucket: a message takes a token; tokens come back at a
// steady rate up to the burst. A 429 empties it until the time the platform
// asked for. It is safe for concurrent use; the turns of one conversation
// share its buckets.
//
// Calls that find no token wait in the bucket's queue, in order of
// arrival, answers ahead of decoration; one timer, set for when the first
// of them can go, hands out the tokens as they come back and wakes each
// waiter as it gets one. A hundred waiters on an empty bucket cost one
// wake-up a token, not a hundred.
type Bucket struct {
	rate  float64 // tokens a second
	burst float64
	clock clock

	tokens  float64
	last    time.Time
	blocked time.Time // a 429: nothing before this

	answers, decoration passQueue
	timer               func() bool // stops the timer set for the queue's head; nil: none
	timerAt             time.Time
	timerGen            uint64 // tells a timer that was stopped too late that it is stale
}

// NewBucket returns a full bucket that refills one token every `every`, up
// to burst.
func NewBucket(every time.Duration, burst int) *Bucket {
	return newBucket(every, burst, realClock{})
}

func newBucket(every time.Duration, burst int, c clock) *Bucket {
	b := float64(max(burst, 1))
	return &Bucket{rate: float64(time.Second) / float64(every), burst: b, tokens: b, clock: c}
}

// reserve is what decoration (progress, a live answer) must leave in a
// bucket: tokens kept for answers, which may come at any moment and must
// not wait behind a progress edit.
func (b *Bucket) reserve() float64 {
	return math.Min(b.burst, math.Max(2, b.burst/2))
}

func (b *Bucket) need(decoration bool) float64 {
	if decoration {
		return b.reserve()
	}
	return 1
}

// enough allows for the rounding of a wait to whole nanoseconds: a timer
// set for the moment a token is back finds it back.
const enough = 1e-6

func (b *Bucket) refillLocked(now time.Time) {
	if !b.last.IsZero() && now.After(b.last) {
		b.tokens = math.Min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	}
	if now.After(b.last) {
		b.last = now
	}
}

// waitLocked is how long until the bucket holds need tokens (0: now),
// if nobody else took any.
func (b *Bucket) waitLocked(now time.Time, need float64) time.Duration {
	var d time.Duration
	if now.Before(b.blocked) {
		d = b.blocked.Sub(now)
		now = b.blocked
	}
	b.refillLocked(now)
	if b.tokens+enough >= need {
		return d
	}
	// At least a nanosecond: a timer set for now would find the same
	// tokens on a clock that has not moved.
	return d + max(1, time.Duration((need-b.tokens)/b.rate*float64(time.Second)))
}

func (b *Bucket) queue(decoration bool) *passQueue {
	if decoration {
		return &b.decoration
	}
	return &b.answers
}

// givesLocked reports whether a call may have a token now: none of its
// kind waits before it (and no answer, for decoration), the bucket is not
// held by a 429, and it holds need tokens.
func (b *Bucket) givesLocked(now time.Time, decoration bool) bool {
	if b.answers.head != nil || decoration && b.decoration.head != nil || now.Before(b.blocked) {
		return false
	}
	b.refillLocked(now)
	return b.tokens+enough >= b.need(decoration)
}

// serveLocked hands out the tokens that came back, first come first
// served, answers first, and sets the timer for the next waiter. It
// returns the passes that now hold every token they asked for.
func (b *Bucket) serveLocked(now time.Time, woken []*pass) []*pass {
	if !now.Before(b.blocked) {
		b.refillLocked(now)
		for _, q := range []*passQueue{&b.answers, &b.decoration} {
			for p := q.head; p != nil && b.tokens+enough >= b.need(p.decoration); p = q.head {
				q.remove(p)
				p.at = nil
				b.tokens--
				p.got++
				if p.walkLocked(now) {
					woken = append(woken, p)
				}
			}
			if q.head != nil {
				break // decoration waits for the answers
			}
		}
	}
	b.scheduleLocked(now)
	return woken
}

// scheduleLocked sets the bucket's one timer for when its first waiter can
// have a token, or stops it when nobody waits.
func (b *Bucket) scheduleLocked(now time.Time) {
	head := b.answers.head
	if head == nil {
		head = b.decoration.head
	}
	if head == nil {
		b.stopTimerLocked()
		return
	}
	at := now.Add(b.waitLocked(now, b.need(head.decoration)))
	if b.timer != nil && !b.timerAt.After(at) {
		// Set for then or sooner: a timer that finds nobody it can
		// serve yet (a 429 came since) sets itself again.
		return
	}
	b.stopTimerLocked()
	gen := b.timerGen
	b.timerAt = at
	b.timer = b.clock.afterFunc(at.Sub(now), func() { b.fire(gen) })
}

func (b *Bucket) stopTimerLocked() {
	if b.timer != nil {
		b.timer()
		b.timer = nil
	}
	b.timerGen++
}

// fire is the timer: tokens came back, or the 429 is over.
func (b *Bucket) fire(gen uint64) {
	paceMu.Lock()
	if gen != b.timerGen {
		paceMu.Unlock()
		return // stopped, and set again since
	}
	b.timer = nil
	woken := b.serveLocked(b.clock.now(), nil)
	paceMu.Unlock()
	wakeAll(woken)
}

// giveBackLocked returns the token of a call that was not made.
func (b *Bucket) giveBackLocked(now time.Time) {
	b.refillLocked(now)
	limit := b.burst
	if now.Before(b.blocked) {
		limit = 1 // block's one call at once
	}
	b.tokens = math.Min(limit, b.tokens+1)
}

// block holds the bucket until until: the platform said 429. Then one
// call may go at once (the one that was refused), and the bucket refills
// from there, so decoration backs off a little longer than the platform
// asked while an answer goes exactly when it allowed.
func (b *Bucket) block(until time.Time) {
	paceMu.Lock()
	defer paceMu.Unlock()
	if until.After(b.blocked) {
		b.blocked = until
	}
	b.tokens = math.Min(b.tokens, 1)
	b.last = b.blocked
	b.scheduleLocked(b.clock.now())
}

// full reports whether the bucket is as good as a new one, so a set of
// buckets may forget it.
func (b *Bucket) full() bool {
	paceMu.Lock()
	defer paceMu.Unlock()
	now := b.clock.now()
	if now.Before(b.blocked) || b.answers.head != nil || b.decoration.head != nil {
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
	clock clock

	mu    sync.Mutex
	m     map[string]*Bucket
	sweep *time.Timer // set while a sweep is due
}

// NewBuckets returns a set of buckets that each refill one token every
// `every`, up to burst.
func NewBuckets(every time.Duration, burst int) *Buckets {
	return &Buckets{every: every, burst: burst, clock: realClock{}, m: map[string]*Bucket{}}
}

// sweepAbove is how many buckets the set holds before it sweeps.
const sweepAbove = 1024

// Get returns key's bucket.
func (s *Buckets) Get(key string) *Bucket {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.m[key]
	if !ok {
		b = newBucket(s.every, s.burst, s.clock)
		s.m[key] = b
		if len(s.m) > sweepAbove && s.sweep == nil {
			// On a timer, not on the next Get: after a burst there may
			// be none for a long time.
			s.sweep = time.AfterFunc(time.Minute, s.forget)
		}
	}
	return b
}

// forget drops the buckets that refilled (and that nobody waits on), into
// a new map: a Go map keeps the room it grew to.
func (s *Buckets) forget() {
	s.mu.Lock()
	defer s.mu.Unlock()
	kept := map[string]*Bucket{}
	for k, b := range s.m {
		if !b.full() {
			kept[k] = b
		}
	}
	s.m = kept
	s.sweep = nil
	if len(s.m) > sweepAbove {
		s.sweep = time.AfterFunc(time.Minute, s.forget)
	}
}

// block holds the first bucket of bs after a 429: the conversation's (or
// the method's), not every chat's.
func block(bs []*Bucket, until time.Time) {
	if len(bs) > 0 {
		bs[0].block(until)
	}
}

// pass is one writer's place in the queues of the buckets of its next
// call. A call takes a token from each of its buckets, in order: the pass
// waits in the first bucket that has none for it, holding the tokens of
// the ones before, and goes on to the next one when it gets one; the
// writer is woken once it holds them all. A writer makes one call at a
// time, so one pass serves all its calls; the call that asks first in a
// round of the writer's (the most urgent) has it.
//
// Only the writer sets bs and decoration (under paceMu); the buckets read
// them, and move got, at and the links, under paceMu.
type pass struct {
	wake  func() // the writer: it may ask again
	asked bool   // the writer's: a call asked for the pass this round

	bs         []*Bucket // the call's buckets; nil: the pass waits for nothing
	decoration bool
	got        int     // bs[:got] gave their token
	at         *Bucket // whose queue holds the pass; nil: none
	prev, next *pass
}

// take reports whether a call on bs may be made now, and takes a token
// from each bucket for it; otherwise the pass waits its turn in their
// queues, and the writer is woken when it may ask again. decoration waits
// for each bucket's reserve, behind every answer.
func (p *pass) take(bs []*Bucket, decoration bool) bool {
	if len(bs) == 0 {
		return true
	}
	if p.asked && p.bs != nil {
		return false // a more urgent call of this round waits for the pass
	}
	p.asked = true
	paceMu.Lock()
	var woken []*pass
	if p.bs != nil && (!slices.Equal(p.bs, bs) || p.decoration != decoration) {
		woken = p.cancelLocked(woken) // that call is not the next one any more
	}
	if p.bs == nil {
		p.bs, p.decoration, p.got = bs, decoration, 0
	}
	ready := p.at == nil && (p.got == len(p.bs) || p.walkLocked(p.bs[p.got].clock.now()))
	if ready {
		p.bs, p.got = nil, 0 // spent
	}
	paceMu.Unlock()
	wakeAll(woken)
	return ready
}

// walkLocked takes tokens from the buckets that have one for the pass, in
// order, and queues it at the first that has none. It reports whether the
// pass holds them all.
func (p *pass) walkLocked(now time.Time) bool {
	for p.got < len(p.bs) {
		b := p.bs[p.got]
		if !b.givesLocked(now, p.decoration) {
			p.at = b
			b.queue(p.decoration).push(p)
			b.scheduleLocked(now)
			return false
		}
		b.tokens--
		p.got++
	}
	return true
}

// cancelLocked takes the pass out of its queue and gives back the tokens
// it took for a call that will not be made.
func (p *pass) cancelLocked(woken []*pass) []*pass {
	if p.bs == nil {
		return woken
	}
	now := p.bs[0].clock.now()
	if b := p.at; b != nil {
		b.queue(p.decoration).remove(p)
		p.at = nil
		woken = b.serveLocked(now, woken) // the head may have changed
	}
	for _, b := range p.bs[:p.got] {
		b.giveBackLocked(now)
		woken = b.serveLocked(now, woken)
	}
	p.bs, p.got = nil, 0
	return woken
}

// cancel gives up the pass's place and tokens.
func (p *pass) cancel() {
	if p.bs == nil {
		return
	}
	paceMu.Lock()
	woken := p.cancelLocked(nil)
	paceMu.Unlock()
	wakeAll(woken)
}

// begin starts a round: the writer looks at every call it might make.
func (p *pass) begin() { p.asked = false }

// end closes a round in which the writer made no call: a call that did not
// ask for the pass is not wanted any more (its delivery was cancelled, the
// progress it would show is out of date), and gives its place up.
func (p *pass) end() {
	if !p.asked {
		p.cancel()
	}
}

// eta is about how long the pass still waits if no answer comes before
// it: for a turn that tidies up, and may give up instead.
func (p *pass) eta() time.Duration {
	if p.bs == nil {
		return 0
	}
	paceMu.Lock()
	defer paceMu.Unlock()
	if p.at == nil {
		return 0
	}
	now := p.at.clock.now()
	var d time.Duration
	for i, b := range p.bs[p.got:] {
		var ahead int
		switch {
		case i == 0 && p.decoration:
			ahead = b.answers.n + b.decoration.before(p)
		case i == 0:
			ahead = b.answers.before(p)
		case p.decoration:
			ahead = b.answers.n + b.decoration.n
		default:
			ahead = b.answers.n
		}
		d = max(d, b.waitLocked(now, float64(ahead)+b.need(p.decoration)))
	}
	return d
}

func wakeAll(ps []*pass) {
	for _, p := range ps {
		p.wake()
	}
}

// passQueue is a FIFO of passes, linked through them: a pass waits in one
// queue at a time, and leaves from anywhere in it when cancelled.
type passQueue struct {
	head, tail *pass
	n          int
}

func (q *passQueue) push(p *pass) {
	p.prev, p.next = q.tail, nil
	if q.tail == nil {
		q.head = p
	} else {
		q.tail.next = p
	}
	q.tail = p
	q.n++
}

func (q *passQueue) remove(p *pass) {
	if p.prev == nil {
		q.head = p.next
	} else {
		p.prev.next = p.next
	}
	if p.next == nil {
		q.tail = p.prev
	} else {
		p.next.prev = p.prev
	}
	p.prev, p.next = nil, nil
	q.n--
}

// before counts the passes ahead of p.
func (q *passQueue) before(p *pass) int {
	n := 0
	for x := q.head; x != nil && x != p; x = x.next {
		n++
	}
	return n
}

// clock is the time a bucket keeps: the real one, or a test's.
type clock interface {
	now() time.Time
	// afterFunc calls f in its own goroutine after d; the func it
	// returns stops that.
	afterFunc(d time.Duration, f func()) (stop func() bool)
}

type realClock struct{}

func (realClock) now() time.Time { return time.Now() }
func (realClock) afterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}
