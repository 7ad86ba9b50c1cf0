package telegram

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/firstmate/firstmate/adapters"
	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/agent/govern"
	"github.com/firstmate/firstmate/internal/testkit/faketelegram"
	"github.com/firstmate/firstmate/internal/testkit/policytest"
)

// wait is how long a test waits for what takes milliseconds.
const wait = 5 * time.Second

// recorder is an agent.Submitter that keeps what it is handed and answers
// as set.
type recorder struct {
	mu        sync.Mutex
	submitted []agent.Inbound
	decisions []agent.Decision
	changes   []agent.PolicyChange
	decided   agent.Decided
	decideErr error
	view      agent.PolicyView // what SetPolicy and Policy answer
}

func (r *recorder) Admit(context.Context, agent.Inbound) (bool, error) { return true, nil }

func (r *recorder) Submit(_ context.Context, in agent.Inbound) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.submitted = append(r.submitted, in)
	return nil
}

func (r *recorder) Decide(_ context.Context, d agent.Decision) (agent.Decided, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.decisions = append(r.decisions, d)
	return r.decided, r.decideErr
}

func (r *recorder) Policy(context.Context, agent.SessionKey, agent.User) (agent.PolicyView, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.view, nil
}

func (r *recorder) SetPolicy(_ context.Context, _ agent.SessionKey, _ agent.User, c agent.PolicyChange) (agent.PolicyView, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.changes = append(r.changes, c)
	return r.view, nil
}

func (r *recorder) Decisions() []agent.Decision {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.decisions)
}

func (r *recorder) Submitted() []agent.Inbound {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.submitted)
}

// run runs the adapter until the test ends.
func run(t *testing.T, a *Adapter, d agent.Submitter) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx, d) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

