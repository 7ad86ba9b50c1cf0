package main

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/firstmate/firstmate/internal/testkit/fakellm"
	"github.com/firstmate/firstmate/internal/testkit/faketelegram"
)

// replica is a `firstmate serve` a test may kill.
type replica struct {
	safeBuffer
	name string
	cmd  *exec.Cmd
	done chan error
}

// startReplica runs serve as replica name; the test ends it with SIGTERM
// unless it killed it first.
func startReplica(t *testing.T, name string, env []string) *replica {
	t.Helper()
	r := &replica{name: name, done: make(chan error, 1)}
	r.cmd = exec.Command(binary, "serve")
	r.cmd.Env = append([]string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}, env...)
	r.cmd.Env = append(r.cmd.Env, "FIRSTMATE_REPLICA="+name, "FIRSTMATE_HTTP_ADDR="+deadAddr(t))
	r.cmd.Stdout, r.cmd.Stderr = r, r
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { r.done <- r.cmd.Wait() }()
	t.Cleanup(func() {
		r.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-r.done:
		case <-time.After(30 * time.Second):
			r.cmd.Process.Kill()
			t.Errorf("replica %s did not stop within 30s of SIGTERM", name)
		}
		if t.Failed() || os.Getenv("SHOWLOGS") != "" {
			t.Logf("replica %s logs:\n%s", name, r.String())
		}
	})
	return r
}

func (r *replica) polling() bool { return strings.Contains(r.String(), "telegram: polling") }

// Two replicas on one bot token: one polls, the other stands by; when the
// poller is killed, the standby takes over and every message is answered
// once.
func TestTelegramOnePollerAmongReplicas(t *testing.T) {
	t.Parallel()
	redisURL(t) // skips without Redis (fails in CI)
	e := telegramBase(t, func(req *fakellm.Request) fakellm.Reply {
		return fakellm.Text("re: " + req.Messages[len(req.Messages)-1].Text())
	})
	a := startReplica(t, "tg-a", e.env)
	if !e.tg.WaitFor(20*time.Second, a.polling) {
		t.Fatalf("replica a does not poll\n%s", a.String())
	}
	b := startReplica(t, "tg-b", e.env)
	if !e.tg.WaitFor(20*time.Second, func() bool { return strings.Contains(b.String(), "standby poller") }) {
		t.Fatalf("replica b is not standing by\n%s", b.String())
	}
	// Messages that arrive during a turn are answered together in the
	// next one: each is counted by its marker.
	send := func(from int64, n int, tag string) {
		for i := range n {
			e.tg.PrivateMessage(from, fmt.Sprintf("%s-%d.", tag, i))
		}
		e.waitCount(t, from, fmt.Sprintf("%s-%d.", tag, n-1), 1)
	}
	send(faketelegram.Alice, 5, "before")
	if b.polling() {
		t.Fatal("both replicas poll")
	}

	// The poller dies without a word; messages keep coming. (Not within
	// moments of an answer: a kill between showing an answer and marking
	// it shown makes the next holder show it again, the one duplicate
	// window left, which the chaos test measures.)
	time.Sleep(time.Second)
	killed := time.Now()
	a.cmd.Process.Kill()
	send(faketelegram.Bob, 5, "during")
	if !b.polling() {
		t.Fatalf("answered, but b does not say it polls\n%s", b.String())
	}
	t.Logf("the standby answered the messages sent after the kill %v later", time.Since(killed).Round(100*time.Millisecond))
	send(faketelegram.Alice, 3, "after")
	time.Sleep(500 * time.Millisecond) // a repeat would have come by now
	for chat, tags := range map[int64]map[string]int{faketelegram.Alice: {"before": 5, "after": 3}, faketelegram.Bob: {"during": 5}} {
		for tag, n := range tags {
			for i := range n {
				if c := e.count(chat, fmt.Sprintf("%s-%d.", tag, i)); c != 1 {
					t.Errorf("%s-%d answered %d times", tag, i, c)
				}
			}
		}
	}
	if n := e.tg.Conflicts(); n != 0 {
		t.Errorf("%d getUpdates conflicts", n)
	}
}
