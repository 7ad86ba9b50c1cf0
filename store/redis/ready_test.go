package redis

import (
	"context"
	"crypto/rand"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/store/storetest"
)

// nameHook records the names of the commands a client sends.
type nameHook struct {
	mu    sync.Mutex
	names []string
}

func (h *nameHook) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (h *nameHook) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		h.add(cmd)
		return next(ctx, cmd)
	}
}

func (h *nameHook) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		h.add(cmds...)
		return next(ctx, cmds)
	}
}

func (h *nameHook) add(cmds ...goredis.Cmder) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range cmds {
		h.names = append(h.names, c.Name())
	}
}

func (h *nameHook) take() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	names := h.names
	h.names = nil
	return names
}

// scans reports the commands among names that walk the keyspace.
func scans(names []string) []string {
	return slices.DeleteFunc(slices.Clone(names), func(n string) bool {
		n = strings.ToLower(n)
		return n != "scan" && n != "keys"
	})
}

// serverCalls counts the commands a server ran, those of scripts included,
// leaving out the test's own (statistics, connection set-up).
func serverCalls(stats map[string]int64) (total int64) {
	for name, n := range stats {
		if !strings.HasPrefix(name, "config") && !strings.HasPrefix(name, "client") &&
			name != "info" && name != "hello" && name != "ping" && name != "select" {
			total += n
		}
	}
	return total
}