func newAdapterWith(t *testing.T, srv *faketelegram.Server, cfg Config) *Adapter {
	t.Helper()
	cfg.Token, cfg.APIURL, cfg.PollTimeout = srv.Token(), srv.URL(), time.Second
	a, err := New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func chatKey(chat int64, thread int) agent.SessionKey {
	k := agent.SessionKey{Platform: Platform, Chat: strconv.FormatInt(chat, 10)}
	if thread != 0 {
		k.Thread = strconv.Itoa(thread)
	}
	return k
}

// post sends t through the chat's surface and returns the last message.
func post(t *testing.T, a *Adapter, key agent.SessionKey, text adapters.Text) int {
	t.Helper()
	var id adapters.MessageID
	for _, p := range a.surface(key, 0).Format(text) {
		var err error
		if id, err = a.surface(key, 0).Post(t.Context(), p); err != nil {
			t.Fatal(err)
		}
	}
	n, _ := strconv.Atoi(string(id))
	return n
}

func question(id string) adapters.Text {
	return adapters.ApprovalText(agent.ApprovalNeeded{ID: id, Name: "shell", Args: json.RawMessage(`{"command":"make"}`),
		Requester: agent.User{ID: strconv.FormatInt(faketelegram.Bob, 10), Name: "Bob"}})
}

var (
	_ adapters.Asker = (*surface)(nil)
	_ adapters.Asker = privateSurface{}
)

func TestKeyboardPostedAndRemovedByEdit(t *testing.T) {
	srv := faketelegram.New(t)
	a := newAdapter(t, srv)
	key := chatKey(faketelegram.Group, 0)
	s := a.surface(key, 0)
	if !s.ShowsButtons() {
		t.Fatal("a group shows no buttons")
	}
	long := adapters.Text{Body: strings.Repeat("a long question ", 400), Buttons: [][]adapters.Button{
		{{Label: "Approve", Data: "fm:ok:1", Style: adapters.StylePrimary}, {Label: "Deny", Data: "fm:no:1", Style: adapters.StyleDanger}},
		{{Label: "Too long", Data: strings.Repeat("x", adapters.MaxButtonData+1)}, {Label: "Always", Data: "fm:all:1"}},
	}}
	parts := s.Format(long)
	if len(parts) != 2 || parts[0].Buttons != nil || len(parts[1].Buttons) != 2 {
		t.Fatalf("parts %d, buttons %v / %v", len(parts), parts[0].Buttons, parts[len(parts)-1].Buttons)
	}
	last := post(t, a, key, long)
	msgs := srv.BotMessages(faketelegram.Group)
	if len(msgs) != 2 || msgs[0].ReplyMarkup != nil {
		t.Fatalf("the first part has a keyboard: %+v", msgs)
	}
	kb := msgs[1].Keyboard()
	if len(kb) != 2 || len(kb[0]) != 2 || len(kb[1]) != 1 ||
		kb[0][0] != (faketelegram.InlineKeyboardButton{Text: "Approve", CallbackData: "fm:ok:1", Style: "primary"}) ||
		kb[0][1].Style != "danger" || kb[1][0].CallbackData != "fm:all:1" {
		t.Fatalf("keyboard %+v", kb)
	}

	// The decided question: an edit without buttons takes them away.
	if err := s.Edit(t.Context(), adapters.MessageID(strconv.Itoa(last)), s.Format(adapters.Text{Body: "Approved by Alice."})[0]); err != nil {
		t.Fatal(err)
	}
	if m, _ := srv.Message(faketelegram.Group, last); m.Text != "Approved by Alice." || m.ReplyMarkup != nil {
		t.Errorf("after the edit: %q %s", m.Text, m.ReplyMarkup)
	}

	// Past Telegram's hundred buttons, the rest are left out rather than
	// the message refused.
	var many [][]adapters.Button
	for i := range 40 {
		d := strconv.Itoa(i)
		many = append(many, []adapters.Button{{Label: d, Data: d + "a"}, {Label: d, Data: d + "b"}, {Label: d, Data: d + "c"}})
	}
	crowded := post(t, a, key, adapters.Text{Body: "many tools", Buttons: many})
	m, _ := srv.Message(faketelegram.Group, crowded)
	n := 0
	for _, row := range m.Keyboard() {
		n += len(row)
	}
	if n != maxButtons {
		t.Errorf("%d buttons", n)
	}

	// A Markdown answer carries buttons too; a draft never does.
	if p := s.Format(adapters.Text{Body: "**hi**", Markdown: true, Buttons: long.Buttons}); p[0].Buttons == nil {
		t.Error("no buttons on a Markdown part")
	}
	ps := privateSurface{a.surface(chatKey(faketelegram.Alice, 0), 42)}
	if err := ps.Draft(t.Context(), adapters.Text{Body: "thinking", Buttons: long.Buttons}); err != nil {
		t.Fatal(err)
	}
	if c := srv.Calls("sendMessageDraft"); len(c) != 1 || c[0].Params.Get("reply_markup") != "" {
		t.Errorf("draft calls %+v", c)
	}
}

// The renderer asks with buttons on a Telegram surface, and the decision
// replaces the question without them.
func TestApprovalThroughTheRenderer(t *testing.T) {
	srv := faketelegram.New(t)
	a := newAdapter(t, srv)
	q := srv.Mention(faketelegram.Group, faketelegram.Bob, "build it")
	key := chatKey(faketelegram.Group, 0)
	th := a.Thread(key, agent.Inbound{ReplyTo: strconv.Itoa(q.Message.MessageID)})
	defer th.(interface{ Close() error }).Close()
	ask := agent.ApprovalNeeded{CallID: "c1", ID: "ab12", Name: "shell", Args: json.RawMessage(`{"command":"make"}`),
		Requester: agent.User{ID: "1002", Name: "Bob"}, Deadline: time.Now().Add(time.Minute)}
	if err := th.Emit(t.Context(), agent.TurnStarted{Key: key}); err != nil {
		t.Fatal(err)
	}
	if err := th.Emit(t.Context(), ask); err != nil {
		t.Fatal(err)
	}
	var asked faketelegram.Message
	if !srv.WaitFor(wait, func() bool {
		for _, m := range srv.BotMessages(faketelegram.Group) {
			if _, ok := m.Button("Approve"); ok {
				asked = m
				return true
			}
		}
		return false
	}) {
		t.Fatalf("no question with buttons: %+v", srv.BotMessages(faketelegram.Group))
	}
	if b, _ := asked.Button("Approve"); b.CallbackData != "fm:ok:ab12" {
		t.Errorf("Approve sends %q", b.CallbackData)
	}
	_ = th
}

func TestClickReachesDecideByPolling(t *testing.T) {
	srv := faketelegram.New(t)
	a := newAdapterWith(t, srv, Config{})
	rec := &recorder{decided: agent.Decided{Applied: true, Notice: "Approved.", Approval: agent.Approval{ID: "f00d", Tool: "shell",
		State: agent.ApprovalApproved, Requester: agent.User{Name: "Bob"}, DecidedBy: agent.User{ID: "1001", Name: "Alice"}, Args: `{"command":"make"}`}}}
	run(t, a, rec)
	topic := srv.CreateTopic(faketelegram.Forum, faketelegram.Alice, "Builds")
	key := chatKey(faketelegram.Forum, topic.Message.MessageID)
	id := post(t, a, key, question("f00d"))

	press, err := srv.PressButton(faketelegram.Forum, faketelegram.Alice, id, "Approve")
	if err != nil {
		t.Fatal(err)
	}
	ans, ok := srv.WaitCallbackAnswer(press.CallbackQuery.ID, wait)
	if !ok || ans.Text != "Approved." || ans.ShowAlert {
		t.Fatalf("answer %+v, %v", ans, ok)
	}
	want := agent.Decision{ApprovalID: "f00d", Chat: key, User: agent.User{ID: "1001", Name: "Alice Admin"}, Approve: true}
	if ds := rec.Decisions(); len(ds) != 1 || ds[0] != want {
		t.Fatalf("decisions %+v, want %+v", ds, want)
	}
	// The click replaces the question with its outcome, without buttons.
	if !srv.WaitFor(wait, func() bool {
		m, _ := srv.Message(faketelegram.Forum, id)
		return m.ReplyMarkup == nil && strings.Contains(m.Text, "Approved by Alice") && strings.Contains(m.Text, "make")
	}) {
		m, _ := srv.Message(faketelegram.Forum, id)
		t.Errorf("the question was not replaced: %q %s", m.Text, m.ReplyMarkup)
	}
	// Another question's "Always allow here" reaches Decide as such.
	id = post(t, a, key, question("beef"))
	always, err := srv.PressButton(faketelegram.Forum, faketelegram.Bob, id, "Always")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := srv.WaitCallbackAnswer(always.CallbackQuery.ID, wait); !ok {
		t.Fatal("the second click was not answered")
	}
	if ds := rec.Decisions(); len(ds) != 2 || !ds[1].Always || !ds[1].Approve || ds[1].User.ID != "1002" {
		t.Errorf("decisions %+v", ds)
	}
	if !srv.WaitFor(wait, func() bool { return srv.Offset() > always.UpdateID }) {
		t.Errorf("offset %d: the clicks were not confirmed", srv.Offset())
	}
}

func TestClickReachesDecideByWebhook(t *testing.T) {
	const secret = "hook_secret-1"
	mux := http.NewServeMux()
	hook := httptest.NewServer(mux)
	defer hook.Close()
	srv := faketelegram.New(t, faketelegram.WithWebhookDelivery(20*time.Millisecond))
	a := newAdapterWith(t, srv, Config{WebhookURL: hook.URL + "/telegram/webhook", WebhookSecret: secret})
	rec := &recorder{decided: agent.Decided{Notice: "Only Bob, who asked, or an admin can decide this."}}
	a.Routes(mux, rec)
	run(t, a, rec)
	if !srv.WaitFor(wait, func() bool { _, ok := srv.Webhook(); return ok }) {
		t.Fatal("no webhook set")
	}
	if allowed := srv.AllowedUpdates(); !slices.Contains(allowed, "callback_query") {
		t.Errorf("allowed updates %v", allowed)
	}
	key := chatKey(faketelegram.Group, 0)
	id := post(t, a, key, question("beef"))
	press, _ := srv.PressButton(faketelegram.Group, faketelegram.Alice, id, "Deny")
	ans, ok := srv.WaitCallbackAnswer(press.CallbackQuery.ID, wait)
	if !ok || ans.Text != rec.decided.Notice {
		t.Fatalf("answer %+v, %v", ans, ok)
	}
	want := agent.Decision{ApprovalID: "beef", Chat: key, User: agent.User{ID: "1001", Name: "Alice Admin"}}
	if ds := rec.Decisions(); len(ds) != 1 || ds[0] != want {
		t.Fatalf("decisions %+v", ds)
	}
	if !srv.WaitFor(wait, func() bool { return srv.Pending() == 0 }) {
		t.Errorf("the click was not acknowledged: %+v", srv.Deliveries())
	}

	// An update that cannot be read is taken, not sent again forever.
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, hook.URL+"/telegram/webhook",
		strings.NewReader(`{"update_id":1,"callback_query":{"id":"nope","from":[]}}`))
	req.Header.Set("X-Telegram-Bot-Api-Secret-Token", secret)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("garbage answered %v, %v", resp, err)
	} else {
		resp.Body.Close()
	}

	// A forged click is refused before anything happens.
	forged := srv.InlineCallbackQuery(faketelegram.Bob, "x", "fm:ok:beef")
	if status, _ := srv.DeliverWebhook(t.Context(), hook.URL+"/telegram/webhook", forged, secret, faketelegram.WrongSecret()); status != http.StatusForbidden {
		t.Errorf("forged click answered %d", status)
	}
}

