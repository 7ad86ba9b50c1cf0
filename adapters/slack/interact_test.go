package slack

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/firstmate/firstmate/adapters"
	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/agent/govern"
	"github.com/firstmate/firstmate/internal/testkit/fakeslack"
	"github.com/firstmate/firstmate/internal/testkit/policytest"
)

const (
	wait   = 5 * time.Second
	secret = "8f742231b10e8888abcd99yyyzzz85a5"
)

// httpAdapter serves the adapter's HTTP routes (events, commands,
// interactivity) and returns their base URL.
func httpAdapter(t *testing.T, srv *fakeslack.Server, d agent.Submitter) (*Adapter, string) {
	t.Helper()
	a, err := New(t.Context(), Config{BotToken: srv.BotToken(), SigningSecret: secret, APIURL: srv.APIURL()})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	a.Routes(mux, d)
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	return a, hs.URL
}

// ask posts an approval question in a thread of #general, as a turn does,
// and returns the thread's key and the question.
func ask(t *testing.T, srv *fakeslack.Server, a *Adapter) (agent.SessionKey, agent.Thread, fakeslack.Message) {
	t.Helper()
	root := srv.AddMessage(fakeslack.Message{Channel: fakeslack.General, User: fakeslack.Bob, Text: "<@U0BOT> clean up"})
	key := agent.SessionKey{Platform: Platform, Team: srv.TeamID(), Chat: fakeslack.General, Thread: root.TS}
	th := a.Thread(key, agent.Inbound{ReplyTo: root.TS, User: agent.User{ID: fakeslack.Bob}})
	err := th.Emit(t.Context(), agent.ApprovalNeeded{CallID: "c1", Name: "shell", Args: json.RawMessage(`{"cmd":"rm -rf build"}`),
		ID: "ap1", Requester: agent.User{ID: fakeslack.Bob, Name: "bob"}, Deadline: time.Now().Add(5 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range srv.Thread(fakeslack.General, root.TS) {
		if len(m.Buttons()) > 0 {
			return key, th, m
		}
	}
	t.Fatalf("no question with buttons in the thread: %+v", srv.Thread(fakeslack.General, root.TS))
	panic("unreachable")
}

func TestApprovalButtonsRenderedAndRemovedByEdit(t *testing.T) {
	srv := fakeslack.New(t)
	a := newAdapter(t, srv, adapters.ModeFull)
	_, th, q := ask(t, srv, a)
	buttons := q.Buttons()
	if len(buttons) != 3 {
		t.Fatalf("buttons %+v", buttons)
	}
	want := []struct{ text, style string }{{"Approve", "primary"}, {"Deny", "danger"}, {"Always allow here", ""}}
	ids := map[string]bool{}
	for i, b := range buttons {
		if b.Text != want[i].text || b.Style != want[i].style || !strings.HasPrefix(b.ActionID, actionPrefix) || !strings.Contains(b.Value, "ap1") {
			t.Errorf("button %d = %+v", i, b)
		}
		ids[b.ActionID] = true
	}
	if len(ids) != 3 {
		t.Errorf("action_ids are not unique: %+v", buttons)
	}
	if !strings.Contains(string(q.Blocks), `"section"`) || !strings.Contains(q.Text, "needs approval to run shell") {
		t.Errorf("the question's text: %q, blocks %s", q.Text, q.Blocks)
	}

	// The question ends the turn: what decides it is a click (see the
	// transport tests), which replaces it.
	_ = th
}

func TestFormatPutsButtonsOnLastPart(t *testing.T) {
	s := &surface{allowed: map[string]bool{}}
	rows := [][]adapters.Button{{{Label: "A", Data: "fm:a"}}, {{Label: strings.Repeat("long ", 30), Data: "fm:b"}}}
	parts := s.Format(adapters.Text{Body: strings.Repeat("word ", 5000), Buttons: rows})
	if len(parts) < 2 || parts[0].Buttons != nil || len(parts[len(parts)-1].Buttons) != 2 {
		t.Fatalf("%d parts; buttons on the first %v, on the last %v", len(parts), parts[0].Buttons, parts[len(parts)-1].Buttons)
	}
	// Rows beyond what fits in a message are packed, 25 a block.
	var many [][]adapters.Button
	for i := range 70 {
		many = append(many, []adapters.Button{{Label: "b", Data: "fm:" + string(rune('a'+i%26))}})
	}
	if blocks := actionBlocks(many, 10); len(blocks) != 3 {
		t.Errorf("70 rows in room for 10 blocks made %d blocks", len(blocks))
	}
}

// clicks sends a click over one transport and returns the HTTP answer
// (zero over Socket Mode, where the ack is awaited).
type transport struct {
	name  string
	setup func(t *testing.T, srv *fakeslack.Server, d *submitter) (*Adapter, func(fakeslack.Interaction) (int, []byte))
}

var transports = []transport{
	{"socket mode", func(t *testing.T, srv *fakeslack.Server, d *submitter) (*Adapter, func(fakeslack.Interaction) (int, []byte)) {
		a := newAdapter(t, srv, adapters.ModeFull)
		runAdapter(t, a, d)
		return a, func(ia fakeslack.Interaction) (int, []byte) {
			t.Helper()
			id := srv.SendInteractive(ia)
			ack, ok := srv.WaitAck(id, wait)
			if !ok {
				t.Fatal("the interaction was not acked")
			}
			return http.StatusOK, ack.Payload
		}
	}},
	{"http", func(t *testing.T, srv *fakeslack.Server, d *submitter) (*Adapter, func(fakeslack.Interaction) (int, []byte)) {
		a, base := httpAdapter(t, srv, d)
		return a, func(ia fakeslack.Interaction) (int, []byte) {
			t.Helper()
			res, err := srv.DeliverHTTP(t.Context(), base+"/slack/interactivity", ia, secret)
			if err != nil {
				t.Fatal(err)
			}
			return res.Status, res.Body
		}
	}},
}

func TestClickReachesDecide(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			srv := fakeslack.New(t)
			d := &submitter{}
			a, send := tr.setup(t, srv, d)
			key, _, q := ask(t, srv, a)
			for i, c := range []struct {
				user, button    string
				approve, always bool
			}{
				{fakeslack.Bob, "Approve", true, false},
				{fakeslack.Alice, "Deny", false, false},
				{fakeslack.Alice, "Always allow here", true, true},
			} {
				ia, err := srv.Click(fakeslack.General, q.TS, c.user, c.button)
				if err != nil {
					t.Fatal(err)
				}
				if status, body := send(ia); status != http.StatusOK || len(body) > 0 && string(body) != "null" {
					t.Fatalf("click answered %d %s", status, body)
				}
				if !srv.WaitFor(wait, func() bool { return len(d.decided()) == i+1 }) {
					t.Fatalf("click %d did not reach Decide: %+v", i, d.decided())
				}
				got := d.decided()[i]
				if got.ApprovalID != "ap1" || got.Chat != key || got.User.ID != c.user || got.Approve != c.approve || got.Always != c.always {
					t.Errorf("click %d: Decide(%+v), want chat %v", i, got, key)
				}
				// The person is told, in the thread, only them.
				if !srv.WaitFor(wait, func() bool { return len(srv.Ephemerals()) == i+1 }) {
					t.Fatalf("no ephemeral notice: %+v", srv.Ephemerals())
				}
				e := srv.Ephemerals()[i]
				if e.User != c.user || e.ThreadTS != key.Thread || e.Channel != fakeslack.General || strings.Contains(e.Text, "<!channel>") {
					t.Errorf("notice %+v", e)
				}
			}
			if got := d.decided()[0].User.Name; got != "bob" {
				t.Errorf("the clicker's name %q", got)
			}
		})
	}
}

