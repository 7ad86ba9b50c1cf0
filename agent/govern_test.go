package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/agent/govern"
	"github.com/firstmate/firstmate/tools"
)

func TestCommandsWithArguments(t *testing.T) {
	for text, want := range map[string]string{
		"tools": "tools", "/tools exec=ask web=deny": "tools", "tools exec=ask": "tools", "why shell": "why",
		"/why is the sky blue": "why", "usage": "usage", "K7QP-M2XD": "pair", "pair k7qpm2xd": "pair",
	} {
		c, _, ok := agent.ParseCommand(text, func(n string) bool { return n == "shell" })
		if !ok || c.Name != want {
			t.Errorf("ParseCommand(%q) = %q, %v; want %s", text, c.Name, ok, want)
		}
	}
	for _, text := range []string{"why is the sky blue", "tools are great", "why not", "usage of memory"} {
		if c, _, ok := agent.ParseCommand(text, func(n string) bool { return n == "shell" }); ok {
			t.Errorf("ParseCommand(%q) = %s; it is a question", text, c.Name)
		}
	}
}

// govTools have the names of real tools, so groups apply.
func govTools() *tools.Set {
	var ts []tools.Tool
	powers := map[string]tools.Power{"shell": tools.PowerExec, "start": tools.PowerExec, "read": tools.PowerRead, "grep": tools.PowerRead, "fetch": tools.PowerWeb}
	for _, name := range []string{"shell", "start", "read", "grep", "fetch"} {
		ts = append(ts, tools.New(name, powers[name], name+" tool", func(_ context.Context, _ *tools.Workspace, a echoArgs) (tools.Result, error) {
			return tools.Result{Text: name + " ran: " + a.Text, Summary: "ran"}, nil
		}))
	}
	return tools.NewSet(ts)
}

// govHarness runs a dispatcher with govTools and admins U9 (and, on the
// "test" platform, nobody else).
func govHarness(t *testing.T, m agent.Model, cfg hcfg) *harness {
	t.Helper()
	cfg.Loop = &agent.Loop{Model: m}
	cfg.Admins = func(platform, id string) bool { return id == "U9" }
	h := startHarness(t, openStore(t), cfg)
	return h
}

func offeredNames(req *agent.Request) []string {
	var names []string
	for _, s := range req.Tools {
		names = append(names, s.Name)
	}
	return names
}

func TestDeniedGroupIsNeverOffered(t *testing.T) {
	var mu sync.Mutex
	var offered [][]string
	step := 0
	m := &funcModel{f: func(_ context.Context, req *agent.Request) (*agent.Response, error) {
		mu.Lock()
		defer mu.Unlock()
		offered = append(offered, offeredNames(req))
		step++
		if step == 1 {
			// Called anyway, as a model reading old history might.
			return &agent.Response{Message: agent.Message{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{call("c1", "start", `{"text":"x"}`)}}}, nil
		}
		return answerWith("done"), nil
	}}
	h := govHarness(t, m, hcfg{Tools: govTools(), Policy: govern.Defaults{Rules: map[string]agent.ToolMode{"group:exec": agent.ToolDeny}}})
	other := agent.SessionKey{Platform: "test", Chat: "C2"}
	if _, err := govern.ChangePolicy(t.Context(), h.store, other, "test:U9", agent.PolicyChange{Version: -1, Set: map[string]agent.ToolMode{"group:web": agent.ToolDeny}}, govTools()); err != nil {
		t.Fatal(err)
	}
	h.submit(t, inbound(keyA, "m1", "run something"))
	h.idle(t, keyA)
	mu.Lock()
	if len(offered) != 2 || !slices.Equal(offered[0], []string{"fetch", "grep", "read"}) {
		t.Errorf("offered %q; want exec left out and web kept (another channel's rule does not leak)", offered)
	}
	mu.Unlock()
	hist, _ := h.store.History(t.Context(), keyA)
	var result string
	for _, msg := range hist {
		if msg.Role == agent.RoleTool {
			result = msg.Content
		}
	}
	if !strings.Contains(result, "start is not allowed in this channel") {
		t.Errorf("a denied call's result %q", result)
	}
	if entries := auditOf(t, h.store, govern.AuditToolCall); len(entries) != 1 || entries[0].Outcome != "denied" || entries[0].Tool != "start" {
		t.Errorf("audit of the denied call: %+v", entries)
	}
}

func auditOf(t *testing.T, st testStore, action string) []govern.AuditEntry {
	t.Helper()
	all, err := st.AuditLog(t.Context(), govern.AuditQuery{})
	if err != nil {
		t.Fatal(err)
	}
	var out []govern.AuditEntry
	for _, e := range all {
		if e.Action == action {
			out = append(out, e)
		}
	}
	return out
}

var codeRE = regexp.MustCompile(`[0-9A-Z]{4}-[0-9A-Z]{4}`)

