package console

import (
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/firstmate/firstmate/adapters"
	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/agent/govern"
	"github.com/firstmate/firstmate/internal/testkit/dispatch"
	"github.com/firstmate/firstmate/tools"
)

func TestRender(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b strings.Builder
		c := New(&b, false, adapters.ModeFull)
		ctx := t.Context()
		turn := func(events ...agent.Event) {
			th := c.Thread(Key, agent.Inbound{})
			for _, ev := range events {
				if err := th.Emit(ctx, ev); err != nil {
					t.Fatal(err)
				}
				time.Sleep(time.Millisecond) // the renderer shows it
			}
			th.(io.Closer).Close()
			c.render.Wait(ctx)
		}
		turn(
			agent.TurnStarted{},
			agent.TextDelta{Text: "Let me look"},
			agent.ToolStarted{CallID: "1", Name: "ls"},
			agent.ToolFinished{CallID: "1", Name: "ls", Summary: "listed . (2 entries)", Duration: 1500 * time.Microsecond},
			agent.ToolFinished{CallID: "2", Name: "read", Summary: "no such file", Failed: true, Duration: 300 * time.Microsecond},
			agent.TextDelta{Text: "Done."},
			agent.Answer{Text: "Done.", Files: []agent.Attachment{{Path: "out.csv"}}, Tools: 2, Took: 2300 * time.Millisecond},
		)
		turn(agent.TurnStarted{}, agent.Answer{Text: "not streamed"})
		turn(agent.TurnStarted{}, agent.Failed{Message: "Stopped."})
		turn(agent.Notice{Text: "Idle."})
		want := "Let me look\n" +
			"  ✓ ls · listed . (2 entries) · <0.1 s\n" +
			"  ✗ read · no such file · <0.1 s\n" +
			"Done.\n" +
			"  attached: out.csv\n" +
			"  (2 tools, 1 failed · 2.3 s)\n" +
			"not streamed\n" +
			"Stopped.\n" +
			"Idle.\n"
		if got := b.String(); got != want {
			t.Errorf("rendered:\n%s\nwant:\n%s", got, want)
		}
	})
}

// model answers "echo: <input>" after an optional wait, and records the
// order of inputs and whether two turns ever overlapped.
type model struct {
	mu      sync.Mutex
	inputs  []string
	busy    bool
	overlap bool
	block   string // an input that waits until cancelled
}

func (m *model) Complete(ctx context.Context, req *agent.Request) (*agent.Response, error) {
	in := req.Messages[len(req.Messages)-1].Content
	m.mu.Lock()
	m.overlap = m.overlap || m.busy
	m.busy = true
	m.inputs = append(m.inputs, in)
	m.mu.Unlock()
	defer func() { m.mu.Lock(); m.busy = false; m.mu.Unlock() }()
	if in == m.block {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	time.Sleep(5 * time.Millisecond) // long enough for a racing line to show
	return &agent.Response{Message: agent.Message{Role: agent.RoleAssistant, Content: "echo: " + in}}, nil
}

func newDispatcher(t *testing.T, m agent.Model, c *Console) *agent.Dispatcher {
	return dispatch.Start(t, dispatch.Config{Model: m, Platforms: map[string]agent.Platform{Key.Platform: c}})
}

func TestRunScriptedOneTurnPerLine(t *testing.T) {
	m := &model{}
	var out syncBuffer
	c := New(&out, false, adapters.ModeFull)
	d := newDispatcher(t, m, c)
	err := c.Run(t.Context(), d, Options{In: strings.NewReader("one\n\n  two  \nthree\n")})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(m.inputs, "|") != "one|two|three" || m.overlap {
		t.Fatalf("inputs %q overlap %v", m.inputs, m.overlap)
	}
	if got := out.String(); got != "echo: one\necho: two\necho: three\n" {
		t.Fatalf("output %q", got)
	}
}

func TestRunQuit(t *testing.T) {
	m := &model{}
	var out syncBuffer
	c := New(&out, false, adapters.ModeFull)
	d := newDispatcher(t, m, c)
	if err := c.Run(t.Context(), d, Options{In: strings.NewReader("one\n/quit\ntwo\n")}); err != nil {
		t.Fatal(err)
	}
	if strings.Join(m.inputs, "|") != "one" {
		t.Fatalf("inputs %q", m.inputs)
	}
}

func TestRunInterruptStopsTurnThenExits(t *testing.T) {
	m := &model{block: "forever"}
	var out syncBuffer
	c := New(&out, false, adapters.ModeFull)
	d := newDispatcher(t, m, c)
	in, typeLine := io.Pipe()
	interrupts := make(chan os.Signal)
	done := make(chan error, 1)
	go func() { done <- c.Run(t.Context(), d, Options{In: in, Interactive: true, Interrupts: interrupts}) }()
	io.WriteString(typeLine, "forever\n")
	waitFor(t, func() bool { m.mu.Lock(); defer m.mu.Unlock(); return m.busy })
	interrupts <- os.Interrupt // stops the turn
	waitFor(t, func() bool { return strings.Contains(out.String(), "Stopped.") })
	select {
	case err := <-done:
		t.Fatalf("the first interrupt ended the chat: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	interrupts <- os.Interrupt // exits
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the second interrupt did not end the chat")
	}
	typeLine.Close()
	if !strings.Contains(out.String(), "press Ctrl-C again to quit") {
		t.Errorf("output %q", out.String())
	}
}

func TestRunSubmitErrorIsShown(t *testing.T) {
	var out syncBuffer
	c := New(&out, false, adapters.ModeFull)
	err := c.Run(t.Context(), failing{}, Options{In: strings.NewReader("hello\n")})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "could not send: store down") {
		t.Fatalf("output %q", out.String())
	}
}

type failing struct{}

func (failing) Submit(context.Context, agent.Inbound) error { return errors.New("store down") }
func (failing) Decide(context.Context, agent.Decision) (agent.Decided, error) {
	return agent.Decided{}, errors.New("store down")
}
func (failing) Stop(agent.SessionKey) bool                       { return false }
func (failing) WaitIdle(context.Context, agent.SessionKey) error { return nil }

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 10s")
		}
		time.Sleep(time.Millisecond)
	}
}

