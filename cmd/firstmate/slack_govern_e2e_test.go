package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/firstmate/firstmate/agent/govern"
	"github.com/firstmate/firstmate/internal/testkit/fakellm"
	"github.com/firstmate/firstmate/internal/testkit/fakemcp"
	"github.com/firstmate/firstmate/internal/testkit/fakeslack"
)

// Admins in charge on Slack, end to end: the real binary, the fake Slack
// (Socket Mode and signed HTTP interactivity), the fake model and Redis.
// `firstmate admin` runs as a separate process against the same Redis
// prefix, and a second replica shares it too.

const (
	govSecret    = "govern-signing-secret"
	govRandom    = "C0RANDOM"    // a second public channel
	govCarol     = "U0CAROL"     // a member who is neither admin nor requester
	govErin      = "U0ERIN"      // a person of another organisation
	govElsewhere = "T0ELSEWHERE" // Erin's workspace
	govGeneral   = "slack:" + fakeslack.DefaultTeamID + ":" + fakeslack.General
	govAuditGen  = govGeneral + ":" // an audit entry's channel: SessionKey.Channel().String()
)

// slackGov is a firstmate serve on the fake Slack with a Redis prefix of
// the test's own; env is its environment, for `firstmate admin` and for a
// second replica.
type slackGov struct {
	*slackEnv
	env  []string
	data string
}

// startSlackGov starts serve with Socket Mode and the HTTP endpoints
// (signed with govSecret) on Redis, the fake workspace holding #random,
// Carol and Erin besides Alice and Bob. It skips without Redis.
func startSlackGov(t *testing.T, model func(*fakellm.Request) fakellm.Reply, extra ...string) *slackGov {
	t.Helper()
	redis := redisURL(t)
	sl := fakeslack.New(t, fakeslack.WithPingInterval(200*time.Millisecond), fakeslack.WithAckTimeout(2*time.Second),
		fakeslack.WithChannel(fakeslack.Channel{ID: govRandom, Name: "random"}),
		fakeslack.WithUser(fakeslack.User{ID: govCarol, Name: "carol", RealName: "Carol Member"}),
		fakeslack.WithUser(fakeslack.User{ID: govErin, Name: "erin", RealName: "Erin Elsewhere", TeamID: govElsewhere}))
	llm := fakellm.New(t, fakellm.WithHandler(model))
	g := &slackGov{slackEnv: &slackEnv{slack: sl, llm: llm, http: deadAddr(t)}, data: t.TempDir()}
	g.env = append([]string{
		"OPENAI_BASE_URL=" + llm.URL(), "FIRSTMATE_MODEL=fake-model", "FIRSTMATE_DATA_DIR=" + g.data,
		"SLACK_BOT_TOKEN=" + sl.BotToken(), "SLACK_APP_TOKEN=" + sl.AppToken(), "SLACK_API_URL=" + sl.APIURL(),
		"SLACK_SIGNING_SECRET=" + govSecret, "FIRSTMATE_HTTP_ADDR=" + g.http, "FIRSTMATE_LOG_LEVEL=debug",
		"REDIS_URL=" + redis, "FIRSTMATE_REDIS_PREFIX=" + redisPrefix(t, redis),
	}, extra...)
	g.srv = startServe(t, g.env)
	if !sl.WaitConnections(1, 20*time.Second) {
		t.Fatalf("firstmate did not open a Socket Mode connection\n%s", g.srv.logs())
	}
	waitHTTP(t, "http://"+g.http+"/healthz")
	return g
}

// govModel writes the file a message names ("write NAME.txt"), then
// answers with what the tool said; any other message gets a plain answer.
func govModel(req *fakellm.Request) fakellm.Reply {
	last := req.LastMessage()
	if last.Role == "tool" {
		return fakellm.Text("tool said: " + last.Text())
	}
	if m := govWriteRE.FindStringSubmatch(last.Text()); m != nil {
		return fakellm.Calls(fakellm.Call("write", map[string]string{"path": m[1], "content": "written for " + m[1] + "\n"}))
	}
	return fakellm.Text("answer to: " + last.Text())
}

var govWriteRE = regexp.MustCompile(`write (\S+\.txt)`)

// admin runs `firstmate admin args…` as its own process against g's store.
func (g *slackGov) admin(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, code := runBinary(t, g.env, "", append([]string{"admin"}, args...)...)
	if code != 0 {
		t.Fatalf("firstmate admin %v: exit %d\n%s%s", args, code, out, errOut)
	}
	return out
}

// audit returns the audit log through `firstmate admin audit --json`.
func (g *slackGov) audit(t *testing.T) []govern.AuditEntry {
	t.Helper()
	var entries []govern.AuditEntry
	for line := range strings.Lines(g.admin(t, "audit", "--json")) {
		var e govern.AuditEntry
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		entries = append(entries, e)
	}
	return entries
}

// govAudits returns the entries of action whose outcome is outcome (any
// outcome when empty).
func govAudits(entries []govern.AuditEntry, action, outcome string) []govern.AuditEntry {
	var out []govern.AuditEntry
	for _, e := range entries {
		if e.Action == action && (outcome == "" || e.Outcome == outcome) {
			out = append(out, e)
		}
	}
	return out
}

