package telegram

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/internal/testkit/faketelegram"
)

// testLease is the poll lease's timing in tests: the same shape as the
// real one (renewals well within the TTL), faster.
var testLease = leaseTiming{ttl: time.Second, renew: 200 * time.Millisecond, retry: 100 * time.Millisecond}

// memLease is an in-memory PollLease, what a store shared by the
// replicas gives them.
type memLease struct {
	mu    sync.Mutex
	holds map[string]leaseHold
	names map[string]bool
	err   error           // every call fails with it
	crash map[string]bool // owners whose DropLease never arrives (the process died)
}

type leaseHold struct {
	owner string
	until time.Time
}

func newMemLease() *memLease {
	return &memLease{holds: map[string]leaseHold{}, names: map[string]bool{}, crash: map[string]bool{}}
}

func (l *memLease) TryLease(_ context.Context, name, owner string, ttl time.Duration) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return false, l.err
	}
	l.names[name] = true
	if h, ok := l.holds[name]; ok && h.owner != owner && time.Now().Before(h.until) {
		return false, nil
	}
	l.holds[name] = leaseHold{owner: owner, until: time.Now().Add(ttl)}
	return true, nil
}

func (l *memLease) DropLease(_ context.Context, name, owner string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return l.err
	}
	if h, ok := l.holds[name]; ok && h.owner == owner && !l.crash[owner] {
		delete(l.holds, name)
	}
	return nil
}

// leaseNames are the names the lease was asked for, read under its lock:
// the replicas go on asking while the test looks.
func (l *memLease) leaseNames() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Collect(maps.Keys(l.names))
}

func (l *memLease) holder(name string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if h, ok := l.holds[name]; ok && time.Now().Before(h.until) {
		return h.owner
	}
	return ""
}

func (l *memLease) fail(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.err = err
}

// ledger is the dispatcher the replicas share: it keeps who submitted
// each message. A Submit whose ctx has ended records nothing and fails,
// as the store would.
type ledger struct {
	mu  sync.Mutex
	got map[string][]string // message text → the replicas that submitted it
}

func (l *ledger) submitter(owner string) agent.Submitter {
	return &replicaSubmitter{recorder: &recorder{}, l: l, owner: owner}
}

func (l *ledger) submitted() map[string][]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string][]string{}
	for k, v := range l.got {
		out[k] = append([]string(nil), v...)
	}
	return out
}

// exactlyOnce fails unless every text was submitted once, and nothing else.
func (l *ledger) exactlyOnce(t *testing.T, texts []string) {
	t.Helper()
	got := l.submitted()
	for _, s := range texts {
		if len(got[s]) != 1 {
			t.Errorf("%q submitted by %v, want exactly once", s, got[s])
		}
		delete(got, s)
	}
	if len(got) > 0 {
		t.Errorf("unexpected submissions %v", got)
	}
}

type replicaSubmitter struct {
	*recorder
	l     *ledger
	owner string
}

func (s *replicaSubmitter) Submit(ctx context.Context, in agent.Inbound) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.l.mu.Lock()
	defer s.l.mu.Unlock()
	if s.l.got == nil {
		s.l.got = map[string][]string{}
	}
	s.l.got[in.Text] = append(s.l.got[in.Text], s.owner)
	return nil
}

// countPolls counts the getUpdates requests a replica makes.
type countPolls struct {
	next  http.RoundTripper
	polls *atomic.Int64
}

func (c countPolls) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.HasSuffix(r.URL.Path, "/getUpdates") {
		c.polls.Add(1)
	}
	return c.next.RoundTrip(r)
}

// logs is a slog handler's output, safe to read while it is written.
type logs struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// count is how many lines have every one of words.
func (l *logs) count(words ...string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
lines:
	for line := range strings.Lines(l.buf.String()) {
		for _, w := range words {
			if !strings.Contains(line, w) {
				continue lines
			}
		}
		n++
	}
	return n
}

// replica is one firstmate process's Telegram adapter, running.
type replica struct {
	owner string
	a     *Adapter
	polls atomic.Int64
	logs  logs
	stop  func() // stops Run and waits for it
}

func startReplica(t *testing.T, srv *faketelegram.Server, lease PollLease, owner string, l *ledger) *replica {
	t.Helper()
	r := &replica{owner: owner}
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	cfg := Config{PollLease: lease, Owner: owner,
		HTTPClient: &http.Client{Transport: countPolls{tr, &r.polls}},
		Logger:     slog.New(slog.NewTextHandler(&r.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	r.a = newAdapterWith(t, srv, cfg)
	r.a.lease = testLease
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.a.Run(ctx, l.submitter(owner)) }()
	var once sync.Once
	r.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("%s Run: %v", owner, err)
			}
		})
	}
	t.Cleanup(r.stop)
	return r
}

