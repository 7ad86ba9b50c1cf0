package agent_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/tools"
)

func userMsg(s string) agent.Message { return agent.Message{Role: agent.RoleUser, Content: s} }

func TestRunAnswersWithoutTools(t *testing.T) {
	m := &scriptModel{replies: []func(*agent.Request) (*agent.Response, error){text("hello")}}
	rec := &recorder{}
	l := &agent.Loop{Model: m}
	out, err := l.Run(t.Context(), &agent.Turn{Input: userMsg("hi"), Tools: testTools(t), Thread: rec})
	if err != nil {
		t.Fatal(err)
	}
	if out.Answer != "hello" || out.Steps != 1 || len(out.Messages) != 2 {
		t.Fatalf("outcome = %+v", out)
	}
	if d, ok := rec.all()[0].(agent.TextDelta); !ok || d.Text != "hello" {
		t.Fatalf("first event = %#v, want the streamed text", rec.all()[0])
	}
}

func TestRunToolErrorsGoBackToModel(t *testing.T) {
	m := &scriptModel{replies: []func(*agent.Request) (*agent.Response, error){
		calls(
			call("a", "echo", `{"text":"one"}`),
			call("b", "nope", `{}`),
			call("c", "echo", `{"txt":"typo"}`),
			call("d", "fail", `{}`),
			call("e", "echo", `not json`),
			call("f", "echo", `{"text":"two"}`),
		),
		text("done"),
	}}
	rec := &recorder{}
	l := &agent.Loop{Model: m}
	out, err := l.Run(t.Context(), &agent.Turn{Input: userMsg("go"), Tools: testTools(t), Thread: rec})
	if err != nil {
		t.Fatal(err)
	}
	if err := agent.ValidateHistory(out.Messages); err != nil {
		t.Fatal(err)
	}
	// input, assistant with 6 calls, 6 results in call order, answer
	if len(out.Messages) != 9 {
		t.Fatalf("got %d messages", len(out.Messages))
	}
	results := out.Messages[2:8]
	want := []struct{ id, contains string }{
		{"a", "one"},
		{"b", "the tools are: block, echo, fail, noop"},
		{"c", "txt"},
		{"d", "disk on fire"},
		{"e", "could not be read: the arguments are not a JSON object"},
		{"f", "two"},
	}
	for i, w := range want {
		if results[i].ToolCallID != w.id || !strings.Contains(results[i].Content, w.contains) {
			t.Errorf("result %d = %+v, want ID %s containing %q", i, results[i], w.id, w.contains)
		}
	}
	// The model saw all six results before answering.
	if got := len(m.seen[1]); got != 8 {
		t.Errorf("second model call saw %d messages, want 8", got)
	}
	var finished int
	for _, ev := range rec.all() {
		if f, ok := ev.(agent.ToolFinished); ok {
			finished++
			if (f.CallID == "a" || f.CallID == "f") == f.Failed {
				t.Errorf("ToolFinished %s Failed=%v", f.CallID, f.Failed)
			}
		}
	}
	if finished != 6 {
		t.Errorf("%d ToolFinished events, want 6", finished)
	}
}

func TestRunStepLimitAsksForAnswerWithoutTools(t *testing.T) {
	var replies []func(*agent.Request) (*agent.Response, error)
	for range 3 {
		replies = append(replies, calls(call("", "noop", `{}`)))
	}
	var lastTools int
	replies = append(replies, func(req *agent.Request) (*agent.Response, error) {
		lastTools = len(req.Tools)
		return &agent.Response{Message: agent.Message{Content: "summary", ToolCalls: []agent.ToolCall{call("x", "noop", "{}")}}}, nil
	})
	m := &scriptModel{replies: replies}
	out, err := (&agent.Loop{Model: m, MaxSteps: 3}).Run(t.Context(), &agent.Turn{Input: userMsg("loop"), Tools: testTools(t)})
	if err != nil {
		t.Fatal(err)
	}
	if out.Answer != "summary" || out.Steps != 4 || lastTools != 0 {
		t.Fatalf("answer %q steps %d tools offered last %d", out.Answer, out.Steps, lastTools)
	}
	if err := agent.ValidateHistory(out.Messages); err != nil {
		t.Fatal(err)
	}
}

