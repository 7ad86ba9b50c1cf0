package slack

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/firstmate/firstmate/adapters"
	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/internal/testkit/fakeslack"
	"github.com/firstmate/firstmate/tools"
)

func newAdapter(t *testing.T, srv *fakeslack.Server, mode adapters.Mode) *Adapter {
	t.Helper()
	a, err := New(t.Context(), Config{BotToken: srv.BotToken(), AppToken: srv.AppToken(), APIURL: srv.APIURL(), Progress: mode})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// submitter records what the adapter submits, decides and changes: a
// small dispatcher. Its policy view is fixed (see policyView); admins may
// change it, at its current version.
type submitter struct {
	mu        sync.Mutex
	got       []agent.Inbound
	err       error
	decisions []agent.Decision
	changes   []policyCall
	admins    map[string]bool // user IDs
	version   int64
}

// policyCall is one SetPolicy call.
type policyCall struct {
	Chat   agent.SessionKey
	User   agent.User
	Change agent.PolicyChange
}

func (s *submitter) Decide(_ context.Context, d agent.Decision) (agent.Decided, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.decisions = append(s.decisions, d)
	verb := "Denied"
	if d.Approve {
		verb = "Approved"
	}
	return agent.Decided{Applied: true, Notice: verb + " <!channel>."}, nil
}

func (s *submitter) Policy(_ context.Context, chat agent.SessionKey, u agent.User) (agent.PolicyView, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return policyView(chat, s.version, s.admins[u.ID]), nil
}

func (s *submitter) SetPolicy(_ context.Context, chat agent.SessionKey, u agent.User, change agent.PolicyChange) (agent.PolicyView, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.changes = append(s.changes, policyCall{chat, u, change})
	switch {
	case !s.admins[u.ID]:
		return agent.PolicyView{}, agent.ErrNotAdmin
	case change.Version >= 0 && change.Version != s.version:
		return agent.PolicyView{}, agent.ErrVersionConflict
	}
	s.version++
	return policyView(chat, s.version, true), nil
}

func (s *submitter) decided() []agent.Decision {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]agent.Decision(nil), s.decisions...)
}

func (s *submitter) policyCalls() []policyCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]policyCall(nil), s.changes...)
}

// policyView: read is as the default (allow); exec is ask by a channel
// rule, shell deny by its own; mytool is in web, which has no rule.
func policyView(chat agent.SessionKey, version int64, editable bool) agent.PolicyView {
	def := agent.Reason{Mode: agent.ToolAllow, Rule: agent.DefaultRule, Layer: "config"}
	exec := agent.Reason{Mode: agent.ToolAsk, Rule: agent.GroupRule(agent.GroupExec), Layer: "channel"}
	return agent.PolicyView{Channel: chat.Channel(), Version: version, Editable: editable, Default: def, Groups: []agent.GroupView{
		{Name: agent.GroupRead, Tools: []agent.ToolView{{Name: "ls", Reason: def}, {Name: "read", Reason: def}}},
		{Name: agent.GroupExec, Rule: &exec, Tools: []agent.ToolView{
			{Name: "shell", Reason: agent.Reason{Mode: agent.ToolDeny, Rule: "shell", Layer: "channel"}},
			{Name: "start", Reason: exec},
		}},
		{Name: "web", Tools: []agent.ToolView{{Name: "mytool", Reason: def}}},
	}}
}

func (s *submitter) Admit(context.Context, agent.Inbound) (bool, error) { return true, nil }

func (s *submitter) Submit(_ context.Context, in agent.Inbound) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	s.got = append(s.got, in)
	return nil
}

func (s *submitter) all() []agent.Inbound {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]agent.Inbound(nil), s.got...)
}