// waitUntil waits up to timeout for cond.
func waitUntil(timeout time.Duration, cond func() bool) bool {
	end := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(end) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// active waits until exactly one of the replicas polls, and returns it
// and the other.
func active(t *testing.T, a, b *replica) (*replica, *replica) {
	t.Helper()
	var on, off *replica
	ok := waitUntil(wait, func() bool {
		switch {
		case a.a.Polling() && !b.a.Polling():
			on, off = a, b
		case b.a.Polling() && !a.a.Polling():
			on, off = b, a
		default:
			return false
		}
		return true
	})
	if !ok {
		t.Fatalf("polling: %s %v, %s %v", a.owner, a.a.Polling(), b.owner, b.a.Polling())
	}
	return on, off
}

// send sends private messages to the bot, one per text.
func send(srv *faketelegram.Server, texts ...string) {
	for _, s := range texts {
		srv.PrivateMessage(faketelegram.Alice, s)
	}
}

func texts(prefix string, n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("%s%d", prefix, i+1))
	}
	return out
}

// waitSubmitted waits until every text was submitted at least once.
func waitSubmitted(t *testing.T, l *ledger, texts []string) {
	t.Helper()
	if !waitUntil(wait, func() bool {
		got := l.submitted()
		for _, s := range texts {
			if len(got[s]) == 0 {
				return false
			}
		}
		return true
	}) {
		t.Fatalf("submitted %v, want %v", l.submitted(), texts)
	}
}

func TestPollLeaseNeedsAnOwner(t *testing.T) {
	srv := faketelegram.New(t)
	_, err := New(t.Context(), Config{Token: srv.Token(), APIURL: srv.URL(), PollLease: newMemLease()})
	if err == nil {
		t.Fatal("a poll lease without an owner was accepted")
	}
}

// Two replicas with one bot: one polls, the other stands by, and no
// getUpdates of one ends the other's with 409 Conflict.
func TestOneReplicaPolls(t *testing.T) {
	srv := faketelegram.New(t)
	lease := newMemLease()
	var l ledger
	r1 := startReplica(t, srv, lease, "one#1", &l)
	r2 := startReplica(t, srv, lease, "two#1", &l)
	on, off := active(t, r1, r2)

	msgs := texts("m", 5)
	send(srv, msgs...)
	waitSubmitted(t, &l, msgs)
	// Some more long polls, for the standby to have every chance to
	// interfere.
	polls := on.polls.Load()
	if !waitUntil(wait, func() bool { return on.polls.Load() > polls+2 }) {
		t.Fatal("the poller stopped polling")
	}
	l.exactlyOnce(t, msgs)
	for s, by := range l.submitted() {
		if by[0] != on.owner {
			t.Errorf("%q submitted by %v, not the poller %s", s, by, on.owner)
		}
	}
	if n := off.polls.Load(); n != 0 || off.a.Polling() {
		t.Errorf("the standby polled %d times (polling now: %v)", n, off.a.Polling())
	}
	if n := srv.Conflicts(); n != 0 {
		t.Errorf("%d conflicts", n)
	}
	name := "telegram-poll:" + fmt.Sprint(faketelegram.DefaultBotID)
	if h := lease.holder(name); h != on.owner {
		t.Errorf("lease %s held by %q, want %s", name, h, on.owner)
	}
	for _, n := range lease.leaseNames() {
		if strings.Contains(n, srv.Token()) || n != name {
			t.Errorf("lease name %q", n)
		}
	}
	if on.logs.count("level=INFO", "telegram: polling") != 1 || off.logs.count("level=INFO", "telegram: standby poller") != 1 {
		t.Errorf("logs:\n%s\n%s", on.logs.buf.String(), off.logs.buf.String())
	}
}