func TestRunCancelStopsRunningTool(t *testing.T) {
	m := &scriptModel{replies: []func(*agent.Request) (*agent.Response, error){
		calls(call("a", "block", `{}`), call("b", "echo", `{"text":"never"}`)),
	}}
	ctx, cancel := context.WithCancel(t.Context())
	rec := &recorder{}
	done := make(chan struct{})
	var out *agent.Outcome
	var err error
	go func() {
		out, err = (&agent.Loop{Model: m}).Run(ctx, &agent.Turn{Input: userMsg("x"), Tools: testTools(t), Thread: rec})
		close(done)
	}()
	waitFor(t, func() bool {
		for _, ev := range rec.all() {
			if _, ok := ev.(agent.ToolStarted); ok {
				return true
			}
		}
		return false
	})
	cancel()
	<-done
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want canceled", err)
	}
	if err := agent.ValidateHistory(out.Messages); err != nil {
		t.Fatal(err)
	}
	if last := out.Messages[len(out.Messages)-1]; last.ToolCallID != "b" || !strings.Contains(last.Content, "not run") {
		t.Fatalf("last message %+v", last)
	}
}

func TestRunDeadline(t *testing.T) {
	m := &scriptModel{replies: []func(*agent.Request) (*agent.Response, error){calls(call("a", "block", `{}`))}}
	_, err := (&agent.Loop{Model: m, Timeout: 50 * time.Millisecond}).Run(t.Context(), &agent.Turn{Input: userMsg("x"), Tools: testTools(t)})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
}

func TestRunModelErrorEndsTurn(t *testing.T) {
	boom := &agent.ModelError{Status: 500, Attempts: 3, Err: errors.New("upstream")}
	m := &scriptModel{replies: []func(*agent.Request) (*agent.Response, error){
		func(*agent.Request) (*agent.Response, error) { return nil, boom },
	}}
	out, err := (&agent.Loop{Model: m}).Run(t.Context(), &agent.Turn{Input: userMsg("x")})
	if !errors.Is(err, agent.ErrModelUnavailable) {
		t.Fatalf("err = %v", err)
	}
	if len(out.Messages) != 1 || out.Messages[0].Content != "x" {
		t.Fatalf("messages = %+v; the input must be kept", out.Messages)
	}
}

