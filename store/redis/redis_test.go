package redis

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/agent/govern"
	"github.com/firstmate/firstmate/store/internal/storegov"
	"github.com/firstmate/firstmate/store/storetest"
)

func redisURL() string {
	if u := os.Getenv("REDIS_URL"); u != "" {
		return u
	}
	return "redis://127.0.0.1:6379"
}

// probe pings the test Redis once for the whole package.
var probe struct {
	once sync.Once
	err  error
}

// newClient connects to the test Redis. Without one the test is skipped,
// except in CI, where a missing Redis is a broken setup.
func newClient(t testing.TB) *goredis.Client {
	t.Helper()
	o, err := parseURL(redisURL())
	if err != nil {
		t.Fatal(err)
	}
	probe.once.Do(func() {
		c := goredis.NewClient(o)
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		probe.err = c.Ping(ctx).Err()
	})
	if probe.err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("no Redis at %s (CI is set): %v", o.Addr, probe.err)
		}
		t.Skipf("no Redis at %s: %v", o.Addr, probe.err)
	}
	return goredis.NewClient(o)
}

// testPrefix returns a fresh key prefix and deletes its keys when t ends.
func testPrefix(t testing.TB) string {
	t.Helper()
	return cleanPrefix(t, "fmtest-"+rand.Text()[:12])
}

// cleanPrefix deletes the keys under prefix when t ends and returns it.
func cleanPrefix(t testing.TB, prefix string) string {
	t.Helper()
	c := newClient(t)
	t.Cleanup(func() {
		defer c.Close()
		ctx := context.Background()
		iter := c.Scan(ctx, 0, globEscape(prefix)+":*", 1000).Iterator()
		var keys []string
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		if err := iter.Err(); err != nil {
			t.Errorf("scanning test keys: %v", err)
		}
		if len(keys) > 0 {
			if err := c.Del(ctx, keys...).Err(); err != nil {
				t.Errorf("deleting test keys: %v", err)
			}
		}
	})
	return prefix
}

func newStore(t testing.TB, ret agent.Retention) (*Store, *goredis.Client) {
	t.Helper()
	c := newClient(t)
	return New(c, Options{Prefix: testPrefix(t), Retention: ret}), c
}

func TestConformance(t *testing.T) {
	newClient(t).Close() // skip here, not in every subtest
	storetest.Run(t, func(t *testing.T, c storetest.Config) storetest.Store {
		return New(newClient(t), Options{Prefix: testPrefix(t), Retention: c.Retention, AuditCap: c.AuditCap})
	})
}