// With piped input, Ctrl-C still stops the running turn.
func TestRunScriptedInterruptStopsTurn(t *testing.T) {
	m := &model{block: "forever"}
	var out syncBuffer
	c := New(&out, false, adapters.ModeFull)
	d := newDispatcher(t, m, c)
	interrupts := make(chan os.Signal)
	done := make(chan error, 1)
	go func() {
		done <- c.Run(t.Context(), d, Options{In: strings.NewReader("forever\nnext\n"), Interrupts: interrupts})
	}()
	waitFor(t, func() bool { m.mu.Lock(); defer m.mu.Unlock(); return m.busy })
	interrupts <- os.Interrupt
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("chat did not finish after the turn was stopped")
	}
	if !strings.Contains(out.String(), "Stopped.") || strings.Join(m.inputs, "|") != "forever|next" {
		t.Fatalf("output %q inputs %q", out.String(), m.inputs)
	}
}

// askModel calls write once, then answers with what the tool said.
type askModel struct{}

func (askModel) Complete(_ context.Context, req *agent.Request) (*agent.Response, error) {
	last := req.Messages[len(req.Messages)-1]
	if last.Role == agent.RoleTool {
		return &agent.Response{Message: agent.Message{Role: agent.RoleAssistant, Content: "tool said: " + last.Content}}, nil
	}
	if strings.HasPrefix(last.Content, "[Approval") {
		return &agent.Response{Message: agent.Message{Role: agent.RoleAssistant, Content: "told: " + last.Content}}, nil
	}
	return &agent.Response{Message: agent.Message{Role: agent.RoleAssistant,
		ToolCalls: []agent.ToolCall{{ID: "c1", Name: "noop", Args: []byte(`{}`)}}}}, nil
}

func askDispatcher(t *testing.T, c *Console) *agent.Dispatcher {
	set := tools.NewSet([]tools.Tool{tools.New("noop", tools.PowerRead, "does nothing", func(context.Context, *tools.Workspace, struct{}) (tools.Result, error) {
		return tools.Result{Text: "ran", Summary: "ran"}, nil
	})})
	return dispatch.Start(t, dispatch.Config{Model: askModel{}, Tools: set, Policy: govern.Defaults{Default: agent.ToolAsk},
		Platforms: map[string]agent.Platform{Key.Platform: c}})
}

func TestApprovalAtTheTerminal(t *testing.T) {
	for _, tc := range []struct {
		answer, want string
	}{
		{"y", "tool said: ran"},
		{"YES", "tool said: ran"},
		{"n", "operator denied the noop call"},
		{"", "operator denied the noop call"},
	} {
		t.Run(tc.answer, func(t *testing.T) {
			var out syncBuffer
			c := New(&out, false, adapters.ModeFull)
			d := askDispatcher(t, c)
			in, typeLine := io.Pipe()
			done := make(chan error, 1)
			go func() { done <- c.Run(t.Context(), d, Options{In: in, Interactive: true}) }()
			io.WriteString(typeLine, "do it\n")
			waitFor(t, func() bool {
				return strings.Contains(out.String(), "needs approval to run noop") && strings.Contains(out.String(), "? approve it [y/N]")
			})
			io.WriteString(typeLine, tc.answer+"\n")
			waitFor(t, func() bool { return strings.Contains(out.String(), tc.want) })
			typeLine.Close()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestApprovalRefusedWithScriptedInput(t *testing.T) {
	var out syncBuffer
	c := New(&out, false, adapters.ModeFull)
	d := askDispatcher(t, c)
	if err := c.Run(t.Context(), d, Options{In: strings.NewReader("do it\n")}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "no one is at the terminal to approve it: denied") || !strings.Contains(out.String(), "operator denied the noop call") {
		t.Fatalf("output %q", out.String())
	}
}

func TestCommandListIsTheRegistry(t *testing.T) {
	list := CommandList()
	for _, c := range agent.Commands() {
		if !strings.Contains(list, "/"+c.Name) {
			t.Errorf("%q lacks /%s", list, c.Name)
		}
	}
	if list != "/help, /status, /stop, /reset, /tools, /why, /usage, /jobs, /schedule, /schedules, /unschedule, /timezone, /pair" {
		t.Errorf("command list %q", list)
	}
}
