package adapters

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/firstmate/firstmate/agent"
)

// asking is a channel that shows buttons: it writes them after the text
// as [label=data|…] so the calls show them.
type asking struct{ channel }

func (asking) ShowsButtons() bool { return true }

func (a asking) Format(t Text) []Part {
	parts := a.channel.Format(t)
	parts[len(parts)-1].Buttons = t.Buttons
	return parts
}

func withButtons(p Part) Part {
	for _, row := range p.Buttons {
		var bs []string
		for _, b := range row {
			bs = append(bs, b.Label+"="+b.Data)
		}
		p.Text += " [" + strings.Join(bs, "|") + "]"
	}
	return p
}

func (a asking) Post(ctx context.Context, p Part) (MessageID, error) {
	return a.channel.Post(ctx, withButtons(p))
}

func (a asking) Edit(ctx context.Context, id MessageID, p Part) error {
	return a.channel.Edit(ctx, id, withButtons(p))
}

func TestApprovalQuestionAndOutcome(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(slackPace())
		r := NewRenderer(ModeFull, nil)
		th := r.Thread(asking{channel{f}})
		ctx := context.Background()
		th.Emit(ctx, agent.TurnStarted{})
		ask := agent.ApprovalNeeded{CallID: "c1", Name: "shell", Args: json.RawMessage(`{"command":"rm -rf build"}`), ID: "ap1",
			Requester: agent.User{ID: "U1", Name: "ann"}, Deadline: time.Now().Add(5 * time.Minute)}
		if err := th.Emit(ctx, ask); err != nil {
			t.Fatal(err)
		}
		q, ok := f.first("post", "ann needs approval to run shell")
		if !ok || !strings.Contains(q.text, `rm -rf build`) || !strings.Contains(q.text, "[Approve=fm:ok:ap1|Deny=fm:no:ap1|Always allow here=fm:all:ap1]") {
			t.Fatalf("question not posted with its buttons: %q", f.ops())
		}
		if q.at != time.Now() {
			t.Errorf("the question waited %v", time.Since(q.at))
		}
		decided := agent.Approval{State: agent.ApprovalApproved, DecidedBy: agent.User{Name: "boss"}, Requester: ask.Requester, Args: `{"command":"rm -rf build"}`}
		if err := th.Emit(ctx, agent.ApprovalDecided{ID: "ap1", CallID: "c1", Name: "shell", Approval: decided}); err != nil {
			t.Fatal(err)
		}
		e, ok := f.first("edit", "✅ Approved by boss")
		if !ok || e.id != q.id || strings.Contains(e.text, "fm:") {
			t.Fatalf("outcome did not replace the question without buttons: %q", f.ops())
		}
		// An outcome for a question this turn never posted changes nothing.
		th.Emit(ctx, agent.ApprovalDecided{ID: "other", Name: "shell", Approval: decided})
		if n := f.count("edit"); n != 1 {
			t.Errorf("%d edits", n)
		}
		end(r, th)
	})
}

func TestPolicyScreenOnlyWhereButtonsShow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		view := &agent.PolicyView{Version: 4, Editable: true, Default: agent.Reason{Mode: agent.ToolAllow},
			Groups: []agent.GroupView{{Name: "exec", Rule: &agent.Reason{Mode: agent.ToolAsk}, Tools: []agent.ToolView{
				{Name: "shell", Reason: agent.Reason{Mode: agent.ToolAsk}}, {Name: "start", Reason: agent.Reason{Mode: agent.ToolDeny}}}}}}
		f := newFake(slackPace())
		r := NewRenderer(ModeFull, nil)
		ctx := context.Background()
		th := r.Thread(asking{channel{f}})
		th.Emit(ctx, agent.Notice{Text: "policy", Policy: view})
		if _, ok := f.first("post", "policy [▸ exec: ask=fm:pol:4:deny:group:exec] [shell: ask=fm:pol:4:deny:shell|start: deny=fm:pol:4:allow:start]"); !ok {
			t.Errorf("screen %q", f.ops())
		}
		th.(interface{ Close() error }).Close()
		plain := newFake(slackPace())
		th = r.Thread(channel{plain})
		th.Emit(ctx, agent.Notice{Text: "policy", Policy: view})
		if got := plain.ops(); len(got) != 1 || got[0] != "post policy" {
			t.Errorf("without buttons: %q", got)
		}
		end(r, th)
	})
	v := agent.PolicyView{Editable: false, Groups: []agent.GroupView{{Name: "exec", Tools: []agent.ToolView{{Name: "shell"}}}}}
	if s := PolicyScreen("x", v); len(s.Buttons) != 0 {
		t.Errorf("a read-only screen has buttons: %+v", s.Buttons)
	}
	long := agent.PolicyView{Editable: true, Groups: []agent.GroupView{{Name: "mcp:srv", Tools: []agent.ToolView{{Name: "srv__" + strings.Repeat("x", 60)}}}}}
	for _, row := range PolicyScreen("x", long).Buttons {
		for _, b := range row {
			if len(b.Data) > MaxButtonData {
				t.Errorf("button data of %d bytes", len(b.Data))
			}
		}
	}
}