func runAdapter(t *testing.T, a *Adapter, d agent.Submitter) {
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

// finish closes the turn and waits until the adapter showed all of it (the
// end mark and the progress summary come after the answer).
func finish(t *testing.T, a *Adapter, th agent.Thread) {
	t.Helper()
	th.(io.Closer).Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	a.Drain(ctx)
	if ctx.Err() != nil {
		t.Fatal("the turn did not finish showing within 10 s")
	}
}

func TestNewChecksTokens(t *testing.T) {
	srv := fakeslack.New(t)
	if _, err := New(t.Context(), Config{AppToken: "xapp-1"}); err == nil || !strings.Contains(err.Error(), "SLACK_BOT_TOKEN") {
		t.Errorf("no bot token: %v", err)
	}
	if _, err := New(t.Context(), Config{BotToken: "xoxb-1"}); err == nil || !strings.Contains(err.Error(), "SLACK_APP_TOKEN") {
		t.Errorf("neither app token nor signing secret: %v", err)
	}
	_, err := New(t.Context(), Config{BotToken: "xoxb-wrong", AppToken: srv.AppToken(), APIURL: srv.APIURL()})
	if err == nil || !strings.Contains(err.Error(), "invalid_auth") || strings.Contains(err.Error(), "xoxb-wrong") {
		t.Errorf("bad bot token: %v", err)
	}
}

func TestSocketModeAcksAfterSubmit(t *testing.T) {
	srv := fakeslack.New(t, fakeslack.WithAckTimeout(300*time.Millisecond), fakeslack.WithMaxRetries(5))
	a := newAdapter(t, srv, adapters.ModeFull)
	d := &submitter{err: context.DeadlineExceeded}
	runAdapter(t, a, d)
	ev := srv.Mention(fakeslack.General, fakeslack.Alice, "hello")
	id := srv.SendEvent(ev)
	if _, ok := srv.WaitAck(id, 500*time.Millisecond); ok {
		t.Fatal("an event that was not recorded was acked")
	}
	// The store is back: the re-sent envelope is recorded and acked.
	d.mu.Lock()
	d.err = nil
	d.mu.Unlock()
	if !srv.WaitFor(5*time.Second, func() bool { return len(d.all()) == 1 }) {
		t.Fatalf("the re-sent event was not submitted; envelopes %+v", srv.Envelopes())
	}
	in := d.all()[0]
	if in.Text != "hello" || in.Key.Thread != ev.TS() || !in.Addressed {
		t.Fatalf("submitted %+v", in)
	}
}

func TestSlashCommandsAreEphemeral(t *testing.T) {
	srv := fakeslack.New(t)
	a := newAdapter(t, srv, adapters.ModeFull)
	d := &submitter{}
	runAdapter(t, a, d)
	id := srv.SendSlashCommand(srv.SlashCommand(fakeslack.General, fakeslack.Alice, "/firstmate", "status"))
	if _, ok := srv.WaitAck(id, 5*time.Second); !ok {
		t.Fatal("slash command not acked")
	}
	got := d.all()
	if len(got) != 1 || got[0].Text != "status" || !strings.HasPrefix(got[0].ReplyTo, ephemeralPrefix) {
		t.Fatalf("submitted %+v", got)
	}
	// The dispatcher's reply goes only to the person who asked.
	th := a.Thread(got[0].Key, got[0])
	if err := th.Emit(t.Context(), agent.Notice{Text: "Idle."}); err != nil {
		t.Fatal(err)
	}
	eph := srv.Ephemerals()
	if len(eph) != 1 || eph[0].User != fakeslack.Alice || eph[0].Text != "Idle." {
		t.Fatalf("ephemerals %+v", eph)
	}
	if n := len(srv.Messages(fakeslack.General)); n != 0 {
		t.Fatalf("%d messages posted in the channel for a slash command", n)
	}
	// Unknown text gets usage at once, in the ack.
	id = srv.SendSlashCommand(srv.SlashCommand(fakeslack.General, fakeslack.Alice, "/firstmate", "dance"))
	ack, ok := srv.WaitAck(id, 5*time.Second)
	if !ok || !strings.Contains(string(ack.Payload), "Usage") {
		t.Fatalf("ack %+v", ack)
	}
}

func TestDownloadAndUpload(t *testing.T) {
	srv := fakeslack.New(t)
	a := newAdapter(t, srv, adapters.ModeFull)
	a.cfg.MaxFileBytes = 100
	ws, err := tools.OpenWorkspace(t.TempDir(), "slack:T:C:")
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	f := srv.AddFile("../../etc/report.csv", "text/csv", []byte("a,b\n1,2\n"))
	in := agent.File{ID: f.ID, Name: f.Name, URL: f.URL, MIME: f.Mimetype, Size: int64(len(f.Content))}
	p, err := a.Download(t.Context(), in, ws)
	if err != nil || p != "uploads/report.csv" {
		t.Fatalf("Download = %q, %v", p, err)
	}
	p2, err := a.Download(t.Context(), in, ws)
	if err != nil || p2 != "uploads/report-2.csv" {
		t.Fatalf("second download of the same name = %q, %v", p2, err)
	}
	data, _ := os.ReadFile(filepath.Join(ws.Dir(), p))
	if string(data) != "a,b\n1,2\n" {
		t.Fatalf("saved %q", data)
	}
	big := agent.File{Name: "big.bin", URL: f.URL, Size: 30 << 20}
	if _, err := a.Download(t.Context(), big, ws); err == nil || !strings.Contains(err.Error(), "over the") {
		t.Fatalf("30 MB file: %v", err)
	}
	// A server that lies about the size is cut at the limit.
	liar := srv.AddFile("liar.bin", "application/octet-stream", make([]byte, 500))
	if _, err := a.Download(t.Context(), agent.File{Name: "liar.bin", URL: liar.URL, Size: 10}, ws); err == nil {
		t.Fatal("a file larger than announced was saved whole")
	}

	// Upload: an answer's attachment goes to the thread.
	key := agent.SessionKey{Platform: Platform, Team: srv.TeamID(), Chat: fakeslack.General, Thread: "1700.1"}
	th := a.Thread(key, agent.Inbound{ReplyTo: "1700.1"})
	att := agent.Attachment{Path: p, Open: func() (io.ReadCloser, int64, error) {
		f, fi, err := ws.OpenRead(p)
		if err != nil {
			return nil, 0, err
		}
		return f, fi.Size(), nil
	}}
	if err := th.Emit(t.Context(), agent.Answer{Text: "here", Files: []agent.Attachment{att}}); err != nil {
		t.Fatal(err)
	}
	files := srv.Files()
	var shared *fakeslack.File
	for i := range files {
		if files[i].Channel == fakeslack.General {
			shared = &files[i]
		}
	}
	if shared == nil || shared.ThreadTS != "1700.1" || string(shared.Content) != "a,b\n1,2\n" || shared.Name != "report.csv" {
		t.Fatalf("uploaded files %+v", files)
	}
}

func TestEarlierMessages(t *testing.T) {
	srv := fakeslack.New(t)
	a := newAdapter(t, srv, adapters.ModeFull)
	root := srv.AddMessage(fakeslack.Message{Channel: fakeslack.General, User: fakeslack.Bob, Text: "the deploy failed"})
	srv.AddMessage(fakeslack.Message{Channel: fakeslack.General, ThreadTS: root.TS, User: fakeslack.Alice, Text: "at step 3 again"})
	key := agent.SessionKey{Platform: Platform, Team: srv.TeamID(), Chat: fakeslack.General, Thread: root.TS}
	trigger := srv.Mention(fakeslack.General, fakeslack.Alice, "why?").InThread(root.TS)
	srv.SendEvent(trigger) // stores it in the thread
	got, err := a.EarlierMessages(t.Context(), key, agent.Inbound{MessageID: trigger.TS()})
	if err != nil {
		t.Fatal(err)
	}
	want := "[" + fakeslack.Bob + "] the deploy failed\n[" + fakeslack.Alice + "] at step 3 again\n"
	if got != want {
		t.Fatalf("EarlierMessages = %q, want %q", got, want)
	}
	// A message that starts its thread has nothing before it, and costs no call.
	before := srv.Count("conversations.replies")
	if got, _ := a.EarlierMessages(t.Context(), key, agent.Inbound{MessageID: root.TS}); got != "" || srv.Count("conversations.replies") != before {
		t.Fatalf("a thread root read %q", got)
	}
}

func TestThreadRetriesRateLimits(t *testing.T) {
	srv := fakeslack.New(t)
	a := newAdapter(t, srv, adapters.ModeOff)
	srv.RateLimitNext("chat.postMessage", 2, 0)
	key := agent.SessionKey{Platform: Platform, Team: srv.TeamID(), Chat: fakeslack.General}
	th := a.Thread(key, agent.Inbound{})
	if err := th.Emit(t.Context(), agent.Answer{Text: "after two 429s"}); err != nil {
		t.Fatal(err)
	}
	msgs := srv.Messages(fakeslack.General)
	if len(msgs) != 1 || !strings.Contains(msgs[0].Text, "after two 429s") || srv.Count("chat.postMessage") != 3 {
		t.Fatalf("messages %+v, %d calls", msgs, srv.Count("chat.postMessage"))
	}
}

func TestLongAnswerIsSplit(t *testing.T) {
	srv := fakeslack.New(t)
	a := newAdapter(t, srv, adapters.ModeOff)
	key := agent.SessionKey{Platform: Platform, Team: srv.TeamID(), Chat: fakeslack.General, Thread: "1700.1"}
	th := a.Thread(key, agent.Inbound{})
	long := "```go\n" + strings.Repeat("fmt.Println(\"all work and no play\")\n", 800) + "```\n\n" + strings.Repeat("Words and more words. ", 400)
	if err := th.Emit(t.Context(), agent.Answer{Text: long}); err != nil {
		t.Fatal(err)
	}
	msgs := srv.Thread(fakeslack.General, "1700.1")
	if len(msgs) < 3 {
		t.Fatalf("a %d-character answer came as %d messages", len(long), len(msgs))
	}
	for _, m := range msgs {
		if strings.Count(string(m.Blocks), "```")%2 != 0 {
			t.Errorf("a part leaves a code fence open: %.200s…", m.Blocks)
		}
	}
}

func TestManifestMatchesAdapter(t *testing.T) {
	data, err := os.ReadFile("../../deploy/slack-app-manifest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		OAuth struct {
			Scopes struct {
				Bot []string `yaml:"bot"`
			} `yaml:"scopes"`
		} `yaml:"oauth_config"`
		Settings struct {
			Events struct {
				Bot []string `yaml:"bot_events"`
			} `yaml:"event_subscriptions"`
			SocketMode    bool `yaml:"socket_mode_enabled"`
			Interactivity struct {
				Enabled    bool   `yaml:"is_enabled"`
				RequestURL string `yaml:"request_url"`
			} `yaml:"interactivity"`
		} `yaml:"settings"`
		Features struct {
			Commands []struct {
				Command   string `yaml:"command"`
				UsageHint string `yaml:"usage_hint"`
			} `yaml:"slash_commands"`
		} `yaml:"features"`
	}
	if err := yaml.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	has := func(list []string, want ...string) {
		t.Helper()
		for _, w := range want {
			found := false
			for _, x := range list {
				found = found || x == w
			}
			if !found {
				t.Errorf("manifest lacks %q", w)
			}
		}
	}
	has(m.OAuth.Scopes.Bot, "app_mentions:read", "channels:history", "im:history", "chat:write", "reactions:write", "files:read", "files:write", "users:read", "commands")
	has(m.Settings.Events.Bot, "app_mention", "message.im", "message.channels", "message.groups")
	if !m.Settings.SocketMode || len(m.Features.Commands) != 1 || m.Features.Commands[0].Command != "/firstmate" {
		t.Errorf("manifest settings %+v commands %+v", m.Settings, m.Features.Commands)
	}
	// Buttons and the tools modal: interactivity on; over HTTP it posts
	// to the route the adapter serves.
	if !m.Settings.Interactivity.Enabled {
		t.Error("manifest: interactivity is off; approval buttons and the tools modal need it")
	}
	if u := m.Settings.Interactivity.RequestURL; u != "" && !strings.HasSuffix(u, "/slack/interactivity") {
		t.Errorf("manifest: interactivity.request_url %q is not the adapter's /slack/interactivity", u)
	}
	// The slash command offers what the command registry has.
	if len(m.Features.Commands) == 1 && m.Features.Commands[0].UsageHint != UsageHint() {
		t.Errorf("manifest usage_hint %q, the registry has %q", m.Features.Commands[0].UsageHint, UsageHint())
	}
}

