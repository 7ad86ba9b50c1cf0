package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/firstmate/firstmate/internal/testkit/fakellm"
	"github.com/firstmate/firstmate/internal/testkit/faketelegram"
)

// Admins in charge on Telegram, end to end: the real binary, the fake Bot
// API, the fake model and Redis (the admin command line runs as a second
// process against the same store, which the embedded store's file lock
// would not allow).

const carol int64 = 1003 // a third person, neither admin nor requester

// startTelegramGov starts serve with Alice as the bot's admin, on top of
// telegramBase's environment (access open) changed by env.
func startTelegramGov(t *testing.T, model func(*fakellm.Request) fakellm.Reply, env ...string) *telegramEnv {
	t.Helper()
	redisURL(t) // skips without Redis (fails in CI)
	e := telegramBase(t, model)
	e.env = append(e.env, fmt.Sprintf("FIRSTMATE_ADMINS=telegram:%d", faketelegram.Alice))
	e.env = append(e.env, env...)
	e.srv = startServe(t, e.env)
	if !e.tg.WaitFor(20*time.Second, func() bool { return e.tg.Polling() > 0 }) {
		t.Fatalf("firstmate does not poll\n%s", e.srv.logs())
	}
	return e
}

// admin runs `firstmate admin args…` against e's store.
func (e *telegramEnv) admin(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, code := runBinary(t, e.env, "", append([]string{"admin"}, args...)...)
	if code != 0 {
		t.Fatalf("admin %v: exit %d\n%s%s", args, code, out, errOut)
	}
	return out
}

// audit returns the audit log's entries, parsed.
func (e *telegramEnv) audit(t *testing.T, args ...string) []map[string]any {
	t.Helper()
	var entries []map[string]any
	for line := range strings.Lines(e.admin(t, append([]string{"audit", "--json"}, args...)...)) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		entries = append(entries, m)
	}
	return entries
}

func countAudit(entries []map[string]any, action, outcome string) int {
	n := 0
	for _, e := range entries {
		if e["action"] == action && (outcome == "" || e["outcome"] == outcome) {
			n++
		}
	}
	return n
}

var pairingCode = regexp.MustCompile(`[0-9A-Z]{4}-[0-9A-Z]{4}`)

func TestTelegramStrangersPair(t *testing.T) {
	t.Parallel()
	e := startTelegramGov(t, func(req *fakellm.Request) fakellm.Reply {
		return fakellm.Text("hello, " + req.Messages[len(req.Messages)-1].Text())
	}, "TELEGRAM_ACCESS=pairing")

	// A stranger writes three times: one message, with a code.
	e.tg.PrivateMessage(faketelegram.Bob, "hi")
	told := e.answers(t, faketelegram.Bob, 0, 1)[0]
	e.tg.PrivateMessage(faketelegram.Bob, "hello?")
	e.tg.PrivateMessage(faketelegram.Bob, "/help")
	code := pairingCode.FindString(told.Text)
	if code == "" || !strings.Contains(told.Text, "firstmate admin pair approve "+code) {
		t.Fatalf("the stranger was told %q", told.Text)
	}
	// A group nobody allowed: the chat gets its own code.
	e.tg.Mention(faketelegram.Group, faketelegram.Bob, "anyone here?")
	groupTold := e.answers(t, faketelegram.Group, 0, 1)[0]
	groupCode := pairingCode.FindString(groupTold.Text)
	if groupCode == "" || groupCode == code || !strings.Contains(groupTold.Text, "this chat") {
		t.Fatalf("the group was told %q", groupTold.Text)
	}
	time.Sleep(500 * time.Millisecond) // what would have come, has
	if n := len(e.tg.BotMessages(faketelegram.Bob)); n != 1 {
		t.Fatalf("the stranger got %d messages: %+v", n, e.tg.BotMessages(faketelegram.Bob))
	}
	if n := len(e.llm.Requests()); n != 0 {
		t.Fatalf("strangers' messages reached the model %d times", n)
	}
	if !strings.Contains(e.admin(t, "pair", "list"), code) {
		t.Error("pair list lacks the code")
	}

	// A stranger cannot approve their own code; the operator can.
	e.tg.PrivateMessage(faketelegram.Bob, code)
	e.admin(t, "pair", "approve", strings.ToLower(code))
	e.tg.PrivateMessage(faketelegram.Bob, "it's me")
	e.answer(t, faketelegram.Bob, 0, "it's me")
	// An admin approves the group's code by sending it to the bot.
	e.tg.PrivateMessage(faketelegram.Alice, groupCode)
	e.answer(t, faketelegram.Alice, 0, "Approved: chat")
	e.tg.Mention(faketelegram.Group, carol, "now?")
	e.answer(t, faketelegram.Group, 0, "now?")
	// A spent code is refused.
	if _, errOut, exit := runBinary(t, e.env, "", "admin", "pair", "approve", code); exit != 1 || !strings.Contains(errOut, "unknown or expired") {
		t.Errorf("a spent code: exit %d %s", exit, errOut)
	}
	entries := e.audit(t)
	if countAudit(entries, "pair.request", "") != 2 || countAudit(entries, "pair.approve", "") != 2 {
		t.Errorf("audit: %v", entries)
	}
	access := e.admin(t, "access", "list", "telegram")
	if !strings.Contains(access, fmt.Sprint(faketelegram.Bob)) || !strings.Contains(access, fmt.Sprint(faketelegram.Group)) {
		t.Errorf("access list:\n%s", access)
	}
	e.admin(t, "access", "revoke", "telegram", "user", fmt.Sprint(faketelegram.Bob))
	before := len(e.llm.Requests())
	e.tg.PrivateMessage(faketelegram.Bob, "still there?")
	second := e.answers(t, faketelegram.Bob, 0, 3)[2]
	if !strings.Contains(second.Text, "approve this code") || len(e.llm.Requests()) != before {
		t.Errorf("after revoke: %q, %d model calls", second.Text, len(e.llm.Requests())-before)
	}
}