// Every click is answered, so the person's app stops waiting: a button
// that is not ours, garbage, a message that is gone, a failure on our side.
func TestEveryClickIsAnswered(t *testing.T) {
	srv := faketelegram.New(t)
	a := newAdapterWith(t, srv, Config{})
	rec := &recorder{decided: agent.Decided{Notice: "This request is no longer open."}}
	run(t, a, rec)
	key := chatKey(faketelegram.Alice, 0)
	id := post(t, a, key, question("0001"))

	answered := func(u faketelegram.Update, text string, alert bool) {
		t.Helper()
		ans, ok := srv.WaitCallbackAnswer(u.CallbackQuery.ID, wait)
		if !ok || ans.Text != text || ans.ShowAlert != alert {
			t.Errorf("answer to %q = %+v, %v; want %q", u.CallbackQuery.Data, ans, ok, text)
		}
	}
	answered(srv.CallbackQuery(faketelegram.Alice, faketelegram.Alice, id, "someone-elses:button"), "", false)
	answered(srv.CallbackQuery(faketelegram.Alice, faketelegram.Alice, id, "fm:pol:not-a-version:ask:shell"), "", false)
	answered(srv.CallbackQuery(faketelegram.Alice, faketelegram.Alice, id, "fm:ok:"), "", false)
	answered(srv.CallbackQuery(faketelegram.Alice, faketelegram.Alice, id, ""), "", false)
	answered(srv.InlineCallbackQuery(faketelegram.Alice, "AgAAAAinline", "fm:ok:0001"), "", false)
	if ds := rec.Decisions(); len(ds) != 0 {
		t.Fatalf("foreign data reached Decide: %+v", ds)
	}

	// The question was deleted: the click still decides (the decision is
	// data) and is answered.
	if err := a.surface(key, 0).Delete(t.Context(), adapters.MessageID(strconv.Itoa(id))); err != nil {
		t.Fatal(err)
	}
	gone := srv.CallbackQuery(faketelegram.Alice, faketelegram.Alice, id, "fm:no:0001")
	answered(gone, "This request is no longer open.", false)
	if ds := rec.Decisions(); len(ds) != 1 || ds[0].ApprovalID != "0001" || ds[0].Chat != key || ds[0].Approve {
		t.Errorf("decisions %+v", ds)
	}

	// The store fails: tried again briefly, then the person is told.
	rec.mu.Lock()
	rec.decided, rec.decideErr = agent.Decided{}, errors.New("store down")
	rec.mu.Unlock()
	failed := srv.CallbackQuery(faketelegram.Alice, faketelegram.Alice, id, "fm:ok:0002")
	answered(failed, "That did not work; try again in a moment.", true)
	if n := len(rec.Decisions()); n != 1+clickAttempts {
		t.Errorf("%d decisions, want %d", n, 1+clickAttempts)
	}
	if !srv.WaitFor(wait, func() bool { return srv.Offset() > failed.UpdateID }) {
		t.Error("a failed click holds the updates up")
	}
	if n := len(srv.Calls("editMessageText")); n != 0 {
		t.Errorf("%d edits", n)
	}
}