func TestFailedEditFallsBackToNewMessage(t *testing.T) {
	srv := fakeslack.New(t)
	a := newAdapter(t, srv, adapters.ModeFull)
	key := agent.SessionKey{Platform: Platform, Team: srv.TeamID(), Chat: fakeslack.General, Thread: "1700.1"}
	th := a.Thread(key, agent.Inbound{ReplyTo: "1700.1"})
	ctx := t.Context()
	th.Emit(ctx, agent.TurnStarted{Key: key})
	srv.WaitFor(5*time.Second, func() bool { return srv.Count("chat.postMessage") == 1 })
	srv.FailNext("chat.update", 1, "message_not_found")
	th.Emit(ctx, agent.ToolStarted{CallID: "c1", Name: "ls"})
	// The edit that shows the tool fails: the progress goes on in a new
	// message.
	srv.WaitFor(5*time.Second, func() bool { return srv.Count("chat.postMessage") == 2 })
	th.Emit(ctx, agent.ToolFinished{CallID: "c1", Name: "ls", Summary: "3 entries"})
	if err := th.Emit(ctx, agent.Answer{Text: "done"}); err != nil {
		t.Fatal(err)
	}
	finish(t, a, th)
	var progress []string
	for _, m := range srv.Thread(fakeslack.General, "1700.1") {
		if !m.Deleted && m.Blocks == nil {
			progress = append(progress, m.Text)
		}
	}
	if len(progress) != 2 || !strings.Contains(progress[1], "1 tool") {
		t.Fatalf("progress messages %q; the edit that failed must continue in a new message", progress)
	}
}