// writeModel writes note.txt with the message's text, then answers with
// what the tool said.
func writeModel(req *fakellm.Request) fakellm.Reply {
	last := req.Messages[len(req.Messages)-1]
	if last.Role == "tool" {
		return fakellm.Text("tool said: " + last.Text())
	}
	if strings.HasPrefix(last.Text(), "[Approval") {
		return fakellm.Text("told: " + last.Text())
	}
	return fakellm.Calls(fakellm.Call("write", map[string]string{"path": "note.txt", "content": last.Text()}))
}

// count is how many of the bot's messages in chat contain text.
func (e *telegramEnv) count(chat int64, text string) int {
	n := 0
	for _, m := range e.tg.BotMessages(chat) {
		if !m.Deleted && strings.Contains(m.Text, text) {
			n++
		}
	}
	return n
}

// waitCount waits until n of the bot's messages in chat contain text.
func (e *telegramEnv) waitCount(t *testing.T, chat int64, text string, n int) {
	t.Helper()
	if !e.tg.WaitFor(20*time.Second, func() bool { return e.count(chat, text) >= n }) {
		t.Fatalf("chat %d: %d messages with %q, want %d: %+v\n%s", chat, e.count(chat, text), text, n, e.tg.BotMessages(chat), e.srv.logs())
	}
}

func toolNames(req fakellm.Request) []string {
	var names []string
	for _, tl := range req.Tools {
		names = append(names, tl.Function.Name)
	}
	return names
}