func TestForgedInteractionRefused(t *testing.T) {
	srv := fakeslack.New(t)
	d := &submitter{admins: map[string]bool{fakeslack.Alice: true}}
	a, base := httpAdapter(t, srv, d)
	_, _, q := ask(t, srv, a)
	ia, err := srv.Click(fakeslack.General, q.TS, fakeslack.Alice, "Approve")
	if err != nil {
		t.Fatal(err)
	}
	for name, opt := range map[string]fakeslack.DeliverOption{"bad signature": fakeslack.BadSignature(), "stale": fakeslack.StaleTimestamp()} {
		res, err := srv.DeliverHTTP(t.Context(), base+"/slack/interactivity", ia, secret, opt)
		if err != nil || res.Status != http.StatusUnauthorized {
			t.Errorf("%s: %d %s, %v; want 401", name, res.Status, res.Body, err)
		}
	}
	// Unsigned.
	req, _ := http.NewRequest(http.MethodPost, base+"/slack/interactivity", strings.NewReader(url.Values{"payload": {`{"type":"block_actions"}`}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Errorf("unsigned: %d", res.StatusCode)
	}
	time.Sleep(100 * time.Millisecond)
	if len(d.decided()) != 0 || len(srv.Ephemerals()) != 0 {
		t.Fatalf("a forged click did something: %+v %+v", d.decided(), srv.Ephemerals())
	}
	// Signed, the same click is taken.
	if res, err := srv.DeliverHTTP(t.Context(), base+"/slack/interactivity", ia, secret); err != nil || res.Status != http.StatusOK {
		t.Fatalf("signed: %+v, %v", res, err)
	}
	if !srv.WaitFor(wait, func() bool { return len(d.decided()) == 1 }) {
		t.Error("the signed click did not reach Decide")
	}
}

// Payloads that are not JSON, not ours, or name a place or person we
// cannot read are answered and do nothing.
func TestGarbageInteractionsAreHarmless(t *testing.T) {
	// A tools modal's exec select, moved from allow to deny.
	const execSelect = `"blocks":[{"type":"input","block_id":"g:exec","label":{"type":"plain_text","text":"exec"},"element":{"type":"static_select","action_id":"mode",` +
		`"initial_option":{"text":{"type":"plain_text","text":"allow"},"value":"allow"}}}],"state":{"values":{"g:exec":{"mode":{"type":"static_select","selected_option":{"value":"deny"}}}}}`
	garbage := []string{
		`"hello"`,
		`[1,2,3]`,
		`{}`,
		`{"type":"block_actions","actions":"nope"}`,
		`{"type":"block_actions","user":{"id":"U0ALICE"},"channel":{"id":"../../etc"},"container":{"message_ts":"1.2"},"actions":[{"type":"button","block_id":"fm_row_0","action_id":"fm_0","value":"fm:ok:ap1"}]}`,
		`{"type":"block_actions","user":{"id":"<@U0ALICE>"},"channel":{"id":"C0GENERAL"},"container":{"message_ts":"1.2"},"actions":[{"type":"button","block_id":"fm_row_0","action_id":"fm_0","value":"fm:ok:ap1"}]}`,
		`{"type":"block_actions","user":{"id":"U0ALICE"},"channel":{"id":"C0GENERAL"},"container":{"message_ts":"1.2"},"actions":[{"type":"button","block_id":"fm_row_0","action_id":"fm_0","value":"someone else's"}]}`,
		`{"type":"block_actions","user":{"id":"U0ALICE"},"channel":{"id":"C0GENERAL"},"container":{"message_ts":"1.2"},"actions":[{"type":"button","block_id":"fm_row_0","action_id":"other_0","value":"fm:ok:ap1"}]}`,
		`{"type":"view_submission","user":{"id":"U0ALICE"},"view":{"callback_id":"fm_tools","private_metadata":"garbage"}}`,
		`{"type":"view_submission","user":{"id":"U0ALICE"},"view":{"callback_id":"fm_tools","private_metadata":"{\"chat\":\"telegram::1:\",\"v\":0}",` + execSelect + `}}`,
		`{"type":"view_submission","user":{"id":"U0ALICE"},"view":{"callback_id":"fm_tools","private_metadata":"{\"chat\":\"slack:T0FAKE:..%3Ax:\",\"v\":0}",` + execSelect + `}}`,
		`{"type":"view_submission","user":{"id":"<U0ALICE>"},"view":{"callback_id":"fm_tools","private_metadata":"{\"chat\":\"slack:T0FAKE:C0GENERAL:\",\"v\":0}",` + execSelect + `}}`,
		`{"type":"view_submission","user":{"id":"U0ALICE"},"view":{"callback_id":"someone_else","private_metadata":"{}"}}`,
		`{"type":"shortcut","callback_id":"x"}`,
	}
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			srv := fakeslack.New(t)
			d := &submitter{admins: map[string]bool{fakeslack.Alice: true}}
			_, send := tr.setup(t, srv, d)
			for _, g := range garbage {
				if status, _ := send(fakeslack.Interaction{Payload: json.RawMessage(g)}); status != http.StatusOK {
					t.Errorf("%s: answered %d", g, status)
				}
			}
			if tr.name == "http" {
				_, base := httpAdapter(t, srv, d)
				for _, form := range []url.Values{{"payload": {"not json"}}, {}, {"payload": {""}}} {
					res, err := srv.DeliverHTTP(t.Context(), base+"/slack/interactivity", form, secret)
					if err != nil || res.Status != http.StatusOK {
						t.Errorf("form %v: %d, %v", form, res.Status, err)
					}
				}
			}
			time.Sleep(100 * time.Millisecond)
			if len(d.decided()) != 0 || len(d.policyCalls()) != 0 || len(srv.Ephemerals()) != 0 || srv.Count("chat.update") != 0 {
				t.Fatalf("garbage did something: decisions %+v, policy %+v, ephemerals %+v", d.decided(), d.policyCalls(), srv.Ephemerals())
			}
			// The same shapes, readable, do act: the garbage above was
			// refused for what is wrong with it.
			send(fakeslack.Interaction{Payload: json.RawMessage(`{"type":"block_actions","user":{"id":"U0ALICE"},"channel":{"id":"C0GENERAL"},"container":{"message_ts":"1.2"},"actions":[{"type":"button","block_id":"fm_row_0","action_id":"fm_0","value":"fm:ok:ap1"}]}`)})
			send(fakeslack.Interaction{Payload: json.RawMessage(`{"type":"view_submission","user":{"id":"U0ALICE"},"view":{"callback_id":"fm_tools","private_metadata":"{\"chat\":\"slack:T0FAKE:C0GENERAL:\",\"v\":0}",` + execSelect + `}}`)})
			if !srv.WaitFor(wait, func() bool { return len(d.decided()) == 1 }) {
				t.Error("the readable click did not reach Decide")
			}
			if c := d.policyCalls(); len(c) != 1 || c[0].Change.Set["group:exec"] != agent.ToolDeny {
				t.Errorf("the readable submission: %+v", c)
			}
		})
	}
}

