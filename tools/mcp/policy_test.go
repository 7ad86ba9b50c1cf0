package mcp_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/agent/govern"
	"github.com/firstmate/firstmate/tools"
	"github.com/firstmate/firstmate/tools/mcp"
)

// scripted is a model that calls the tools it is told to, in order, then
// answers; it records what each request offered.
type scripted struct {
	mu      sync.Mutex
	calls   []string
	offered [][]string
	results []string
}

func (m *scripted) Complete(_ context.Context, req *agent.Request) (*agent.Response, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var names []string
	for _, s := range req.Tools {
		names = append(names, s.Name)
	}
	m.offered = append(m.offered, names)
	if last := req.Messages[len(req.Messages)-1]; last.Role == agent.RoleTool {
		m.results = append(m.results, last.Content)
	}
	if len(m.calls) == 0 {
		return &agent.Response{Message: agent.Message{Content: "done"}}, nil
	}
	call := m.calls[0]
	m.calls = m.calls[1:]
	return &agent.Response{Message: agent.Message{ToolCalls: []agent.ToolCall{{ID: "c1", Name: call, Args: []byte(`{"text":"hi"}`)}}}}, nil
}

// Each server is a policy group mcp:SERVER: a denied server's tools are
// never offered to the model (nor run if it calls one anyway), while
// another server's are; one tool of a server can be denied alone.
func TestPolicyDeniedServerNeverOffered(t *testing.T) {
	url := httpServer(t, "")
	e := newEnv(t, mcp.Config{AllowNetworks: loopback}, mcp.Server{Name: "notes", URL: url}, mcp.Server{Name: "wiki", URL: url})
	if g := govern.GroupOf(e.set.Current(), "notes__echo"); g != "mcp:notes" {
		t.Fatalf("group of notes__echo: %q", g)
	}
	rule, err := govern.ParseRuleName("mcp:notes", e.set.Current())
	if err != nil || rule != "group:mcp:notes" {
		t.Fatalf("mcp:notes is not a group here: %q, %v", rule, err)
	}
	policy := govern.NewPolicy(agent.SessionKey{Platform: "test", Chat: "C1"}, govern.Defaults{
		Default: agent.ToolAllow,
		Rules:   map[string]agent.ToolMode{"group:mcp:notes": agent.ToolDeny, "wiki__huge": agent.ToolDeny},
	}, agent.ChannelSettings{}, e.set.Current())
	model := &scripted{calls: []string{"notes__echo", "wiki__echo"}}
	loop := &agent.Loop{Model: model}
	out, err := loop.Run(t.Context(), &agent.Turn{Key: agent.SessionKey{Platform: "test", Chat: "C1"},
		Input: agent.Message{Role: agent.RoleUser, Content: "go"}, Tools: e.set, Workspace: e.ws, Gate: policyGate{policy, e.set.Current()}})
	if err != nil || out.Answer != "done" {
		t.Fatalf("turn: %v, %+v", err, out)
	}
	for i, offered := range model.offered {
		if slices.ContainsFunc(offered, func(n string) bool { return strings.HasPrefix(n, "notes__") }) {
			t.Errorf("request %d offered a denied server's tool: %v", i, offered)
		}
		if slices.Contains(offered, "wiki__huge") || !slices.Contains(offered, "wiki__echo") {
			t.Errorf("request %d offered %v", i, offered)
		}
		if !slices.IsSorted(offered) {
			t.Errorf("request %d: not sorted: %v", i, offered)
		}
	}
	if len(model.results) != 2 || !strings.Contains(model.results[0], "notes__echo is not allowed in this channel") || model.results[1] != "hi" {
		t.Errorf("results %q", model.results)
	}
}

// policyGate is a turn's gate with a channel policy and nothing else.
type policyGate struct {
	p   *govern.Policy
	set *tools.Set
}

func (g policyGate) Mode(name string) agent.ToolMode { return g.p.Mode(name) }
func (g policyGate) CallMode(c agent.ToolCall) (agent.ToolMode, string) {
	return g.p.CallMode(g.set, c)
}
func (policyGate) BeforeModel(context.Context) error                                       { return nil }
func (policyGate) AfterModel(context.Context, agent.Usage, time.Duration, error)           {}
func (policyGate) ToolDone(context.Context, agent.ToolCall, string, string, time.Duration) {}
func (policyGate) Ask(context.Context, agent.Pending) (agent.Approval, error) {
	return agent.Approval{}, errors.New("no approvals in this test")
}
func (policyGate) Spent() agent.Spent                 { return agent.Spent{} }
func (policyGate) Flush(context.Context, agent.Spent) {}