func TestPairingAStranger(t *testing.T) {
	m := &funcModel{f: func(_ context.Context, req *agent.Request) (*agent.Response, error) {
		return answerWith("hi " + lastUser(req)), nil
	}}
	h := govHarness(t, m, hcfg{Tools: govTools(), Access: map[string]govern.Access{"test": {Mode: govern.AccessPairing}}})
	dm := agent.SessionKey{Platform: "test", Chat: "D5"}
	stranger := func(id, text string) agent.Inbound {
		in := agent.Inbound{Key: dm, MessageID: id, User: agent.User{ID: "U5", Name: "eve"}, Text: text, Addressed: true, Private: true}
		return in
	}
	h.submit(t, stranger("m1", "hello"))
	h.submit(t, stranger("m2", "hello?"))
	h.submit(t, stranger("m3", "tools"))
	waitFor(t, func() bool { _, _, n := h.p.final(dm); return len(n) >= 1 })
	time.Sleep(50 * time.Millisecond)
	_, _, notices := h.p.final(dm)
	if len(notices) != 1 || !strings.Contains(notices[0], "firstmate admin pair approve") {
		t.Fatalf("stranger told %q; want one message with a code", notices)
	}
	code := codeRE.FindString(notices[0])
	if m.calls.Load() != 0 {
		t.Fatal("a stranger's message reached the model")
	}
	if n, _ := h.store.Pending(t.Context(), dm); n != 0 {
		t.Fatalf("a stranger's message was stored: %d pending", n)
	}

	// Someone who is not an admin cannot approve it, even in their own chat.
	h.submit(t, stranger("m4", code))
	// An admin sends the code to the bot.
	admin := agent.SessionKey{Platform: "test", Chat: "D9"}
	h.submit(t, agent.Inbound{Key: admin, MessageID: "a1", User: agent.User{ID: "U9"}, Text: strings.ToLower(code), Addressed: true, Private: true})
	waitFor(t, func() bool { _, _, n := h.p.final(admin); return len(n) == 1 })
	if _, _, n := h.p.final(admin); !strings.Contains(n[0], "Approved: user U5") {
		t.Fatalf("admin told %q", n)
	}
	h.submit(t, stranger("m5", "hello again"))
	h.idle(t, dm)
	if answers, _, _ := h.p.final(dm); len(answers) != 1 || !strings.Contains(answers[0], "hello again") {
		t.Fatalf("after pairing: %q", answers)
	}
	if len(auditOf(t, h.store, govern.AuditPairRequest)) != 1 || len(auditOf(t, h.store, govern.AuditPairApprove)) != 1 {
		t.Error("pairing not audited")
	}
	// The code is spent.
	h.submit(t, agent.Inbound{Key: admin, MessageID: "a2", User: agent.User{ID: "U9"}, Text: code, Addressed: true, Private: true})
	waitFor(t, func() bool { _, _, n := h.p.final(admin); return len(n) == 2 })
	if _, _, n := h.p.final(admin); !strings.Contains(n[1], "unknown or expired") {
		t.Fatalf("a spent code: %q", n[1])
	}
}

func TestGroupPairsTheChatAndAllowlistTellsOnce(t *testing.T) {
	m := &funcModel{f: func(_ context.Context, req *agent.Request) (*agent.Response, error) { return answerWith("ok"), nil }}
	h := govHarness(t, m, hcfg{Tools: govTools(), Access: map[string]govern.Access{
		"test": {Mode: govern.AccessPairing}, "list": {Mode: govern.AccessAllowlist, Users: []string{"U1"}},
		"open": {Mode: govern.AccessOpen},
	}})
	group := agent.SessionKey{Platform: "test", Chat: "G1"}
	h.submit(t, agent.Inbound{Key: group, MessageID: "g1", User: agent.User{ID: "U5"}, Text: "hi", Addressed: true, ChatName: "Team"})
	waitFor(t, func() bool { _, _, n := h.p.final(group); return len(n) == 1 })
	ps, err := h.store.Pairings(t.Context())
	if err != nil || len(ps) != 1 || ps[0].Kind != govern.GrantChat || ps[0].ID != "G1" || ps[0].Name != "Team" {
		t.Fatalf("pairings %+v %v", ps, err)
	}
	if _, err := govern.ApprovePairing(t.Context(), h.store, ps[0].Code, "cli:op"); err != nil {
		t.Fatal(err)
	}
	// Anyone in the group now.
	h.submit(t, agent.Inbound{Key: group, MessageID: "g2", User: agent.User{ID: "U6"}, Text: "hi", Addressed: true})
	h.idle(t, group)
	if a, _, _ := h.p.final(group); len(a) != 1 {
		t.Fatalf("group answers %q", a)
	}

	listed := agent.SessionKey{Platform: "list", Chat: "C1"}
	for i, u := range []string{"U7", "U7", "U1"} {
		h.submit(t, agent.Inbound{Key: listed, MessageID: "l" + string(rune('0'+i)), User: agent.User{ID: u}, Text: "hi", Addressed: true})
	}
	h.idle(t, listed)
	a, _, n := h.p.final(listed)
	if len(a) != 1 || len(n) != 1 || !strings.Contains(n[0], "firstmate admin access allow list user U7") {
		t.Fatalf("allowlist: answers %q notices %q", a, n)
	}

	open := agent.SessionKey{Platform: "open", Chat: "C1"}
	h.submit(t, agent.Inbound{Key: open, MessageID: "o1", User: agent.User{ID: "X1", External: true}, Text: "hi", Addressed: true})
	h.submit(t, agent.Inbound{Key: open, MessageID: "o2", User: agent.User{ID: "U2"}, Text: "hi", Addressed: true})
	h.idle(t, open)
	if a, _, n := h.p.final(open); len(a) != 1 || len(n) != 1 || !strings.Contains(n[0], "outside this workspace") {
		t.Fatalf("open with an outsider: answers %q notices %q", a, n)
	}
	if refused := auditOf(t, h.store, govern.AuditAccessRefused); len(refused) != 2 {
		t.Errorf("refusals audited: %+v", refused)
	}
}