// A policy screen's button (from "tools exec=ask" or a mention) changes
// the rule and the screen; on an ephemeral screen, through its response_url.
func TestPolicyScreenClick(t *testing.T) {
	srv := fakeslack.New(t)
	d := &submitter{admins: map[string]bool{fakeslack.Alice: true}, version: 3}
	a := newAdapter(t, srv, adapters.ModeFull)
	runAdapter(t, a, d)
	id := srv.SendSlashCommand(srv.SlashCommand(fakeslack.General, fakeslack.Alice, "/firstmate", "tools exec=ask"))
	if _, ok := srv.WaitAck(id, wait); !ok {
		t.Fatal("not acked")
	}
	in := d.all()[0]
	v := policyView(in.Key, 3, true)
	if err := a.Thread(in.Key, in).Emit(t.Context(), agent.Notice{Text: "Saved.", Policy: &v}); err != nil {
		t.Fatal(err)
	}
	screen := srv.Ephemerals()[0]
	if len(screen.Buttons()) == 0 {
		t.Fatalf("the ephemeral screen has no buttons: %+v", screen)
	}
	ia, err := srv.Click(fakeslack.General, screen.TS, fakeslack.Alice, "▸ exec: ask (here)")
	if err != nil {
		t.Fatal(err)
	}
	srv.SendInteractive(ia)
	if !srv.WaitFor(wait, func() bool { e := srv.Ephemerals(); return len(e) == 2 && e[0].Edits == 1 }) {
		t.Fatalf("the screen was not replaced and the person not told: %+v", srv.Ephemerals())
	}
	calls := d.policyCalls()
	if len(calls) != 1 || calls[0].Change.Version != 3 || calls[0].Change.Set[agent.GroupRule(agent.GroupExec)] != agent.ToolDeny {
		t.Fatalf("SetPolicy calls %+v", calls)
	}
	if e := srv.Ephemerals(); !strings.Contains(e[1].Text, "exec (group) is deny") || e[1].User != fakeslack.Alice ||
		!slices.ContainsFunc(e[0].Buttons(), func(b fakeslack.Button) bool { return strings.HasPrefix(b.Text, "▸ exec") }) {
		t.Errorf("after the click: %+v", e)
	}

	// In a thread (someone sent "tools" in a mention) the screen is edited
	// in place, and a non-admin's click changes nothing but is answered.
	root := srv.AddMessage(fakeslack.Message{Channel: fakeslack.General, User: fakeslack.Alice, Text: "<@U0BOT> tools"})
	key := agent.SessionKey{Platform: Platform, Team: srv.TeamID(), Chat: fakeslack.General, Thread: root.TS}
	v = policyView(key, 4, true)
	if err := a.Thread(key, agent.Inbound{User: agent.User{ID: fakeslack.Alice}}).Emit(t.Context(), agent.Notice{Text: "Tools:", Policy: &v}); err != nil {
		t.Fatal(err)
	}
	var screenTS string
	for _, m := range srv.Thread(fakeslack.General, root.TS) {
		if len(m.Buttons()) > 0 {
			screenTS = m.TS
		}
	}
	for i, user := range []string{fakeslack.Bob, fakeslack.Alice} {
		ia, err := srv.Click(fakeslack.General, screenTS, user, "shell: deny (here)")
		if err != nil {
			t.Fatal(err)
		}
		srv.SendInteractive(ia)
		if !srv.WaitFor(wait, func() bool { return len(srv.Ephemerals()) == 3+i }) {
			t.Fatalf("click %d not answered: %+v", i, srv.Ephemerals())
		}
	}
	e := srv.Ephemerals()
	if !strings.Contains(e[2].Text, "Only an admin") || e[2].User != fakeslack.Bob || e[2].ThreadTS != root.TS || !strings.Contains(e[3].Text, "shell is allow") {
		t.Errorf("notices %+v", e[2:])
	}
	if m, _ := srv.Message(fakeslack.General, screenTS); m.Edits != 1 || len(m.Buttons()) == 0 {
		t.Errorf("the screen after an admin's click: %+v", m)
	}
	if c := d.policyCalls(); len(c) != 3 || c[2].Change.Set["shell"] != agent.ToolAllow || c[2].Chat != key {
		t.Errorf("SetPolicy calls %+v", c)
	}
}