// wantAudit checks that action (with outcome) was logged n times, each in
// channel, by user (a suffix: a policy change by chat is "slack:U…"), with
// tool when one is given.
func wantAudit(t *testing.T, entries []govern.AuditEntry, action, outcome string, n int, channel, user, tool string) []govern.AuditEntry {
	t.Helper()
	got := govAudits(entries, action, outcome)
	if len(got) != n {
		t.Errorf("audit: %d %s/%s entries, want %d: %+v", len(got), action, outcome, n, got)
		return got
	}
	for _, e := range got {
		// Every entry names its user with the platform, as the command line's do.
		if e.Channel != channel || !strings.HasPrefix(e.User, "slack:") || !strings.HasSuffix(e.User, user) || (tool != "" && e.Tool != tool) || e.Platform != "slack" {
			t.Errorf("audit %s/%s: %+v, want channel %s, user %s, tool %q", action, outcome, e, channel, user, tool)
		}
	}
	return got
}

// ephemerals returns the ephemeral messages shown to user whose text
// contains text.
func (g *slackGov) ephemerals(user, text string) []fakeslack.Ephemeral {
	var out []fakeslack.Ephemeral
	for _, e := range g.slack.Ephemerals() {
		if e.User == user && strings.Contains(e.Text, text) {
			out = append(out, e)
		}
	}
	return out
}

// waitEphemeral waits until user has been shown n ephemeral messages
// containing text, and returns the last.
func (g *slackGov) waitEphemeral(t *testing.T, user, text string, n int) fakeslack.Ephemeral {
	t.Helper()
	if !g.slack.WaitFor(20*time.Second, func() bool { return len(g.ephemerals(user, text)) >= n }) {
		t.Fatalf("%s was shown %d ephemeral messages with %q, want %d; all: %+v\n%s", user, len(g.ephemerals(user, text)), text, n, g.slack.Ephemerals(), g.srv.logs())
	}
	got := g.ephemerals(user, text)
	return got[len(got)-1]
}

// slash types /firstmate text as user in channel over Socket Mode and
// waits for the ack, whose payload it returns.
func (g *slackGov) slash(t *testing.T, channel, user, text string) json.RawMessage {
	t.Helper()
	id := g.slack.SendSlashCommand(g.slack.SlashCommand(channel, user, "/firstmate", text))
	ack, ok := g.slack.WaitAck(id, 20*time.Second)
	if !ok {
		t.Fatalf("/firstmate %s was not acked\n%s", text, g.srv.logs())
	}
	return ack.Payload
}

// interact delivers an interaction over Socket Mode and returns the ack's
// payload: the app's answer.
func (g *slackGov) interact(t *testing.T, payload fakeslack.Interaction) json.RawMessage {
	t.Helper()
	ack, ok := g.slack.WaitAck(g.slack.SendInteractive(payload), 20*time.Second)
	if !ok {
		t.Fatalf("the interaction was not acked\n%s", g.srv.logs())
	}
	return ack.Payload
}

// waitView waits until n modals have been opened for user, and returns
// the n-th.
func (g *slackGov) waitView(t *testing.T, user string, n int) fakeslack.View {
	t.Helper()
	var views []fakeslack.View
	ok := g.slack.WaitFor(20*time.Second, func() bool {
		views = nil
		for _, v := range g.slack.Views() {
			if v.User == user {
				views = append(views, v)
			}
		}
		return len(views) >= n
	})
	if !ok {
		t.Fatalf("no modal was opened for %s (views %+v)\n%s", user, g.slack.Views(), g.srv.logs())
	}
	return views[n-1]
}

// mention has user mention the bot in channel and returns the event; the
// envelope is acked (so the message was recorded, or refused) on return.
func (g *slackGov) mention(t *testing.T, channel, user, text string) fakeslack.Event {
	t.Helper()
	ev := g.slack.Mention(channel, user, text)
	if _, ok := g.slack.WaitAck(g.slack.SendEvent(ev), 20*time.Second); !ok {
		t.Fatalf("the mention %q was not acked\n%s", text, g.srv.logs())
	}
	return ev
}

// waitMessage waits until a bot message in the thread satisfies cond.
func (g *slackGov) waitMessage(t *testing.T, channel, thread, what string, cond func(fakeslack.Message) bool) fakeslack.Message {
	t.Helper()
	var found fakeslack.Message
	ok := g.slack.WaitFor(20*time.Second, func() bool {
		for _, m := range botReplies(g.slack.Thread(channel, thread)) {
			if cond(m) {
				found = m
				return true
			}
		}
		return false
	})
	if !ok {
		t.Fatalf("no %s in thread %s/%s: %+v\n%s", what, channel, thread, g.slack.Thread(channel, thread), g.srv.logs())
	}
	return found
}

// waitQuestion waits for the approval question in a thread: the message
// with the three buttons.
func (g *slackGov) waitQuestion(t *testing.T, channel, thread string) fakeslack.Message {
	t.Helper()
	q := g.waitMessage(t, channel, thread, "approval question", func(m fakeslack.Message) bool { return len(m.Buttons()) > 0 })
	var labels []string
	for _, b := range q.Buttons() {
		labels = append(labels, b.Text)
	}
	if !slices.Equal(labels, []string{"Approve", "Deny", "Always allow here"}) {
		t.Fatalf("the question's buttons are %q", labels)
	}
	return q
}