// An open bot is open to its organisation's members, not to its guests
// nor to people from outside, unless allowed; and an admin's ID (U9) in a
// message from outside (or from someone whose organisation is not known)
// is neither admitted as the admin nor obeyed as one.
func TestOpenRefusesGuestsAndForeignAdminIDs(t *testing.T) {
	m := &funcModel{f: func(_ context.Context, req *agent.Request) (*agent.Response, error) { return answerWith("ok"), nil }}
	h := govHarness(t, m, hcfg{Tools: govTools(), Access: map[string]govern.Access{"open": {Mode: govern.AccessOpen, Users: []string{"G2"}}}})
	open := agent.SessionKey{Platform: "open", Chat: "C1"}
	h.submit(t, agent.Inbound{Key: open, MessageID: "o1", User: agent.User{ID: "G1", Guest: true}, Text: "hi", Addressed: true})
	h.submit(t, agent.Inbound{Key: open, MessageID: "o2", User: agent.User{ID: "G2", Guest: true}, Text: "hi", Addressed: true})
	h.submit(t, agent.Inbound{Key: open, MessageID: "o3", User: agent.User{ID: "U9", External: true, Team: "T0OTHER"}, Text: "/tools exec=allow", Addressed: true})
	h.idle(t, open)
	// Refusals are told in the background.
	var a, n []string
	waitFor(t, func() bool { a, _, n = h.p.final(open); return len(a) == 1 && len(n) == 2 })
	slices.Sort(n)
	if !strings.Contains(n[0], "guests of this workspace are not on the list") || !strings.Contains(n[1], "people from outside this workspace") {
		t.Errorf("refusals %q", n)
	}
	if v, err := h.store.Settings(t.Context(), open.Channel()); err != nil || len(v.Tools) != 0 {
		t.Errorf("the outsider with the admin's ID changed the policy: %+v %v", v, err)
	}
	// The admin themself, from inside, is obeyed.
	h.submit(t, agent.Inbound{Key: open, MessageID: "o4", User: agent.User{ID: "U9"}, Text: "/tools exec=allow", Addressed: true})
	waitFor(t, func() bool {
		v, err := h.store.Settings(t.Context(), open.Channel())
		return err == nil && len(v.Tools) == 1
	})
}

// askingModel calls tool once with args, then answers with the tool's result.
func askingModel(tool string) *funcModel {
	return &funcModel{f: func(_ context.Context, req *agent.Request) (*agent.Response, error) {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == agent.RoleTool {
			return answerWith("result: " + last.Content), nil
		}
		if strings.HasPrefix(last.Content, "[Approval") {
			return answerWith("told: " + last.Content), nil
		}
		args, _ := json.Marshal(map[string]string{"text": lastUser(req)})
		return &agent.Response{Message: agent.Message{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{call("c1", tool, string(args))}}}, nil
	}}
}

// approvalOf waits for key's ApprovalNeeded and returns it.
func (h *harness) approvalOf(t *testing.T, key agent.SessionKey) agent.ApprovalNeeded {
	t.Helper()
	var req agent.ApprovalNeeded
	waitFor(t, func() bool {
		h.p.mu.Lock()
		defer h.p.mu.Unlock()
		for _, ev := range h.p.events[key] {
			if ev, ok := ev.(agent.ApprovalNeeded); ok {
				req = ev
				return true
			}
		}
		return false
	})
	return req
}

