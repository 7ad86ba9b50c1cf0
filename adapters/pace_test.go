package adapters

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// testClock is a bucket's time, moved by the test: timers fire in order
// when it is moved past them, in the test's goroutine, and are counted.
type testClock struct {
	mu      sync.Mutex
	t       time.Time
	timers  []*testTimer
	started int // timers set, in all
}

type testTimer struct {
	at      time.Time
	f       func()
	stopped bool
}

func newTestClock() *testClock { return &testClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *testClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) afterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.started++
	tm := &testTimer{at: c.t.Add(d), f: f}
	c.timers = append(c.timers, tm)
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		was := !tm.stopped
		tm.stopped = true
		return was
	}
}

// armed counts the timers set and not yet fired or stopped.
func (c *testClock) armed() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, tm := range c.timers {
		if !tm.stopped {
			n++
		}
	}
	return n
}

// advance moves the time on by d, firing each timer that comes due at its
// own time.
func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	end := c.t.Add(d)
	c.mu.Unlock()
	for {
		c.mu.Lock()
		var next *testTimer
		for _, tm := range c.timers {
			if !tm.stopped && !tm.at.After(end) && (next == nil || tm.at.Before(next.at)) {
				next = tm
			}
		}
		if next == nil {
			c.t = end
			c.mu.Unlock()
			return
		}
		next.stopped = true
		if next.at.After(c.t) {
			c.t = next.at
		}
		c.mu.Unlock()
		next.f()
	}
}

// testWaiter is a writer as the buckets see it: a pass, and the wake-ups it
// got.
type testWaiter struct {
	name  string
	pass  pass
	woken int
	log   *[]string // names, in the order they were woken
}

func newWaiters(n int) ([]*testWaiter, *[]string) {
	log := &[]string{}
	ws := make([]*testWaiter, n)
	for i := range ws {
		w := &testWaiter{name: fmt.Sprint("w", i), log: log}
		w.pass.wake = func() {
			w.woken++
			*log = append(*log, w.name)
		}
		ws[i] = w
	}
	return ws, log
}

// ask is one round of the writer: it asks for a token for one call.
func (w *testWaiter) ask(bs []*Bucket, decoration bool) bool {
	w.pass.begin()
	ok := w.pass.take(bs, decoration)
	if !ok {
		w.pass.end()
	}
	return ok
}

// queued is a bucket on a test clock and n writers that asked it for a
// token each, in order.
func queued(every time.Duration, burst, n int) (*testClock, []*Bucket, []*testWaiter, *[]string) {
	c := newTestClock()
	bs := []*Bucket{newBucket(every, burst, c)}
	ws, log := newWaiters(n)
	for _, w := range ws {
		w.ask(bs, false)
	}
	return c, bs, ws, log
}

func tokens(b *Bucket) float64 {
	paceMu.Lock()
	defer paceMu.Unlock()
	b.refillLocked(b.clock.now())
	return b.tokens
}

// Calls that find an empty bucket get its tokens in the order they came,
// each woken once, when its token is back.
func TestBucketServesInArrivalOrder(t *testing.T) {
	c, bs, ws, log := queued(time.Second, 2, 6)
	if got := *log; len(got) != 0 {
		t.Fatalf("woken before any token came back: %v", got)
	}
	for i := range 4 {
		c.advance(time.Second)
		if want := ws[2+i].name; len(*log) != i+1 || (*log)[i] != want {
			t.Fatalf("after %d s woken %v; want %s next", i+1, *log, want)
		}
		if !ws[2+i].ask(bs, false) {
			t.Fatalf("%s was woken but gets no token", ws[2+i].name)
		}
	}
	if want := []string{"w2", "w3", "w4", "w5"}; !slices.Equal(*log, want) {
		t.Errorf("woken %v, want %v", *log, want)
	}
	if tk := tokens(bs[0]); tk > enough {
		t.Errorf("%.3f tokens left after every call; want none", tk)
	}
}