// submitter records what clicks asked of the dispatcher.
type submitter struct {
	mu        sync.Mutex
	decisions []agent.Decision
	changes   []agent.PolicyChange
	setErr    error
}

func (s *submitter) Admit(context.Context, agent.Inbound) (bool, error) { return true, nil }

func (s *submitter) Submit(context.Context, agent.Inbound) error { return nil }

func (s *submitter) Decide(_ context.Context, d agent.Decision) (agent.Decided, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.decisions = append(s.decisions, d)
	return agent.Decided{Applied: true, Notice: "Approved by you."}, nil
}

func (s *submitter) Policy(context.Context, agent.SessionKey, agent.User) (agent.PolicyView, error) {
	return agent.PolicyView{Version: 9, Editable: true}, nil
}

func (s *submitter) SetPolicy(_ context.Context, _ agent.SessionKey, _ agent.User, c agent.PolicyChange) (agent.PolicyView, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.changes = append(s.changes, c)
	return agent.PolicyView{Version: c.Version + 1, Editable: true}, s.setErr
}

func TestHandleClick(t *testing.T) {
	ctx := context.Background()
	chat := agent.SessionKey{Platform: "p", Chat: "C"}
	u := agent.User{ID: "U1"}
	s := &submitter{}
	for data, want := range map[string]agent.Decision{
		"fm:ok:ap1":  {ApprovalID: "ap1", Chat: chat, User: u, Approve: true},
		"fm:no:ap1":  {ApprovalID: "ap1", Chat: chat, User: u},
		"fm:all:ap1": {ApprovalID: "ap1", Chat: chat, User: u, Approve: true, Always: true},
	} {
		s.decisions = nil
		c, err := HandleClick(ctx, s, chat, u, data)
		if err != nil || c.Notice != "Approved by you." || len(s.decisions) != 1 || s.decisions[0] != want {
			t.Errorf("%s: %+v %v %+v", data, c, err, s.decisions)
		}
	}
	c, err := HandleClick(ctx, s, chat, u, "fm:pol:3:ask:group:exec")
	if err != nil || c.Replace == nil || len(s.changes) != 1 || s.changes[0].Version != 3 || s.changes[0].Set["group:exec"] != agent.ToolAsk {
		t.Fatalf("policy click: %+v %v %+v", c, err, s.changes)
	}
	s.setErr = agent.ErrVersionConflict
	if c, _ := HandleClick(ctx, s, chat, u, "fm:pol:3:deny:shell"); c.Replace == nil || !strings.Contains(c.Notice, "changed the policy meanwhile") {
		t.Errorf("conflict: %+v", c)
	}
	s.setErr = agent.ErrNotAdmin
	if c, _ := HandleClick(ctx, s, chat, u, "fm:pol:3:deny:shell"); c.Replace != nil || !strings.Contains(c.Notice, "Only an admin") {
		t.Errorf("non-admin: %+v", c)
	}
	for _, bad := range []string{"", "hello", "fm:", "fm:ok:", "fm:pol:x:ask:shell", "fm:pol:3:maybe:shell", "fm:pol:3", "fm:zap:1"} {
		if _, err := HandleClick(ctx, s, chat, u, bad); !errors.Is(err, ErrNotOurs) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}