func TestToolsModal(t *testing.T) {
	for _, tr := range []string{"socket mode", "http"} {
		t.Run(tr, func(t *testing.T) {
			srv := fakeslack.New(t)
			d := &submitter{admins: map[string]bool{fakeslack.Alice: true}, version: 7}
			var (
				command func(slack.SlashCommand)
				submit  func(fakeslack.Interaction) []byte
			)
			if tr == "http" {
				_, base := httpAdapter(t, srv, d)
				command = func(c slack.SlashCommand) {
					if res, err := srv.DeliverHTTP(t.Context(), base+"/slack/commands", c, secret); err != nil || res.Status != http.StatusOK || len(res.Body) != 0 {
						t.Fatalf("slash command: %+v, %v", res, err)
					}
				}
				submit = func(ia fakeslack.Interaction) []byte {
					res, err := srv.DeliverHTTP(t.Context(), base+"/slack/interactivity", ia, secret)
					if err != nil || res.Status != http.StatusOK {
						t.Fatalf("submission: %+v, %v", res, err)
					}
					return res.Body
				}
			} else {
				a := newAdapter(t, srv, adapters.ModeFull)
				runAdapter(t, a, d)
				command = func(c slack.SlashCommand) {
					if ack, ok := srv.WaitAck(srv.SendSlashCommand(c), wait); !ok || len(ack.Payload) != 0 {
						t.Fatalf("slash command ack %+v", ack)
					}
				}
				submit = func(ia fakeslack.Interaction) []byte {
					ack, ok := srv.WaitAck(srv.SendInteractive(ia), wait)
					if !ok {
						t.Fatal("submission not acked")
					}
					return ack.Payload
				}
			}
			openView := func(user string) fakeslack.View {
				t.Helper()
				n := len(srv.Views())
				command(srv.SlashCommand(fakeslack.General, user, "/firstmate", "tools"))
				if !srv.WaitFor(wait, func() bool { return len(srv.Views()) == n+1 }) {
					t.Fatalf("no modal opened; views.open calls %+v, ephemerals %+v", srv.Calls("views.open"), srv.Ephemerals())
				}
				return srv.Views()[n]
			}

			// An admin gets selects at the policy's modes.
			v := openView(fakeslack.Alice)
			if v.User != fakeslack.Alice || v.Submit == "" || v.CallbackID != toolsCallbackID || !strings.Contains(v.PrivateMetadata, `"v":7`) {
				t.Fatalf("modal %+v", v)
			}
			initial := map[string]string{}
			for _, s := range v.Selects() {
				initial[s.BlockID] = s.Initial
			}
			want := map[string]string{"g:read": "allow", "t:ls": "inherit", "t:read": "inherit", "g:exec": "ask", "t:shell": "deny", "t:start": "inherit", "g:web": "allow", "t:mytool": "inherit"}
			if !mapsEqual(initial, want) {
				t.Errorf("initial options %v, want %v", initial, want)
			}
			if len(d.all()) != 0 {
				t.Errorf("tools without arguments was submitted: %+v", d.all())
			}

			// Submitted: what moved is changed, at the version shown.
			ia, err := srv.SubmitView(v.ID, fakeslack.Alice, map[string]string{"g:exec": "deny", "t:shell": "inherit", "t:ls": "inherit"})
			if err != nil {
				t.Fatal(err)
			}
			if body := submit(ia); len(body) != 0 && string(body) != "null" {
				t.Errorf("a saved modal must close: %s", body)
			}
			calls := d.policyCalls()
			wantSet := map[string]agent.ToolMode{"group:exec": agent.ToolDeny, "shell": ""}
			if len(calls) != 1 || calls[0].Change.Version != 7 || !mapsEqual(calls[0].Change.Set, wantSet) || calls[0].User.ID != fakeslack.Alice ||
				calls[0].Chat != (agent.SessionKey{Platform: Platform, Team: srv.TeamID(), Chat: fakeslack.General}) {
				t.Fatalf("SetPolicy calls %+v", calls)
			}
			if !srv.WaitFor(wait, func() bool { return len(srv.Ephemerals()) == 1 }) || !strings.Contains(srv.Ephemerals()[0].Text, "exec (group) deny") {
				t.Errorf("confirmation %+v", srv.Ephemerals())
			}

			// The same modal again: the version moved on, so it is refused.
			ia, _ = srv.SubmitView(v.ID, fakeslack.Alice, map[string]string{"g:read": "ask"})
			if body := submit(ia); !strings.Contains(string(body), `"response_action":"errors"`) || !strings.Contains(string(body), "g:read") {
				t.Errorf("a stale modal: %s", body)
			}

			// A non-admin gets the policy in words, and no submit button; a
			// submission in their name is refused in the modal.
			bv := openView(fakeslack.Bob)
			if bv.Submit != "" || len(bv.Selects()) != 0 || !strings.Contains(string(bv.Blocks), "Only an admin can change it") {
				t.Errorf("non-admin modal %+v", bv)
			}
			v = openView(fakeslack.Alice)
			ia, _ = srv.SubmitView(v.ID, fakeslack.Bob, map[string]string{"t:mytool": "deny"})
			body := submit(ia)
			var resp slack.ViewSubmissionResponse
			if err := json.Unmarshal(body, &resp); err != nil || resp.ResponseAction != slack.RAErrors || !strings.Contains(resp.Errors["t:mytool"], "Only an admin") {
				t.Errorf("a non-admin's submission: %s", body)
			}
		})
	}
}