// A thousand calls waiting on one empty bucket keep one timer between
// them, and a token that comes back wakes one of them: wake-ups and timers
// grow with the tokens, not with tokens times waiters.
func TestBucketWaitersShareOneTimer(t *testing.T) {
	c, bs, ws, _ := queued(40*time.Millisecond, 30, 1030)
	if c.started != 1 || c.armed() != 1 {
		t.Fatalf("%d timers set (%d armed) for 1000 waiters on an empty bucket; want one", c.started, c.armed())
	}
	const served = 75 // three seconds
	next := 30
	for range served {
		c.advance(40 * time.Millisecond)
		if c.armed() > 1 {
			t.Fatalf("%d timers armed at once", c.armed())
		}
		// Each writer woken asks again, as a writer does.
		for ; next < len(ws) && ws[next].woken > 0; next++ {
			if !ws[next].ask(bs, false) {
				t.Fatalf("%s was woken but gets no token", ws[next].name)
			}
		}
	}
	woken := 0
	for _, w := range ws {
		woken += w.woken
		if w.woken > 1 {
			t.Errorf("%s woken %d times", w.name, w.woken)
		}
	}
	if woken != served || next != 30+served {
		t.Errorf("%d wake-ups, %d served, for %d tokens", woken, next-30, served)
	}
	if c.started > served+1 {
		t.Errorf("%d timers set to hand out %d tokens", c.started, served)
	}
	// A writer that asks again while it waits (an Emit woke it) changes
	// nothing.
	before := c.started
	for _, w := range ws[next:] {
		w.ask(bs, false)
	}
	if c.started != before {
		t.Errorf("asking again while waiting set %d more timers", c.started-before)
	}
}

// A call that gives up leaves the queue: the one behind it gets the token,
// and the tokens it already held (of the chat's bucket, while it waited for
// the global one) go back.
func TestBucketCancelledWaiterFreesItsPlace(t *testing.T) {
	c, bs, ws, log := queued(time.Second, 1, 4)
	ws[1].pass.cancel()
	c.advance(time.Second)
	if want := []string{"w2"}; !slices.Equal(*log, want) {
		t.Fatalf("woken %v after the first waiter gave up; want %v", *log, want)
	}
	// A round in which the writer no longer asks (the Emit's ctx ended)
	// gives the place up too; a token it was woken for goes to the next.
	ws[2].pass.begin()
	ws[2].pass.end()
	if want := []string{"w2", "w3"}; !slices.Equal(*log, want) {
		t.Fatalf("woken %v after the woken waiter gave up; want %v", *log, want)
	}
	if !ws[3].ask(bs, false) {
		t.Fatal("the token given back does not reach the next waiter")
	}

	chat, global := newBucket(time.Second, 3, c), newBucket(time.Second/30, 1, c)
	both := []*Bucket{chat, global}
	ws, _ = newWaiters(2)
	ws[0].ask(both, false) // takes global's one token
	ws[1].ask(both, false) // chat's token, then waits for global
	if tk := tokens(chat); tk != 1 {
		t.Fatalf("chat bucket holds %.2f; want 1 after two calls", tk)
	}
	ws[1].pass.cancel()
	if tk := tokens(chat); tk != 2 {
		t.Errorf("chat bucket holds %.2f after the waiting call gave up; want its token back (2)", tk)
	}
	if c.armed() != 0 {
		t.Errorf("%d timers armed with nobody waiting", c.armed())
	}
}

// A chat's empty bucket does not hold other chats' calls back at the
// global bucket they share.
func TestBucketsOneChatDoesNotHoldOthers(t *testing.T) {
	c := newTestClock()
	global := newBucket(time.Second/30, 30, c)
	busy, quiet := newBucket(time.Second, 1, c), newBucket(time.Second, 1, c)
	ws, _ := newWaiters(3)
	ws[0].ask([]*Bucket{busy, global}, false)
	if ws[1].ask([]*Bucket{busy, global}, false) {
		t.Fatal("a second call in a chat with burst 1 went at once")
	}
	if !ws[2].ask([]*Bucket{quiet, global}, false) {
		t.Error("another chat's call waits behind a chat that spent its tokens")
	}
}