func TestRunPolicy(t *testing.T) {
	var offered []string
	m := &scriptModel{replies: []func(*agent.Request) (*agent.Response, error){
		func(req *agent.Request) (*agent.Response, error) {
			for _, s := range req.Tools {
				offered = append(offered, s.Name)
			}
			return calls(call("b", "fail", `{}`), call("a", "echo", `{"text":"hi"}`), call("c", "noop", `{}`))(req)
		},
		text("ok"),
	}}
	mode := func(name string) agent.ToolMode {
		switch name {
		case "echo":
			return agent.ToolAsk
		case "fail":
			return agent.ToolDeny
		}
		return agent.ToolAllow
	}
	g := &fakeGate{mode: mode}
	out, err := (&agent.Loop{Model: m}).Run(t.Context(), &agent.Turn{Input: userMsg("x"), Tools: testTools(t), Gate: g, Thread: &recorder{}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(offered, ",") != "block,echo,noop" {
		t.Errorf("offered %v", offered)
	}
	if !strings.Contains(out.Messages[2].Content, "fail is not allowed in this channel") {
		t.Errorf("denied tool: %q", out.Messages[2].Content)
	}
	// The call in ask mode ends the turn: it and the call after it wait,
	// and the history stays valid.
	if p := out.Pending; p == nil || len(p.Calls) != 2 || p.Calls[0].ID != "a" || p.Rule != "echo" || out.Answer != "" || m.calls != 1 {
		t.Fatalf("pending %+v, answer %q, model calls %d", out.Pending, out.Answer, m.calls)
	}
	if !strings.Contains(out.Messages[3].Content, "needs a person's approval") || !strings.Contains(out.Messages[4].Content, "comes after echo") {
		t.Errorf("results of the waiting calls: %q, %q", out.Messages[3].Content, out.Messages[4].Content)
	}
	if err := agent.ValidateHistory(out.Messages); err != nil {
		t.Fatal(err)
	}
}

// A decided approval resumes its calls as a step of the next turn: an
// approved one runs (ask mode does not ask again), the calls after it run
// under the policy as it is now, and the model is told; a denied one is
// told and nothing runs.
func TestRunResumesApprovals(t *testing.T) {
	waiting := []agent.ToolCall{call("a", "echo", `{"text":"approved"}`), call("b", "fail", `{}`), call("c", "echo", `{"text":"again"}`)}
	mode := func(name string) agent.ToolMode {
		if name == "fail" {
			return agent.ToolDeny // denied since it was asked for
		}
		return agent.ToolAsk
	}
	m := &scriptModel{replies: []func(*agent.Request) (*agent.Response, error){text("done")}}
	approved := agent.Approval{ID: "ap1", Tool: "echo", State: agent.ApprovalApproved, DecidedBy: agent.User{ID: "U2", Name: "bob"}, Calls: waiting}
	out, err := (&agent.Loop{Model: m}).Run(t.Context(), &agent.Turn{Resume: []agent.Approval{approved}, Tools: testTools(t), Gate: &fakeGate{mode: mode}})
	if err != nil {
		t.Fatal(err)
	}
	// The note, the calls, the first one's result and the second's
	// refusal; the third is in ask mode: it waits again, and the turn ends.
	if len(out.Messages) != 5 || !strings.Contains(out.Messages[0].Content, "bob approved the echo call") ||
		out.Messages[2].Content != "approved" || !strings.Contains(out.Messages[3].Content, "not allowed") || !strings.Contains(out.Messages[4].Content, "needs a person's approval") {
		t.Fatalf("messages %+v", out.Messages)
	}
	if out.Pending == nil || out.Pending.Calls[0].ID != "c-ap1" || m.calls != 0 {
		t.Fatalf("pending %+v, model calls %d", out.Pending, m.calls)
	}
	if err := agent.ValidateHistory(out.Messages); err != nil {
		t.Fatal(err)
	}

	m = &scriptModel{replies: []func(*agent.Request) (*agent.Response, error){text("ok, I will not")}}
	denied := agent.Approval{ID: "ap2", Tool: "echo", State: agent.ApprovalDenied, DecidedBy: agent.User{ID: "U2", Name: "bob"}, Calls: waiting}
	out, err = (&agent.Loop{Model: m}).Run(t.Context(), &agent.Turn{Resume: []agent.Approval{denied}, Input: userMsg("and now?"), Tools: testTools(t), Gate: &fakeGate{mode: mode}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Messages) != 3 || !strings.Contains(out.Messages[0].Content, "bob denied the echo call") || out.Messages[1].Content != "and now?" || out.Answer != "ok, I will not" {
		t.Fatalf("messages %+v", out.Messages)
	}
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

// BenchmarkTurnOneToolCall measures the loop's own overhead for a turn with
// one tool call: an instant in-process model and a no-op tool.
func BenchmarkTurnOneToolCall(b *testing.B) {
	set := testTools(b)
	toolReply := &agent.Response{Message: agent.Message{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{call("c1", "noop", `{}`)}}}
	answer := &agent.Response{Message: agent.Message{Role: agent.RoleAssistant, Content: "done"}}
	m := instantModel{toolReply, answer}
	l := &agent.Loop{Model: m}
	th := discard{}
	history := make([]agent.Message, 0, 50)
	for i := range 25 {
		history = append(history, userMsg("question "+string(rune('a'+i%26))), agent.Message{Role: agent.RoleAssistant, Content: "answer"})
	}
	for _, bc := range []struct {
		name string
		mode func(string) agent.ToolMode
	}{
		{"no-policy", nil},
		{"policy", func(name string) agent.ToolMode {
			if name == "fail" {
				return agent.ToolDeny
			}
			return agent.ToolAllow
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			turn := &agent.Turn{History: history, Input: userMsg("go"), Tools: set, Thread: th}
			if bc.mode != nil {
				turn.Gate = &fakeGate{mode: bc.mode}
			}
			b.ReportAllocs()
			for b.Loop() {
				out, err := l.Run(context.Background(), turn)
				if err != nil || out.Answer != "done" {
					b.Fatal(err)
				}
			}
		})
	}
}

type instantModel [2]*agent.Response

func (m instantModel) Complete(_ context.Context, req *agent.Request) (*agent.Response, error) {
	if req.Messages[len(req.Messages)-1].Role == agent.RoleTool {
		return m[1], nil
	}
	return m[0], nil
}

type discard struct{}

func (discard) Emit(context.Context, agent.Event) error { return nil }

func TestRunRedactsSecretsShownToPeople(t *testing.T) {
	const secret = "xoxb-secret-token-1234"
	set := tools.NewSet(testTools(t).Tools(), tools.WithSecrets(secret))
	m := &scriptModel{replies: []func(*agent.Request) (*agent.Response, error){
		calls(call("a", "echo", `{"text":"`+secret+`"}`)),
		text("ok"),
	}}
	rec := &recorder{}
	out, err := (&agent.Loop{Model: m}).Run(t.Context(), &agent.Turn{Input: userMsg("x"), Tools: set, Thread: rec})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range rec.all() {
		if s, ok := ev.(agent.ToolStarted); ok && strings.Contains(string(s.Args), secret) {
			t.Fatalf("ToolStarted shows the secret: %s", s.Args)
		}
	}
	if strings.Contains(out.Messages[2].Content, secret) {
		t.Fatalf("result shows the secret: %q", out.Messages[2].Content)
	}
}

// While the sandbox probe runs, a turn is offered the shell as if it will
// pass; a turn that does not call it never waits for the probe, one that
// does waits and then gets what the probe decided, and a turn after a
// failed probe is not offered it.
func TestRunWhileToolsArePending(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		type cmd struct {
			Command string `json:"command"`
		}
		spec := tools.New("shell", tools.PowerExec, "runs a command", func(context.Context, *tools.Workspace, cmd) (tools.Result, error) {
			t.Error("the provisional shell ran")
			return tools.Result{}, nil
		})
		p := tools.NewPending()
		set := tools.NewSet(slices.Concat(testTools(t).Tools(), []tools.Tool{spec}), tools.WithPending(p, "shell"))
		var offered [][]string
		seen := func(next func(*agent.Request) (*agent.Response, error)) func(*agent.Request) (*agent.Response, error) {
			return func(req *agent.Request) (*agent.Response, error) {
				var names []string
				for _, s := range req.Tools {
					names = append(names, s.Name)
				}
				offered = append(offered, names)
				return next(req)
			}
		}
		l := &agent.Loop{Model: &scriptModel{replies: []func(*agent.Request) (*agent.Response, error){
			seen(calls(call("a", "echo", `{"text":"one"}`))), seen(text("echoed")),
			seen(calls(call("b", "shell", `{"command":"id"}`))), seen(text("no shell")),
			seen(text("later")),
		}}}

		// The probe has not ended, and never does until this turn is over.
		out, err := l.Run(t.Context(), &agent.Turn{Input: userMsg("echo"), Tools: set})
		if err != nil || out.Answer != "echoed" {
			t.Fatalf("%+v %v", out, err)
		}
		if want := []string{"block", "echo", "fail", "noop", "shell"}; !slices.Equal(offered[0], want) {
			t.Fatalf("offered %v while the probe runs, want %v", offered[0], want)
		}

		done := make(chan *agent.Outcome, 1)
		go func() {
			out, _ := l.Run(t.Context(), &agent.Turn{Input: userMsg("id"), Tools: set})
			done <- out
		}()
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("the shell call did not wait for the probe")
		default:
		}
		why := "the sandbox is unavailable: user namespaces are disabled"
		p.Settle(tools.NewSet(testTools(t).Tools(), tools.WithUnavailable("shell", tools.PowerExec, why)))
		out = <-done
		if res := out.Messages[2].Content; !strings.Contains(res, "shell is unavailable here: "+why) {
			t.Fatalf("the waiting call got %q", res)
		}

		if _, err := l.Run(t.Context(), &agent.Turn{Input: userMsg("again"), Tools: set}); err != nil {
			t.Fatal(err)
		}
		if last := offered[len(offered)-1]; slices.Contains(last, "shell") {
			t.Fatalf("offered %v after a failed probe", last)
		}
	})
}

// A server that sends no usage figures still has its calls counted: the
// loop estimates them from the request and the reply, and says so.
func TestRunEstimatesMissingUsage(t *testing.T) {
	m := &scriptModel{replies: []func(*agent.Request) (*agent.Response, error){
		calls(call("a", "echo", `{"text":"`+strings.Repeat("w", 4000)+`"}`)), // no usage
		text("done"), // 10 and 2, as the server said
	}}
	var mu sync.Mutex
	var seen []agent.Usage
	after := func(_ context.Context, u agent.Usage, _ time.Duration, _ error) {
		mu.Lock()
		seen = append(seen, u)
		mu.Unlock()
	}
	l := &agent.Loop{Model: m, System: strings.Repeat("s", 400)}
	out, err := l.Run(t.Context(), &agent.Turn{Input: userMsg("go"), Tools: testTools(t), Gate: &fakeGate{after: after}})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != 2 {
		t.Fatalf("AfterModel told of %d calls, want 2", len(seen))
	}
	// The system prompt (100), the input and four tools' specs make the
	// prompt; the call's 4,000-byte arguments the completion.
	if u := seen[0]; !u.Estimated || u.PromptTokens < 120 || u.CompletionTokens < 1000 {
		t.Errorf("first call's usage %+v, want an estimate of at least 120 and 1000", u)
	}
	if u := seen[1]; u.Estimated || u.PromptTokens != 10 || u.CompletionTokens != 2 {
		t.Errorf("second call's usage %+v, want the server's own", u)
	}
	if u := out.Usage; !u.Estimated || u.PromptTokens != seen[0].PromptTokens+10 {
		t.Errorf("turn usage %+v", u)
	}
}