// The tools modal and the policy screen list the channel's skills and
// its MCP servers, with their modes and where those come from, and change
// them like any rule: for admins only, stored, at the version shown.
func TestPolicyScreensSkillsAndMCPServers(t *testing.T) {
	srv := fakeslack.New(t)
	key := agent.SessionKey{Platform: Platform, Team: srv.TeamID(), Chat: fakeslack.General}
	e := policytest.New(t, key, []string{fakeslack.Alice})
	a := newAdapter(t, srv, adapters.ModeFull)
	runAdapter(t, a, e.D)
	long := agent.SkillRule(policytest.LongSkill)
	openView := func(user string) fakeslack.View {
		t.Helper()
		n := len(srv.Views())
		if _, ok := srv.WaitAck(srv.SendSlashCommand(srv.SlashCommand(fakeslack.General, user, "/firstmate", "tools")), wait); !ok {
			t.Fatal("not acked")
		}
		if !srv.WaitFor(wait, func() bool { return len(srv.Views()) == n+1 }) {
			t.Fatalf("no modal opened; ephemerals %+v", srv.Ephemerals())
		}
		return srv.Views()[n]
	}
	submit := func(v fakeslack.View, user string, selected map[string]string) []byte {
		t.Helper()
		ia, err := srv.SubmitView(v.ID, user, selected)
		if err != nil {
			t.Fatal(err)
		}
		ack, ok := srv.WaitAck(srv.SendInteractive(ia), wait)
		if !ok {
			t.Fatal("submission not acked")
		}
		return ack.Payload
	}

	// The modal: a select per skill and for the skills group, one for the
	// server; a skill's hint says where its mode comes from.
	v := openView(fakeslack.Alice)
	got := map[string]fakeslack.Select{}
	for _, sel := range v.Selects() {
		got[sel.BlockID] = sel
	}
	for id, want := range map[string]struct{ label, initial string }{
		"g:skills":        {"skills (every skill)", "allow"},
		"t:skill:deploy":  {"skill:deploy", "inherit"},
		"t:" + long:       {long, "inherit"},
		"g:mcp:notes":     {"mcp:notes (MCP server)", "allow"},
		"t:notes__search": {"notes__search", "inherit"},
		"g:exec":          {"exec (group)", "allow"},
	} {
		if sel, ok := got[id]; !ok || sel.Label != want.label || sel.Initial != want.initial || len(sel.Options) > 100 {
			t.Errorf("%s: %+v, want %+v", id, sel, want)
		}
	}
	if !strings.Contains(string(v.Blocks), "Now allow, the default. Skills: deploy, "+policytest.LongSkill) {
		t.Errorf("the skills group's hint: %s", v.Blocks)
	}

	// A non-admin sees them in words and cannot change them.
	bv := openView(fakeslack.Bob)
	if len(bv.Selects()) != 0 || !strings.Contains(string(bv.Blocks), "deploy=allow") || !strings.Contains(string(bv.Blocks), "mcp:notes: allow (default)") {
		t.Errorf("non-admin modal %s", bv.Blocks)
	}
	body := submit(v, fakeslack.Bob, map[string]string{"t:skill:deploy": "deny"})
	if !strings.Contains(string(body), "Only an admin") {
		t.Errorf("a non-admin's submission: %s", body)
	}
	if st := e.Settings(t, key); st.Version != 0 || len(st.Tools) != 0 {
		t.Fatalf("a non-admin's submission stored %+v", st)
	}

	// An admin's is stored and audited.
	if body := submit(v, fakeslack.Alice, map[string]string{"t:skill:deploy": "ask", "t:" + long: "deny", "g:mcp:notes": "deny"}); len(body) != 0 && string(body) != "null" {
		t.Fatalf("an admin's submission: %s", body)
	}
	st := e.Settings(t, key)
	if st.Version != 1 || st.Tools["skill:deploy"].Mode != agent.ToolAsk || st.Tools[long].Mode != agent.ToolDeny || st.Tools["group:mcp:notes"].Mode != agent.ToolDeny || len(st.Tools) != 3 {
		t.Fatalf("stored %+v", st)
	}
	if a := e.Audit(t, key, govern.AuditPolicySet); len(a) != 1 || !strings.Contains(a[0].Detail, "skill:deploy=ask") {
		t.Errorf("audit %+v", a)
	}
	v = openView(fakeslack.Alice)
	for _, sel := range v.Selects() {
		if want := map[string]string{"t:skill:deploy": "ask", "t:" + long: "deny", "g:mcp:notes": "deny", "t:notes__add": "inherit"}[sel.BlockID]; want != "" && sel.Initial != want {
			t.Errorf("%s after the change: %q, want %q", sel.BlockID, sel.Initial, want)
		}
	}

	// The screen's buttons in a thread: a non-admin's click is answered
	// and changes nothing; an admin's cycles the skill, the long name too.
	root := srv.AddMessage(fakeslack.Message{Channel: fakeslack.General, User: fakeslack.Alice, Text: "<@U0BOT> tools"})
	thread := agent.SessionKey{Platform: Platform, Team: srv.TeamID(), Chat: fakeslack.General, Thread: root.TS}
	pv, err := e.D.Policy(t.Context(), thread, agent.User{ID: fakeslack.Alice})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Thread(thread, agent.Inbound{User: agent.User{ID: fakeslack.Alice}}).Emit(t.Context(), agent.Notice{Text: "Tools:", Policy: &pv}); err != nil {
		t.Fatal(err)
	}
	var screenTS string
	if !srv.WaitFor(wait, func() bool {
		for _, m := range srv.Thread(fakeslack.General, root.TS) {
			if len(m.Buttons()) > 0 {
				screenTS = m.TS
			}
		}
		return screenTS != ""
	}) {
		t.Fatal("no screen in the thread")
	}
	click := func(user, button string, n int) fakeslack.Ephemeral {
		t.Helper()
		ia, err := srv.Click(fakeslack.General, screenTS, user, button)
		if err != nil {
			t.Fatal(err)
		}
		srv.SendInteractive(ia)
		if !srv.WaitFor(wait, func() bool { return len(srv.Ephemerals()) >= n }) {
			t.Fatalf("the click on %s was not answered: %+v", button, srv.Ephemerals())
		}
		return srv.Ephemerals()[n-1]
	}
	n := len(srv.Ephemerals())
	if e := click(fakeslack.Bob, "deploy: ask (here)", n+1); !strings.Contains(e.Text, "Only an admin") || e.User != fakeslack.Bob {
		t.Errorf("a non-admin's click: %+v", e)
	}
	if st := e.Settings(t, key); st.Version != 1 {
		t.Fatalf("a non-admin's click stored %+v", st)
	}
	if e := click(fakeslack.Alice, "deploy: ask (here)", n+2); !strings.Contains(e.Text, "skill:deploy is deny here now") {
		t.Errorf("an admin's click: %+v", e)
	}
	if !srv.WaitFor(wait, func() bool {
		m, _ := srv.Message(fakeslack.General, screenTS)
		return slices.ContainsFunc(m.Buttons(), func(b fakeslack.Button) bool { return b.Text == "deploy: deny (here)" })
	}) {
		m, _ := srv.Message(fakeslack.General, screenTS)
		t.Fatalf("the screen after the click: %+v", m.Buttons())
	}
	if e := click(fakeslack.Alice, policytest.LongSkill+": deny (here)", n+3); !strings.Contains(e.Text, long+" is allow here now") {
		t.Errorf("the long skill's click: %+v", e)
	}
	st = e.Settings(t, key)
	if st.Version != 3 || st.Tools["skill:deploy"].Mode != agent.ToolDeny || st.Tools[long].Mode != agent.ToolAllow {
		t.Errorf("stored %+v", st)
	}
}

