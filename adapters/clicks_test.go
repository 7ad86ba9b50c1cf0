package adapters

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/agent/govern"
	"github.com/firstmate/firstmate/internal/testkit/policytest"
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

// The question ends the turn that asked: it is posted with its buttons,
// at once, and the decision, whoever clicks and wherever, replaces it
// with the outcome and no buttons (HandleClick's Replace).
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
		if n := f.count("upload"); n != 0 {
			t.Errorf("a short call's question attached %d files", n)
		}
		end(r, th)
	})
	sub := &decider{decided: agent.Decided{Applied: true, Notice: "Approved by boss.", Approval: agent.Approval{ID: "ap1", Tool: "shell",
		State: agent.ApprovalApproved, DecidedBy: agent.User{Name: "boss"}, Requester: agent.User{Name: "ann"}, Args: `{"command":"rm -rf build"}`}}}
	c, err := HandleClick(context.Background(), sub, agent.SessionKey{Platform: "slack", Chat: "C1"}, agent.User{ID: "U9"}, "fm:ok:ap1")
	if err != nil || c.Replace == nil || !strings.Contains(c.Replace.Body, "✅ Approved by boss") || !strings.Contains(c.Replace.Body, "rm -rf build") || len(c.Replace.Buttons) != 0 {
		t.Fatalf("click: %+v %v", c, err)
	}
	if sub.got.ApprovalID != "ap1" || !sub.got.Approve || sub.got.User.ID != "U9" {
		t.Errorf("decision %+v", sub.got)
	}
}

// decider is a Submitter that records a decision and answers with one.
type decider struct {
	agent.Submitter
	got     agent.Decision
	decided agent.Decided
}

func (d *decider) Decide(_ context.Context, dec agent.Decision) (agent.Decided, error) {
	d.got = dec
	return d.decided, nil
}