// An update that cannot be read still has its click answered, and does
// not hold up the updates after it.
func TestUnreadableClickIsAnswered(t *testing.T) {
	srv := faketelegram.New(t)
	a := newAdapter(t, srv)
	q := srv.InlineCallbackQuery(faketelegram.Alice, "x", "y")
	raw := json.RawMessage(`{"update_id":` + strconv.Itoa(q.UpdateID) + `,"callback_query":{"id":"` + q.CallbackQuery.ID + `","from":"garbage"}}`)
	var u update
	if json.Unmarshal(raw, &u) == nil {
		t.Fatal("the garbage was read")
	}
	a.answerUnreadable(t.Context(), raw)
	if _, ok := srv.CallbackAnswer(q.CallbackQuery.ID); !ok {
		t.Error("not answered")
	}
	if got := updateID(raw); got != int64(q.UpdateID) {
		t.Errorf("updateID = %d", got)
	}
	for _, junk := range []string{`{}`, `[]`, `{"callback_query":{"id":7}}`, `{"callback_query":null}`, `nonsense`} {
		a.answerUnreadable(t.Context(), json.RawMessage(junk)) // must not panic or call
	}
	if n := srv.Count("answerCallbackQuery"); n != 1 {
		t.Errorf("%d answers", n)
	}
}