// With more skills than a modal holds, every group (the server's too) and
// the tools keep their selects, skills take what room is left, and a note
// says how to set the rest.
func TestToolsModalWithManySkills(t *testing.T) {
	key := agent.SessionKey{Platform: Platform, Team: "T1", Chat: "C1"}
	var extra []string
	for i := range 150 {
		extra = append(extra, "skill-"+strconv.Itoa(1000+i))
	}
	e := policytest.New(t, key, []string{"U9"}, extra...)
	v, err := e.D.Policy(t.Context(), key, agent.User{ID: "U9"})
	if err != nil {
		t.Fatal(err)
	}
	m := toolsModal(key, v)
	if n := len(m.Blocks.BlockSet); n > maxModalBlocks {
		t.Fatalf("%d blocks", n)
	}
	ids := map[string]bool{}
	for _, b := range m.Blocks.BlockSet {
		if in, ok := b.(*slack.InputBlock); ok {
			ids[in.BlockID] = true
		}
	}
	for _, id := range []string{"g:read", "g:exec", "g:skills", "g:mcp:notes", "t:notes__add", "t:shell", "t:skill", "t:skill:deploy"} {
		if !ids[id] {
			t.Errorf("no select %s", id)
		}
	}
	last, ok := m.Blocks.BlockSet[len(m.Blocks.BlockSet)-1].(*slack.ContextBlock)
	if !ok || !strings.Contains(last.ContextElements.Elements[0].(*slack.TextBlockObject).Text, "more groups, tools or skills do not fit") {
		t.Errorf("no note on what does not fit: %+v", m.Blocks.BlockSet[len(m.Blocks.BlockSet)-1])
	}
}

