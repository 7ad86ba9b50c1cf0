package local

import (
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/agent/govern"
	"github.com/firstmate/firstmate/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, c storetest.Config) storetest.Store {
		s, err := Open(filepath.Join(t.TempDir(), "firstmate.db"), c.Retention, WithAuditCap(c.AuditCap))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func openTemp(t *testing.T, ret agent.Retention) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "data", "firstmate.db")
	s, err := Open(path, ret)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, path
}

var key = agent.SessionKey{Platform: "telegram", Chat: "-100123"}

func TestSecondOpenFailsFast(t *testing.T) {
	_, path := openTemp(t, agent.Retention{})
	start := time.Now()
	_, err := open(path, agent.Retention{}, 100*time.Millisecond)
	if !errors.Is(err, ErrInUse) {
		t.Fatalf("second Open: err = %v, want ErrInUse", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("second Open took %v", d)
	}
}

func TestReopenKeepsDataNotLeases(t *testing.T) {
	s, path := openTemp(t, agent.Retention{})
	ctx := t.Context()
	if _, err := s.Enqueue(ctx, agent.Inbound{Key: key, MessageID: "1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Claim(ctx, key, "old process", time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}

	s, err := Open(path, agent.Retention{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// The old process is gone, and so is its lease.
	c, err := s.Claim(ctx, key, "new process", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Mailbox) != 1 {
		t.Fatalf("mailbox after reopen has %d entries, want 1", len(c.Mailbox))
	}
	if added, err := s.Enqueue(ctx, agent.Inbound{Key: key, MessageID: "1"}); err != nil || added {
		t.Fatalf("Enqueue of a seen message after reopen = %v, %v; want false, nil", added, err)
	}
}

func TestSweepDeletesExpired(t *testing.T) {
	const ttl = 200 * time.Millisecond
	s, _ := openTemp(t, agent.Retention{DedupTTL: ttl, HistoryTTL: ttl})
	ctx := t.Context()
	for i := range 3 {
		k := key
		k.Thread = fmt.Sprint(i)
		if _, err := s.Enqueue(ctx, agent.Inbound{Key: k, MessageID: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Claim(ctx, k, "w", ttl); err != nil {
			t.Fatal(err)
		}
		if err := s.Commit(ctx, k, "w", 1, []agent.Message{{Role: agent.RoleUser, Content: "hi"}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.SetSettings(ctx, key, agent.ChannelSettings{}); err != nil {
		t.Fatal(err)
	}
	if err := s.sweep(time.Now()); err != nil {
		t.Fatal(err)
	}
	if seen, sessions, leases := s.records(t); seen != 3 || sessions != 3 || leases != 3 {
		t.Fatalf("before expiry: %d seen, %d sessions, %d leases; want 3 of each", seen, sessions, leases)
	}

	if err := s.sweep(time.Now().Add(2 * ttl)); err != nil {
		t.Fatal(err)
	}
	if seen, sessions, leases := s.records(t); seen != 0 || sessions != 0 || leases != 0 {
		t.Fatalf("after expiry: %d seen, %d sessions, %d leases; want none", seen, sessions, leases)
	}
	if cs, err := s.Settings(ctx, key); err != nil || cs.Version != 1 {
		t.Fatalf("settings after sweep = %+v, %v; want version 1", cs, err)
	}
}

func (s *Store) records(t *testing.T) (seen, sessions, leases int) {
	t.Helper()
	err := s.db.View(func(tx *bbolt.Tx) error {
		seen = count(tx.Bucket(bucketSeen))
		sessions = count(tx.Bucket(bucketSessions))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	s.leases.mu.Lock()
	defer s.leases.mu.Unlock()
	return seen, sessions, len(s.leases.m)
}

func TestCloseStopsSweeper(t *testing.T) {
	before := runtime.NumGoroutine()
	dir := t.TempDir()
	for i := range 20 {
		s, err := Open(filepath.Join(dir, fmt.Sprintf("%d.db", i)), agent.Retention{})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// Close waits for the sweeper, so nothing is left running; allow for
	// goroutines of the test runtime itself coming and going.
	if after := runtime.NumGoroutine(); after > before+2 {
		t.Fatalf("%d goroutines before, %d after opening and closing 20 stores", before, after)
	}
}

func TestSweepInterval(t *testing.T) {
	for _, tc := range []struct {
		ret  agent.Retention
		want time.Duration
	}{
		{agent.DefaultRetention, time.Hour},
		{agent.Retention{DedupTTL: 10 * time.Minute, HistoryTTL: time.Hour}, 5 * time.Minute},
		{agent.Retention{DedupTTL: time.Millisecond, HistoryTTL: time.Hour}, time.Second},
	} {
		if got := sweepInterval(tc.ret); got != tc.want {
			t.Errorf("sweepInterval(%+v) = %v, want %v", tc.ret, got, tc.want)
		}
	}
}

func BenchmarkTurn(b *testing.B) {
	s, err := Open(filepath.Join(b.TempDir(), "firstmate.db"), agent.Retention{MaxTurns: 50})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := b.Context()
	turn := []agent.Message{
		{Role: agent.RoleUser, Content: "what is in the workspace?"},
		{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{{ID: "c1", Name: "ls", Args: []byte(`{"path":"."}`)}}},
		{Role: agent.RoleTool, ToolCallID: "c1", ToolName: "ls", Content: "a.txt\nb.txt"},
		{Role: agent.RoleAssistant, Content: "Two files: a.txt and b.txt."},
	}
	i := 0
	for b.Loop() {
		i++
		if _, err := s.Enqueue(ctx, agent.Inbound{Key: key, MessageID: fmt.Sprint(i), Text: "hi"}); err != nil {
			b.Fatal(err)
		}
		c, err := s.Claim(ctx, key, "w", time.Minute)
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Commit(ctx, key, "w", len(c.Mailbox), turn, nil); err != nil {
			b.Fatal(err)
		}
		if _, err := s.Release(ctx, key, "w", ""); err != nil {
			b.Fatal(err)
		}
	}
}

// reopenOlder makes s's file an older one with older, closes s and opens
// the file again.
func reopenOlder(t *testing.T, s *Store, path string, older func(tx *bbolt.Tx) error) *Store {
	t.Helper()
	if err := s.db.Update(older); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err := Open(path, agent.Retention{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// A file written before message counts keeps Hit's counters in a bucket
// nothing reads or sweeps any more; Open drops it.
func TestOpenDropsHitCounters(t *testing.T) {
	s, path := openTemp(t, agent.Retention{})
	s = reopenOlder(t, s, path, func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucket([]byte("hits"))
		if err != nil {
			return err
		}
		return b.Put([]byte("msgs%3Aslack%3AU1:60000"), make([]byte, 16))
	})
	if err := s.db.View(func(tx *bbolt.Tx) error {
		if tx.Bucket([]byte("hits")) != nil {
			t.Error("the hits bucket is still there")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func TestSweepDeletesExpiredGovernRecords(t *testing.T) {
	s, _ := openTemp(t, agent.Retention{})
	ctx := t.Context()
	now := time.Now()
	if err := s.Allow(ctx, govern.Grant{Platform: "telegram", Kind: govern.GrantUser, ID: "42"}); err != nil {
		t.Fatal(err)
	}
	p := govern.Pairing{Code: "K7QP-M2XD", Platform: "telegram", Kind: govern.GrantUser, ID: "43", Created: now, Expires: now.Add(time.Hour)}
	if _, _, err := s.Pair(ctx, p); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Once(ctx, "refused", time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CountMessage(ctx, "telegram:44", "telegram:44::1", 10, time.Minute, 10*time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddUsage(ctx, key, "2025-03-04", 10); err != nil {
		t.Fatal(err)
	}
	if err := s.PutApproval(ctx, agent.Approval{ID: "a1", Key: key, Deadline: now.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if err := s.Audit(ctx, govern.AuditEntry{Action: govern.AuditPolicySet}); err != nil {
		t.Fatal(err)
	}
	counts := func() map[string]int {
		t.Helper()
		out := map[string]int{}
		err := s.db.View(func(tx *bbolt.Tx) error {
			for _, b := range governBuckets {
				out[string(b)] = count(tx.Bucket(b))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if err := s.sweep(time.Now()); err != nil {
		t.Fatal(err)
	}
	for b, n := range counts() {
		if n != 1 {
			t.Errorf("before expiry: bucket %s has %d records, want 1", b, n)
		}
	}
	if err := s.sweep(time.Now().Add(9 * 24 * time.Hour)); err != nil {
		t.Fatal(err)
	}
	for b, n := range counts() {
		want := 0
		if b == string(bucketGrants) || b == string(bucketAudit) {
			want = 1 // they do not expire
		}
		if n != want {
			t.Errorf("after expiry: bucket %s has %d records, want %d", b, n, want)
		}
	}
}

func TestAuditCapAcrossReopen(t *testing.T) {
	s, path := openTemp(t, agent.Retention{})
	ctx := t.Context()
	for i := range 10 {
		if err := s.Audit(ctx, govern.AuditEntry{Action: "test", Detail: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	// A smaller cap applies at once to what is read, and to what is kept
	// at the next append.
	s, err := Open(path, agent.Retention{}, WithAuditCap(3))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.AuditLog(ctx, govern.AuditQuery{})
	if err != nil || len(got) != 3 || got[0].Detail != "7" {
		t.Fatalf("AuditLog after reopening with a smaller cap = %d entries, %v", len(got), err)
	}
	if err := s.Audit(ctx, govern.AuditEntry{Action: "test", Detail: "10"}); err != nil {
		t.Fatal(err)
	}
	var n int
	s.db.View(func(tx *bbolt.Tx) error { n = count(tx.Bucket(bucketAudit)); return nil })
	if n != 3 {
		t.Fatalf("%d entries kept, want 3", n)
	}
	// IDs keep their order across the reopen.
	got, _ = s.AuditLog(ctx, govern.AuditQuery{})
	if len(got) != 3 || got[2].Detail != "10" || !(got[0].ID < got[1].ID && got[1].ID < got[2].ID) {
		t.Fatalf("AuditLog = %+v", got)
	}
}

func TestSettingsOfAnOlderVersion(t *testing.T) {
	s, _ := openTemp(t, agent.Retention{})
	// Before rules recorded who set them, a rule was a bare mode.
	err := s.db.Update(func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketSettings).Put([]byte(key.String()), []byte(`{"version":4,"tools":{"shell":"deny"}}`))
	})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := s.Settings(t.Context(), key)
	if err != nil || cs.Version != 4 || cs.Tools["shell"].Mode != agent.ToolDeny {
		t.Fatalf("Settings = %+v, %v", cs, err)
	}
	if _, err := s.SetSettings(t.Context(), key, cs); err != nil {
		t.Fatalf("SetSettings over older settings: %v", err)
	}
}

// readyIndex returns the sizes of the ready index's two buckets.
func (s *Store) readyIndex(t *testing.T) (byOrder, bySession int) {
	t.Helper()
	err := s.db.View(func(tx *bbolt.Tx) error {
		byOrder, bySession = count(tx.Bucket(bucketReady)), count(tx.Bucket(bucketReadyAt))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return byOrder, bySession
}

func TestReadyIndexHoldsOnlyWork(t *testing.T) {
	s, _ := openTemp(t, agent.Retention{})
	ctx := t.Context()
	const idle = 50
	for i := range idle {
		k := key
		k.Thread = fmt.Sprint(i)
		if _, err := s.Enqueue(ctx, agent.Inbound{Key: k, MessageID: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
		c, err := s.Claim(ctx, k, "w", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Commit(ctx, k, "w", len(c.Mailbox), []agent.Message{{Role: agent.RoleUser, Content: "hi"}}, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Release(ctx, k, "w", ""); err != nil {
			t.Fatal(err)
		}
	}
	waiting := key
	waiting.Thread = "waiting"
	if _, err := s.Enqueue(ctx, agent.Inbound{Key: waiting, MessageID: "w"}); err != nil {
		t.Fatal(err)
	}
	if a, b := s.readyIndex(t); a != idle+1 || b != idle+1 {
		t.Fatalf("before Ready the index holds %d and %d entries, want %d", a, b, idle+1)
	}
	got, err := s.Ready(ctx, 10)
	if err != nil || len(got) != 1 || got[0] != waiting {
		t.Fatalf("Ready = %v, %v; want [%v]", got, err, waiting)
	}
	if a, b := s.readyIndex(t); a != 1 || b != 1 {
		t.Fatalf("after Ready the index holds %d and %d entries, want 1", a, b)
	}
}

// TestOpenIndexesAnOlderFile opens a file written before the ready index
// and the outbox: its sessions with waiting messages are ready, and its
// sessions work without an outbox bucket.
func TestOpenIndexesAnOlderFile(t *testing.T) {
	s, path := openTemp(t, agent.Retention{})
	ctx := t.Context()
	a, b := key, key
	a.Thread, b.Thread = "a", "b"
	for _, k := range []agent.SessionKey{a, b} {
		if _, err := s.Enqueue(ctx, agent.Inbound{Key: k, MessageID: k.Thread}); err != nil {
			t.Fatal(err)
		}
	}
	// Make it an older file.
	s = reopenOlder(t, s, path, func(tx *bbolt.Tx) error {
		for _, name := range [][]byte{bucketReady, bucketReadyAt} {
			if err := tx.DeleteBucket(name); err != nil {
				return err
			}
		}
		sessions := tx.Bucket(bucketSessions)
		return sessions.ForEach(func(name, _ []byte) error {
			return sessions.Bucket(name).DeleteBucket(bucketOutbox)
		})
	})
	got, err := s.Ready(ctx, 10)
	if err != nil || len(got) != 2 {
		t.Fatalf("Ready after opening an older file = %v, %v; want its 2 sessions", got, err)
	}
	c, err := s.Claim(ctx, a, "w", time.Minute)
	if err != nil || len(c.Mailbox) != 1 || len(c.Outbox) != 0 {
		t.Fatalf("Claim = %+v, %v", c, err)
	}
	if err := s.Delivered(ctx, a, "o1"); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, a, "w", 1, nil, &agent.Outbound{ID: "o1"}); err != nil {
		t.Fatal(err)
	}
	if c, err = s.Claim(ctx, a, "w", time.Minute); err != nil || len(c.Outbox) != 1 {
		t.Fatalf("Claim after a Commit with an outbox entry = %+v, %v", c, err)
	}
}

func TestSweepDeletesExpiredIndexAndLeases(t *testing.T) {
	const ttl = 200 * time.Millisecond
	s, _ := openTemp(t, agent.Retention{HistoryTTL: ttl})
	ctx := t.Context()
	if _, err := s.Enqueue(ctx, agent.Inbound{Key: key, MessageID: "1"}); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.TryLease(ctx, "poller", "w", ttl); err != nil || !ok {
		t.Fatalf("TryLease = %v, %v", ok, err)
	}
	if err := s.sweep(time.Now().Add(2 * ttl)); err != nil {
		t.Fatal(err)
	}
	if a, b := s.readyIndex(t); a != 0 || b != 0 {
		t.Errorf("after the session expired the index holds %d and %d entries, want none", a, b)
	}
	s.leases.mu.Lock()
	n := len(s.leases.named)
	s.leases.mu.Unlock()
	if n != 0 {
		t.Errorf("%d named leases left after they expired", n)
	}
}
