package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/tools"
)

// scriptModel answers from a script: each reply is used once, in order. A
// reply func sees the request, so a test can check what the model was sent.
type scriptModel struct {
	mu      sync.Mutex
	replies []func(*agent.Request) (*agent.Response, error)
	calls   int
	seen    [][]agent.Message
}

func (m *scriptModel) Complete(ctx context.Context, req *agent.Request) (*agent.Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seen = append(m.seen, append([]agent.Message(nil), req.Messages...))
	if m.calls >= len(m.replies) {
		return nil, fmt.Errorf("script exhausted after %d calls", m.calls)
	}
	r := m.replies[m.calls]
	m.calls++
	return r(req)
}

func text(s string) func(*agent.Request) (*agent.Response, error) {
	return func(req *agent.Request) (*agent.Response, error) {
		if req.OnText != nil {
			req.OnText(s)
		}
		return &agent.Response{Message: agent.Message{Role: agent.RoleAssistant, Content: s}, Usage: agent.Usage{PromptTokens: 10, CompletionTokens: 2}}, nil
	}
}

func calls(cs ...agent.ToolCall) func(*agent.Request) (*agent.Response, error) {
	return func(*agent.Request) (*agent.Response, error) {
		return &agent.Response{Message: agent.Message{Role: agent.RoleAssistant, ToolCalls: cs}}, nil
	}
}

func call(id, name, args string) agent.ToolCall {
	return agent.ToolCall{ID: id, Name: name, Args: json.RawMessage(args)}
}

// recorder is a Thread that keeps every event.
type recorder struct {
	mu     sync.Mutex
	events []agent.Event
}

func (r *recorder) Emit(_ context.Context, ev agent.Event) error {
	r.mu.Lock()
	r.events = append(r.events, ev)
	r.mu.Unlock()
	return nil
}

func (r *recorder) all() []agent.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]agent.Event(nil), r.events...)
}

type echoArgs struct {
	Text string `json:"text" jsonschema:"what to echo"`
}

type noArgs struct{}

func testTools(t testing.TB) *tools.Set {
	return tools.NewSet([]tools.Tool{
		tools.New("echo", tools.PowerRead, "echoes text", func(_ context.Context, _ *tools.Workspace, a echoArgs) (tools.Result, error) {
			return tools.Result{Text: a.Text, Summary: "echoed"}, nil
		}),
		tools.New("fail", tools.PowerRead, "always fails", func(context.Context, *tools.Workspace, noArgs) (tools.Result, error) {
			return tools.Result{}, fmt.Errorf("disk on fire")
		}),
		tools.New("block", tools.PowerRead, "waits until cancelled", func(ctx context.Context, _ *tools.Workspace, _ noArgs) (tools.Result, error) {
			<-ctx.Done()
			return tools.Result{}, ctx.Err()
		}),
		tools.New("noop", tools.PowerRead, "does nothing", func(context.Context, *tools.Workspace, noArgs) (tools.Result, error) {
			return tools.Result{Text: "ok", Summary: "ok"}, nil
		}),
	})
}

// fakeGate is a TurnGate with a policy of mode (nil: allow all) that
// tells after of each model call and records what it was asked.
type fakeGate struct {
	mode  func(string) agent.ToolMode
	after func(ctx context.Context, u agent.Usage, took time.Duration, err error)
	asked []agent.Pending
}

func (g *fakeGate) Mode(name string) agent.ToolMode {
	if g.mode == nil {
		return agent.ToolAllow
	}
	return g.mode(name)
}

func (g *fakeGate) CallMode(c agent.ToolCall) (agent.ToolMode, string) { return g.Mode(c.Name), c.Name }
func (g *fakeGate) BeforeModel(context.Context) error                  { return nil }
func (g *fakeGate) AfterModel(ctx context.Context, u agent.Usage, took time.Duration, err error) {
	if g.after != nil {
		g.after(ctx, u, took, err)
	}
}
func (g *fakeGate) ToolDone(context.Context, agent.ToolCall, string, string, time.Duration) {}
func (g *fakeGate) Ask(_ context.Context, p agent.Pending) (agent.Approval, error) {
	g.asked = append(g.asked, p)
	return agent.Approval{ID: fmt.Sprint("ap", len(g.asked)), Tool: p.Rule, State: agent.ApprovalPending, Calls: p.Calls}, nil
}
func (g *fakeGate) Spent() agent.Spent                 { return agent.Spent{} }
func (g *fakeGate) Flush(context.Context, agent.Spent) {}