func TestTelegramPolicyAndApprovals(t *testing.T) {
	t.Parallel()
	e := startTelegramGov(t, writeModel, "TELEGRAM_ACCESS=open")
	g := faketelegram.Group

	// Only an admin changes the policy: by text…
	e.tg.Command(g, faketelegram.Bob, "tools", "write=allow exec=allow")
	e.answer(t, g, 0, "Only an admin can change")
	e.tg.Command(g, faketelegram.Alice, "tools", "write=ask exec=deny")
	saved := e.answer(t, g, 0, "Saved.")
	if !strings.Contains(saved.Text, "shell=deny") || !strings.Contains(saved.Text, "write=ask") {
		t.Fatalf("saved: %q", saved.Text)
	}
	// …and by the screen's buttons, which a forged click cannot use.
	e.tg.Command(g, faketelegram.Bob, "tools", "")
	screen := e.answer(t, g, 0, "Only an admin can change it.")
	if len(screen.Keyboard()) != 0 {
		t.Errorf("a non-admin's screen has buttons: %s", screen.ReplyMarkup)
	}
	e.tg.Command(g, faketelegram.Alice, "tools", "")
	adminScreen := e.answer(t, g, 0, "Change it with", saved.MessageID, screen.MessageID)
	exec, ok := adminScreen.Button("▸ exec")
	if !ok {
		t.Fatalf("admin screen keyboard %s", adminScreen.ReplyMarkup)
	}
	forged := e.tg.CallbackQuery(g, faketelegram.Bob, adminScreen.MessageID, exec.CallbackData)
	if a, ok := e.tg.WaitCallbackAnswer(forged.CallbackQuery.ID, 20*time.Second); !ok || !strings.Contains(a.Text, "Only an admin") {
		t.Fatalf("a non-admin's click on the policy screen: %+v", a)
	}

	// exec is denied in this group only: its tools are not offered here,
	// and are in Alice's private chat.
	e.tg.Mention(g, faketelegram.Bob, "first")
	question := e.answer(t, g, 0, "needs approval to run write")
	reqs := e.llm.Requests()
	names := toolNames(reqs[len(reqs)-1])
	for _, denied := range []string{"shell", "start", "jobs", "stop"} {
		if slices.Contains(names, denied) {
			t.Errorf("%s offered in a group that denies exec: %q", denied, names)
		}
	}
	if !slices.Contains(names, "write") {
		t.Errorf("write (ask) not offered: %q", names)
	}

	// Approval: Carol may not decide; Bob, who asked, may; twice is once.
	if !strings.Contains(question.Text, "Bob") || len(question.Keyboard()) == 0 {
		t.Fatalf("question %q keyboard %s", question.Text, question.ReplyMarkup)
	}
	press := func(from int64, msg faketelegram.Message, label string) faketelegram.CallbackAnswer {
		t.Helper()
		u, err := e.tg.PressButton(g, from, msg.MessageID, label)
		if err != nil {
			t.Fatal(err)
		}
		a, ok := e.tg.WaitCallbackAnswer(u.CallbackQuery.ID, 20*time.Second)
		if !ok {
			t.Fatalf("click by %d on %q not answered\n%s", from, label, e.srv.logs())
		}
		return a
	}
	approve, _ := question.Button("Approve")
	if a := press(carol, question, "Approve"); !strings.Contains(a.Text, "Only Bob") {
		t.Errorf("Carol's click: %+v", a)
	}
	if a := press(faketelegram.Bob, question, "Approve"); !strings.Contains(a.Text, "Approved") {
		t.Errorf("Bob's click: %+v", a)
	}
	e.waitCount(t, g, "tool said:", 1)
	decided, _ := e.tg.Message(g, question.MessageID)
	if !strings.Contains(decided.Text, "Approved by Bob") || len(decided.Keyboard()) != 0 {
		t.Errorf("question after approval: %q %s", decided.Text, decided.ReplyMarkup)
	}
	if notes, _ := filepath.Glob(filepath.Join(e.data, "workspaces", "*", "note.txt")); len(notes) != 1 {
		t.Errorf("note.txt not written once: %v", notes)
	}
	// A double click arrives after the buttons are gone.
	late := e.tg.CallbackQuery(g, faketelegram.Bob, question.MessageID, approve.CallbackData)
	if a, ok := e.tg.WaitCallbackAnswer(late.CallbackQuery.ID, 20*time.Second); !ok || !strings.Contains(a.Text, "Approved by Bob") {
		t.Errorf("a second click is not told what happened: %+v", a)
	}

	// Deny: the model is told and the turn answers.
	e.tg.Mention(g, faketelegram.Bob, "second")
	q2 := e.answer(t, g, 0, "needs approval to run write", question.MessageID)
	press(faketelegram.Alice, q2, "Deny")
	e.answer(t, g, 0, "denied the write call")
	// An admin's "always allow" stores the rule: the next turn does not ask.
	e.tg.Mention(g, faketelegram.Bob, "third")
	q3 := e.answer(t, g, 0, "needs approval to run write", question.MessageID, q2.MessageID)
	if a := press(faketelegram.Bob, q3, "Always allow here"); !strings.Contains(a.Text, "Only an admin") {
		t.Errorf("a non-admin's always: %+v", a)
	}
	press(faketelegram.Alice, q3, "Always allow here")
	policy := e.admin(t, "policy", "show", fmt.Sprintf("telegram:%d", g))
	if !regexp.MustCompile(`write\s+allow`).MatchString(policy) {
		t.Errorf("policy after always allow:\n%s", policy)
	}
	e.waitCount(t, g, "tool said:", 2) // the approved call, then this one (the denied one's answer is "told: …")
	questions := e.count(g, "needs approval")
	e.tg.Mention(g, faketelegram.Bob, "fourth")
	e.waitCount(t, g, "tool said:", 3)
	if n := e.count(g, "needs approval"); n != questions {
		t.Errorf("asked again after always allow")
	}

	entries := e.audit(t, "--channel", fmt.Sprintf("telegram:%d", g))
	for _, want := range []struct{ action, outcome string }{
		{"policy.set", ""}, {"policy.refused", ""}, {"approval.asked", ""}, {"approval.decided", "approved"},
		{"approval.decided", "denied"}, {"approval.refused", ""}, {"tool.call", "ok"},
	} {
		if countAudit(entries, want.action, want.outcome) == 0 {
			t.Errorf("audit lacks %s %s", want.action, want.outcome)
		}
	}
}