// A click on the policy screen edits it in place, with the new buttons.
func TestClickReplacesThePolicyScreen(t *testing.T) {
	srv := faketelegram.New(t)
	a := newAdapterWith(t, srv, Config{})
	view := func(version int64, shell agent.ToolMode) agent.PolicyView {
		return agent.PolicyView{Version: version, Editable: true, Default: agent.Reason{Mode: agent.ToolAsk},
			Groups: []agent.GroupView{{Name: "exec", Tools: []agent.ToolView{{Name: "shell", Reason: agent.Reason{Mode: shell}}}}}}
	}
	rec := &recorder{view: view(8, agent.ToolAsk)}
	run(t, a, rec)
	v7 := view(7, agent.ToolAllow)
	key := chatKey(faketelegram.Group, 0)
	id := post(t, a, key, adapters.PolicyScreen(adapters.PolicyText(v7), v7))
	before, _ := srv.Message(faketelegram.Group, id)
	if b, ok := before.Button("shell"); !ok || !strings.HasPrefix(b.CallbackData, "fm:pol:7:ask:") {
		t.Fatalf("screen %s", before.ReplyMarkup)
	}

	press, err := srv.PressButton(faketelegram.Group, faketelegram.Alice, id, "shell")
	if err != nil {
		t.Fatal(err)
	}
	ans, ok := srv.WaitCallbackAnswer(press.CallbackQuery.ID, wait)
	if !ok || !strings.Contains(ans.Text, "ask here now") {
		t.Fatalf("answer %+v, %v", ans, ok)
	}
	rec.mu.Lock()
	changes := slices.Clone(rec.changes)
	rec.mu.Unlock()
	if len(changes) != 1 || changes[0].Version != 7 || changes[0].Set["shell"] != agent.ToolAsk {
		t.Errorf("changes %+v", changes)
	}
	if !srv.WaitFor(wait, func() bool {
		m, _ := srv.Message(faketelegram.Group, id)
		b, ok := m.Button("shell")
		return ok && strings.HasPrefix(b.CallbackData, "fm:pol:8:deny:") && strings.Contains(m.Text, "shell=ask")
	}) {
		m, _ := srv.Message(faketelegram.Group, id)
		t.Errorf("screen after the click: %q %s", m.Text, m.ReplyMarkup)
	}
}