// An approver sees exactly what will run: a command padded to hide its
// end shows its head and its tail with how much is not shown, and the
// whole call is attached; invisible characters that reorder what is read
// are shown escaped.
func TestApprovalShowsWhatRuns(t *testing.T) {
	padded := `{"command":"echo ` + strings.Repeat("harmless ", 400) + `; echo HIDDEN-PAYLOAD-RAN; id"}`
	q := ApprovalText(agent.ApprovalNeeded{ID: "ap2", Name: "shell", Args: json.RawMessage(padded), Requester: agent.User{Name: "ann"}})
	if !strings.Contains(q.Body, "HIDDEN-PAYLOAD-RAN; id") {
		t.Errorf("the end of the command is not shown:\n%s", q.Body)
	}
	hidden := len([]rune(padded)) - 2*shownEnds
	if !strings.Contains(q.Body, fmt.Sprintf("%d characters not shown", hidden)) || !strings.Contains(q.Body, "approval-ap2.txt") {
		t.Errorf("the cut is not said:\n%s", q.Body)
	}
	f, ok := ApprovalFile(agent.ApprovalNeeded{ID: "ap2", Name: "shell", Args: json.RawMessage(padded)})
	if !ok {
		t.Fatal("no file for a long call")
	}
	rc, _, err := f.Open()
	if err != nil {
		t.Fatal(err)
	}
	whole, _ := io.ReadAll(rc)
	if !strings.Contains(string(whole), padded) {
		t.Errorf("the attached file lacks the call")
	}
	if _, ok := ApprovalFile(agent.ApprovalNeeded{ID: "ap3", Name: "shell", Args: json.RawMessage(`{"command":"ls"}`)}); ok {
		t.Error("a file for a call shown whole")
	}
	// RLO would show "cat log.txt<RLO>; rm -rf ~" reordered.
	shown, n := ShownArgs("{\"command\":\"cat log.txt\u202e; rm -rf ~\"}")
	if n != 0 || strings.ContainsRune(shown, '\u202e') || !strings.Contains(shown, `\u202e`) {
		t.Errorf("bidi override shown as %q", shown)
	}
	// A fence in the arguments does not end the code block.
	if shown, _ := ShownArgs("{\"c\":\"```\"}"); strings.Contains(shown, "```") {
		t.Errorf("fence kept: %q", shown)
	}
	synctest.Test(t, func(t *testing.T) {
		fk := newFake(slackPace())
		r := NewRenderer(ModeFull, nil)
		th := r.Thread(asking{channel{fk}})
		th.Emit(context.Background(), agent.ApprovalNeeded{ID: "ap2", Name: "shell", Args: json.RawMessage(padded), Requester: agent.User{Name: "ann"}})
		end(r, th)
		if _, ok := fk.first("upload", "approval-ap2.txt"); !ok {
			t.Errorf("the whole call was not attached: %q", fk.ops())
		}
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
		if _, ok := f.first("post", "policy [▸ exec: ask (config)=fm:pol:4:deny:group:exec] [shell: ask=fm:pol:4:deny:shell|start: deny=fm:pol:4:allow:start]"); !ok {
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
	for _, bad := range []string{"", "hello", "fm:", "fm:ok:", "fm:pol:x:ask:shell", "fm:pol:3:maybe:shell", "fm:pol:3", "fm:pol:3:ask:", "fm:pg:", "fm:pg:x", "fm:pg:-1", "fm:zap:1"} {
		if _, err := HandleClick(ctx, s, chat, u, bad); !errors.Is(err, ErrNotOurs) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// findButton is the button of s whose label starts with label.
func findButton(t *testing.T, s Text, label string) Button {
	t.Helper()
	for _, row := range s.Buttons {
		for _, b := range row {
			if strings.HasPrefix(b.Label, label) {
				return b
			}
		}
	}
	t.Fatalf("no button %q in %+v", label, s.Buttons)
	return Button{}
}

// The screen lists a channel's skills (configured and its own) and its MCP
// servers with their modes and where they come from; a click changes them
// like any rule, for admins only, and a rule too long for button data
// still comes back whole.
func TestPolicyScreenSkillsAndMCPServers(t *testing.T) {
	ctx := context.Background()
	chat := agent.SessionKey{Platform: "p", Chat: "C1", Thread: "17"}
	admin, someone := agent.User{ID: "U9"}, agent.User{ID: "U1"}
	e := policytest.New(t, chat, []string{admin.ID})
	long := agent.SkillRule(policytest.LongSkill)

	v, err := e.D.Policy(ctx, chat, admin)
	if err != nil {
		t.Fatal(err)
	}
	s := PolicyScreen(PolicyText(v), v)
	for _, want := range []string{"▸ skills: allow (default)", "deploy: allow", policytest.LongSkill + ": allow", "▸ mcp:notes: allow (default)", "notes__search: allow"} {
		findButton(t, s, want)
	}
	for _, want := range []string{"• skills: allow (default); skill=allow deploy=allow " + policytest.LongSkill + "=allow", "• mcp:notes: allow (default); notes__add=allow notes__search=allow"} {
		if !strings.Contains(s.Body, want) {
			t.Errorf("the text lacks %q:\n%s", want, s.Body)
		}
	}
	for _, row := range s.Buttons {
		for _, b := range row {
			if len(b.Data) > MaxButtonData {
				t.Errorf("%s: data of %d bytes", b.Label, len(b.Data))
			}
		}
	}
	longData := findButton(t, s, policytest.LongSkill).Data
	if strings.Contains(longData, "release") || !strings.HasPrefix(longData, "fm:pol:0:ask:#") {
		t.Errorf("the long skill's data %q", longData)
	}

	// A non-admin's click changes nothing and is answered.
	deploy := findButton(t, s, "deploy").Data
	c, err := HandleClick(ctx, e.D, chat, someone, deploy)
	if err != nil || c.Replace != nil || c.Notice != notAdmin {
		t.Errorf("a non-admin's click: %+v, %v", c, err)
	}
	if c, err := HandleClick(ctx, e.D, chat, someone, longData); err != nil || c.Replace != nil || c.Notice != notAdmin {
		t.Errorf("a non-admin's click on the long skill: %+v, %v", c, err)
	}
	if st := e.Settings(t, chat); st.Version != 0 || len(st.Tools) != 0 {
		t.Fatalf("a non-admin's click stored %+v", st)
	}
	if n := len(e.Audit(t, chat, govern.AuditPolicyRefused)); n != 2 {
		t.Errorf("%d refusals audited", n)
	}

	// An admin's click cycles the skill, stores it, audits it, and the
	// screen shows it set here.
	c, err = HandleClick(ctx, e.D, chat, admin, deploy)
	if err != nil || c.Replace == nil || c.Notice != "skill:deploy is ask here now." {
		t.Fatalf("an admin's click: %+v, %v", c, err)
	}
	st := e.Settings(t, chat)
	if r := st.Tools["skill:deploy"]; st.Version != 1 || r.Mode != agent.ToolAsk || r.By != "p:U9" {
		t.Fatalf("stored %+v", st)
	}
	if a := e.Audit(t, chat, govern.AuditPolicySet); len(a) != 1 || a[0].Detail != "skill:deploy=ask" {
		t.Errorf("audit %+v", a)
	}
	findButton(t, *c.Replace, "deploy: ask (here)")
	if !strings.Contains(c.Replace.Body, "deploy=ask (here)") {
		t.Errorf("the text after the click:\n%s", c.Replace.Body)
	}
	// The same click again (a double click, a replayed payload) is stale:
	// nothing changes.
	c, _ = HandleClick(ctx, e.D, chat, admin, deploy)
	if c.Replace == nil || !strings.Contains(c.Notice, "changed the policy meanwhile") || e.Settings(t, chat).Version != 1 {
		t.Errorf("a second click: %+v, stored %+v", c, e.Settings(t, chat))
	}

	// The long name round-trips through its button's data; so does a
	// server's.
	s = *c.Replace
	c, err = HandleClick(ctx, e.D, chat, admin, findButton(t, s, policytest.LongSkill).Data)
	if err != nil || c.Notice != long+" is ask here now." {
		t.Fatalf("the long skill's click: %+v, %v", c, err)
	}
	findButton(t, *c.Replace, policytest.LongSkill+": ask (here)")
	c, err = HandleClick(ctx, e.D, chat, admin, findButton(t, *c.Replace, "▸ mcp:notes").Data)
	if err != nil || c.Notice != "mcp:notes (group) is ask here now." {
		t.Fatalf("the server's click: %+v, %v", c, err)
	}
	findButton(t, *c.Replace, "▸ mcp:notes: ask (here)")
	findButton(t, *c.Replace, "notes__add: ask")
	st = e.Settings(t, chat)
	if st.Version != 3 || st.Tools[long].Mode != agent.ToolAsk || st.Tools["group:mcp:notes"].Mode != agent.ToolAsk || len(st.Tools) != 3 {
		t.Errorf("stored %+v", st)
	}

	// A hash that names no rule on the screen sets nothing.
	c, err = HandleClick(ctx, e.D, chat, admin, "fm:pol:3:deny:"+ruleRef("skill:gone"))
	if err != nil || !strings.Contains(c.Notice, "no longer on this screen") || e.Settings(t, chat).Version != 3 {
		t.Errorf("an unknown hash: %+v, %v", c, err)
	}
}

// Many skills make pages, each within the platforms' limits; a click keeps
// the page of the rule it changed, and only admins turn pages.
func TestPolicyScreenPages(t *testing.T) {
	ctx := context.Background()
	chat := agent.SessionKey{Platform: "p", Chat: "C1"}
	admin := agent.User{ID: "U9"}
	var extra []string
	for i := range 120 {
		extra = append(extra, fmt.Sprintf("skill-%03d", i))
	}
	e := policytest.New(t, chat, []string{admin.ID}, extra...)
	v, err := e.D.Policy(ctx, chat, admin)
	if err != nil {
		t.Fatal(err)
	}
	pages := policyPages(v)
	if len(pages) < 2 {
		t.Fatalf("%d pages", len(pages))
	}
	seen := map[string]bool{}
	for i := range pages {
		s := policyPage(PolicyText(v), v, i, "")
		n := 0
		for _, row := range s.Buttons {
			n += len(row)
			for _, b := range row {
				if len(b.Data) > MaxButtonData {
					t.Errorf("%s: data of %d bytes", b.Label, len(b.Data))
				}
				seen[b.Label] = true
			}
		}
		if n > maxPageButtons+2 || len([]rune(s.Body)) > 4096 {
			t.Errorf("page %d: %d buttons, %d characters", i, n, len([]rune(s.Body)))
		}
	}
	for _, want := range []string{"skill-000: allow", "skill-119: allow", "▸ mcp:notes: allow (default)", policytest.LongSkill + ": allow"} {
		if !seen[want] {
			t.Errorf("no page shows %q", want)
		}
	}

	first := PolicyScreen(PolicyText(v), v)
	next := findButton(t, first, "page 2 ▶")
	if c, err := HandleClick(ctx, e.D, chat, agent.User{ID: "U1"}, next.Data); err != nil || c.Replace != nil || c.Notice != notAdmin {
		t.Errorf("a non-admin turns the page: %+v, %v", c, err)
	}
	c, err := HandleClick(ctx, e.D, chat, admin, next.Data)
	if err != nil || c.Replace == nil {
		t.Fatalf("page 2: %+v, %v", c, err)
	}
	findButton(t, *c.Replace, "◀ page 1")
	last := policyPage(PolicyText(v), v, len(pages)-1, "")
	b := last.Buttons[len(last.Buttons)-2][0] // a rule's button on the last page
	c, err = HandleClick(ctx, e.D, chat, admin, b.Data)
	if err != nil || c.Replace == nil {
		t.Fatalf("a click on the last page: %+v, %v", c, err)
	}
	name, _, _ := strings.Cut(b.Label, ":")
	findButton(t, *c.Replace, name+": ")
	if !strings.Contains(c.Replace.Body, fmt.Sprintf("(Page %d of %d", len(pages), len(pages))) {
		t.Errorf("the screen went back to another page:\n%s", c.Replace.Body)
	}
}