// In a DM thread (an assistant thread) the status line is the sign of life
// and the answer is streamed; no progress message is posted.
func TestAssistantThreadStatusAndStream(t *testing.T) {
	srv := fakeslack.New(t)
	a := newAdapter(t, srv, adapters.ModeFull)
	dm := srv.DirectMessage(fakeslack.Alice, "hi")
	root := dm.TS()
	srv.SendEvent(dm) // opens the DM and stores the message
	key := agent.SessionKey{Platform: Platform, Team: srv.TeamID(), Chat: dm.Channel(), Thread: root}
	th := a.Thread(key, agent.Inbound{ReplyTo: root, User: agent.User{ID: fakeslack.Alice}})
	ctx := t.Context()
	th.Emit(ctx, agent.TurnStarted{Key: key})
	srv.WaitFor(5*time.Second, func() bool { return len(srv.Statuses()) == 1 }) // the model thinks
	th.Emit(ctx, agent.TextDelta{Text: "Let me look. "})
	// Text written for more than a second streams.
	srv.WaitFor(5*time.Second, func() bool { return srv.Count("chat.startStream") == 1 })
	th.Emit(ctx, agent.ToolStarted{CallID: "c1", Name: "ls"})
	srv.WaitFor(5*time.Second, func() bool { return len(srv.Statuses()) == 2 }) // the tool runs a while
	th.Emit(ctx, agent.ToolFinished{CallID: "c1", Name: "ls"})
	for _, w := range strings.Fields("There are three files <!channel> in the workspace.") {
		th.Emit(ctx, agent.TextDelta{Text: w + " "})
	}
	if err := th.Emit(ctx, agent.Answer{Text: "There are three files in the workspace."}); err != nil {
		t.Fatal(err)
	}
	var statuses []string
	for _, s := range srv.Statuses() {
		statuses = append(statuses, s.Status)
	}
	if len(statuses) < 2 || statuses[0] != "is working on it…" || !slices.Contains(statuses, "is running ls…") {
		t.Errorf("statuses %q", statuses)
	}
	var bot []fakeslack.Message
	for _, m := range srv.Thread(dm.Channel(), root) {
		if m.BotID != "" {
			bot = append(bot, m)
		}
	}
	if len(bot) != 1 || bot[0].Streaming || !strings.Contains(bot[0].Text, "Let me look.") || !strings.Contains(bot[0].Text, "in the workspace.") {
		t.Fatalf("bot messages %+v; want one streamed answer", bot)
	}
	if strings.Contains(bot[0].Text, "<!channel>") {
		t.Errorf("the stream can ping: %q", bot[0].Text)
	}
	if srv.Count("chat.startStream") != 1 || srv.Count("chat.stopStream") != 1 {
		t.Errorf("stream calls: start %d append %d stop %d", srv.Count("chat.startStream"), srv.Count("chat.appendStream"), srv.Count("chat.stopStream"))
	}
}