// The /tools keyboard lists the chat's skills and MCP servers with their
// modes; an admin's press changes the stored rule and edits the keyboard
// in place, a non-admin's changes nothing, and every press is answered. A
// skill name too long for callback data comes back whole.
func TestPolicyKeyboardSkillsAndMCPServers(t *testing.T) {
	srv := faketelegram.New(t)
	a := newAdapterWith(t, srv, Config{})
	key := chatKey(faketelegram.Group, 0)
	admin := strconv.FormatInt(faketelegram.Alice, 10)
	e := policytest.New(t, key, []string{admin})
	run(t, a, e.D)
	v, err := e.D.Policy(t.Context(), key, agent.User{ID: admin})
	if err != nil {
		t.Fatal(err)
	}
	th := a.Thread(key, agent.Inbound{Key: key})
	if err := th.Emit(t.Context(), agent.Notice{Text: "Tools here:", Policy: &v}); err != nil {
		t.Fatal(err)
	}
	var id int
	if !srv.WaitFor(wait, func() bool {
		for _, m := range srv.BotMessages(faketelegram.Group) {
			if _, ok := m.Button("▸ skills"); ok {
				id = m.MessageID
			}
		}
		return id != 0
	}) {
		t.Fatalf("no policy keyboard: %+v", srv.BotMessages(faketelegram.Group))
	}
	th.(interface{ Close() error }).Close()
	screen, _ := srv.Message(faketelegram.Group, id)
	for _, label := range []string{"▸ skills: allow (default)", "deploy: allow", policytest.LongSkill + ": allow", "▸ mcp:notes: allow (default)", "notes__search: allow"} {
		if _, ok := screen.Button(label); !ok {
			t.Errorf("no button %q in %s", label, screen.ReplyMarkup)
		}
	}
	long, _ := screen.Button(policytest.LongSkill)
	if len(long.CallbackData) > adapters.MaxButtonData || strings.Contains(long.CallbackData, "checklist") {
		t.Errorf("the long skill's callback data %q", long.CallbackData)
	}
	press := func(from int64, label, answer string) {
		t.Helper()
		u, err := srv.PressButton(faketelegram.Group, from, id, label)
		if err != nil {
			t.Fatal(err)
		}
		ans, ok := srv.WaitCallbackAnswer(u.CallbackQuery.ID, wait)
		if !ok || !strings.Contains(ans.Text, answer) {
			t.Fatalf("%s: answer %+v, %v; want %q", label, ans, ok, answer)
		}
	}

	// Bob is no admin: answered, nothing stored, the keyboard as it was.
	press(faketelegram.Bob, "deploy", "Only an admin")
	press(faketelegram.Bob, policytest.LongSkill, "Only an admin")
	if st := e.Settings(t, key); st.Version != 0 || len(st.Tools) != 0 {
		t.Fatalf("a non-admin's press stored %+v", st)
	}
	if m, _ := srv.Message(faketelegram.Group, id); string(m.ReplyMarkup) != string(screen.ReplyMarkup) || m.Edits != screen.Edits {
		t.Errorf("a non-admin's press changed the keyboard: %s", m.ReplyMarkup)
	}

	// Alice is: deploy cycles to ask, stored, and the keyboard says so.
	press(faketelegram.Alice, "deploy", "skill:deploy is ask here now")
	if st := e.Settings(t, key); st.Version != 1 || st.Tools["skill:deploy"].Mode != agent.ToolAsk {
		t.Fatalf("stored %+v", st)
	}
	edited := func(label string) {
		t.Helper()
		if !srv.WaitFor(wait, func() bool { m, _ := srv.Message(faketelegram.Group, id); _, ok := m.Button(label); return ok }) {
			m, _ := srv.Message(faketelegram.Group, id)
			t.Fatalf("no %q after the press: %s", label, m.ReplyMarkup)
		}
	}
	edited("deploy: ask (here)")
	press(faketelegram.Alice, policytest.LongSkill, agent.SkillRule(policytest.LongSkill)+" is ask here now")
	edited(policytest.LongSkill + ": ask (here)")
	press(faketelegram.Alice, "▸ mcp:notes", "mcp:notes (group) is ask here now")
	edited("▸ mcp:notes: ask (here)")
	st := e.Settings(t, key)
	if st.Version != 3 || st.Tools[agent.SkillRule(policytest.LongSkill)].Mode != agent.ToolAsk || st.Tools["group:mcp:notes"].Mode != agent.ToolAsk {
		t.Errorf("stored %+v", st)
	}
	if n := len(e.Audit(t, key, govern.AuditPolicySet)); n != 3 {
		t.Errorf("%d changes audited", n)
	}
	if n := len(e.Audit(t, key, govern.AuditPolicyRefused)); n != 2 {
		t.Errorf("%d refusals audited", n)
	}
	if m, _ := srv.Message(faketelegram.Group, id); !strings.Contains(m.Text, "deploy=ask (here)") || adapters.UTF16(m.Text) > 4096 {
		t.Errorf("the screen's text: %q", m.Text)
	}
}