func mapsEqual[V comparable](a, b map[string]V) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func TestSlashTextWithArguments(t *testing.T) {
	srv := fakeslack.New(t)
	a := newAdapter(t, srv, adapters.ModeFull)
	d := &submitter{}
	runAdapter(t, a, d)
	for _, c := range []struct{ text, want string }{
		{"tools shell=ask web=deny", "tools shell=ask web=deny"},
		{"why shell", "/why shell"}, // a command typed after the slash command is one
		{"why is it off", "/why is it off"},
		{"  usage ", "usage"},
	} {
		n := len(d.all())
		id := srv.SendSlashCommand(srv.SlashCommand(fakeslack.General, fakeslack.Alice, "/firstmate", c.text))
		if _, ok := srv.WaitAck(id, wait); !ok {
			t.Fatal("not acked")
		}
		got := d.all()
		if len(got) != n+1 || got[n].Text != c.want || got[n].Private || got[n].ChatName != "general" {
			t.Errorf("/firstmate %s submitted %+v", c.text, got[n:])
		}
	}
	// In a DM it is private.
	dm := srv.DirectMessage(fakeslack.Bob, "hi").Channel()
	if _, ok := srv.WaitAck(srv.SendSlashCommand(srv.SlashCommand(dm, fakeslack.Bob, "/firstmate", "status")), wait); !ok {
		t.Fatal("not acked")
	}
	if got := d.all(); !got[len(got)-1].Private || got[len(got)-1].ChatName != "" {
		t.Errorf("slash command in a DM: %+v", got[len(got)-1])
	}
	if h := UsageHint(); !strings.Contains(h, "tools [exec=ask web=deny …]") || !strings.Contains(h, "why TOOL") || !strings.HasPrefix(h, "help | status") {
		t.Errorf("UsageHint() = %q", h)
	}
}

func TestIsAdmin(t *testing.T) {
	srv := fakeslack.New(t,
		fakeslack.WithUser(fakeslack.User{ID: "U0OWNER", Name: "olga", IsPrimaryOwner: true}),
		fakeslack.WithUser(fakeslack.User{ID: "U0EXTADMIN", Name: "eve", IsAdmin: true, TeamID: "T0OTHER"}))
	chat := agent.SessionKey{Platform: Platform, Team: srv.TeamID(), Chat: fakeslack.General}

	// Off by default: no call.
	a := newAdapter(t, srv, adapters.ModeFull)
	if ok, err := a.IsAdmin(t.Context(), chat, fakeslack.Alice); ok || err != nil {
		t.Errorf("IsAdmin without WorkspaceAdmins = %v, %v", ok, err)
	}
	if n := srv.Count("users.info"); n != 0 {
		t.Errorf("%d users.info calls with WorkspaceAdmins off", n)
	}

	a.cfg.WorkspaceAdmins = true
	now := time.Now()
	a.admins.now = func() time.Time { return now }
	for user, want := range map[string]bool{fakeslack.Alice: true, fakeslack.Bob: false, "U0OWNER": true, "U0EXTADMIN": false} {
		for range 3 {
			if ok, err := a.IsAdmin(t.Context(), chat, user); ok != want || err != nil {
				t.Errorf("IsAdmin(%s) = %v, %v", user, ok, err)
			}
		}
	}
	if n := srv.Count("users.info"); n != 4 {
		t.Errorf("%d users.info calls for 4 people asked 3 times each", n)
	}
	// Demoted: the answer stands five minutes, then Slack is asked again.
	srv.SetUser(fakeslack.User{ID: fakeslack.Alice, Name: "alice"})
	now = now.Add(4 * time.Minute)
	if ok, _ := a.IsAdmin(t.Context(), chat, fakeslack.Alice); !ok || srv.Count("users.info") != 4 {
		t.Error("the answer was not kept for five minutes")
	}
	now = now.Add(2 * time.Minute)
	if ok, _ := a.IsAdmin(t.Context(), chat, fakeslack.Alice); ok || srv.Count("users.info") != 5 {
		t.Error("a demoted admin is still one after five minutes")
	}
	// An error is reported, and not kept.
	srv.FailNext("users.info", 1, "fatal_error")
	if ok, err := a.IsAdmin(t.Context(), chat, fakeslack.Bob); ok || err == nil {
		t.Errorf("IsAdmin when users.info fails = %v, %v", ok, err)
	}
	if ok, err := a.IsAdmin(t.Context(), chat, fakeslack.Bob); ok || err != nil || srv.Count("users.info") != 7 {
		t.Errorf("IsAdmin after a failure = %v, %v (%d calls)", ok, err, srv.Count("users.info"))
	}
	var _ agent.AdminChecker = a
}