// When the poller stops, the standby takes over within seconds, and every
// message, sent before, during and after the hand-over, is submitted once.
func TestStandbyTakesOver(t *testing.T) {
	for _, tc := range []struct {
		name  string
		crash bool // the poller's DropLease never arrives: the standby waits out the TTL
	}{{"stop", false}, {"crash", true}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := faketelegram.New(t)
			lease := newMemLease()
			var l ledger
			r1 := startReplica(t, srv, lease, "one#1", &l)
			r2 := startReplica(t, srv, lease, "two#1", &l)
			on, off := active(t, r1, r2)
			if tc.crash {
				lease.crash[on.owner] = true
			}

			before := texts("before", 3)
			send(srv, before...)
			waitSubmitted(t, &l, before)
			during := texts("during", 3)
			send(srv, during[0])
			stopped := time.Now()
			go send(srv, during[1:]...)
			on.stop()
			if on.a.Polling() {
				t.Error("a stopped replica says it polls")
			}
			after := texts("after", 3)
			send(srv, after...)

			if !waitUntil(wait, off.a.Polling) {
				t.Fatal("the standby did not take over")
			}
			took := time.Since(stopped)
			// A dropped lease is taken at the standby's next try; a
			// crashed poller's when it expires.
			limit := 2*testLease.retry + time.Second
			if tc.crash {
				limit += testLease.ttl
			}
			if took > limit {
				t.Errorf("the standby took over after %v", took)
			}
			all := append(append(append([]string{}, before...), during...), after...)
			waitSubmitted(t, &l, all)
			later := texts("later", 2)
			send(srv, later...)
			waitSubmitted(t, &l, later)
			l.exactlyOnce(t, append(all, later...))
			if n := srv.Conflicts(); n != 0 {
				t.Errorf("%d conflicts", n)
			}
			if off.logs.count("level=INFO", "telegram: polling") != 1 {
				t.Errorf("standby's logs:\n%s", off.logs.buf.String())
			}
		})
	}
}

// A replica that cannot reach the lease stops polling (no lease, no
// poll) and starts again when the lease is back.
func TestLeaseErrorStopsPolling(t *testing.T) {
	srv := faketelegram.New(t)
	lease := newMemLease()
	var l ledger
	r := startReplica(t, srv, lease, "one#1", &l)
	if !waitUntil(wait, r.a.Polling) {
		t.Fatal("not polling")
	}
	first := texts("first", 2)
	send(srv, first...)
	waitSubmitted(t, &l, first)

	lease.fail(errors.New("store down"))
	if !waitUntil(wait, func() bool { return !r.a.Polling() }) {
		t.Fatal("still polling without a lease")
	}
	polls := r.polls.Load()
	during := texts("during", 2)
	send(srv, during...)
	time.Sleep(testLease.ttl) // many renewal periods and tries
	if n := r.polls.Load(); n != polls {
		t.Errorf("%d getUpdates without a lease", n-polls)
	}
	if got := l.submitted(); len(got) != len(first) {
		t.Errorf("submitted without a lease: %v", got)
	}
	if r.logs.count("level=WARN", "not renewed") != 1 || r.logs.count("level=WARN", "lease unavailable") != 1 {
		t.Errorf("logs:\n%s", r.logs.buf.String())
	}

	lease.fail(nil)
	if !waitUntil(wait, r.a.Polling) {
		t.Fatal("polling did not resume")
	}
	waitSubmitted(t, &l, during)
	l.exactlyOnce(t, append(first, during...))
}

// A getUpdates consumer outside the lease (an old version still running)
// ends the poller's long polls with 409 Conflict: the poller says so once
// and backs off, and gets its updates when the other stops.
func TestConflictOutsideTheLease(t *testing.T) {
	srv := faketelegram.New(t)
	lease := newMemLease()
	var l ledger
	r := startReplica(t, srv, lease, "one#1", &l)
	if !waitUntil(wait, r.a.Polling) {
		t.Fatal("not polling")
	}
	outsider := func() {
		t.Helper()
		if !srv.WaitFor(wait, func() bool { return srv.Polling() == 1 }) {
			t.Fatal("the replica does not poll")
		}
		resp, err := http.Get(srv.URL() + "/bot" + srv.Token() + "/getUpdates?timeout=0")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	outsider()
	outsider()
	if !waitUntil(wait, func() bool { return srv.Conflicts() == 2 }) {
		t.Fatalf("%d conflicts", srv.Conflicts())
	}
	msgs := texts("m", 2)
	send(srv, msgs...)
	waitSubmitted(t, &l, msgs)
	l.exactlyOnce(t, msgs)
	if n := r.logs.count("level=WARN", "conflict"); n != 1 {
		t.Errorf("%d warnings of a conflict:\n%s", n, r.logs.buf.String())
	}
}

// Without a poll lease the adapter polls alone, as a single process does.
func TestPollingWithoutALease(t *testing.T) {
	srv := faketelegram.New(t)
	var l ledger
	r := startReplica(t, srv, nil, "", &l)
	if !waitUntil(wait, r.a.Polling) {
		t.Fatal("not polling")
	}
	msgs := texts("m", 3)
	send(srv, msgs...)
	waitSubmitted(t, &l, msgs)
	l.exactlyOnce(t, msgs)
	r.stop()
	if r.a.Polling() {
		t.Error("polling after Run returned")
	}
}