func TestTelegramBudgets(t *testing.T) {
	t.Parallel()
	e := startTelegramGov(t, func(*fakellm.Request) fakellm.Reply { return fakellm.Text("ok") },
		"TELEGRAM_ACCESS=open", "FIRSTMATE_CHANNEL_TOKENS_PER_DAY=1", "FIRSTMATE_USER_MESSAGES_PER_MINUTE=3")
	e.tg.PrivateMessage(faketelegram.Bob, "one")
	e.answer(t, faketelegram.Bob, 0, "ok")
	e.tg.PrivateMessage(faketelegram.Bob, "two")
	over := e.answer(t, faketelegram.Bob, 0, "used its model budget for today")
	if n := len(e.llm.Requests()); n != 1 {
		t.Errorf("the model was called %d times; the budget allows one turn", n)
	}
	// Over three messages a minute: told once, the rest dropped.
	for _, s := range []string{"three", "four", "five"} {
		e.tg.PrivateMessage(faketelegram.Bob, s)
	}
	e.answer(t, faketelegram.Bob, 0, "3 a minute", over.MessageID)
	// The private chat's pace (three at once, then one a second) may hold
	// the last one back a moment.
	e.waitCount(t, faketelegram.Bob, "used its model budget", 2)
	time.Sleep(300 * time.Millisecond)
	msgs := e.tg.BotMessages(faketelegram.Bob)
	if len(msgs) != 4 {
		t.Errorf("%d bot messages; want the answer, the budget, one failure for three and the rate notice: %+v", len(msgs), msgs)
	}
	if countAudit(e.audit(t), "budget.exceeded", "") < 2 {
		t.Error("budget overruns not audited")
	}
}

// No decision before the deadline is a denial: the question says by when;
// a click after it decides nothing but the expiry, which replaces the
// question and tells the model, and nothing runs.
func TestTelegramApprovalTimesOut(t *testing.T) {
	t.Parallel()
	cfg := writeFile(t, "tools:\n  ask: [write]\napprovals:\n  timeout: 10s\n")
	e := startTelegramGov(t, writeModel, "TELEGRAM_ACCESS=open", "FIRSTMATE_CONFIG="+cfg)
	e.tg.PrivateMessage(faketelegram.Bob, "note this")
	q := e.answer(t, faketelegram.Bob, 0, "needs approval to run write")
	approve, ok := q.Button("Approve")
	if !ok || !strings.Contains(q.Text, "without a decision by") {
		t.Fatalf("question %q keyboard %s", q.Text, q.ReplyMarkup)
	}
	time.Sleep(10500 * time.Millisecond) // past the deadline: a limit the test sets, not a timing it hopes for
	late := e.tg.CallbackQuery(faketelegram.Bob, faketelegram.Bob, q.MessageID, approve.CallbackData)
	if a, ok := e.tg.WaitCallbackAnswer(late.CallbackQuery.ID, 20*time.Second); !ok || !strings.Contains(a.Text, "did not run") {
		t.Errorf("a click after the deadline: %+v", a)
	}
	e.answer(t, faketelegram.Bob, 0, "nobody decided on the write call in time")
	expired, _ := e.tg.Message(faketelegram.Bob, q.MessageID)
	if !strings.Contains(expired.Text, "No decision in time") || len(expired.Keyboard()) != 0 {
		t.Errorf("the question after the deadline: %q %s", expired.Text, expired.ReplyMarkup)
	}
	if notes, _ := filepath.Glob(filepath.Join(e.data, "workspaces", "*", "note.txt")); len(notes) != 0 {
		t.Errorf("written without approval: %v", notes)
	}
	if n := countAudit(e.audit(t), "approval.decided", "expired"); n != 1 {
		t.Errorf("%d expiries audited", n)
	}
}