// In a channel thread an answer that takes a while to write is posted at
// its first words and edited as it grows; the final edit is the answer.
func TestLiveAnswerInChannel(t *testing.T) {
	srv := fakeslack.New(t)
	a := newAdapter(t, srv, adapters.ModeFull)
	key := agent.SessionKey{Platform: Platform, Team: srv.TeamID(), Chat: fakeslack.General, Thread: "1700.1"}
	th := a.Thread(key, agent.Inbound{ReplyTo: "1700.1", User: agent.User{ID: fakeslack.Alice}})
	ctx := t.Context()
	th.Emit(ctx, agent.TurnStarted{Key: key})
	words := strings.Fields("The build <!channel> broke because the cache was stale and the lock file was old")
	for _, w := range words {
		th.Emit(ctx, agent.TextDelta{Text: w + " "})
		time.Sleep(120 * time.Millisecond)
	}
	final := "The build broke because the cache was stale."
	if err := th.Emit(ctx, agent.Answer{Text: final}); err != nil {
		t.Fatal(err)
	}
	var answers []fakeslack.Message
	for _, m := range srv.Thread(fakeslack.General, "1700.1") {
		if m.BotID != "" && m.Blocks != nil && !m.Deleted {
			answers = append(answers, m)
		}
	}
	if len(answers) != 1 || answers[0].Edits < 1 || !strings.Contains(string(answers[0].Blocks), final) {
		t.Fatalf("answers %+v", answers)
	}
	for _, c := range srv.Calls("chat.update") {
		if strings.Contains(c.Params.Get("blocks"), "<!channel>") {
			t.Fatalf("a live edit could ping: %s", c.Params.Get("blocks"))
		}
	}
	if n := srv.Count("chat.update"); n > 3 {
		t.Errorf("%d edits for a 1.7 s answer; they should come at most once a second", n)
	}
}