// waitDecided waits until the question at ts has been edited to its
// outcome, without buttons, and returns it.
func (g *slackGov) waitDecided(t *testing.T, channel, ts, outcome string) fakeslack.Message {
	t.Helper()
	var m fakeslack.Message
	ok := g.slack.WaitFor(20*time.Second, func() bool {
		m, _ = g.slack.Message(channel, ts)
		return m.Edits > 0 && len(m.Buttons()) == 0 && strings.Contains(m.Text, outcome)
	})
	if !ok {
		t.Fatalf("the question was not edited to %q without buttons: %+v\n%s", outcome, m, g.srv.logs())
	}
	return m
}

// workspaceFile returns the content of a file of a channel's workspace
// under dataDir, and whether there is one.
func workspaceFile(t *testing.T, dataDir, name string) (string, bool) {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dataDir, "workspaces", "*", name))
	if err != nil || len(paths) > 1 {
		t.Fatalf("%s in workspaces: %v %v", name, paths, err)
	}
	if len(paths) == 0 {
		return "", false
	}
	b, err := os.ReadFile(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	return string(b), true
}

// forgedClick is a block_actions payload Slack never sent: user "clicks"
// a button of ours carrying value on the message ts in channel, although
// no such button was shown to them.
func forgedClick(sl *fakeslack.Server, channel, ts, user, value string) fakeslack.Interaction {
	return fakeslack.Interaction{Payload: map[string]any{
		"type": "block_actions", "api_app_id": sl.AppID(), "token": "fake-verification-token",
		"user":       map[string]any{"id": user, "username": strings.ToLower(user), "team_id": sl.TeamID()},
		"team":       map[string]any{"id": sl.TeamID(), "domain": "fake"},
		"container":  map[string]any{"type": "message", "message_ts": ts, "channel_id": channel, "is_ephemeral": false},
		"channel":    map[string]any{"id": channel},
		"trigger_id": "1700000000.1.forged", "state": map[string]any{"values": map[string]any{}},
		"actions": []any{map[string]any{
			"type": "button", "action_id": "fm_0", "block_id": "fm_row_0", "value": value,
			"text": map[string]any{"type": "plain_text", "text": "forged"}, "action_ts": "1700000000.000200",
		}},
	}}
}

// policyRules returns the lines of `admin policy show` that list the
// channel's own rules; empty when it has none.
func policyRules(t *testing.T, show string) []string {
	t.Helper()
	if strings.Contains(show, "No rules are set for this channel") {
		return nil
	}
	_, rules, ok := strings.Cut(show, "Rules set for this channel:\n")
	if !ok {
		t.Fatalf("policy show:\n%s", show)
	}
	var out []string
	for line := range strings.Lines(rules) {
		if strings.HasPrefix(line, "  ") {
			out = append(out, strings.Fields(line)[0])
		}
	}
	return out
}