// Who the adapter says wrote: a person of another organisation, a guest
// of either kind, one whose event names no team, one Slack does not know
// and one who cannot be looked up are each told apart from a member, for
// messages, slash commands and clicks alike; the gate refuses the first
// four in open mode and takes no admin ID from them.
func TestWhoWrote(t *testing.T) {
	srv := fakeslack.New(t,
		fakeslack.WithUser(fakeslack.User{ID: "U0EXT", Name: "xavier", TeamID: "T0OTHER"}),
		fakeslack.WithUser(fakeslack.User{ID: "U0MULTI", Name: "gina", IsRestricted: true}),
		fakeslack.WithUser(fakeslack.User{ID: "U0SINGLE", Name: "sam", IsUltraRestricted: true}),
		fakeslack.WithUser(fakeslack.User{ID: "U0HIDDEN", Name: "hal", TeamID: "T0OTHER"}),
		fakeslack.WithUser(fakeslack.User{ID: "U0LATE", Name: "lee"}),
		fakeslack.WithAckTimeout(time.Second))
	a := newAdapter(t, srv, adapters.ModeFull)
	d := &submitter{}
	runAdapter(t, a, d)
	noTeam := func(ev fakeslack.Event) fakeslack.Event {
		for _, k := range []string{"team", "user_team", "source_team"} {
			delete(ev.Data, k)
		}
		return ev
	}
	for _, ev := range []fakeslack.Event{
		srv.Mention(fakeslack.General, "U0EXT", "hi from outside"),
		srv.Mention(fakeslack.General, fakeslack.Alice, "hi from inside"),
		srv.DirectMessage(fakeslack.Bob, "hi in private"),
		srv.DirectMessage("U0MULTI", "a multi-channel guest"),
		srv.Mention(fakeslack.General, "U0SINGLE", "a single-channel guest"),
		// Another organisation's person whose event names no team: their
		// own workspace comes from users.info.
		noTeam(srv.Mention(fakeslack.General, "U0HIDDEN", "no team fields")),
		// A person Slack does not know.
		noTeam(srv.Mention(fakeslack.General, "U0NOBODY", "who am I")),
	} {
		if _, ok := srv.WaitAck(srv.SendEvent(ev), wait); !ok {
			t.Fatalf("%q not acked", ev.Data["text"])
		}
	}
	got := d.all()
	if len(got) != 7 {
		t.Fatalf("submitted %+v", got)
	}
	for i, want := range []struct {
		name              string
		external, guest   bool
		private           bool
		team, displayName string
	}{
		{"another team's user", true, false, false, "T0OTHER", "xavier"},
		{"a member", false, false, false, srv.TeamID(), "alice"},
		{"a DM", false, false, true, srv.TeamID(), "bob"},
		{"a multi-channel guest", false, true, true, srv.TeamID(), "gina"},
		{"a single-channel guest", false, true, false, srv.TeamID(), "sam"},
		{"another team's user without team fields", true, false, false, "T0OTHER", "hal"},
		{"a person Slack does not know", true, false, false, "", "U0NOBODY"},
	} {
		u := got[i].User
		if u.External != want.external || u.Guest != want.guest || got[i].Private != want.private || u.Team != want.team || u.Name != want.displayName {
			t.Errorf("%s: %+v (private %v)", want.name, u, got[i].Private)
		}
	}

	// users.info failing is no answer: the event is not acked, and not
	// taken as from inside meanwhile; Slack sends it again, and then the
	// member is known.
	srv.FailNextStatus("users.info", 1, http.StatusInternalServerError)
	srv.SendEvent(noTeam(srv.Mention(fakeslack.General, "U0LATE", "slack is slow")))
	if !srv.WaitFor(wait, func() bool { return len(d.all()) == 8 }) {
		t.Fatalf("the event was not submitted on Slack's retry: %d messages", len(d.all()))
	}
	if late := d.all()[7]; late.User.External || late.User.Name != "lee" {
		t.Errorf("the retried message: %+v", late.User)
	}
	if n := srv.Count("users.info"); n != 9 {
		t.Errorf("users.info was called %d times, want 9 (one per person, one failed)", n)
	}

	// A thread reply by another team's user names their team.
	n := &normalizer{me: me}
	in, ok := n.inbound("T1", parse(t, `{"type":"message","channel_type":"channel","user":"U9","user_team":"T9","source_team":"T9","team":"T9","text":"and?","ts":"1700.9","thread_ts":"1700.1","channel":"C1"}`))
	if !ok || in.User.Team != "T9" || !n.foreign(in.User.Team, "T1") {
		t.Errorf("a reply from T9: %+v", in)
	}
	in, _ = n.inbound("T1", parse(t, `{"type":"message","channel_type":"channel","user":"U1","team":"T1","text":"and?","ts":"1700.9","thread_ts":"1700.1","channel":"C1"}`))
	if in.User.Team != "T1" || n.foreign(in.User.Team, "T1") || !n.foreign("", "T1") {
		t.Errorf("a reply from home: %+v", in)
	}
}

// A click and a slash command say who the person is as a message does: a
// guest is a guest, and a click whose payload names no team for a person
// of another organisation is not taken as from inside.
func TestWhoClickedAndCommanded(t *testing.T) {
	srv := fakeslack.New(t,
		fakeslack.WithUser(fakeslack.User{ID: "U0GUEST", Name: "gina", IsRestricted: true}),
		fakeslack.WithUser(fakeslack.User{ID: "U0EXT", Name: "xavier", TeamID: "T0OTHER"}))
	d := &submitter{}
	a := newAdapter(t, srv, adapters.ModeFull)
	runAdapter(t, a, d)
	_, _, q := ask(t, srv, a)
	for i, who := range []string{"U0GUEST", "U0EXT"} {
		ia, err := srv.Click(fakeslack.General, q.TS, who, "Approve")
		if err != nil {
			t.Fatal(err)
		}
		delete(ia.Payload.(map[string]any)["user"].(map[string]any), "team_id")
		if _, ok := srv.WaitAck(srv.SendInteractive(ia), wait); !ok {
			t.Fatal("the click was not acked")
		}
		if !srv.WaitFor(wait, func() bool { return len(d.decided()) == i+1 }) {
			t.Fatalf("click %d did not reach Decide", i)
		}
	}
	if u := d.decided()[0].User; !u.Guest || u.External || u.Name != "gina" {
		t.Errorf("a guest's click: %+v", u)
	}
	if u := d.decided()[1].User; !u.External || u.Team != "T0OTHER" {
		t.Errorf("another organisation's click without a team: %+v", u)
	}
	if _, ok := srv.WaitAck(srv.SendSlashCommand(srv.SlashCommand(fakeslack.General, "U0GUEST", "/firstmate", "status")), wait); !ok {
		t.Fatal("the command was not acked")
	}
	got := d.all()
	if len(got) != 1 || !got[0].User.Guest || got[0].User.External {
		t.Errorf("a guest's command: %+v", got)
	}
}

func TestValidIDs(t *testing.T) {
	for id, want := range map[string]bool{"C0GENERAL": true, "D123": true, "G1X": true, "U0ALICE": false, "c0general": false, "C0../x": false, "C": false, "": false} {
		if got := validID(id, "CDG"); got != want {
			t.Errorf("validID(%q, channels) = %v", id, got)
		}
	}
	for ts, want := range map[string]bool{"1700000000.000100": true, "1.2": true, "1700": false, ".1": false, "1.x": false, "": false} {
		if got := validTS(ts); got != want {
			t.Errorf("validTS(%q) = %v", ts, got)
		}
	}
}
