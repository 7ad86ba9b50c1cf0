package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/firstmate/firstmate/internal/testkit/fakellm"
)

// lockedBuffer is a bytes.Buffer a test reads while a process writes it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// The terminal chat schedules too: a schedule made with the command fires
// while the chat is open, as a turn of its own whose answer is printed,
// without anyone typing; the model reads the stored prompt.
func TestChatScheduleFires(t *testing.T) {
	t.Parallel()
	llm := fakellm.New(t, fakellm.WithHandler(func(req *fakellm.Request) fakellm.Reply {
		last := req.LastMessage().Text()
		if i := strings.Index(last, "PING-"); i >= 0 {
			return fakellm.Text("ANSWER " + strings.Fields(last[i:])[0])
		}
		return fakellm.Text("plain")
	}))
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "chat")
	cmd.Env = append([]string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}, chatEnv(t, llm, t.TempDir())...)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitOut := func(what string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !strings.Contains(out.String(), what) {
			if time.Now().After(deadline) {
				t.Fatalf("no %q in the chat after 30 s\nstdout:\n%s\nstderr:\n%s", what, out.String(), errOut.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if _, err := in.Write([]byte("/schedule in 2s say PING-later to the crew\n")); err != nil {
		t.Fatal(err)
	}
	waitOut("Scheduled")
	waitOut("ANSWER PING-later") // nobody typed anything since
	in.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("chat: %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errOut.String())
	}
	if n := strings.Count(out.String(), "ANSWER PING-later"); n != 1 {
		t.Errorf("the scheduled turn answered %d times:\n%s", n, out.String())
	}
	asked := 0
	for _, r := range llm.Requests() {
		if strings.Contains(r.LastMessage().Text(), "say PING-later to the crew") {
			asked++
		}
	}
	if asked != 1 {
		t.Errorf("the model was asked the stored prompt %d times, want once", asked)
	}
}
