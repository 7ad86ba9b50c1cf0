package redis

import (
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/store/storetest"
)

// openErr opens url, which must fail, and returns the error, having
// checked that it names REDIS_URL, holds want and shows no password.
func openErr(t *testing.T, url, want string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	s, err := Open(ctx, url, Options{})
	if err == nil {
		s.Close()
		t.Errorf("Open succeeded, want an error holding %q", want)
		return nil
	}
	if !strings.HasPrefix(err.Error(), "REDIS_URL: ") {
		t.Errorf("the error does not start with REDIS_URL: %v", err)
	}
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error %q, want it to hold %q", err, want)
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Errorf("the error shows the password: %v", err)
	}
	t.Log(err)
	return err
}

// TestOpenNode opens a private server with a password through redis://,
// and checks that Open refuses a Cluster or Sentinel URL to it.
func TestOpenNode(t *testing.T) {
	addr := startServer(t)
	setPassword(t, addr, "n-s3cret")
	s, err := Open(t.Context(), "redis://:n-s3cret@"+addr+"/2", Options{Prefix: "fmtest-" + rand.Text()[:12]})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if want := "Redis node " + addr + ", db 2"; s.Describe() != want {
		t.Errorf("Describe() = %q, want %q", s.Describe(), want)
	}
	if !s.ordered {
		t.Error("a single node's store does not pipeline in order")
	}
	key := agent.SessionKey{Platform: "slack", Team: "T1", Chat: "C1"}
	if _, err := s.Enqueue(t.Context(), agent.Inbound{Key: key, MessageID: "1", Text: "hi"}); err != nil {
		t.Fatal(err)
	}
	c := goredis.NewClient(&goredis.Options{Addr: addr, Password: "n-s3cret", DB: 2})
	defer c.Close()
	if n := c.DBSize(t.Context()).Val(); n == 0 {
		t.Error("nothing was written to database 2")
	}

	openErr(t, "redis://:wrong-s3cret@"+addr, "no answer from Redis node "+addr)
	openErr(t, "redis+cluster://:n-s3cret@"+addr, "the server is not a Cluster node (its cluster support is disabled); for one node, use redis://")
	openErr(t, "redis+sentinel://:n-s3cret@"+addr+"/mymaster", "the host is not a sentinel (it knows no SENTINEL command); for one node, use redis://")
}

// TestSentinel opens a store through a sentinel that monitors a private
// master, both with passwords of their own, and runs a turn and the
// conformance suite through it.
func TestSentinel(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a master and a sentinel")
	}
	const master, mpw, spw = "fmmaster", "m-s3cret", "s-s3cret"
	maddr := startServer(t)
	setPassword(t, maddr, mpw)
	saddr := startSentinel(t, master, maddr, spw, "sentinel auth-pass "+master+" "+mpw, "requirepass "+spw)
	url := "redis+sentinel://:" + mpw + "@" + saddr + "/" + master + "/0?sentinel_password=" + spw
	open := func(t *testing.T, opts Options) *Store {
		opts.Prefix = "fmtest-" + rand.Text()[:12]
		s, err := Open(t.Context(), url, opts)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}

	t.Run("Turn", func(t *testing.T) {
		s := open(t, Options{})
		defer s.Close()
		if want := `Redis Sentinel master "fmmaster" (sentinels ` + saddr + `), db 0`; s.Describe() != want {
			t.Errorf("Describe() = %q, want %q", s.Describe(), want)
		}
		if !s.ordered {
			t.Error("a Sentinel store does not pipeline in order")
		}
		ctx := t.Context()
		key := agent.SessionKey{Platform: "telegram", Chat: "42"}
		for _, id := range []string{"1", "2"} {
			if added, err := s.Enqueue(ctx, agent.Inbound{Key: key, MessageID: id, Text: "hi " + id}); err != nil || !added {
				t.Fatalf("Enqueue(%s) = %v, %v", id, added, err)
			}
		}
		cl, err := s.Claim(ctx, key, "w1", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if cl == nil || len(cl.Mailbox) != 2 || cl.Mailbox[0].Text != "hi 1" || cl.Mailbox[1].Text != "hi 2" {
			t.Fatalf("Claim = %+v", cl)
		}
		if _, err := s.Claim(ctx, key, "w2", time.Minute); !errors.Is(err, agent.ErrLeaseHeld) {
			t.Errorf("a second Claim: %v, want ErrLeaseHeld", err)
		}
		turn := []agent.Message{{Role: agent.RoleUser, Content: "hi"}, {Role: agent.RoleAssistant, Content: "hello"}}
		if err := s.Commit(ctx, key, "w1", 2, turn, nil); err != nil {
			t.Fatal(err)
		}
		if n, err := s.Release(ctx, key, "w1", ""); err != nil || n != 0 {
			t.Fatalf("Release = %d, %v", n, err)
		}
		// The keys are on the master.
		c := goredis.NewClient(&goredis.Options{Addr: maddr, Password: mpw})
		defer c.Close()
		if h := c.LLen(ctx, s.key(history, key, "")).Val(); h != 1 {
			t.Errorf("the master holds %d turns of history, want 1", h)
		}
	})

	t.Run("BadURLs", func(t *testing.T) {
		base := "redis+sentinel://:" + mpw + "@" + saddr + "/"
		openErr(t, base+master, "the sentinels want a password: give it as ?sentinel_password=")
		openErr(t, base+master+"?sentinel_password=wrong-s3cret", "no answer from Redis Sentinel master") // the wrong one
		openErr(t, base+"nosuchmaster?sentinel_password="+spw, `the sentinels monitor no master named "nosuchmaster"`)
		openErr(t, "redis+sentinel://:wrong-s3cret@"+saddr+"/"+master+"?sentinel_password="+spw, "no answer from Redis Sentinel master")
		openErr(t, "redis://:"+spw+"@"+saddr, "the server is a sentinel; use redis+sentinel://host:port/MASTER")
	})

	storetest.Run(t, func(t *testing.T, c storetest.Config) storetest.Store {
		return open(t, Options{Retention: c.Retention, AuditCap: c.AuditCap})
	})
}

// TestOpenClusterOfOne checks that redis:// to the only master of a
// Cluster is accepted (every key is on it), and that redis+cluster:// to it
// works too.
func TestOpenClusterOfOne(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	addr := startCluster(t, 1)[0]
	for url, want := range map[string]string{
		"redis://" + addr:         "Redis node " + addr + ", db 0 (a Cluster of one master)",
		"redis+cluster://" + addr: "Redis Cluster (seeds " + addr + "), 1 master",
	} {
		s, err := Open(t.Context(), url, Options{Prefix: "fmtest-" + rand.Text()[:12]})
		if err != nil {
			t.Fatal(err)
		}
		if s.Describe() != want {
			t.Errorf("Describe() = %q, want %q", s.Describe(), want)
		}
		key := agent.SessionKey{Platform: "slack", Team: "T1", Chat: "C1"}
		if _, err := s.Enqueue(t.Context(), agent.Inbound{Key: key, MessageID: "1"}); err != nil {
			t.Errorf("%s: %v", s.Describe(), err)
		}
		s.Close()
	}
}