// Many skills: the keyboard has pages within Telegram's hundred buttons,
// turned in place.
func TestPolicyKeyboardPages(t *testing.T) {
	srv := faketelegram.New(t)
	a := newAdapterWith(t, srv, Config{})
	key := chatKey(faketelegram.Group, 0)
	admin := strconv.FormatInt(faketelegram.Alice, 10)
	var extra []string
	for i := range 150 {
		extra = append(extra, "skill-"+strconv.Itoa(1000+i))
	}
	e := policytest.New(t, key, []string{admin}, extra...)
	run(t, a, e.D)
	v, err := e.D.Policy(t.Context(), key, agent.User{ID: admin})
	if err != nil {
		t.Fatal(err)
	}
	id := post(t, a, key, adapters.PolicyScreen(adapters.PolicyText(v), v))
	buttons := func() (n int, labels []string) {
		m, _ := srv.Message(faketelegram.Group, id)
		for _, row := range m.Keyboard() {
			for _, b := range row {
				n++
				labels = append(labels, b.Text)
			}
		}
		return n, labels
	}
	n, labels := buttons()
	if n > maxButtons || !slices.Contains(labels, "page 2 ▶") || slices.Contains(labels, "skill-1149: allow") {
		t.Fatalf("first page: %d buttons %q", n, labels)
	}
	for page := 2; ; page++ {
		u, err := srv.PressButton(faketelegram.Group, faketelegram.Alice, id, fmt.Sprintf("page %d ▶", page))
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := srv.WaitCallbackAnswer(u.CallbackQuery.ID, wait); !ok {
			t.Fatal("a page press not answered")
		}
		if !srv.WaitFor(wait, func() bool { _, l := buttons(); return slices.Contains(l, fmt.Sprintf("◀ page %d", page-1)) }) {
			t.Fatalf("page %d not shown: %q", page, labels)
		}
		if n, labels = buttons(); n > maxButtons {
			t.Fatalf("page %d: %d buttons", page, n)
		}
		if slices.Contains(labels, "skill-1149: allow") {
			break
		}
		if page == 10 {
			t.Fatalf("no page shows the last skill: %q", labels)
		}
	}
	if st := e.Settings(t, key); st.Version != 0 {
		t.Errorf("turning pages stored %+v", st)
	}
}