// keysOf lists the keys under s's prefix.
func keysOf(t *testing.T, c *goredis.Client, s *Store) []string {
	t.Helper()
	keys, err := c.Keys(t.Context(), globEscape(s.prefix)+":*").Result()
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// TestEveryKeyExpiresOrIsKept runs every session operation and checks that
// each key it leaves has a TTL, or is one of those kept on purpose (see the
// record kinds in keys.go). TestGovernKeys does the same for the governance
// records.
func TestEveryKeyExpiresOrIsKept(t *testing.T) {
	s, c := newStore(t, agent.Retention{})
	defer s.Close()
	ctx := t.Context()
	key := agent.SessionKey{Platform: "slack", Team: "T1", Chat: "C1", Thread: "1700.01"}
	for _, id := range []string{"1", "2", "4"} {
		if _, err := s.Enqueue(ctx, agent.Inbound{Key: key, MessageID: id, Seq: id}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Seen(ctx, agent.Inbound{Key: key, MessageID: "3"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Claim(ctx, key, "w", time.Minute); err != nil {
		t.Fatal(err)
	}
	// Two of the three claimed are consumed, so a claimed count is left.
	out := &agent.Outbound{ID: "o1", Answer: "hi"}
	if err := s.Commit(ctx, key, "w", 2, []agent.Message{{Role: agent.RoleUser, Content: "hi"}}, out); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetSettings(ctx, key.Channel(), agent.ChannelSettings{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Boot(ctx, "web-0:8080"); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.TryLease(ctx, "telegram", "w", time.Minute); err != nil || !ok {
		t.Fatalf("TryLease = %v, %v", ok, err)
	}
	if _, err := s.Ready(ctx, 10); err != nil {
		t.Fatal(err)
	}

	// Keys that expire, with the TTL they should have at most.
	idle, dedupTTL := s.ret.HistoryTTL, s.ret.DedupTTL
	ttls := map[string]time.Duration{
		s.key(mailbox, key, ""): idle, s.key(history, key, ""): idle, s.key(outbox, key, ""): idle,
		s.key(lease, key, ""): time.Minute, s.key(claimed, key, ""): time.Minute, s.key(committed, key, ""): idle,
		s.key(dedup, key, "1"): dedupTTL, s.key(dedup, key, "2"): dedupTTL, s.key(dedup, key, "4"): dedupTTL,
		s.key(dedup, key, "3"):          dedupTTL,
		s.key(named, noKey, "telegram"): time.Minute,
	}
	// Keys kept on purpose, each for the reason keys.go gives.
	kept := map[string]bool{
		s.key(settings, key, ""):         true,
		s.key(ready, noKey, ""):          true,
		s.key(readyTouch, noKey, ""):     true,
		s.key(readySeq, noKey, ""):       true,
		s.key(boot, noKey, "web-0:8080"): true,
	}
	keys := keysOf(t, c, s)
	if len(keys) != len(ttls)+len(kept) {
		t.Errorf("keys = %q, want %d keys", keys, len(ttls)+len(kept))
	}
	for _, k := range keys {
		ttl, err := c.PTTL(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if kept[k] {
			if ttl >= 0 {
				t.Errorf("key %q has a TTL (%v)", k, ttl)
			}
			continue
		}
		want, ok := ttls[k]
		switch {
		case !ok:
			t.Errorf("unexpected key %q (TTL %v): give it a TTL, or a reason in keys.go and here", k, ttl)
		case ttl <= 0 || ttl > want:
			t.Errorf("key %q has TTL %v, want up to %v", k, ttl, want)
		}
	}
}

// hashTag returns the part of k Redis Cluster hashes, by Redis's rule: the
// text between the first '{' and the first '}' after it, if not empty.
func hashTag(k string) string {
	if i := strings.IndexByte(k, '{'); i >= 0 {
		if j := strings.IndexByte(k[i+1:], '}'); j > 0 {
			return k[i+1 : i+1+j]
		}
	}
	return k
}

func TestKeysOfASessionShareASlot(t *testing.T) {
	s := &Store{prefix: DefaultPrefix}
	for _, key := range []agent.SessionKey{
		{Platform: "slack", Team: "T1", Chat: "C1", Thread: "1700.01"},
		{Platform: "slack", Team: "T1", Chat: "C1"},
		{Platform: "telegram", Chat: "-100123", Thread: "7"},
		{Platform: "x", Chat: "a}b{c", Thread: "}{"},
		{Platform: "x", Team: "{", Chat: "}"},
	} {
		tag := hashTag(s.key(mailbox, key, ""))
		for _, k := range []string{
			s.key(history, key, ""), s.key(lease, key, ""), s.key(outbox, key, ""), s.key(claimed, key, ""),
			s.key(dedup, key, "1700.02"), s.key(dedup, key, "}{"),
			s.key(settings, key, ""),
			s.key(mailbox, key.Channel(), ""),
		} {
			if got := hashTag(k); got != tag {
				t.Errorf("%v: key %q hashes %q, mailbox hashes %q", key, k, got, tag)
			}
		}
	}
	if got, want := s.key(mailbox, agent.SessionKey{Platform: "slack", Team: "T1", Chat: "C1", Thread: "1700.01"}, ""),
		"fm:{slack:T1:C1:}:s:slack:T1:C1:1700.01:mbox"; got != want {
		t.Errorf("mailbox key = %q, want %q", got, want)
	}
}

// countHook counts round trips: one per command, one per pipeline. It
// keeps what each was, for a test to say which ones went over a budget.
type countHook struct {
	n    atomic.Int64
	mu   sync.Mutex
	seen []string
}

func (h *countHook) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (h *countHook) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		h.note(cmd.FullName())
		return next(ctx, cmd)
	}
}

func (h *countHook) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		names := make([]string, len(cmds))
		for i, c := range cmds {
			names[i] = c.FullName()
		}
		h.note("pipeline[" + strings.Join(names, " ") + "]")
		return next(ctx, cmds)
	}
}

func (h *countHook) note(what string) {
	h.n.Add(1)
	h.mu.Lock()
	if len(h.seen) < 64 {
		h.seen = append(h.seen, what)
	}
	h.mu.Unlock()
}

// reset forgets the round trips the hook has seen.
func (h *countHook) reset() {
	h.mu.Lock()
	h.n.Store(0)
	h.seen = nil
	h.mu.Unlock()
}

// trips says which round trips the hook has seen.
func (h *countHook) trips() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return strings.Join(h.seen, ", ")
}

// turnOf is a dispatcher turn: a user message, a tool call and its result,
// the answer.
var turnOf = []agent.Message{
	{Role: agent.RoleUser, Content: "what is in the workspace?"},
	{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{{ID: "c1", Name: "ls", Args: []byte(`{"path":"."}`)}}},
	{Role: agent.RoleTool, ToolCallID: "c1", ToolName: "ls", Content: "a.txt\nb.txt"},
	{Role: agent.RoleAssistant, Content: "Two files: a.txt and b.txt."},
}

// runTurn is what the dispatcher does with one incoming message: Enqueue,
// Claim, Commit with the answer, Delivered, Release.
func runTurn(ctx context.Context, s *Store, in agent.Inbound, owner string) (claimed int, err error) {
	if _, err := s.Enqueue(ctx, in); err != nil {
		return 0, err
	}
	c, err := s.Claim(ctx, in.Key, owner, time.Minute)
	if err != nil {
		return 0, err
	}
	out := &agent.Outbound{ID: "answer-" + in.MessageID, Trigger: in, Answer: turnOf[len(turnOf)-1].Content}
	if err := s.Commit(ctx, in.Key, owner, len(c.Mailbox), turnOf, out); err != nil {
		return 0, err
	}
	if err := s.Delivered(ctx, in.Key, out.ID); err != nil {
		return 0, err
	}
	if _, err := s.Release(ctx, in.Key, owner, ""); err != nil {
		return 0, err
	}
	return len(c.Mailbox), nil
}

// turnRoundTrips runs a turn on a session with 50 messages of history and
// 49 waiting, with the ready poll that finds it, and returns the round
// trips of each step as hook counted them.
func turnRoundTrips(t *testing.T, s *Store, hook *countHook) map[string]int64 {
	t.Helper()
	const sessionLen = 50
	ctx := t.Context()
	key := agent.SessionKey{Platform: "slack", Team: "T1", Chat: "C1", Thread: "1700.01"}

	// Warm up the connections and the server's script cache on another
	// session, then give this one a 50-message history and 49 waiting
	// messages.
	warm := key
	warm.Thread = "warm"
	if _, err := runTurn(ctx, s, agent.Inbound{Key: warm, MessageID: "w"}, "w"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Claim(ctx, key, "w", time.Minute); err != nil {
		t.Fatal(err)
	}
	for range sessionLen / len(turnOf) {
		if err := s.Commit(ctx, key, "w", 0, turnOf, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Commit(ctx, key, "w", 0, turnOf[:sessionLen%len(turnOf)], nil); err != nil {
		t.Fatal(err)
	}
	for i := range sessionLen - 1 {
		if _, err := s.Enqueue(ctx, agent.Inbound{Key: key, MessageID: fmt.Sprint(i), Text: "message"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Abandon(ctx, key, "w"); err != nil {
		t.Fatal(err)
	}
	// This Ready drops the warm-up session, which is empty.
	if _, err := s.Ready(ctx, 10); err != nil {
		t.Fatal(err)
	}

	counts := map[string]int64{}
	step := func(name string, f func() error) {
		t.Helper()
		hook.n.Store(0)
		if err := f(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		counts[name] = hook.n.Load()
	}
	in := agent.Inbound{Key: key, MessageID: "last", Text: "message"}
	out := &agent.Outbound{ID: "a1", Trigger: in, Answer: "Two files."}
	var c *agent.Claim
	step("Enqueue", func() error { _, err := s.Enqueue(ctx, in); return err })
	step("Ready", func() error {
		got, err := s.Ready(ctx, 10)
		if err == nil && (len(got) != 1 || got[0] != key) {
			err = fmt.Errorf("got %v, want [%v]", got, key)
		}
		return err
	})
	step("Claim", func() (err error) { c, err = s.Claim(ctx, key, "w", time.Minute); return err })
	if len(c.Mailbox) != sessionLen || len(c.History) != sessionLen {
		t.Fatalf("claimed %d messages and %d of history, want %d of each", len(c.Mailbox), len(c.History), sessionLen)
	}
	step("Commit", func() error { return s.Commit(ctx, key, "w", len(c.Mailbox), turnOf, out) })
	step("Delivered", func() error { return s.Delivered(ctx, key, out.ID) })
	step("Release", func() error { _, err := s.Release(ctx, key, "w", ""); return err })
	t.Logf("round trips of a turn on a session with %d messages of history and %d waiting: %v", sessionLen, sessionLen, counts)
	return counts
}

func TestTurnRoundTrips(t *testing.T) {
	s, c := newStore(t, agent.Retention{})
	defer s.Close()
	hook := &countHook{}
	c.AddHook(hook)
	counts := turnRoundTrips(t, s, hook)
	// On one node the ready touch rides in the pipeline of Enqueue's and
	// Commit's scripts.
	want := map[string]int64{"Enqueue": 1, "Claim": 1, "Commit": 1, "Delivered": 1, "Release": 1, "Ready": 2}
	for op, n := range want {
		if counts[op] != n {
			t.Errorf("%s took %d round trips, want %d", op, counts[op], n)
		}
	}
}

func BenchmarkTurn(b *testing.B) {
	s, c := newStore(b, agent.Retention{MaxTurns: 50 / len(turnOf)})
	defer s.Close()
	hook := &countHook{}
	c.AddHook(hook)
	ctx := b.Context()
	key := agent.SessionKey{Platform: "slack", Team: "T1", Chat: "C1", Thread: "1700.01"}
	i := 0
	for b.Loop() {
		i++
		if _, err := runTurn(ctx, s, agent.Inbound{Key: key, MessageID: fmt.Sprint(i), Text: "message"}, "w"); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(hook.n.Load())/float64(b.N), "roundtrips/op")
}

func TestOpen(t *testing.T) {
	newClient(t).Close()
	s, err := Open(t.Context(), redisURL(), Options{Prefix: testPrefix(t)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Settings(t.Context(), agent.SessionKey{Platform: "x", Chat: "y"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestOpenErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	for _, url := range []string{
		"",
		"localhost:6379",
		"http://localhost:6379",
		"redis://user:s3cret@bad host:6379/0",
		"redis://user:s3cret@localhost:6379/notadb",
		"redis://user:s3cret@127.0.0.1:1/0", // nothing listens on port 1
		"redis://user:s3cret@a:1,b:2/0",
		"redis://user:s3cret@127.0.0.1:1?cluster=true",
		"redis+cluster://user:s3cret@127.0.0.1:1,127.0.0.1:2",
		"redis+cluster://user:s3cret@127.0.0.1:1/3",
		"redis+sentinel://user:s3cret@127.0.0.1:1",
		"redis+sentinel://user:s3cret@127.0.0.1:1/mymaster?sentinel_password=s3cret",
		"rediss+sentinel://user:s3cret@127.0.0.1:1/mymaster/0?sentinel_password=s3cret&skip_verify=true",
	} {
		_, err := Open(ctx, url, Options{})
		if err == nil {
			t.Errorf("Open(%q) succeeded", url)
			continue
		}
		if !strings.Contains(err.Error(), "REDIS_URL") {
			t.Errorf("Open(%q) error does not name REDIS_URL: %v", url, err)
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Open(%q) error leaks the password: %v", url, err)
		}
	}
	if _, err := Open(ctx, redisURL(), Options{Prefix: "a{b}"}); err == nil {
		t.Error("Open with a brace in the prefix succeeded")
	}
}

func TestParseURL(t *testing.T) {
	o, err := parseURL("rediss://alice:s3cret@redis.example.com:6380/3")
	if err != nil {
		t.Fatal(err)
	}
	if o.TLSConfig == nil {
		t.Fatal("rediss:// did not enable TLS")
	}
	if o.TLSConfig.ServerName != "redis.example.com" {
		t.Errorf("TLS server name = %q", o.TLSConfig.ServerName)
	}
	if o.Addr != "redis.example.com:6380" || o.DB != 3 || o.Username != "alice" || o.Password != "s3cret" {
		t.Errorf("parsed %q, db %d, user %q, password %q", o.Addr, o.DB, o.Username, o.Password)
	}

	o, err = parseURL("redis://localhost")
	if err != nil {
		t.Fatal(err)
	}
	if o.TLSConfig != nil || o.Addr != "localhost:6379" || o.DB != 0 {
		t.Errorf("redis://localhost parsed as %q, db %d, TLS %v", o.Addr, o.DB, o.TLSConfig != nil)
	}
}

func TestNewPanicsOnBraces(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("New with a brace in the prefix did not panic")
		}
	}()
	New(nil, Options{Prefix: "x}"})
}

func TestReplicasShareState(t *testing.T) {
	prefix := testPrefix(t)
	a := New(newClient(t), Options{Prefix: prefix})
	defer a.Close()
	b := New(newClient(t), Options{Prefix: prefix})
	defer b.Close()
	ctx := t.Context()
	key := agent.SessionKey{Platform: "slack", Team: "T1", Chat: "C1", Thread: "1700.01"}

	if added, err := a.Enqueue(ctx, agent.Inbound{Key: key, MessageID: "1"}); err != nil || !added {
		t.Fatalf("Enqueue on replica a = %v, %v", added, err)
	}
	// Slack retries the event and another replica receives it.
	if added, err := b.Enqueue(ctx, agent.Inbound{Key: key, MessageID: "1"}); err != nil || added {
		t.Fatalf("Enqueue of the retry on replica b = %v, %v; want false, nil", added, err)
	}
	if _, err := a.Claim(ctx, key, "a", time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Claim(ctx, key, "b", time.Minute); !errors.Is(err, agent.ErrLeaseHeld) {
		t.Fatalf("Claim on replica b while a holds the lease: %v", err)
	}
	if err := a.Commit(ctx, key, "a", 1, turnOf, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Release(ctx, key, "a", ""); err != nil {
		t.Fatal(err)
	}
	c, err := b.Claim(ctx, key, "b", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Mailbox) != 0 || len(c.History) != len(turnOf) {
		t.Fatalf("replica b claimed %d messages and %d of history, want 0 and %d", len(c.Mailbox), len(c.History), len(turnOf))
	}
}

func TestWaitingGlobPrefix(t *testing.T) {
	base := "fmtest-" + rand.Text()[:12]
	// Unescaped, the first prefix as a pattern would match the other two.
	glob := cleanPrefix(t, base+`*?[x]\`)
	a := New(newClient(t), Options{Prefix: glob})
	defer a.Close()
	ctx := t.Context()
	var others []*Store
	for _, p := range []string{base + "-yx", base + "ab[x]x"} {
		o := New(newClient(t), Options{Prefix: cleanPrefix(t, p)})
		defer o.Close()
		others = append(others, o)
	}
	key := agent.SessionKey{Platform: "slack", Team: "T1", Chat: "C1", Thread: "1700.01"}
	for i, o := range others {
		if _, err := o.Enqueue(ctx, agent.Inbound{Key: key, MessageID: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := a.Waiting(ctx); err != nil || len(got) != 0 {
		t.Fatalf("Waiting with other prefixes' messages = %v, %v; want none", got, err)
	}
	if _, err := a.Enqueue(ctx, agent.Inbound{Key: key, MessageID: "1"}); err != nil {
		t.Fatal(err)
	}
	got, err := a.Waiting(ctx)
	if err != nil || len(got) != 1 || got[0] != key {
		t.Fatalf("Waiting = %v, %v; want [%v]", got, err, key)
	}
	for _, o := range others {
		if got, err := o.Waiting(ctx); err != nil || len(got) != 1 || got[0] != key {
			t.Fatalf("Waiting on %q = %v, %v; want [%v]", o.prefix, got, err, key)
		}
	}
}

func TestMailboxSession(t *testing.T) {
	s := &Store{prefix: "fm"}
	for _, key := range []agent.SessionKey{
		{Platform: "slack", Team: "T1", Chat: "C1", Thread: "1700.01"},
		{Platform: "slack", Team: "T1", Chat: "C1"},
		{Platform: "x", Team: "}", Chat: "s", Thread: "t"},
		{Platform: "x", Team: "a:b%", Chat: "}:s:{", Thread: ":mbox"},
	} {
		got, ok := s.mailboxSession(s.key(mailbox, key, ""))
		if !ok || got != key {
			t.Errorf("mailboxSession(key(mailbox, %v)) = %v, %v", key, got, ok)
		}
	}
	key := agent.SessionKey{Platform: "slack", Team: "T1", Chat: "C1", Thread: "1700.01"}
	for _, k := range []string{
		s.key(history, key, ""),
		s.key(lease, key, ""),
		(&Store{prefix: "fm2"}).key(mailbox, key, ""),
		"fm:{slack:T1:C1:}:s:slack:T1:C2:1700.01:mbox",  // wrong hash tag
		"fm:{slack:T1:C1:}:x:slack:T1:C1:1700.01:mbox",  // no s: marker
		"fm:{slack:T1:C1:}:s:slack:T1:C1:17%00.01:mbox", // bad escape
		"fm:{::}:s::::mbox",
		"mbox",
		":mbox",
		"",
	} {
		if got, ok := s.mailboxSession(k); ok {
			t.Errorf("mailboxSession(%q) = %v, want no session", k, got)
		}
	}
}

func TestGlobEscape(t *testing.T) {
	for in, want := range map[string]string{
		"fm":       "fm",
		`fm*[x]`:   `fm\*\[x\]`,
		`a?b\c-^d`: `a\?b\\c-^d`,
		"":         "",
	} {
		if got := globEscape(in); got != want {
			t.Errorf("globEscape(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestGovernKeys(t *testing.T) {
	s, c := newStore(t, agent.Retention{})
	defer s.Close()
	ctx := t.Context()
	ch := agent.SessionKey{Platform: "slack", Team: "T1", Chat: "C1", Thread: "1700.01"}
	now := time.Now()
	if err := s.Allow(ctx, govern.Grant{Platform: "telegram", Kind: govern.GrantUser, ID: "42"}); err != nil {
		t.Fatal(err)
	}
	p := govern.Pairing{Code: "K7QP-M2XD", Platform: "telegram", Kind: govern.GrantUser, ID: "43", Created: now, Expires: now.Add(time.Hour)}
	if _, _, err := s.Pair(ctx, p); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Once(ctx, "refused:telegram:44:44", time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CountMessage(ctx, "telegram:46", "telegram:46::1", 10, time.Minute, 10*time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddUsage(ctx, ch, "2025-03-04", 10); err != nil {
		t.Fatal(err)
	}
	if err := s.PutApproval(ctx, agent.Approval{ID: "a1", Key: ch, Deadline: now.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if err := s.Audit(ctx, govern.AuditEntry{Action: govern.AuditPolicySet}); err != nil {
		t.Fatal(err)
	}

	n, wms := storegov.Window(time.Now(), time.Minute)
	noTTL := map[string]bool{s.key(grants, noKey, ""): true, s.key(audit, noKey, ""): true}
	// At most, because the request stays until its expiry; at least, so
	// that a key does not outlive its content by much.
	ttls := map[string][2]time.Duration{
		s.key(pairCodes, noKey, ""):                                         {59 * time.Minute, time.Hour},
		s.key(pairSubjects, noKey, ""):                                      {59 * time.Minute, time.Hour},
		s.key(pairExpiry, noKey, ""):                                        {59 * time.Minute, time.Hour},
		s.key(once, noKey, "refused:telegram:44:44"):                        {59 * time.Minute, time.Hour},
		s.key(msgCount, noKey, msgCountName("telegram:46", wms, n)):         {59 * time.Second, time.Minute},
		s.key(msgSeen, noKey, msgSeenName("telegram:46", "telegram:46::1")): {9 * time.Minute, 10 * time.Minute},
		s.key(usage, ch, "2025-03-04"):                                      {storegov.UsageTTL - time.Minute, storegov.UsageTTL},
		s.key(approval, noKey, "a1"):                                        {storegov.ApprovalKeep, storegov.ApprovalKeep + time.Minute},
	}
	keys := keysOf(t, c, s)
	if len(keys) != len(noTTL)+len(ttls) {
		t.Fatalf("keys = %q, want %d keys", keys, len(noTTL)+len(ttls))
	}
	for _, k := range keys {
		ttl, err := c.PTTL(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if noTTL[k] {
			if ttl >= 0 {
				t.Errorf("key %q has a TTL (%v)", k, ttl)
			}
			continue
		}
		want, ok := ttls[k]
		if !ok {
			t.Errorf("unexpected key %q", k)
			continue
		}
		if ttl < want[0] || ttl > want[1] {
			t.Errorf("key %q has TTL %v, want %v to %v", k, ttl, want[0], want[1])
		}
	}
}

func TestGlobalKeys(t *testing.T) {
	s := &Store{prefix: DefaultPrefix}
	for _, tc := range []struct {
		got, want string
	}{
		{s.key(grants, noKey, ""), "fm:{admin}:grants"},
		{s.key(pairCodes, noKey, ""), "fm:{pair}:codes"},
		{s.key(pairSubjects, noKey, ""), "fm:{pair}:subjects"},
		{s.key(pairExpiry, noKey, ""), "fm:{pair}:expiry"},
		{s.key(approval, noKey, "0a1b"), "fm:{approval:0a1b}"},
		{s.key(approval, noKey, "a:}{"), "fm:{approval:a%3A%7D%7B}"},
		{s.key(once, noKey, "refused:telegram:42"), "fm:{once:refused%3Atelegram%3A42}"},
		{s.key(msgCount, noKey, msgCountName("slack:U1", 60000, 29000000)), "fm:{msgs:slack%3AU1}:60000:29000000"},
		{s.key(msgSeen, noKey, msgSeenName("slack:U1", "slack:T1:C1::1.2")), "fm:{msgs:slack%3AU1}:m:slack%3AT1%3AC1%3A%3A1.2"},
		{s.key(msgSeen, noKey, msgSeenName("{x}:", "}")), "fm:{msgs:%7Bx%7D%3A}:m:%7D"},
		{s.key(audit, noKey, ""), "fm:{audit}:log"},
		{s.key(ready, noKey, ""), "fm:{ready}"},
		{s.key(readyTouch, noKey, ""), "fm:{ready}:touch"},
		{s.key(readySeq, noKey, ""), "fm:{ready}:seq"},
		{s.key(boot, noKey, "web-0:8080"), "fm:{boot:web-0%3A8080}"},
		{s.key(named, noKey, "telegram}{"), "fm:{lease:telegram%7D%7B}"},
		{s.key(usage, agent.SessionKey{Platform: "slack", Team: "T1", Chat: "C1", Thread: "1"}, "2025-03-04"), "fm:{slack:T1:C1:}:u:2025-03-04"},
	} {
		if tc.got != tc.want {
			t.Errorf("key = %q, want %q", tc.got, tc.want)
		}
	}
	// The pairing scripts take three keys, and so do the ready scripts:
	// one slot each. CountMessage takes a message's mark and its author's
	// count: one slot, the author's, whatever the names hold.
	for _, keys := range [][]string{s.pairKeys(), s.readyKeys(),
		{s.key(msgSeen, noKey, msgSeenName("slack:U1", "slack:T1:C1::1.2")), s.key(msgCount, noKey, msgCountName("slack:U1", 60000, 1))},
		{s.key(msgSeen, noKey, msgSeenName("a}{:", "{b}:")), s.key(msgCount, noKey, msgCountName("a}{:", 1, 1))},
	} {
		tag := hashTag(keys[0])
		for _, k := range keys {
			if hashTag(k) != tag {
				t.Errorf("key %q hashes %q, want %q", k, hashTag(k), tag)
			}
		}
	}
	// No global key is a channel's, even for a platform named like one.
	for _, key := range []agent.SessionKey{
		{Platform: "once", Team: "x", Chat: "y"},
		{Platform: "approval", Chat: "0a1b}"},
		{Platform: "admin}", Team: "grants", Chat: "c"},
		{Platform: "msgs", Team: "a", Chat: "1"},
		{Platform: "ready}", Chat: "touch"},
		{Platform: "ready", Chat: "x"},
		{Platform: "lease", Team: "x", Chat: "y"},
	} {
		for _, r := range []record{mailbox, history, lease, outbox, claimed, settings} {
			k := s.key(r, key, "")
			for _, g := range []string{
				s.key(grants, noKey, ""), s.key(once, noKey, "x:y"), s.key(approval, noKey, "0a1b"),
				s.key(msgCount, noKey, msgCountName("a", 1, 1)), s.key(msgSeen, noKey, msgSeenName("a", "1")),
				s.key(ready, noKey, ""), s.key(readyTouch, noKey, ""), s.key(readySeq, noKey, ""),
				s.key(boot, noKey, "x"), s.key(named, noKey, "x:y"),
			} {
				if k == g {
					t.Errorf("%v's key %q is a global key", key, k)
				}
			}
		}
	}
}

func TestAuditCapTrimsTheStream(t *testing.T) {
	c := newClient(t)
	s := New(c, Options{Prefix: testPrefix(t), AuditCap: 200})
	defer s.Close()
	ctx := t.Context()
	for i := range 2000 {
		if err := s.Audit(ctx, govern.AuditEntry{Action: "test", Detail: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	// MAXLEN ~ trims in whole stream nodes (100 entries by default), so a
	// little more than the cap stays; the reader sees exactly the cap.
	n, err := c.XLen(ctx, s.key(audit, noKey, "")).Result()
	if err != nil {
		t.Fatal(err)
	}
	if n < 200 || n > 400 {
		t.Errorf("stream holds %d entries, want about 200", n)
	}
	got, err := s.AuditLog(ctx, govern.AuditQuery{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 200 || got[0].Detail != "1800" || got[199].Detail != "1999" {
		t.Fatalf("AuditLog returned %d entries, %s to %s; want 200, 1800 to 1999", len(got), got[0].Detail, got[len(got)-1].Detail)
	}
}

func TestSettingsOfAnOlderVersion(t *testing.T) {
	s, c := newStore(t, agent.Retention{})
	defer s.Close()
	ch := agent.SessionKey{Platform: "slack", Team: "T1", Chat: "C1"}
	// Before rules recorded who set them, a rule was a bare mode.
	if err := c.HSet(t.Context(), s.key(settings, ch, ""), "version", "4", "json", `{"version":4,"tools":{"shell":"deny"}}`).Err(); err != nil {
		t.Fatal(err)
	}
	cs, err := s.Settings(t.Context(), ch)
	if err != nil || cs.Version != 4 || cs.Tools["shell"].Mode != agent.ToolDeny {
		t.Fatalf("Settings = %+v, %v", cs, err)
	}
	if _, err := s.SetSettings(t.Context(), ch, cs); err != nil {
		t.Fatalf("SetSettings over older settings: %v", err)
	}
}