// Decoration leaves each bucket's reserve for answers and waits behind
// every answer, however long it waited before it.
func TestBucketDecorationYieldsToAnswers(t *testing.T) {
	c := newTestClock()
	b := newBucket(time.Second, 3, c) // reserve 2
	bs := []*Bucket{b}
	ws, log := newWaiters(5)
	if !ws[0].ask(bs, true) || !ws[1].ask(bs, true) {
		t.Fatal("decoration waits on a bucket above its reserve")
	}
	if ws[2].ask(bs, true) {
		t.Fatal("decoration took a token below the reserve")
	}
	if !ws[3].ask(bs, false) {
		t.Fatal("an answer waits for the token decoration left")
	}
	ws[4].ask(bs, false)
	c.advance(time.Second)
	if want := []string{"w4"}; !slices.Equal(*log, want) {
		t.Fatalf("woken %v; want the answer that came after the decoration", *log)
	}
	ws[4].ask(bs, false)
	c.advance(time.Second)
	if len(*log) != 1 {
		t.Fatalf("decoration woken with %.2f tokens, below the reserve", tokens(b))
	}
	c.advance(time.Second)
	if want := []string{"w4", "w2"}; !slices.Equal(*log, want) {
		t.Errorf("woken %v; want the decoration once the reserve is back", *log)
	}
}

// A 429 holds the bucket for as long as the platform asked, waiters
// included; then the refused call goes at once, and the rest as the bucket
// refills.
func TestBucketBlockHolds(t *testing.T) {
	c := newTestClock()
	b := newBucket(time.Second, 3, c)
	bs := []*Bucket{b}
	ws, log := newWaiters(3)
	ws[0].ask(bs, false)
	b.block(c.now().Add(10 * time.Second))
	if ws[0].ask(bs, false) {
		t.Fatal("a call went on a bucket a 429 holds")
	}
	ws[1].ask(bs, false)
	ws[2].ask(bs, false)
	c.advance(10*time.Second - time.Millisecond)
	if len(*log) != 0 {
		t.Fatalf("woken %v before the 429 was over", *log)
	}
	c.advance(time.Millisecond)
	if want := []string{"w0"}; !slices.Equal(*log, want) {
		t.Fatalf("woken %v the moment the 429 is over; want the refused call", *log)
	}
	ws[0].ask(bs, false)
	c.advance(time.Second)
	if want := []string{"w0", "w1"}; !slices.Equal(*log, want) {
		t.Errorf("woken %v a second after; want the next waiter", *log)
	}
	if c.started > 4 {
		t.Errorf("%d timers for a 429 and three calls", c.started)
	}
}

// A closed turn that tidies up asks how long its place in the queue will
// take, to give up rather than hold its writer.
func TestPassEta(t *testing.T) {
	c := newTestClock()
	b := newBucket(time.Second, 3, c) // reserve 2
	bs := []*Bucket{b}
	ws, _ := newWaiters(4)
	for _, w := range ws[:3] {
		w.ask(bs, false)
	}
	ws[3].ask(bs, true)
	if eta := ws[3].pass.eta(); eta != 2*time.Second {
		t.Errorf("decoration's eta %v; want 2 s for its reserve", eta)
	}
	ws[0].ask(bs, false)
	if eta := ws[0].pass.eta(); eta != time.Second {
		t.Errorf("answer's eta %v; want 1 s", eta)
	}
	if eta := ws[3].pass.eta(); eta != 3*time.Second {
		t.Errorf("decoration's eta %v behind an answer; want 3 s", eta)
	}
}

// A set that grew with a burst of chats forgets those whose buckets
// refilled, without waiting for another chat to come along, and keeps the
// ones still spending.
func TestBucketsForgetRefilled(t *testing.T) {
	c := newTestClock()
	s := NewBuckets(time.Hour, 1)
	s.clock = c
	ws, _ := newWaiters(1)
	for i := range sweepAbove + 500 {
		b := s.Get(fmt.Sprint("chat", i))
		if i%100 == 0 {
			ws[0].ask([]*Bucket{b}, false) // spent: an hour to refill
		}
	}
	s.mu.Lock()
	due := s.sweep != nil
	s.mu.Unlock()
	if !due {
		t.Fatal("no sweep is due after the set grew past sweepAbove")
	}
	s.forget()
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := len(s.m); n != (sweepAbove+500+99)/100 {
		t.Fatalf("%d buckets kept; want the %d still refilling", n, (sweepAbove+500+99)/100)
	}
	if s.sweep != nil {
		t.Error("another sweep is due with few buckets left")
	}
	if _, ok := s.m["chat100"]; !ok {
		t.Error("a bucket still refilling was forgotten")
	}
}