// stored is the approval with id as the gate keeps it.
func (h *harness) stored(t *testing.T, id string) agent.Approval {
	t.Helper()
	a, err := h.store.Approval(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestApprovals(t *testing.T) {
	ask := govern.Defaults{Rules: map[string]agent.ToolMode{"group:exec": agent.ToolAsk}}
	chat := func(k agent.SessionKey) agent.SessionKey { return k.Channel() }

	t.Run("approve by the requester; others and forged chats refused; a second click changes nothing", func(t *testing.T) {
		h := govHarness(t, askingModel("shell"), hcfg{Tools: govTools(), Policy: ask})
		h.submit(t, inbound(keyA, "m1", "ls"))
		req := h.approvalOf(t, keyA)
		// The turn that asked is over: nothing waits for the click.
		h.idle(t, keyA)
		if req.ID == "" || req.Requester.ID != "U1" || time.Until(req.Deadline) < 4*time.Minute {
			t.Fatalf("approval request %+v", req)
		}
		res, err := h.d.Decide(t.Context(), agent.Decision{ApprovalID: req.ID, Chat: chat(keyA), User: agent.User{ID: "U2"}, Approve: true})
		if err != nil || res.Applied || !strings.Contains(res.Notice, "Only ann") {
			t.Fatalf("another user's click: %+v %v", res, err)
		}
		res, _ = h.d.Decide(t.Context(), agent.Decision{ApprovalID: req.ID, Chat: agent.SessionKey{Platform: "test", Chat: "C9"}, User: agent.User{ID: "U1"}, Approve: true})
		if res.Applied {
			t.Fatal("a click from another chat decided")
		}
		res, _ = h.d.Decide(t.Context(), agent.Decision{ApprovalID: req.ID, Chat: chat(keyA), User: agent.User{ID: "U1"}, Always: true})
		if res.Applied {
			t.Fatal("a non-admin's always allow decided")
		}
		res, err = h.d.Decide(t.Context(), agent.Decision{ApprovalID: req.ID, Chat: chat(keyA), User: agent.User{ID: "U1", Name: "ann"}, Approve: true})
		if err != nil || !res.Applied {
			t.Fatalf("requester's click: %+v %v", res, err)
		}
		again, _ := h.d.Decide(t.Context(), agent.Decision{ApprovalID: req.ID, Chat: chat(keyA), User: agent.User{ID: "U9"}, Approve: false})
		if again.Applied || again.Approval.State != agent.ApprovalApproved {
			t.Fatalf("a second click: %+v", again)
		}
		waitFor(t, func() bool { a, _, _ := h.p.final(keyA); return len(a) > 0 })
		h.idle(t, keyA)
		if a, _, _ := h.p.final(keyA); len(a) != 1 || !strings.Contains(a[0], "shell ran") {
			t.Fatalf("answers %q", a)
		}
		if a := h.stored(t, req.ID); a.State != agent.ApprovalApproved || a.DecidedBy.ID != "U1" {
			t.Fatalf("stored %+v", a)
		}
		if len(auditOf(t, h.store, govern.AuditApprovalRefused)) != 3 || len(auditOf(t, h.store, govern.AuditApprovalDecided)) != 1 {
			t.Error("approval clicks not audited")
		}
	})

	t.Run("deny, and always allow by an admin", func(t *testing.T) {
		h := govHarness(t, askingModel("shell"), hcfg{Tools: govTools(), Policy: ask})
		h.submit(t, inbound(keyA, "m1", "ls"))
		req := h.approvalOf(t, keyA)
		h.idle(t, keyA)
		h.d.Decide(t.Context(), agent.Decision{ApprovalID: req.ID, Chat: chat(keyA), User: agent.User{ID: "U9", Name: "boss"}, Approve: false})
		waitFor(t, func() bool { a, _, _ := h.p.final(keyA); return len(a) > 0 })
		h.idle(t, keyA)
		if a, _, _ := h.p.final(keyA); len(a) != 1 || !strings.Contains(a[0], "boss denied the shell call") {
			t.Fatalf("the model was told %q", a)
		}
		h.submit(t, inbound(keyB, "m2", "ls"))
		req = h.approvalOf(t, keyB)
		h.idle(t, keyB)
		res, _ := h.d.Decide(t.Context(), agent.Decision{ApprovalID: req.ID, Chat: chat(keyB), User: agent.User{ID: "U9"}, Always: true})
		if !res.Applied || !res.Approval.Always {
			t.Fatalf("always: %+v", res)
		}
		waitFor(t, func() bool { a, _, _ := h.p.final(keyB); return len(a) > 0 })
		h.idle(t, keyB)
		p, _ := h.d.Policy(t.Context(), keyA, agent.User{ID: "U1"})
		for _, g := range p.Groups {
			for _, tl := range g.Tools {
				if tl.Name == "shell" && (tl.Reason.Mode != agent.ToolAllow || tl.Reason.Layer != "channel" || tl.Reason.By != "test:U9") {
					t.Errorf("after always allow, shell is %+v", tl.Reason)
				}
			}
		}
	})

	t.Run("no decision before the deadline is a denial", func(t *testing.T) {
		h := govHarness(t, askingModel("shell"), hcfg{Tools: govTools(), Policy: ask, ApprovalTimeout: 300 * time.Millisecond})
		h.submit(t, inbound(keyA, "m1", "ls"))
		req := h.approvalOf(t, keyA)
		h.idle(t, keyA)
		waitFor(t, func() bool { return time.Now().After(req.Deadline) })
		res, _ := h.d.Decide(t.Context(), agent.Decision{ApprovalID: req.ID, Chat: chat(keyA), User: agent.User{ID: "U1"}, Approve: true})
		if !res.Applied || res.Approval.State != agent.ApprovalExpired || !strings.Contains(res.Notice, "did not run") {
			t.Fatalf("a late click: %+v", res)
		}
		waitFor(t, func() bool { a, _, _ := h.p.final(keyA); return len(a) > 0 })
		h.idle(t, keyA)
		if a, _, _ := h.p.final(keyA); len(a) != 1 || !strings.Contains(a[0], "nobody decided on the shell call in time") {
			t.Fatalf("answer %q", a)
		}
		if late, _ := h.d.Decide(t.Context(), agent.Decision{ApprovalID: req.ID, Chat: chat(keyA), User: agent.User{ID: "U1"}, Approve: true}); late.Applied {
			t.Fatalf("a click after the expiry: %+v", late)
		}
	})

	t.Run("a click on another replica resumes the turn", func(t *testing.T) {
		h := govHarness(t, askingModel("shell"), hcfg{Tools: govTools(), Policy: ask})
		other, _ := build(t, h.store, hcfg{Loop: &agent.Loop{Model: askingModel("shell")}, Tools: govTools(), Policy: ask}, &platform{})
		h.submit(t, inbound(keyA, "m1", "ls"))
		req := h.approvalOf(t, keyA)
		h.idle(t, keyA)
		if res, err := other.Decide(t.Context(), agent.Decision{ApprovalID: req.ID, Chat: chat(keyA), User: agent.User{ID: "U1"}, Approve: true}); err != nil || !res.Applied {
			t.Fatalf("%+v %v", res, err)
		}
		// The decision is a mailbox entry of a session nobody holds: this
		// replica, watching its ready sessions, takes it.
		waitFor(t, func() bool {
			a, _, _ := h.p.final(keyA)
			return slices.ContainsFunc(a, func(s string) bool { return strings.Contains(s, "shell ran") })
		})
	})

	t.Run("revoking the person who asked voids their approval", func(t *testing.T) {
		access := map[string]govern.Access{"test": {Mode: govern.AccessAllowlist}}
		h := govHarness(t, askingModel("shell"), hcfg{Tools: govTools(), Policy: ask, Access: access})
		if err := govern.AllowAccess(t.Context(), h.store, govern.Grant{Platform: "test", Kind: govern.GrantUser, ID: "U1", By: "cli:op"}); err != nil {
			t.Fatal(err)
		}
		h.submit(t, inbound(keyA, "m1", "ls"))
		req := h.approvalOf(t, keyA)
		h.idle(t, keyA)
		if _, err := govern.RevokeAccess(t.Context(), h.store, "test", govern.GrantUser, "U1", "cli:op"); err != nil {
			t.Fatal(err)
		}
		// Neither they nor an admin can approve it now.
		for _, u := range []agent.User{{ID: "U1", Name: "ann"}, {ID: "U9", Name: "boss"}} {
			res, err := h.d.Decide(t.Context(), agent.Decision{ApprovalID: req.ID, Chat: chat(keyA), User: u, Approve: true})
			if err != nil || res.Approval.State != agent.ApprovalDenied {
				t.Fatalf("%s's click after the revocation: %+v %v", u.Name, res, err)
			}
		}
		if a := h.stored(t, req.ID); a.State != agent.ApprovalDenied || !strings.Contains(a.Why, "may no longer talk to me here") {
			t.Fatalf("stored %+v", a)
		}
		waitFor(t, func() bool { a, _, _ := h.p.final(keyA); return len(a) > 0 })
		if a, _, _ := h.p.final(keyA); len(a) != 1 || strings.Contains(a[0], "shell ran") {
			t.Fatalf("answers %q", a)
		}
	})

	t.Run("a folded turn is everyone's: an author decides, a bystander does not, the audit names them all", func(t *testing.T) {
		h := govHarness(t, askingModel("shell"), hcfg{Tools: govTools(), Policy: ask, MaxTurns: 1})
		// Two people write before the turn claims the mailbox.
		ann, bob := inbound(keyA, "m1", "ls"), inbound(keyA, "m2", "ls -l")
		bob.User = agent.User{ID: "U2", Name: "bob"}
		h.stop() // queue both, then run: one turn answers them
		st := h.store
		for _, in := range []agent.Inbound{ann, bob} {
			if _, err := st.Enqueue(t.Context(), in); err != nil {
				t.Fatal(err)
			}
		}
		h = startHarness(t, st, hcfg{Loop: &agent.Loop{Model: askingModel("shell")}, Tools: govTools(), Policy: ask, Admins: func(_, id string) bool { return id == "U9" }})
		req := h.approvalOf(t, keyA)
		h.idle(t, keyA)
		if len(req.Authors) != 2 || req.Requester.ID != "U2" {
			t.Fatalf("asked for %+v, requester %+v", req.Authors, req.Requester)
		}
		if res, _ := h.d.Decide(t.Context(), agent.Decision{ApprovalID: req.ID, Chat: chat(keyA), User: agent.User{ID: "U3", Name: "cy"}, Approve: true}); res.Applied {
			t.Fatalf("a bystander decided: %+v", res)
		}
		if res, _ := h.d.Decide(t.Context(), agent.Decision{ApprovalID: req.ID, Chat: chat(keyA), User: agent.User{ID: "U1", Name: "ann"}, Approve: true}); !res.Applied {
			t.Fatalf("an author could not decide: %+v", res)
		}
		waitFor(t, func() bool { a, _, _ := h.p.final(keyA); return len(a) > 0 })
		h.idle(t, keyA)
		calls := auditOf(t, h.store, govern.AuditToolCall)
		if len(calls) != 1 || calls[0].User != "test:U1,test:U2" {
			t.Fatalf("tool call audited as %+v", calls)
		}
		asked := auditOf(t, h.store, govern.AuditApprovalAsked)
		if len(asked) != 1 || asked[0].User != "test:U1,test:U2" {
			t.Fatalf("approval asked audited as %+v", asked)
		}
	})
}

// A turn waiting for a person holds no worker: with one worker and many
// sessions waiting (50, as the issue asks), another session's turn still runs.
func TestWaitingForApprovalHoldsNoWorker(t *testing.T) {
	m := &funcModel{f: func(_ context.Context, req *agent.Request) (*agent.Response, error) {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == agent.RoleTool {
			return answerWith("done"), nil
		}
		if strings.Contains(lastUser(req), "quick") {
			return answerWith("quick answer"), nil
		}
		return &agent.Response{Message: agent.Message{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{call("c1", "shell", `{"text":"x"}`)}}}, nil
	}}
	h := govHarness(t, m, hcfg{Tools: govTools(), MaxTurns: 1,
		Policy: govern.Defaults{Rules: map[string]agent.ToolMode{"shell": agent.ToolAsk}}})
	var waiting []agent.SessionKey
	for i := range 50 {
		k := agent.SessionKey{Platform: "test", Chat: "W", Thread: fmt.Sprint(i)}
		waiting = append(waiting, k)
		h.submit(t, inbound(k, "w"+k.Thread, "run it"))
	}
	for _, k := range waiting {
		h.approvalOf(t, k)
	}
	quick := agent.SessionKey{Platform: "test", Chat: "Q"}
	h.submit(t, inbound(quick, "q1", "quick"))
	h.idle(t, quick)
	if a, _, _ := h.p.final(quick); len(a) != 1 {
		t.Fatalf("quick session answers %q while 50 wait for approval", a)
	}
	for _, k := range waiting {
		req := h.approvalOf(t, k)
		if _, err := h.d.Decide(t.Context(), agent.Decision{ApprovalID: req.ID, Chat: k.Channel(), User: agent.User{ID: "U1"}, Approve: true}); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range waiting {
		h.idle(t, k)
		if a, _, _ := h.p.final(k); len(a) != 1 || a[0] != "done" {
			t.Fatalf("%v answers %q", k, a)
		}
	}
}

func TestPolicyCommands(t *testing.T) {
	m := &funcModel{f: func(context.Context, *agent.Request) (*agent.Response, error) { return answerWith("x"), nil }}
	h := govHarness(t, m, hcfg{Tools: govTools()})
	ch := agent.SessionKey{Platform: "test", Chat: "C7"}
	send := func(id, user, text string) string {
		t.Helper()
		_, _, before := h.p.final(ch)
		h.submit(t, agent.Inbound{Key: ch, MessageID: id, User: agent.User{ID: user}, Text: text, Addressed: true})
		var n []string
		waitFor(t, func() bool { _, _, n = h.p.final(ch); return len(n) > len(before) })
		return n[len(n)-1]
	}
	if r := send("1", "U1", "/tools exec=deny"); !strings.Contains(r, "Only an admin") {
		t.Fatalf("non-admin set: %q", r)
	}
	if _, err := h.d.SetPolicy(t.Context(), ch, agent.User{ID: "U1"}, agent.PolicyChange{Version: -1, Set: map[string]agent.ToolMode{"shell": agent.ToolAllow}}); !errors.Is(err, agent.ErrNotAdmin) {
		t.Fatalf("SetPolicy by a non-admin: %v", err)
	}
	if r := send("2", "U9", "tools exec=deny tool:read=ask"); !strings.Contains(r, "Saved.") || !strings.Contains(r, "shell=deny") || !strings.Contains(r, "read=ask") {
		t.Fatalf("admin set: %q", r)
	}
	if r := send("3", "U9", "tools shell=allow"); !strings.Contains(r, "Note: shell is allow") && !strings.Contains(r, "start is deny") {
		// shell allowed alone leaves start denied: no leak, since allow is looser.
		t.Logf("reply %q", r)
	}
	if r := send("4", "U1", "why start"); !strings.Contains(r, "start is not allowed here") || !strings.Contains(r, "exec (group)=deny, set here by test:U9") {
		t.Fatalf("why: %q", r)
	}
	if r := send("5", "U1", "/tools bogus=allow"); !strings.Contains(r, "neither a tool") {
		t.Fatalf("bad rule: %q", r)
	}
	if r := send("6", "U1", "tools"); !strings.Contains(r, "Only an admin can change it") {
		t.Fatalf("show for a non-admin: %q", r)
	}
	// A stale version (a screen opened before another change) is refused.
	v, _ := h.d.Policy(t.Context(), ch, agent.User{ID: "U9"})
	if _, err := h.d.SetPolicy(t.Context(), ch, agent.User{ID: "U9"}, agent.PolicyChange{Version: v.Version - 1, Set: map[string]agent.ToolMode{"fetch": agent.ToolDeny}}); !errors.Is(err, agent.ErrVersionConflict) {
		t.Fatalf("stale version: %v", err)
	}
	if refused := auditOf(t, h.store, govern.AuditPolicyRefused); len(refused) != 2 {
		t.Errorf("refused changes audited: %+v", refused)
	}
	if set := auditOf(t, h.store, govern.AuditPolicySet); len(set) != 2 {
		t.Errorf("changes audited: %+v", set)
	}
}

func TestBudgets(t *testing.T) {
	m := &funcModel{f: func(_ context.Context, req *agent.Request) (*agent.Response, error) {
		r := answerWith("ok")
		r.Usage = agent.Usage{PromptTokens: 80, CompletionTokens: 20}
		return r, nil
	}}
	h := govHarness(t, m, hcfg{Tools: govTools(), Budgets: govern.Budgets{ChannelTokensPerDay: 150, UserMessagesPerMinute: 3}})
	ch := agent.SessionKey{Platform: "test", Chat: "B1"}
	for i := range 2 {
		h.submit(t, agent.Inbound{Key: ch, MessageID: "b" + string(rune('0'+i)), User: agent.User{ID: "U1"}, Text: "hi", Addressed: true})
		h.idle(t, ch)
	}
	h.submit(t, agent.Inbound{Key: ch, MessageID: "b2", User: agent.User{ID: "U1"}, Text: "hi", Addressed: true})
	h.idle(t, ch)
	answers, failures, _ := h.p.final(ch)
	if len(answers) != 2 || len(failures) != 1 || !strings.Contains(failures[0], "used its model budget for today (200 of 150 tokens)") {
		t.Fatalf("answers %q failures %q", answers, failures)
	}
	// The fourth message in a minute is over the person's rate.
	h.submit(t, agent.Inbound{Key: ch, MessageID: "b3", User: agent.User{ID: "U1"}, Text: "hi", Addressed: true})
	h.submit(t, agent.Inbound{Key: ch, MessageID: "b4", User: agent.User{ID: "U1"}, Text: "hi", Addressed: true})
	waitFor(t, func() bool { _, _, n := h.p.final(ch); return len(n) == 1 })
	if _, _, n := h.p.final(ch); !strings.Contains(n[0], "3 a minute") {
		t.Fatalf("rate notice %q", n)
	}
	if p, _ := h.store.Pending(t.Context(), ch); p != 0 {
		t.Fatalf("%d over-rate messages stored", p)
	}
	if len(auditOf(t, h.store, govern.AuditBudget)) != 2 {
		t.Error("budget overruns not audited")
	}
	// The admin is not rate limited.
	h.submit(t, agent.Inbound{Key: ch, MessageID: "b5", User: agent.User{ID: "U9"}, Text: "usage", Addressed: true})
	waitFor(t, func() bool { _, _, n := h.p.final(ch); return len(n) == 2 })
	if _, _, n := h.p.final(ch); !strings.Contains(n[1], "used 200 model tokens today") {
		t.Fatalf("usage: %q", n[1])
	}
}

// A person's message count counts each message once: a platform's
// re-delivery is not another message, the same ID in another chat is. The
// message past the limit is told of, the ones after it are dropped
// quietly, and a message without an author is not counted.
func TestMessageRateCountsEachMessageOnce(t *testing.T) {
	// The count is a minute's, aligned to the clock: keep the test in one.
	if left := time.Minute - time.Duration(time.Now().UnixNano())%time.Minute; left < 2*time.Second {
		time.Sleep(left)
	}
	st := openStore(t)
	gate := govern.New(govern.Config{Store: st, Budgets: govern.Budgets{UserMessagesPerMinute: 2}})
	b1, b2 := agent.SessionKey{Platform: "test", Chat: "B1"}, agent.SessionKey{Platform: "test", Chat: "B2"}
	receive := func(key agent.SessionKey, id, user string) agent.Admission {
		t.Helper()
		a, err := gate.Receive(t.Context(), agent.Inbound{Key: key, MessageID: id, User: agent.User{ID: user}, Text: "hi", Addressed: true})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	for _, step := range []struct {
		what     string
		key      agent.SessionKey
		id, user string
		ok, told bool
	}{
		{"first message", b1, "1", "U1", true, false},
		{"delivered again", b1, "1", "U1", true, false},
		{"delivered once more", b1, "1", "U1", true, false},
		{"its ID in another chat", b2, "1", "U1", true, false},
		{"third message", b1, "2", "U1", false, true},
		{"fourth message", b1, "3", "U1", false, false},
		{"another person", b1, "4", "U2", true, false},
		{"no author", b1, "5", "", true, false},
		{"no author again", b1, "6", "", true, false},
		{"no author, a third time", b1, "7", "", true, false},
	} {
		a := receive(step.key, step.id, step.user)
		if a.OK != step.ok || (a.Tell != "") != step.told {
			t.Fatalf("%s: %+v, want OK %v, told %v", step.what, a, step.ok, step.told)
		}
	}
	if n := len(auditOf(t, st, govern.AuditBudget)); n != 1 {
		t.Errorf("%d budget entries audited, want 1", n)
	}
}

// adminPlatform says U5 administers every chat, as a Telegram group's
// creator administers the group they made.
type adminPlatform struct{ *platform }

func (adminPlatform) IsAdmin(_ context.Context, _ agent.SessionKey, userID string) (bool, error) {
	return userID == "U5", nil
}

// A platform's own admins count only in a chat that is itself admitted: a
// paired person who makes a group is its administrator, and administers
// nothing of the bot's there until an admin allows the group.
func TestPlatformAdminsOnlyInAdmittedChats(t *testing.T) {
	rec := &platform{}
	st := openStore(t)
	h := startHarness(t, st, hcfg{Loop: &agent.Loop{Model: &funcModel{f: func(context.Context, *agent.Request) (*agent.Response, error) { return answerWith("x"), nil }}},
		Tools: govTools(), Access: map[string]govern.Access{"test": {Mode: govern.AccessPairing}}, Platform: adminPlatform{rec},
		Admins: func(_, id string) bool { return id == "U9" }})
	if err := govern.AllowAccess(t.Context(), st, govern.Grant{Platform: "test", Kind: govern.GrantUser, ID: "U5", By: "cli:op"}); err != nil {
		t.Fatal(err)
	}
	group := agent.SessionKey{Platform: "test", Chat: "G1"}
	say := func(id, text string) string {
		t.Helper()
		_, _, before := rec.final(group)
		h.submit(t, agent.Inbound{Key: group, MessageID: id, User: agent.User{ID: "U5", Name: "eve"}, Text: text, Addressed: true})
		var n []string
		waitFor(t, func() bool { _, _, n = rec.final(group); return len(n) > len(before) })
		return n[len(n)-1]
	}
	if r := say("1", "tools exec=allow"); !strings.Contains(r, "Only an admin") {
		t.Fatalf("the group's creator changed its policy before the group was admitted: %q", r)
	}
	if v, _ := h.d.Policy(t.Context(), group, agent.User{ID: "U5"}); v.Editable {
		t.Error("the policy screen is editable for the group's creator")
	}
	if err := govern.AllowAccess(t.Context(), st, govern.Grant{Platform: "test", Kind: govern.GrantChat, ID: "G1", By: "cli:op"}); err != nil {
		t.Fatal(err)
	}
	if r := say("2", "tools exec=allow"); !strings.Contains(r, "Saved.") {
		t.Fatalf("the admitted group's administrator: %q", r)
	}
}

// A running job asks the gate at every beat: it may go on while its
// channel allows exec and its starter may talk to the bot; denying exec,
// or revoking the starter, refuses it (the shell then stops it), and the
// thread it was started in is told. Reset stops the session's jobs; an
// admin lists and stops a channel's jobs from chat where exec is denied.
func TestJobsAskTheGate(t *testing.T) {
	st := openStore(t)
	rec := &platform{}
	h := startHarness(t, st, hcfg{Loop: &agent.Loop{Model: &funcModel{f: func(context.Context, *agent.Request) (*agent.Response, error) { return answerWith("x"), nil }}},
		Tools: govTools(), Access: map[string]govern.Access{"test": {Mode: govern.AccessAllowlist}}, Platform: rec, Jobs: st,
		Admins: func(_, id string) bool { return id == "U9" }})
	if err := govern.AllowAccess(t.Context(), st, govern.Grant{Platform: "test", Kind: govern.GrantUser, ID: "U1", By: "cli:op"}); err != nil {
		t.Fatal(err)
	}
	ch := keyA.Channel()
	space := tools.JobSpace(ch.String())
	job := tools.Job{ID: 1, Owner: "r#1", Command: "sleep 600", Session: keyA.String(), User: "U1", UserName: "ann", Started: time.Now(), Seen: time.Now()}
	if err := st.PutJob(t.Context(), space, job); err != nil {
		t.Fatal(err)
	}
	if err := h.gate.MayRun(t.Context(), job); err != nil {
		t.Fatalf("an allowed job: %v", err)
	}
	if _, err := govern.ChangePolicy(t.Context(), st, ch, "test:U9", agent.PolicyChange{Version: -1, Set: map[string]agent.ToolMode{"group:exec": agent.ToolDeny}}, govTools()); err != nil {
		t.Fatal(err)
	}
	if err := h.gate.MayRun(t.Context(), job); !errors.Is(err, tools.ErrNotPermitted) || !strings.Contains(err.Error(), "exec is denied") {
		t.Fatalf("a job after exec=deny: %v", err)
	}
	h.gate.Stopped(t.Context(), job, "exec is denied in this channel")
	waitFor(t, func() bool {
		_, _, n := rec.final(keyA)
		return slices.ContainsFunc(n, func(s string) bool { return strings.Contains(s, "⏹ Stopped job 1") })
	})
	if len(auditOf(t, st, govern.AuditJobStopped)) != 1 {
		t.Error("the stop is not audited")
	}
	// Allowed again, the starter revoked: refused all the same.
	if _, err := govern.ChangePolicy(t.Context(), st, ch, "test:U9", agent.PolicyChange{Version: -1, Set: map[string]agent.ToolMode{"group:exec": ""}}, govTools()); err != nil {
		t.Fatal(err)
	}
	if _, err := govern.RevokeAccess(t.Context(), st, "test", govern.GrantUser, "U1", "cli:op"); err != nil {
		t.Fatal(err)
	}
	if err := h.gate.MayRun(t.Context(), job); !errors.Is(err, tools.ErrNotPermitted) || !strings.Contains(err.Error(), "ann, who started it") {
		t.Fatalf("a revoked person's job: %v", err)
	}

	// From chat, where exec is denied: an admin lists and stops jobs.
	if _, err := govern.ChangePolicy(t.Context(), st, ch, "test:U9", agent.PolicyChange{Version: -1, Set: map[string]agent.ToolMode{"group:exec": agent.ToolDeny}}, govTools()); err != nil {
		t.Fatal(err)
	}
	admin := agent.User{ID: "U9", Name: "boss"}
	say := func(id, text string, u agent.User) string {
		t.Helper()
		_, _, before := rec.final(keyA)
		h.submit(t, agent.Inbound{Key: keyA, MessageID: id, User: u, Text: text, Addressed: true})
		var n []string
		waitFor(t, func() bool { _, _, n = rec.final(keyA); return len(n) > len(before) })
		return n[len(n)-1]
	}
	if r := say("j1", "jobs", admin); !strings.Contains(r, "1 running: sleep 600 (by ann)") {
		t.Fatalf("jobs: %q", r)
	}
	if r := say("j2", "jobs stop 1", admin); !strings.Contains(r, "Asked job 1 to stop") {
		t.Fatalf("jobs stop: %q", r)
	}
	jobs, _ := st.Jobs(t.Context(), space)
	if len(jobs) != 1 || jobs[0].StopAsked != "test:U9" {
		t.Fatalf("the board after a stop from chat: %+v", jobs)
	}

	// Reset takes back what the session started.
	job2 := tools.Job{ID: 2, Owner: "r#1", Command: "sleep 700", Session: keyA.String(), User: "U9", Started: time.Now(), Seen: time.Now()}
	other := tools.Job{ID: 3, Owner: "r#1", Command: "sleep 800", Session: keyB.String(), User: "U9", Started: time.Now(), Seen: time.Now()}
	for _, j := range []tools.Job{job2, other} {
		if err := st.PutJob(t.Context(), space, j); err != nil {
			t.Fatal(err)
		}
	}
	if r := say("r1", "reset", admin); !strings.Contains(r, "being stopped") {
		t.Fatalf("reset: %q", r)
	}
	jobs, _ = st.Jobs(t.Context(), space)
	for _, j := range jobs {
		if want := j.ID != 3; (j.StopAsked != "") != want {
			t.Errorf("after reset, job %d stop asked %q", j.ID, j.StopAsked)
		}
	}
}