// TestTelegramGovernPolicyScreenSkillsAndMCP: /tools shows the skills and
// the MCP server as buttons; a member's press is answered and changes
// nothing, an admin's cycles the rule and edits the keyboard, and a skill
// name too long for callback data comes back whole.
func TestTelegramGovernPolicyScreenSkillsAndMCP(t *testing.T) {
	t.Parallel()
	e := startTelegramGov(t, writeModel, "TELEGRAM_ACCESS=open", "FIRSTMATE_CONFIG="+screensConfig(t))
	if !e.tg.WaitFor(20*time.Second, func() bool { return strings.Contains(e.srv.logs(), "MCP server tools listed") }) {
		t.Fatalf("the MCP server did not list its tools\n%s", e.srv.logs())
	}
	g := faketelegram.Group
	e.tg.Command(g, faketelegram.Alice, "tools", "")
	screen := e.answer(t, g, 0, "Change it with")
	for _, label := range []string{"▸ skills: allow (default)", "deploy: allow", govLongSkill + ": allow", "▸ mcp:notes: allow (default)", "notes__echo: allow"} {
		if _, ok := screen.Button(label); !ok {
			t.Errorf("no button %q: %s", label, screen.ReplyMarkup)
		}
	}
	if b, _ := screen.Button(govLongSkill); len(b.CallbackData) > 64 {
		t.Errorf("callback data of %d bytes", len(b.CallbackData))
	}
	press := func(from int64, label, want string) {
		t.Helper()
		u, err := e.tg.PressButton(g, from, screen.MessageID, label)
		if err != nil {
			t.Fatal(err)
		}
		if a, ok := e.tg.WaitCallbackAnswer(u.CallbackQuery.ID, 20*time.Second); !ok || !strings.Contains(a.Text, want) {
			t.Fatalf("%d pressed %q: %+v, want %q\n%s", from, label, a, want, e.srv.logs())
		}
	}
	show := func() string { return e.admin(t, "policy", "show", fmt.Sprintf("telegram:%d", g)) }
	press(faketelegram.Bob, "deploy", "Only an admin")
	press(faketelegram.Bob, govLongSkill, "Only an admin")
	if s := show(); strings.Contains(s, "skill:") {
		t.Fatalf("a member's press stored a rule:\n%s", s)
	}
	// Each press edits the keyboard to the new version before the next.
	edited := func(label string) {
		t.Helper()
		if !e.tg.WaitFor(20*time.Second, func() bool {
			m, _ := e.tg.Message(g, screen.MessageID)
			_, ok := m.Button(label)
			return ok
		}) {
			m, _ := e.tg.Message(g, screen.MessageID)
			t.Fatalf("the keyboard has no %q: %s", label, m.ReplyMarkup)
		}
	}
	press(faketelegram.Alice, "deploy", "skill:deploy is ask here now")
	edited("deploy: ask (here)")
	press(faketelegram.Alice, govLongSkill, "skill:"+govLongSkill+" is ask here now")
	edited(govLongSkill + ": ask (here)")
	press(faketelegram.Alice, "▸ mcp:notes", "mcp:notes (group) is ask here now")
	edited("▸ mcp:notes: ask (here)")
	if s := show(); !slices.Equal(policyRules(t, s), []string{"group:mcp:notes=ask", "skill:deploy=ask", "skill:" + govLongSkill + "=ask"}) {
		t.Errorf("stored rules %v:\n%s", policyRules(t, s), s)
	}
	entries := e.audit(t, "--channel", fmt.Sprintf("telegram:%d", g))
	if n, r := countAudit(entries, "policy.set", "ok"), countAudit(entries, "policy.refused", ""); n != 3 || r != 2 {
		t.Errorf("audit: %d changes, %d refusals", n, r)
	}
}