// With progress off, 👀 is the sign of life and is swapped for ✅.
func TestProgressOffUsesEyes(t *testing.T) {
	srv := fakeslack.New(t)
	a := newAdapter(t, srv, adapters.ModeOff)
	ev := srv.Mention(fakeslack.General, fakeslack.Alice, "hi")
	srv.SendEvent(ev) // stores the message the reactions go on
	key := agent.SessionKey{Platform: Platform, Team: srv.TeamID(), Chat: fakeslack.General, Thread: ev.TS()}
	th := a.Thread(key, agent.Inbound{ReplyTo: ev.TS()})
	ctx := t.Context()
	th.Emit(ctx, agent.TurnStarted{Key: key})
	srv.WaitFor(5*time.Second, func() bool { return len(srv.Reactions(fakeslack.General, ev.TS())) > 0 })
	if r := srv.Reactions(fakeslack.General, ev.TS()); len(r) != 1 || r[0] != "eyes" {
		t.Fatalf("reactions while working: %v", r)
	}
	th.Emit(ctx, agent.ToolStarted{CallID: "c", Name: "ls"})
	th.Emit(ctx, agent.ToolFinished{CallID: "c", Name: "ls"})
	if err := th.Emit(ctx, agent.Answer{Text: "done"}); err != nil {
		t.Fatal(err)
	}
	finish(t, a, th)
	if r := srv.Reactions(fakeslack.General, ev.TS()); len(r) != 1 || r[0] != "white_check_mark" {
		t.Fatalf("reactions at the end: %v", r)
	}
	for _, m := range srv.Thread(fakeslack.General, ev.TS()) {
		if m.BotID != "" && m.Blocks == nil {
			t.Errorf("a progress message with progress off: %q", m.Text)
		}
	}
}

// A ping split across two streamed pieces is caught: the pieces together
// are what SafeMarkdown makes of the whole.
func TestStreamNeutralizesAcrossPieces(t *testing.T) {
	s := &stream{s: &surface{allowed: map[string]bool{}}}
	var sent strings.Builder
	for _, piece := range []string{"see [here](", " !channel) now", " and <!her", "e> too"} {
		sent.WriteString(s.safeChunk(piece))
	}
	whole := "see [here]( !channel) now and <!here> too"
	if got, want := sent.String(), SafeMarkdown(whole, nil); got != want {
		t.Fatalf("streamed %q, want %q", got, want)
	}
	if strings.Contains(sent.String(), "!channel)") && !strings.Contains(sent.String(), "\u200b") {
		t.Fatalf("the split link still pings: %q", sent.String())
	}
}

func TestMentionsMe(t *testing.T) {
	n := &normalizer{me: me}
	for text, want := range map[string]bool{
		"<@UBOT> hi":               true,
		"<@UBOT|firstmate> hi":     true,
		"<@UBOT2> is someone else": false,
		"<@UBOT2> and <@UBOT> too": true,
		"no mention":               false,
		"<@UBOT":                   false,
	} {
		if got := n.mentionsMe(text); got != want {
			t.Errorf("mentionsMe(%q) = %v", text, got)
		}
	}
}

func TestFileHostOK(t *testing.T) {
	a := &Adapter{cfg: Config{APIURL: "http://127.0.0.1:9999/api/"}}
	for u, want := range map[string]bool{
		"https://files.slack.com/files-pri/T1-F1/a.csv": true,
		"https://slack-gov.com/x":                       true,
		"http://files.slack.com/x":                      false, // not https
		"https://files.slack.com.evil.example/x":        false,
		"https://evil.example/files.slack.com":          false,
		"http://127.0.0.1:9999/files/F1":                true, // the configured API host
		"http://127.0.0.1:8888/files/F1":                false,
		"not a url":                                     false,
	} {
		if got := a.fileHostOK(u); got != want {
			t.Errorf("fileHostOK(%q) = %v", u, got)
		}
	}
}