func TestIsAdmin(t *testing.T) {
	srv := faketelegram.New(t)
	ctx := t.Context()
	group := chatKey(faketelegram.Group, 0)

	off := newAdapter(t, srv)
	if ok, err := off.IsAdmin(ctx, group, "1001"); ok || err != nil {
		t.Errorf("without ChatAdmins: %v, %v", ok, err)
	}
	if n := srv.Count("getChatAdministrators"); n != 0 {
		t.Errorf("%d calls without ChatAdmins", n)
	}

	a := newAdapterWith(t, srv, Config{ChatAdmins: true})
	now := time.Now()
	a.admins.now = func() time.Time { return now }
	is := func(key agent.SessionKey, user int64) bool {
		t.Helper()
		ok, err := a.IsAdmin(ctx, key, strconv.FormatInt(user, 10))
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !is(group, faketelegram.Alice) || is(group, faketelegram.Bob) {
		t.Error("Alice created the group; Bob is no admin")
	}
	srv.SetChatAdmins(faketelegram.Group, faketelegram.Alice, faketelegram.Bob)
	now = now.Add(30 * time.Second)
	if is(group, faketelegram.Bob) || is(chatKey(faketelegram.Group, 5), faketelegram.Bob) {
		t.Error("the list was not cached")
	}
	if n := srv.Count("getChatAdministrators"); n != 1 {
		t.Errorf("%d calls in a minute", n)
	}
	now = now.Add(31 * time.Second)
	if !is(group, faketelegram.Bob) {
		t.Error("a new admin is not one after a minute")
	}
	if n := srv.Count("getChatAdministrators"); n != 2 {
		t.Errorf("%d calls", n)
	}

	// Nobody administers a private chat, and Telegram is not asked.
	if is(chatKey(faketelegram.Alice, 0), faketelegram.Alice) {
		t.Error("an admin of a private chat")
	}
	if n := srv.Count("getChatAdministrators"); n != 2 {
		t.Errorf("%d calls", n)
	}
	// A failure is an error and is not remembered.
	srv.FailNext("getChatAdministrators", 1, 400, "Bad Request: chat not found")
	forum := chatKey(faketelegram.Forum, 0)
	if _, err := a.IsAdmin(ctx, forum, "1001"); err == nil {
		t.Error("no error")
	}
	if !is(forum, faketelegram.Alice) {
		t.Error("the failure was remembered")
	}
	// A channel's admins are not asked.
	if err := a.handle(ctx, &recorder{}, &update{UpdateID: 1, ChannelPost: &message{MessageID: 1, Chat: chat{ID: faketelegram.Channel, Type: "channel"}, Text: "news"}}); err != nil {
		t.Fatal(err)
	}
	if is(chatKey(faketelegram.Channel, 0), faketelegram.Alice) {
		t.Error("a channel admin counts")
	}
	if n := srv.Count("getChatAdministrators"); n != 4 {
		t.Errorf("%d calls", n)
	}
}

// Who wrote where: private chats are marked, groups named, and commands
// with arguments reach Submit whole, without the @botname.
func TestInboundWhoAndCommands(t *testing.T) {
	srv := faketelegram.New(t)
	a := newAdapterWith(t, srv, Config{})
	rec := &recorder{}
	run(t, a, rec)
	topic := srv.CreateTopic(faketelegram.Forum, faketelegram.Alice, "Ops")
	sent := []faketelegram.Update{
		srv.PrivateMessage(faketelegram.Alice, "/tools exec=ask"),
		srv.Command(faketelegram.Group, faketelegram.Bob, "tools", "exec=ask"),
		srv.GroupMessage(faketelegram.Group, faketelegram.Bob, "/why shell"),
		srv.GroupMessage(faketelegram.Group, faketelegram.Bob, "/why@helper_bot shell"), // another bot's
		srv.GroupMessage(faketelegram.Group, faketelegram.Bob, "/start"),                // not ours, to nobody
		srv.Mention(faketelegram.Forum, faketelegram.Bob, "tools", faketelegram.InTopic(topic.Message.MessageID)),
		srv.Command(faketelegram.BasicGroup, faketelegram.Alice, "pair", "K7QP-M2XD"),
	}
	last := sent[len(sent)-1]
	if !srv.WaitFor(wait, func() bool { return srv.Offset() > last.UpdateID }) {
		t.Fatal("not all handled")
	}
	got := rec.Submitted()
	type want struct {
		key      agent.SessionKey
		text     string
		private  bool
		chatName string
		cmd      string
		args     string
	}
	wants := []want{
		{chatKey(faketelegram.Alice, 0), "/tools exec=ask", true, "", "tools", "exec=ask"},
		{chatKey(faketelegram.Group, 0), "/tools exec=ask", false, "Crew", "tools", "exec=ask"},
		{chatKey(faketelegram.Group, 0), "/why shell", false, "Crew", "why", "shell"},
		{chatKey(faketelegram.Forum, topic.Message.MessageID), "tools", false, "Crew Forum", "tools", ""},
		{chatKey(faketelegram.BasicGroup, 0), "/pair K7QP-M2XD", false, "Old Crew", "pair", "K7QP-M2XD"},
	}
	if len(got) != len(wants) {
		t.Fatalf("submitted %d: %+v", len(got), got)
	}
	for i, w := range wants {
		in := got[i]
		if in.Key != w.key || in.Text != w.text || in.Private != w.private || in.ChatName != w.chatName {
			t.Errorf("%d: got %+v, want %+v", i, in, w)
		}
		cmd, args, ok := agent.ParseCommand(in.Text, nil)
		if !ok || cmd.Name != w.cmd || args != w.args {
			t.Errorf("%d: %q parses as %q %q %v", i, in.Text, cmd.Name, args, ok)
		}
	}
	if got[0].User != (agent.User{ID: "1001", Name: "Alice Admin"}) {
		t.Errorf("user %+v", got[0].User)
	}
}

// The command menu is the registry's, and Telegram takes it.
func TestCommandMenu(t *testing.T) {
	srv := faketelegram.New(t)
	a := newAdapterWith(t, srv, Config{})
	run(t, a, &recorder{})
	if !srv.WaitFor(wait, func() bool { return len(srv.Commands()) > 0 }) {
		t.Fatalf("no commands set: %+v", srv.Calls("setMyCommands"))
	}
	menu := srv.Commands()
	var names []string
	for _, c := range agent.Commands() {
		names = append(names, c.Name)
	}
	var got []string
	for _, c := range menu {
		got = append(got, c.Command)
		if !menuName.MatchString(c.Command) || c.Description == "" || len([]rune(c.Description)) > 256 {
			t.Errorf("menu entry %+v", c)
		}
		if c.Command == "tools" && !strings.Contains(c.Description, "/tools [exec=ask") {
			t.Errorf("tools: %q", c.Description)
		}
		if c.Command == "pair" && !strings.Contains(c.Description, "(admins)") {
			t.Errorf("pair: %q", c.Description)
		}
	}
	if !slices.Equal(got, names) {
		t.Errorf("menu %v, registry %v", got, names)
	}
}