// TestReadyIgnoresIdleSessions checks that Ready's cost does not grow with
// the number of idle sessions: with thousands of them (history only, and
// some that had a turn and are in the ready set until Ready finds them
// empty), it sends no SCAN or KEYS, its round trips and the commands the
// server runs for it (scripts' commands included, counted by the server on
// a private redis-server when one can be started) are bounded by the size
// of the ready set, and the set shrinks to the sessions with work.
func TestReadyIgnoresIdleSessions(t *testing.T) {
	const idle, hadTurn = 5000, 100
	var c *goredis.Client
	private := false
	prefix := "fmtest-" + rand.Text()[:12]
	if _, err := exec.LookPath("redis-server"); err == nil {
		c = goredis.NewClient(&goredis.Options{Addr: startServer(t)})
		private = true
	} else {
		c = newClient(t)
		prefix = cleanPrefix(t, prefix)
	}
	s := New(c, Options{Prefix: prefix})
	defer s.Close()
	ctx := t.Context()

	// Idle sessions as Commit leaves them: a history with an idle TTL.
	_, err := c.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i := range idle {
			k := s.key(history, agent.SessionKey{Platform: "telegram", Chat: fmt.Sprint(-1000 - i)}, "")
			p.RPush(ctx, k, `[{"role":"user","content":"hi"}]`)
			p.PExpire(ctx, k, time.Hour)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range hadTurn {
		key := agent.SessionKey{Platform: "slack", Team: "T2", Chat: fmt.Sprintf("C%d", i)}
		if n, err := runTurn(ctx, s, agent.Inbound{Key: key, MessageID: "1"}, "w"); err != nil || n != 1 {
			t.Fatalf("runTurn = %d, %v", n, err)
		}
	}
	var want []agent.SessionKey
	for i := range 3 {
		key := agent.SessionKey{Platform: "slack", Team: "T1", Chat: "C1", Thread: fmt.Sprint(i)}
		want = append(want, key)
		if _, err := s.Enqueue(ctx, agent.Inbound{Key: key, MessageID: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	// A session whose turn runs: work, but leased.
	busy := agent.SessionKey{Platform: "slack", Team: "T1", Chat: "C2"}
	if _, err := s.Enqueue(ctx, agent.Inbound{Key: busy, MessageID: "1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Claim(ctx, busy, "w", time.Minute); err != nil {
		t.Fatal(err)
	}
	if n := c.DBSize(ctx).Val(); n < idle {
		t.Fatalf("the keyspace holds %d keys, want more than %d", n, idle)
	}

	// Load Ready's scripts, so that the first call is not counted an
	// EVALSHA that falls back to EVAL per script.
	for _, sc := range []*goredis.Script{readyPageScript, sweepScript} {
		if err := sc.Load(ctx, c).Err(); err != nil {
			t.Fatal(err)
		}
	}
	names := &nameHook{}
	trips := &countHook{}
	c.AddHook(names)
	c.AddHook(trips)
	setSize := int64(hadTurn + len(want) + 1)
	if n := c.ZCard(ctx, s.key(ready, noKey, "")).Val(); n != setSize {
		t.Fatalf("the ready set holds %d sessions, want %d", n, setSize)
	}
	for i, wantSet := range []int64{setSize, int64(len(want) + 1)} {
		if private {
			resetStats(t, c)
		}
		names.take()
		trips.n.Store(0)
		got, err := s.Ready(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("Ready #%d = %v, want %v", i+1, got, want)
		}
		sent := names.take()
		if sc := scans(sent); len(sc) > 0 {
			t.Errorf("Ready #%d sent %q", i+1, sc)
		}
		// Two round trips per page of up to readyPageMin sessions, one more
		// per page with sessions to drop.
		pages := (wantSet + readyPageMin - 1) / readyPageMin
		if n := trips.n.Load(); n > 3*pages {
			t.Errorf("Ready #%d with %d sessions in the ready set took %d round trips, want at most %d", i+1, wantSet, n, 3*pages)
		}
		t.Logf("Ready #%d, %d sessions in the ready set and %d idle: %d round trips, %d commands sent", i+1, wantSet, idle, trips.n.Load(), len(sent))
		if private {
			stats := commandStats(t, c)
			if stats["scan"] > 0 || stats["keys"] > 0 {
				t.Errorf("Ready #%d: the server ran SCAN %d times, KEYS %d times", i+1, stats["scan"], stats["keys"])
			}
			// A page script reads two keys, the pipeline two per session,
			// the sweep three per session dropped.
			calls := serverCalls(stats)
			if limit := 8 * wantSet; calls > limit {
				t.Errorf("Ready #%d: the server ran %d commands, want at most %d: %v", i+1, calls, limit, stats)
			}
			t.Logf("Ready #%d: the server ran %d commands", i+1, calls)
		}
	}
	if n := c.ZCard(ctx, s.key(ready, noKey, "")).Val(); n != int64(len(want)+1) {
		t.Errorf("the ready set holds %d sessions after Ready, want %d", n, len(want)+1)
	}
}

// TestReadyReAddsWhatItDrops checks the sweep's compare: a session that
// Ready found empty, and that got mail before Ready removed it, stays.
func TestReadyReAddsWhatItDrops(t *testing.T) {
	s, _ := newStore(t, agent.Retention{})
	defer s.Close()
	ctx := t.Context()
	key := agent.SessionKey{Platform: "slack", Team: "T1", Chat: "C1"}
	if _, err := runTurn(ctx, s, agent.Inbound{Key: key, MessageID: "1"}, "w"); err != nil {
		t.Fatal(err)
	}
	// What Ready does, step by step, with an Enqueue between its look at
	// the session and its sweep.
	members, touches, err := s.readyPage(ctx, 0, 10)
	if err != nil || len(members) != 1 || members[0] != key.String() {
		t.Fatalf("readyPage = %q, %v", members, err)
	}
	if _, err := s.Enqueue(ctx, agent.Inbound{Key: key, MessageID: "2"}); err != nil {
		t.Fatal(err)
	}
	n, err := sweepScript.Run(ctx, s.client, s.readyKeys(), members[0], touches[0]).Int()
	if err != nil || n != 0 {
		t.Fatalf("sweep after a touch removed %d, %v; want 0", n, err)
	}
	if got, err := s.Ready(ctx, 10); err != nil || !slices.Equal(got, []agent.SessionKey{key}) {
		t.Fatalf("Ready = %v, %v; want [%v]", got, err, key)
	}
}

// TestScriptCacheLost checks that Enqueue and Commit, which pipeline two
// scripts on one node, run each once when Redis has forgotten its scripts
// (a restart, a failover), whichever of the two it forgot.
func TestScriptCacheLost(t *testing.T) {
	var (
		s *Store
		c *goredis.Client
	)
	// A private server if one can be started: flushing the shared one's
	// scripts would slow the other tests (they would still pass).
	if _, err := exec.LookPath("redis-server"); err == nil {
		c = goredis.NewClient(&goredis.Options{Addr: startServer(t)})
		s = New(c, Options{Prefix: "fmtest"})
	} else {
		s, c = newStore(t, agent.Retention{})
	}
	defer s.Close()
	if !s.ordered {
		t.Fatal("a single-node client should pipeline in order")
	}
	ctx := t.Context()
	key := agent.SessionKey{Platform: "slack", Team: "T1", Chat: "C1"}
	for i, load := range []*goredis.Script{nil, enqueueScript, touchScript} {
		if err := c.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		if load != nil {
			if err := load.Load(ctx, c).Err(); err != nil {
				t.Fatal(err)
			}
		}
		k := key
		k.Thread = fmt.Sprint(i)
		if added, err := s.Enqueue(ctx, agent.Inbound{Key: k, MessageID: fmt.Sprint(i)}); err != nil || !added {
			t.Fatalf("Enqueue #%d = %v, %v; want true, nil", i, added, err)
		}
		if n, err := s.Pending(ctx, k); err != nil || n != 1 {
			t.Fatalf("Pending #%d = %d, %v; want 1", i, n, err)
		}
	}
	got, err := s.Ready(ctx, 10)
	if err != nil || len(got) != 3 {
		t.Fatalf("Ready = %v, %v; want the 3 sessions", got, err)
	}

	if _, err := s.Claim(ctx, key, "w", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, key, "w", 0, turnOf, &agent.Outbound{ID: "o1"}); err != nil {
		t.Fatal(err)
	}
	cl, err := s.Claim(ctx, key, "w", time.Minute)
	if err != nil || len(cl.History) != len(turnOf) || len(cl.Outbox) != 1 {
		t.Fatalf("after a Commit over a flushed script cache: %d messages of history, %d outbox entries, %v; want %d, 1", len(cl.History), len(cl.Outbox), err, len(turnOf))
	}
}

// TestClusterConformance runs the conformance suite on a Redis Cluster of
// three masters, where a script may touch only keys of one slot and a
// pipeline is spread over the nodes, and checks the round trips of the
// steps whose scripts touch two slots. Every store is made by Open from a
// redis+cluster:// URL naming two of the three nodes (and their password),
// as in production.
func TestClusterConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	addrs := startCluster(t, 3)
	const password = "c-s3cret"
	for _, a := range addrs {
		setPassword(t, a, password)
	}
	url := "redis+cluster://:" + password + "@" + addrs[0] + "," + addrs[1]
	open := func(t *testing.T, opts Options) *Store {
		opts.Prefix = "fmtest-" + rand.Text()[:12]
		s, err := Open(t.Context(), url, opts)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	t.Run("Open", func(t *testing.T) {
		s := open(t, Options{})
		defer s.Close()
		if _, ok := s.client.(*goredis.ClusterClient); !ok {
			t.Fatalf("Open(redis+cluster://...) made a %T", s.client)
		}
		want := fmt.Sprintf("Redis Cluster (seeds %s, %s), 3 masters", addrs[0], addrs[1])
		if s.Describe() != want {
			t.Errorf("Describe() = %q, want %q", s.Describe(), want)
		}
		// A node the URL does not name is reached through the seeds.
		for i := range 50 {
			if err := s.client.Set(t.Context(), fmt.Sprintf("fmtest-spread-%d", i), "1", time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
		}
		third := goredis.NewClient(&goredis.Options{Addr: addrs[2], Password: password})
		defer third.Close()
		if n := third.DBSize(t.Context()).Val(); n == 0 {
			t.Error("no key landed on the node the URL does not name")
		}
		// The wrong password, and a single-node URL to a Cluster node.
		for _, bad := range []string{
			"redis+cluster://:wrong-s3cret@" + addrs[0],
			"redis://:" + password + "@" + addrs[0],
		} {
			_, err := Open(t.Context(), bad, Options{})
			if err == nil {
				t.Errorf("Open succeeded with a bad URL")
				continue
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("the error shows the password: %v", err)
			}
			t.Log(err)
		}
	})
	t.Run("RoundTrips", func(t *testing.T) {
		s := open(t, Options{})
		defer s.Close()
		if s.ordered {
			t.Fatal("a Cluster client must not pipeline the ready touch")
		}
		hook := &countHook{}
		s.client.AddHook(hook)
		counts := turnRoundTrips(t, s, hook)
		want := map[string]int64{"Enqueue": 2, "Claim": 1, "Commit": 2, "Delivered": 1, "Release": 1, "Ready": 2}
		for op, n := range want {
			if counts[op] != n {
				t.Errorf("%s took %d round trips on a Cluster, want %d", op, counts[op], n)
			}
		}
	})
	storetest.Run(t, func(t *testing.T, c storetest.Config) storetest.Store {
		return open(t, Options{Retention: c.Retention, AuditCap: c.AuditCap})
	})
}