// TestSlackGovernPolicyByAdminsOnly: only an admin changes a channel's
// tools, whatever a member sends (a slash command, a view submission for
// the admin's modal, a crafted click, an unsigned request); the admin's
// modal saves exec=deny, and the next turn there is offered no exec tools
// while another channel's still is. Admins are the workspace's
// (SLACK_WORKSPACE_ADMINS: Alice is one, Bob is not).
func TestSlackGovernPolicyByAdminsOnly(t *testing.T) {
	t.Parallel()
	g := startSlackGov(t, govModel, "SLACK_WORKSPACE_ADMINS=true")
	sl := g.slack
	unchanged := func(when string) {
		t.Helper()
		if rules := policyRules(t, g.admin(t, "policy", "show", govGeneral)); len(rules) != 0 {
			t.Fatalf("%s: the channel has rules %v", when, rules)
		}
	}

	// A member's rule change is refused, and said so to them alone.
	g.slash(t, fakeslack.General, fakeslack.Bob, "tools write=deny")
	g.waitEphemeral(t, fakeslack.Bob, "Only an admin can change this channel's tools.", 1)
	unchanged("after a member's /firstmate tools write=deny")

	// A member's tools modal only shows the policy.
	g.slash(t, fakeslack.General, fakeslack.Bob, "tools")
	bobView := g.waitView(t, fakeslack.Bob, 1)
	if bobView.Submit != "" || len(bobView.Selects()) != 0 || !strings.Contains(string(bobView.Blocks), "Only an admin can change it.") {
		t.Errorf("a member's modal: submit %q, %d selects, blocks %s", bobView.Submit, len(bobView.Selects()), bobView.Blocks)
	}
	if _, err := sl.SubmitView(bobView.ID, fakeslack.Bob, nil); err == nil {
		t.Error("a member's modal can be submitted")
	}

	// The admin's modal has the selects; the member submits it in the
	// admin's stead: refused in the modal.
	g.slash(t, fakeslack.General, fakeslack.Alice, "tools")
	aliceView := g.waitView(t, fakeslack.Alice, 1)
	if aliceView.Submit != "Save" || !slices.ContainsFunc(aliceView.Selects(), func(s fakeslack.Select) bool { return s.BlockID == "g:exec" && s.Initial == "allow" }) {
		t.Fatalf("the admin's modal: submit %q, selects %+v", aliceView.Submit, aliceView.Selects())
	}
	forged, err := sl.SubmitView(aliceView.ID, fakeslack.Bob, map[string]string{"g:exec": "allow", "g:write": "deny"})
	if err != nil {
		t.Fatal(err)
	}
	var answer struct {
		ResponseAction string            `json:"response_action"`
		Errors         map[string]string `json:"errors"`
	}
	if raw := g.interact(t, forged); json.Unmarshal(raw, &answer) != nil || answer.ResponseAction != "errors" ||
		!strings.Contains(answer.Errors["g:write"], "Only an admin") {
		t.Fatalf("the forged submission was answered %s", raw)
	}
	unchanged("after a member submitted the admin's modal")

	// The admin saves exec=deny.
	mine, err := sl.SubmitView(aliceView.ID, fakeslack.Alice, map[string]string{"g:exec": "deny"})
	if err != nil {
		t.Fatal(err)
	}
	if raw := g.interact(t, mine); strings.Contains(string(raw), "errors") {
		t.Fatalf("the admin's submission was refused: %s", raw)
	}
	g.waitEphemeral(t, fakeslack.Alice, "Saved this channel's tools: exec (group) deny.", 1)
	saved := g.admin(t, "policy", "show", govGeneral)
	if rules := policyRules(t, saved); !slices.Equal(rules, []string{"group:exec=deny"}) || !strings.Contains(saved, "stored version 1") {
		t.Fatalf("after the admin's modal:\n%s", saved)
	}

	// A member's crafted click with the policy screen's data, at the
	// current version, over signed HTTP: refused.
	interactivity := "http://" + g.http + "/slack/interactivity"
	d, err := sl.DeliverHTTP(t.Context(), interactivity, forgedClick(sl, fakeslack.General, "1700000000.000100", fakeslack.Bob, "fm:pol:1:allow:group:exec"), govSecret)
	if err != nil || d.Status != http.StatusOK {
		t.Fatalf("signed interaction: %+v %v", d, err)
	}
	g.waitEphemeral(t, fakeslack.Bob, "Only an admin can change this channel's tools.", 2)
	// The same click as the admin, unsigned or badly signed: 401.
	asAlice := forgedClick(sl, fakeslack.General, "1700000000.000100", fakeslack.Alice, "fm:pol:1:allow:group:exec")
	raw, _ := json.Marshal(asAlice.Payload)
	resp, err := http.Post(interactivity, "application/x-www-form-urlencoded", strings.NewReader(url.Values{"payload": {string(raw)}}.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("an unsigned interaction: HTTP %d, want 401", resp.StatusCode)
	}
	for _, bad := range []fakeslack.DeliverOption{fakeslack.BadSignature(), fakeslack.StaleTimestamp()} {
		if d, err := sl.DeliverHTTP(t.Context(), interactivity, asAlice, govSecret, bad); err != nil || d.Status != http.StatusUnauthorized {
			t.Errorf("a badly signed interaction: %+v %v, want 401", d, err)
		}
	}
	time.Sleep(300 * time.Millisecond) // room for a wrong change to land
	if after := g.admin(t, "policy", "show", govGeneral); !slices.Equal(policyRules(t, after), []string{"group:exec=deny"}) || !strings.Contains(after, "stored version 1") {
		t.Fatalf("after the crafted and unsigned clicks:\n%s", after)
	}

	// The next turn here is offered no exec tool; #random's still is.
	exec := []string{"shell", "start", "jobs", "stop"}
	ev := g.mention(t, fakeslack.General, fakeslack.Bob, "what can you do here?")
	g.waitReplies(t, fakeslack.General, ev.TS(), 1)
	reqs := g.llm.Requests()
	here := reqs[len(reqs)-1].ToolNames()
	if slices.ContainsFunc(here, func(n string) bool { return slices.Contains(exec, n) }) || !slices.Contains(here, "write") || !slices.Contains(here, "ls") {
		t.Errorf("#general after exec=deny was offered %v", here)
	}
	ev = g.mention(t, govRandom, fakeslack.Bob, "and here?")
	g.waitReplies(t, govRandom, ev.TS(), 1)
	reqs = g.llm.Requests()
	there := reqs[len(reqs)-1].ToolNames()
	if !strings.Contains(reqs[len(reqs)-1].LastMessage().Text(), "and here?") {
		t.Fatalf("the last model call is not #random's turn: %q", reqs[len(reqs)-1].LastMessage().Text())
	}
	t.Logf("offered in #general: %v; in #random: %v", here, there)
	switch {
	case !slices.Contains(there, "shell") && strings.Contains(g.srv.logs(), "the shell is not offered"):
		t.Logf("this host has no sandbox, so no channel is offered the shell; #random got %v", there)
	default:
		for _, n := range exec {
			if !slices.Contains(there, n) {
				t.Errorf("#random was not offered %s: %v (the deny leaked)", n, there)
			}
		}
	}

	t.Run("audit", func(t *testing.T) {
		entries := g.audit(t)
		wantAudit(t, entries, govern.AuditPolicyRefused, "not an admin", 3, govAuditGen, fakeslack.Bob, "")
		set := wantAudit(t, entries, govern.AuditPolicySet, "ok", 1, govAuditGen, fakeslack.Alice, "")
		if len(set) == 1 && set[0].Detail != "group:exec=deny" {
			t.Errorf("policy.set detail %q", set[0].Detail)
		}
		if n := len(govAudits(entries, govern.AuditToolCall, "")); n != 0 {
			t.Errorf("%d tool calls audited; none ran", n)
		}
	})
}

// TestSlackGovernApprovalButtons: write is ask (the config file); a turn
// that writes asks in its thread with buttons. Another member's click and
// a crafted "always" are refused and the turn keeps waiting; the
// requester's Approve runs the tool and the question shows the outcome; a
// second click changes nothing; Deny gives the model a denial; an admin's
// "Always allow here" stores write=allow for the channel.
func TestSlackGovernApprovalButtons(t *testing.T) {
	t.Parallel()
	cfg := writeFile(t, "tools:\n  ask: [write]\n")
	g := startSlackGov(t, govModel, "FIRSTMATE_CONFIG="+cfg, "FIRSTMATE_ADMINS=slack:"+fakeslack.Alice)
	sl := g.slack

	// Approve.
	ev := g.mention(t, fakeslack.General, fakeslack.Bob, "please write approved.txt")
	q := g.waitQuestion(t, fakeslack.General, ev.TS())
	if !strings.Contains(q.Text, "needs approval to run write") || !strings.Contains(q.Text, "approved.txt") ||
		!(strings.Contains(q.Text, "bob") || strings.Contains(q.Text, fakeslack.Bob)) {
		t.Errorf("the question says %q; want the requester and the tool", q.Text)
	}
	t.Logf("the question: %q", q.Text)
	id := strings.TrimPrefix(q.Buttons()[0].Value, "fm:ok:")

	other, err := sl.Click(fakeslack.General, q.TS, govCarol, "Approve")
	if err != nil {
		t.Fatal(err)
	}
	g.interact(t, other)
	g.waitEphemeral(t, govCarol, "who asked, or an admin can decide this", 1)
	g.interact(t, forgedClick(sl, fakeslack.General, q.TS, govCarol, "fm:all:"+id))
	g.waitEphemeral(t, govCarol, "Only an admin can allow write here for good.", 1)
	time.Sleep(300 * time.Millisecond)
	if m, _ := sl.Message(fakeslack.General, q.TS); len(m.Buttons()) != 3 || m.Edits != 0 {
		t.Errorf("after refused clicks the question is %+v", m)
	}
	if _, ok := workspaceFile(t, g.data, "approved.txt"); ok {
		t.Fatal("the tool ran without a decision")
	}
	if r := sl.Reactions(fakeslack.General, ev.TS()); slices.Contains(r, "white_check_mark") || slices.Contains(r, "x") {
		t.Fatalf("the message is marked answered while its call waits: reactions %v", r)
	}
	if rules := policyRules(t, g.admin(t, "policy", "show", govGeneral)); len(rules) != 0 {
		t.Fatalf("a member's crafted always-allow stored %v", rules)
	}

	first, err := sl.Click(fakeslack.General, q.TS, fakeslack.Bob, "Approve")
	if err != nil {
		t.Fatal(err)
	}
	again, _ := sl.Click(fakeslack.General, q.TS, fakeslack.Bob, "Approve") // a double click
	g.interact(t, first)
	decided := g.waitDecided(t, fakeslack.General, q.TS, "Approved by")
	t.Logf("the question, decided: %q", decided.Text)
	replies := g.waitReplies(t, fakeslack.General, ev.TS(), 2)
	if last := replies[len(replies)-1]; !strings.Contains(last.Text, "tool said:") || strings.Contains(last.Text, "error") {
		t.Errorf("the answer %q", last.Text)
	}
	if got, ok := workspaceFile(t, g.data, "approved.txt"); !ok || got != "written for approved.txt\n" {
		t.Errorf("approved.txt = %q, %v", got, ok)
	}
	g.interact(t, again)
	g.waitEphemeral(t, fakeslack.Bob, "Approved by", 2) // the first click's notice, then the second's
	time.Sleep(300 * time.Millisecond)
	if m, _ := sl.Message(fakeslack.General, q.TS); m.Edits != decided.Edits || m.Text != decided.Text {
		t.Errorf("the second click changed the question: %+v, was %+v", m, decided)
	}

	// Deny, in a new turn: the model is told, and answers.
	ev = g.mention(t, fakeslack.General, fakeslack.Bob, "now write denied.txt")
	q = g.waitQuestion(t, fakeslack.General, ev.TS())
	deny, err := sl.Click(fakeslack.General, q.TS, fakeslack.Bob, "Deny")
	if err != nil {
		t.Fatal(err)
	}
	g.interact(t, deny)
	g.waitDecided(t, fakeslack.General, q.TS, "Denied by")
	replies = g.waitReplies(t, fakeslack.General, ev.TS(), 2)
	if last := replies[len(replies)-1]; !strings.Contains(last.Text, "denied") {
		t.Errorf("the answer after a denial %q", last.Text)
	}
	reqs := g.llm.Requests()
	if res := reqs[len(reqs)-1].LastMessage(); res.Role != "user" || !strings.Contains(res.Text(), "denied the write call") {
		t.Errorf("the model got %s %q after the denial", res.Role, res.Text())
	}
	if _, ok := workspaceFile(t, g.data, "denied.txt"); ok {
		t.Error("denied.txt was written")
	}

	// An admin's "Always allow here": stored for the channel.
	ev = g.mention(t, fakeslack.General, fakeslack.Bob, "write always.txt")
	q = g.waitQuestion(t, fakeslack.General, ev.TS())
	always, err := sl.Click(fakeslack.General, q.TS, fakeslack.Alice, "Always allow here")
	if err != nil {
		t.Fatal(err)
	}
	g.interact(t, always)
	g.waitDecided(t, fakeslack.General, q.TS, "write is allowed here from now on")
	g.waitReplies(t, fakeslack.General, ev.TS(), 2)
	if _, ok := workspaceFile(t, g.data, "always.txt"); !ok {
		t.Error("always.txt was not written")
	}
	show := g.admin(t, "policy", "show", govGeneral)
	if rules := policyRules(t, show); !slices.Equal(rules, []string{"write=allow"}) || !strings.Contains(show, "by slack:"+fakeslack.Alice) {
		t.Fatalf("after always allow:\n%s", show)
	}
	// The next turn writes without asking.
	ev = g.mention(t, fakeslack.General, fakeslack.Bob, "write later.txt")
	replies = g.waitReplies(t, fakeslack.General, ev.TS(), 1)
	for _, m := range replies {
		if len(m.Buttons()) > 0 {
			t.Errorf("asked again after always allow: %q", m.Text)
		}
	}
	if _, ok := workspaceFile(t, g.data, "later.txt"); !ok {
		t.Error("later.txt was not written")
	}

	t.Run("audit", func(t *testing.T) {
		entries := g.audit(t)
		wantAudit(t, entries, govern.AuditApprovalAsked, "pending", 3, govAuditGen, fakeslack.Bob, "write")
		wantAudit(t, entries, govern.AuditApprovalRefused, "refused", 2, govAuditGen, govCarol, "write")
		byBob := wantAudit(t, entries, govern.AuditApprovalDecided, "approved", 2, govAuditGen, "", "write")
		if len(byBob) == 2 && (byBob[0].User != "slack:"+fakeslack.Bob || byBob[1].User != "slack:"+fakeslack.Alice || !strings.Contains(byBob[1].Detail, "always allow here")) {
			t.Errorf("approvals decided: %+v", byBob)
		}
		wantAudit(t, entries, govern.AuditApprovalDecided, "denied", 1, govAuditGen, fakeslack.Bob, "write")
		wantAudit(t, entries, govern.AuditToolCall, "ok", 3, govAuditGen, fakeslack.Bob, "write")
		wantAudit(t, entries, govern.AuditPolicySet, "ok", 1, govAuditGen, fakeslack.Alice, "")
	})
}

// TestSlackGovernApprovalOnAnotherReplica: the turn that asks runs on a
// replica that runs Socket Mode; the click is delivered over HTTP to a
// second replica on the same Redis prefix, and the decision resumes the
// session, on whichever replica takes it, once.
func TestSlackGovernApprovalOnAnotherReplica(t *testing.T) {
	t.Parallel()
	g := startSlackGov(t, govModel, "FIRSTMATE_ADMINS=slack:"+fakeslack.Alice)
	sl := g.slack

	// An admin puts write in ask mode in chat.
	g.slash(t, fakeslack.General, fakeslack.Alice, "tools write=ask")
	g.waitEphemeral(t, fakeslack.Alice, "Saved.", 1)

	ev := g.mention(t, fakeslack.General, fakeslack.Bob, "write replica.txt")
	q := g.waitQuestion(t, fakeslack.General, ev.TS())

	// The second replica: HTTP only, its own address and data dir.
	second := deadAddr(t)
	secondData := t.TempDir()
	var env []string
	for _, kv := range g.env {
		switch {
		case strings.HasPrefix(kv, "SLACK_APP_TOKEN="), strings.HasPrefix(kv, "FIRSTMATE_HTTP_ADDR="), strings.HasPrefix(kv, "FIRSTMATE_DATA_DIR="):
		default:
			env = append(env, kv)
		}
	}
	replica := startServe(t, append(env, "FIRSTMATE_HTTP_ADDR="+second, "FIRSTMATE_DATA_DIR="+secondData))
	waitHTTP(t, "http://"+second+"/healthz")

	click, err := sl.Click(fakeslack.General, q.TS, fakeslack.Bob, "Approve")
	if err != nil {
		t.Fatal(err)
	}
	d, err := sl.DeliverHTTP(t.Context(), "http://"+second+"/slack/interactivity", click, govSecret)
	if err != nil || d.Status != http.StatusOK {
		t.Fatalf("the click to the second replica: %+v %v\n%s", d, err, replica.logs())
	}
	g.waitEphemeral(t, fakeslack.Bob, "Approved by", 1)
	g.waitDecided(t, fakeslack.General, q.TS, "Approved by")
	replies := g.waitReplies(t, fakeslack.General, ev.TS(), 2)
	if last := replies[len(replies)-1]; !strings.Contains(last.Text, "tool said:") || strings.Contains(last.Text, "error") {
		t.Errorf("the answer %q\nfirst replica:\n%s\nsecond replica:\n%s", last.Text, g.srv.logs(), replica.logs())
	}
	_, first := workspaceFile(t, g.data, "replica.txt")
	_, other := workspaceFile(t, secondData, "replica.txt")
	if first == other {
		t.Errorf("replica.txt in the first replica's workspace: %v, in the second's: %v; want one of them", first, other)
	}
	for _, env := range sl.Envelopes() {
		if env.Type == "interactive" {
			t.Errorf("an interaction went over Socket Mode: %s", env.Payload)
		}
	}

	t.Run("audit", func(t *testing.T) {
		entries := g.audit(t)
		wantAudit(t, entries, govern.AuditPolicySet, "ok", 1, govAuditGen, fakeslack.Alice, "")
		wantAudit(t, entries, govern.AuditApprovalAsked, "pending", 1, govAuditGen, fakeslack.Bob, "write")
		wantAudit(t, entries, govern.AuditApprovalDecided, "approved", 1, govAuditGen, fakeslack.Bob, "write")
		wantAudit(t, entries, govern.AuditToolCall, "ok", 1, govAuditGen, fakeslack.Bob, "write")
	})
}

// TestSlackGovernExternalUsers: a person of another organisation in a
// shared channel is told once that they are not allowed, however often
// they write, and never reaches the model; allowed by SLACK_ALLOWED_USERS,
// they are answered.
func TestSlackGovernExternalUsers(t *testing.T) {
	t.Parallel()
	const refusal = "Sorry, I only answer people an admin has allowed"
	refusals := func(g *slackGov) []fakeslack.Message {
		var out []fakeslack.Message
		for _, m := range g.slack.Messages(fakeslack.General) {
			if m.BotID != "" && strings.Contains(m.Text, refusal) {
				out = append(out, m)
			}
		}
		return out
	}
	erinTexts := []string{"hello from elsewhere", "anyone there?", "please write erin.txt", "help"}

	t.Run("refused", func(t *testing.T) {
		g := startSlackGov(t, govModel)
		first := g.mention(t, fakeslack.General, govErin, erinTexts[0])
		for _, text := range erinTexts[1:] {
			g.mention(t, fakeslack.General, govErin, text)
		}
		// and a reply in the thread of the first
		g.slack.SendEvent(g.slack.Mention(fakeslack.General, govErin, "still nothing?").InThread(first.TS()))
		if !g.slack.WaitFor(20*time.Second, func() bool { return len(refusals(g)) > 0 }) {
			t.Fatalf("Erin was not told\n%s", g.srv.logs())
		}
		// A member's mention, sent after, is answered: what Erin sent
		// has been handled by then.
		bob := g.mention(t, fakeslack.General, fakeslack.Bob, "hi from bob")
		g.waitReplies(t, fakeslack.General, bob.TS(), 1)
		time.Sleep(500 * time.Millisecond) // room for a second refusal to show up
		told := refusals(g)
		if len(told) != 1 {
			t.Fatalf("Erin was told %d times: %+v", len(told), told)
		}
		if told[0].ThreadTS != first.TS() || !strings.Contains(told[0].Text, "people from outside this workspace") ||
			!strings.Contains(told[0].Text, "firstmate admin access allow slack user "+govErin) {
			t.Errorf("the refusal: %+v", told[0])
		}
		for _, req := range g.llm.Requests() {
			for _, m := range req.Messages {
				for _, text := range append(erinTexts, "still nothing?") {
					if m.Role == "user" && strings.Contains(m.Text(), text) {
						t.Errorf("Erin's %q reached the model", text)
					}
				}
			}
		}
		if n := len(g.llm.Requests()); n != 1 {
			t.Errorf("%d model calls, want 1 (Bob's)", n)
		}
		for _, m := range g.slack.Messages(fakeslack.General) {
			if m.BotID != "" && strings.Contains(m.Text, "Commands (send the word alone)") {
				t.Errorf("Erin's help command was answered: %q", m.Text)
			}
		}
		if r := g.slack.Reactions(fakeslack.General, first.TS()); len(r) != 0 {
			t.Errorf("reactions on Erin's message: %v", r)
		}
		t.Run("audit", func(t *testing.T) {
			refused := wantAudit(t, g.audit(t), govern.AuditAccessRefused, "told", 1, govAuditGen, govErin, "")
			if len(refused) == 1 && refused[0].Detail != "open" {
				t.Errorf("access.refused detail %q", refused[0].Detail)
			}
		})
	})

	t.Run("allowed", func(t *testing.T) {
		g := startSlackGov(t, govModel, "SLACK_ALLOWED_USERS="+govErin)
		ev := g.mention(t, fakeslack.General, govErin, erinTexts[0])
		replies := g.waitReplies(t, fakeslack.General, ev.TS(), 1)
		if last := replies[len(replies)-1]; !strings.Contains(last.Text, "answer to:") || !strings.Contains(last.Text, erinTexts[0]) {
			t.Errorf("Erin was answered %q", last.Text)
		}
		if len(refusals(g)) != 0 {
			t.Errorf("an allowed person was refused: %+v", refusals(g))
		}
		if n := len(govAudits(g.audit(t), govern.AuditAccessRefused, "")); n != 0 {
			t.Errorf("%d access.refused entries for an allowed person", n)
		}
	})
}

// TestSlackGovernSlashCommandsRespectAccess: /firstmate is talking to the
// bot too, so who may not talk to it gets no answer that way either: a
// person of another organisation in open mode, or a member nobody allowed
// in allowlist mode, is refused (once) instead of answered, and is shown
// no tools modal.
func TestSlackGovernSlashCommandsRespectAccess(t *testing.T) {
	t.Parallel()
	// refusedBySlash runs /firstmate usage, status and tools as user and
	// checks that none was answered.
	refusedBySlash := func(t *testing.T, g *slackGov, user string) {
		t.Helper()
		g.slash(t, fakeslack.General, user, "usage")
		g.waitEphemeral(t, user, "", 1) // an answer or a refusal
		g.slash(t, fakeslack.General, user, "status")
		g.slash(t, fakeslack.General, user, "tools")
		time.Sleep(time.Second) // room for an answer or a modal to show up
		for _, e := range g.ephemerals(user, "") {
			if !strings.Contains(e.Text, "Sorry, I only answer people an admin has allowed") {
				t.Errorf("%s, who may not talk to the bot, was answered: %q", user, e.Text)
			}
		}
		if n := len(g.ephemerals(user, "Sorry, I only answer people")); n != 1 {
			t.Errorf("%s was told %d times that they are not allowed, want once", user, n)
		}
		for _, v := range g.slack.Views() {
			if v.User == user {
				t.Errorf("%s, who may not talk to the bot, was shown the tools modal: %s", user, v.Blocks)
			}
		}
		wantAudit(t, g.audit(t), govern.AuditAccessRefused, "told", 1, govAuditGen, user, "")
	}
	t.Run("another organisation", func(t *testing.T) {
		refusedBySlash(t, startSlackGov(t, govModel), govErin)
	})
	t.Run("allowlist", func(t *testing.T) {
		refusedBySlash(t, startSlackGov(t, govModel, "SLACK_ACCESS=allowlist", "SLACK_ALLOWED_USERS="+fakeslack.Alice), fakeslack.Bob)
	})
}

// govLongSkill is a skill name of 61 bytes: its rule does not fit in
// Telegram's callback data beside the rest of a button's.
const govLongSkill = "the-long-release-checklist-skill-for-the-weekly-deploy-trains"

// screensConfig is a config file with the skills deploy and govLongSkill
// and the MCP server notes (the fake MCP server over HTTP on loopback).
func screensConfig(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{"deploy", govLongSkill} {
		if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		md := "---\nname: " + name + "\ndescription: The " + name + " skill.\n---\nDo it.\n"
		if err := os.WriteFile(filepath.Join(dir, name, "SKILL.md"), []byte(md), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	notes := httptest.NewServer(fakemcp.Handler(fakemcp.Options{}))
	t.Cleanup(notes.Close)
	return writeFile(t, "skills:\n  dirs: ["+dir+"]\nweb:\n  fetch:\n    allow_networks: [127.0.0.0/8]\nmcp:\n  servers:\n    notes:\n      url: "+notes.URL+"/\n")
}

// TestSlackGovernPolicyScreenSkillsAndMCP: the tools modal lists the
// skills and the MCP server; an admin's change of a skill and of the
// server is stored, a member's is refused and stores nothing.
func TestSlackGovernPolicyScreenSkillsAndMCP(t *testing.T) {
	t.Parallel()
	g := startSlackGov(t, govModel, "FIRSTMATE_CONFIG="+screensConfig(t), "FIRSTMATE_ADMINS=slack:"+fakeslack.Alice)
	if !g.slack.WaitFor(20*time.Second, func() bool { return strings.Contains(g.srv.logs(), "MCP server tools listed") }) {
		t.Fatalf("the MCP server did not list its tools\n%s", g.srv.logs())
	}
	long := "skill:" + govLongSkill
	g.slash(t, fakeslack.General, fakeslack.Alice, "tools")
	v := g.waitView(t, fakeslack.Alice, 1)
	initial := map[string]string{}
	for _, s := range v.Selects() {
		initial[s.BlockID] = s.Initial
	}
	for id, want := range map[string]string{"g:skills": "allow", "t:skill:deploy": "inherit", "t:" + long: "inherit", "g:mcp:notes": "allow", "t:notes__echo": "inherit"} {
		if initial[id] != want {
			t.Errorf("select %s starts at %q, want %q (selects %v)", id, initial[id], want, initial)
		}
	}
	forged, err := g.slack.SubmitView(v.ID, fakeslack.Bob, map[string]string{"t:skill:deploy": "deny"})
	if err != nil {
		t.Fatal(err)
	}
	if raw := g.interact(t, forged); !strings.Contains(string(raw), "Only an admin") {
		t.Fatalf("a member's submission was answered %s", raw)
	}
	if rules := policyRules(t, g.admin(t, "policy", "show", govGeneral)); len(rules) != 0 {
		t.Fatalf("a member's submission stored %v", rules)
	}
	mine, err := g.slack.SubmitView(v.ID, fakeslack.Alice, map[string]string{"t:skill:deploy": "ask", "t:" + long: "deny", "g:mcp:notes": "deny"})
	if err != nil {
		t.Fatal(err)
	}
	if raw := g.interact(t, mine); strings.Contains(string(raw), "errors") {
		t.Fatalf("the admin's submission was refused: %s", raw)
	}
	saved := g.admin(t, "policy", "show", govGeneral)
	if rules := policyRules(t, saved); !slices.Equal(rules, []string{"group:mcp:notes=deny", "skill:deploy=ask", long + "=deny"}) {
		t.Fatalf("after the admin's modal (%v):\n%s", rules, saved)
	}
	entries := g.audit(t)
	wantAudit(t, entries, govern.AuditPolicyRefused, "not an admin", 1, govAuditGen, fakeslack.Bob, "")
	wantAudit(t, entries, govern.AuditPolicySet, "ok", 1, govAuditGen, fakeslack.Alice, "")
}
