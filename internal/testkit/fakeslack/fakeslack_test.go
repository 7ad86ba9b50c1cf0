package fakeslack_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"github.com/slack-go/slack/socketmode"

	"github.com/firstmate/firstmate/internal/testkit/fakeslack"
)

// wait is how long a test waits for something that should take
// milliseconds; only a failing test waits that long.
const wait = 5 * time.Second

func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if leaks := leakedGoroutines(); leaks != "" {
			fmt.Fprintf(os.Stderr, "leaked goroutines:\n%s\n", leaks)
			code = 1
		}
	}
	os.Exit(code)
}

// leakedGoroutines waits a moment for goroutines of the fake, of
// slack-go's Socket Mode client and of WebSockets to end, and describes
// those that do not.
func leakedGoroutines() string {
	// Idle keep-alive connections of slack-go's default client are not
	// leaks of anything under test.
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	var found []string
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		found = found[:0]
		for g := range strings.SplitSeq(string(buf), "\n\n") {
			if strings.Contains(g, "fakeslack.(*") || strings.Contains(g, "slack/socketmode.") ||
				strings.Contains(g, "gorilla/websocket.") {
				found = append(found, g)
			}
		}
		if len(found) == 0 {
			return ""
		}
	}
	return strings.Join(found, "\n\n")
}

func newAPI(srv *fakeslack.Server) *slack.Client {
	return slack.New(srv.BotToken(), slack.OptionAPIURL(srv.APIURL()), slack.OptionAppLevelToken(srv.AppToken()))
}

// startSocket runs slack-go's Socket Mode client against srv until the test
// ends, passing each event to handle (on one goroutine, in order).
func startSocket(t *testing.T, srv *fakeslack.Server, handle func(*socketmode.Client, socketmode.Event), opts ...socketmode.Option) *socketmode.Client {
	t.Helper()
	opts = append([]socketmode.Option{socketmode.OptionLog(log.New(io.Discard, "", 0))}, opts...)
	sm := socketmode.New(newAPI(srv), opts...)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = sm.RunContext(ctx) })
	wg.Go(func() {
		for {
			select {
			case ev := <-sm.Events:
				handle(sm, ev)
			case <-ctx.Done():
				return
			}
		}
	})
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	return sm
}

// ackAll acks every request and sends the events_api ones to events.
func ackAll(events chan<- socketmode.Event) func(*socketmode.Client, socketmode.Event) {
	return func(sm *socketmode.Client, ev socketmode.Event) {
		if ev.Request != nil && ev.Request.EnvelopeID != "" {
			_ = sm.Ack(*ev.Request)
		}
		if ev.Type == socketmode.EventTypeEventsAPI {
			events <- ev
		}
	}
}

func receive[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(wait):
		t.Fatal("nothing received")
		panic("unreachable")
	}
}

func slackError(err error) string {
	var se slack.SlackErrorResponse
	if errors.As(err, &se) {
		return se.Err
	}
	if err != nil {
		return "not a Slack error: " + err.Error()
	}
	return ""
}

// The whole loop: a bot on slack-go's Socket Mode client answers a
// mention in its thread.
func TestMentionGetsAnswerInThread(t *testing.T) {
	t.Parallel()
	srv := fakeslack.New(t)
	api := newAPI(srv)
	startSocket(t, srv, func(sm *socketmode.Client, ev socketmode.Event) {
		if ev.Type != socketmode.EventTypeEventsAPI {
			return
		}
		_ = sm.Ack(*ev.Request)
		m, ok := ev.Data.(slackevents.EventsAPIEvent).InnerEvent.Data.(*slackevents.AppMentionEvent)
		if !ok {
			return
		}
		thread := m.ThreadTimeStamp
		if thread == "" {
			thread = m.TimeStamp
		}
		_, _, _ = api.PostMessage(m.Channel, slack.MsgOptionText("hello <@"+m.User+">", false), slack.MsgOptionTS(thread))
	})

	ev := srv.Mention(fakeslack.General, fakeslack.Alice, "hi there")
	id := srv.SendEvent(ev)
	if _, ok := srv.WaitAck(id, wait); !ok {
		t.Fatal("the envelope was not acked")
	}
	thread, ok := srv.WaitThread(fakeslack.General, ev.TS(), 2, wait)
	if !ok {
		t.Fatalf("no answer in the thread: %+v", thread)
	}
	if thread[0].User != fakeslack.Alice || thread[0].Text != "<@U0BOT> hi there" {
		t.Errorf("the thread starts with %+v, want Alice's mention", thread[0])
	}
	if got := thread[1]; got.BotID != srv.BotID() || got.Text != "hello <@U0ALICE>" || got.ThreadTS != ev.TS() {
		t.Errorf("answer = %+v", got)
	}
}

func TestAuthTest(t *testing.T) {
	t.Parallel()
	srv := fakeslack.New(t, fakeslack.WithBot("U0CUSTOM", "B0CUSTOM", "mate"), fakeslack.WithTeam("T0TEAM", "acme"))
	resp, err := newAPI(srv).AuthTest()
	if err != nil {
		t.Fatal(err)
	}
	if resp.UserID != "U0CUSTOM" || resp.BotID != "B0CUSTOM" || resp.TeamID != "T0TEAM" || resp.User != "mate" {
		t.Errorf("auth.test = %+v", resp)
	}

	for _, c := range []struct{ token, want string }{
		{"xoxb-wrong", "invalid_auth"},
		{"", "not_authed"},
		{srv.AppToken(), "not_allowed_token_type"},
	} {
		_, err := slack.New(c.token, slack.OptionAPIURL(srv.APIURL())).AuthTest()
		if got := slackError(err); got != c.want {
			t.Errorf("auth.test with %q: %s, want %s", c.token, got, c.want)
		}
	}
	if n := srv.Count("auth.test"); n != 4 {
		t.Errorf("Count(auth.test) = %d, want 4", n)
	}
	if c := srv.Calls("auth.test")[1]; c.OK() || c.Error != "invalid_auth" || c.Token != "xoxb-wrong" {
		t.Errorf("recorded call = %+v", c)
	}
}

func TestPostUpdateReplies(t *testing.T) {
	t.Parallel()
	srv := fakeslack.New(t)
	api := newAPI(srv)
	parent := srv.AddMessage(fakeslack.Message{Channel: fakeslack.General, User: fakeslack.Bob, Text: "earlier question"})

	_, ts, err := api.PostMessage(fakeslack.General, slack.MsgOptionText("working…", false), slack.MsgOptionTS(parent.TS))
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{"step 1", "step 2"} {
		if _, _, _, err := api.UpdateMessage(fakeslack.General, ts, slack.MsgOptionText(text, false)); err != nil {
			t.Fatal(err)
		}
	}
	_, _, err = api.PostMessage(fakeslack.General, slack.MsgOptionTS(parent.TS),
		slack.MsgOptionText("answer", false), slack.MsgOptionBlocks(slack.NewMarkdownBlock("", "**answer**")))
	if err != nil {
		t.Fatal(err)
	}

	msgs, _, _, err := api.GetConversationReplies(&slack.GetConversationRepliesParameters{ChannelID: fakeslack.General, Timestamp: parent.TS})
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, m := range msgs {
		texts = append(texts, m.Text)
	}
	if got := strings.Join(texts, " | "); got != "earlier question | step 2 | answer" {
		t.Errorf("replies = %s", got)
	}
	if msgs[0].ReplyCount != 2 || msgs[1].Edited == nil || msgs[1].BotID != srv.BotID() {
		t.Errorf("replies lack thread or edit details: %+v / %+v", msgs[0].Msg, msgs[1].Msg)
	}

	thread := srv.Thread(fakeslack.General, parent.TS)
	if len(thread) != 3 || thread[1].Edits != 2 || thread[1].Text != "step 2" || thread[2].Edits != 0 {
		t.Fatalf("thread = %+v", thread)
	}
	if !strings.Contains(string(thread[2].Blocks), `"type":"markdown"`) {
		t.Errorf("blocks not kept: %s", thread[2].Blocks)
	}

	// An update that leaves the blocks out keeps them.
	if _, _, _, err := api.UpdateMessage(fakeslack.General, thread[2].TS, slack.MsgOptionText("answer!", false)); err != nil {
		t.Fatal(err)
	}
	if m, _ := srv.Message(fakeslack.General, thread[2].TS); m.Text != "answer!" || len(m.Blocks) == 0 {
		t.Errorf("after a text-only update: %+v", m)
	}

	_, _, _, err = api.UpdateMessage(fakeslack.General, "1.000001", slack.MsgOptionText("x", false))
	if got := slackError(err); got != "message_not_found" {
		t.Errorf("update of an unknown ts: %s", got)
	}
	_, _, _, err = api.UpdateMessage(fakeslack.General, parent.TS, slack.MsgOptionText("x", false))
	if got := slackError(err); got != "cant_update_message" {
		t.Errorf("update of a user's message: %s", got)
	}
	_, _, err = api.PostMessage("C0NOWHERE", slack.MsgOptionText("x", false))
	if got := slackError(err); got != "channel_not_found" {
		t.Errorf("post to an unknown channel: %s", got)
	}
	if _, _, err := api.DeleteMessage(fakeslack.General, ts); err != nil {
		t.Fatal(err)
	}
	if got := len(srv.Thread(fakeslack.General, parent.TS)); got != 2 {
		t.Errorf("after delete the thread has %d messages, want 2", got)
	}
	if m, ok := srv.Message(fakeslack.General, ts); !ok || !m.Deleted {
		t.Errorf("deleted message = %+v", m)
	}
}

func TestMessageLimits(t *testing.T) {
	t.Parallel()
	srv := fakeslack.New(t)
	api := newAPI(srv)
	post := func(opts ...slack.MsgOption) string {
		_, _, err := api.PostMessage(fakeslack.General, opts...)
		return slackError(err)
	}
	if got := post(slack.MsgOptionText(strings.Repeat("é", 40_000), false)); got != "" {
		t.Errorf("40,000 characters: %s", got)
	}
	if got := post(slack.MsgOptionText(strings.Repeat("a", 40_001), false)); got != "msg_too_long" {
		t.Errorf("40,001 characters: %q, want msg_too_long", got)
	}
	md := func(n int) slack.MsgOption {
		return slack.MsgOptionBlocks(slack.NewMarkdownBlock("", strings.Repeat("m", n)))
	}
	if got := post(slack.MsgOptionText("fallback", false), md(12_000)); got != "" {
		t.Errorf("a 12,000-character markdown block: %s", got)
	}
	if got := post(slack.MsgOptionText("fallback", false), md(12_001)); got != "invalid_blocks" {
		t.Errorf("a 12,001-character markdown block: %q, want invalid_blocks", got)
	}
	two := slack.MsgOptionBlocks(slack.NewMarkdownBlock("", strings.Repeat("m", 7000)), slack.NewMarkdownBlock("", strings.Repeat("m", 7000)))
	if got := post(slack.MsgOptionText("fallback", false), two); got != "invalid_blocks" {
		t.Errorf("two 7,000-character markdown blocks: %q, want invalid_blocks", got)
	}
	if got := post(); got != "no_text" {
		t.Errorf("an empty message: %q, want no_text", got)
	}
	if n := len(srv.Messages(fakeslack.General)); n != 2 {
		t.Errorf("%d messages stored, want the 2 accepted", n)
	}
}

func TestReactions(t *testing.T) {
	t.Parallel()
	srv := fakeslack.New(t)
	api := newAPI(srv)
	m := srv.AddMessage(fakeslack.Message{Channel: fakeslack.General, User: fakeslack.Alice, Text: "hi"})
	ref := slack.NewRefToMessage(fakeslack.General, m.TS)

	if err := api.AddReaction("eyes", ref); err != nil {
		t.Fatal(err)
	}
	if got := slackError(api.AddReaction("eyes", ref)); got != "already_reacted" {
		t.Errorf("second :eyes: %s", got)
	}
	if err := api.AddReaction("white_check_mark", ref); err != nil {
		t.Fatal(err)
	}
	if err := api.RemoveReaction("eyes", ref); err != nil {
		t.Fatal(err)
	}
	if got := slackError(api.RemoveReaction("eyes", ref)); got != "no_reaction" {
		t.Errorf("removing a removed reaction: %s", got)
	}
	if got := slackError(api.AddReaction("eyes", slack.NewRefToMessage(fakeslack.General, "1.000002"))); got != "message_not_found" {
		t.Errorf("reaction on an unknown message: %s", got)
	}
	if got := srv.Reactions(fakeslack.General, m.TS); len(got) != 1 || got[0] != "white_check_mark" {
		t.Errorf("reactions = %v", got)
	}
}

func TestRateLimitStorm(t *testing.T) {
	t.Parallel()
	srv := fakeslack.New(t)
	api := newAPI(srv)
	_, ts, err := api.PostMessage(fakeslack.General, slack.MsgOptionText("progress", false))
	if err != nil {
		t.Fatal(err)
	}
	srv.RateLimitNext("chat.update", 3, 2*time.Second)
	for i := range 3 {
		_, _, _, err := api.UpdateMessage(fakeslack.General, ts, slack.MsgOptionText(fmt.Sprint(i), false))
		var rl *slack.RateLimitedError
		if !errors.As(err, &rl) || rl.RetryAfter != 2*time.Second {
			t.Fatalf("update %d: %v, want *slack.RateLimitedError{RetryAfter: 2s}", i, err)
		}
	}
	if _, _, _, err := api.UpdateMessage(fakeslack.General, ts, slack.MsgOptionText("done", false)); err != nil {
		t.Fatalf("after the storm: %v", err)
	}
	if m, _ := srv.Message(fakeslack.General, ts); m.Edits != 1 || m.Text != "done" {
		t.Errorf("message = %+v, want one edit", m)
	}
	calls := srv.Calls("chat.update")
	if len(calls) != 4 || calls[0].Status != http.StatusTooManyRequests || calls[0].Error != "ratelimited" || !calls[3].OK() {
		t.Errorf("calls = %+v", calls)
	}

	// A storm for a while: Retry-After 0 keeps a retrying client fast.
	srv.RateLimitFor("chat.postMessage", time.Hour, 0)
	_, _, err = api.PostMessage(fakeslack.General, slack.MsgOptionText("x", false))
	var rl *slack.RateLimitedError
	if !errors.As(err, &rl) || rl.RetryAfter != 0 {
		t.Errorf("post during a storm: %v", err)
	}

	srv.FailNext("chat.update", 1, "message_not_found")
	_, _, _, err = api.UpdateMessage(fakeslack.General, ts, slack.MsgOptionText("y", false))
	if got := slackError(err); got != "message_not_found" {
		t.Errorf("scripted failure: %s", got)
	}
	srv.FailNextStatus("chat.update", 1, http.StatusServiceUnavailable)
	_, _, _, err = api.UpdateMessage(fakeslack.General, ts, slack.MsgOptionText("y", false))
	var sce slack.StatusCodeError
	if !errors.As(err, &sce) || sce.Code != http.StatusServiceUnavailable {
		t.Errorf("scripted 503: %v", err)
	}
}

func TestFileUpload(t *testing.T) {
	t.Parallel()
	srv := fakeslack.New(t)
	api := newAPI(srv)
	parent := srv.AddMessage(fakeslack.Message{Channel: fakeslack.General, User: fakeslack.Alice, Text: "send me the report"})
	content := "# Report\nall good\n"
	sum, err := api.UploadFileContext(context.Background(), slack.UploadFileParameters{
		Reader: strings.NewReader(content), FileSize: len(content), Filename: "report.md", Title: "The report",
		Channel: fakeslack.General, ThreadTimestamp: parent.TS, InitialComment: "here it is",
	})
	if err != nil {
		t.Fatal(err)
	}
	files := srv.Files()
	if len(files) != 1 {
		t.Fatalf("files = %+v", files)
	}
	f := files[0]
	if f.ID != sum.ID || f.Name != "report.md" || f.Title != "The report" || string(f.Content) != content ||
		f.Channel != fakeslack.General || f.ThreadTS != parent.TS || f.Comment != "here it is" {
		t.Errorf("file = %+v", f)
	}
	thread := srv.Thread(fakeslack.General, parent.TS)
	if len(thread) != 2 || len(thread[1].Files) != 1 || thread[1].Text != "here it is" {
		t.Errorf("the thread does not show the file: %+v", thread)
	}
	for _, m := range []string{"files.getUploadURLExternal", "files.completeUploadExternal"} {
		if srv.Count(m) != 1 {
			t.Errorf("%s called %d times", m, srv.Count(m))
		}
	}

	var buf bytes.Buffer
	if err := api.GetFile(f.URL, &buf); err != nil || buf.String() != content {
		t.Errorf("download with the bot token: %q, %v", buf.String(), err)
	}
	buf.Reset()
	err = slack.New("xoxb-someone-else", slack.OptionAPIURL(srv.APIURL())).GetFile(f.URL, &buf)
	if err == nil || !strings.Contains(err.Error(), "sign-in page") {
		t.Errorf("download without the token: %v, want the sign-in redirect", err)
	}

	_, err = api.CompleteUploadExternalContext(context.Background(), slack.CompleteUploadExternalParameters{Files: []slack.FileSummary{{ID: "F0NEVER"}}})
	if got := slackError(err); got != "file_not_found" {
		t.Errorf("completing an upload that never happened: %s", got)
	}
}

func TestStreaming(t *testing.T) {
	t.Parallel()
	srv := fakeslack.New(t)
	api := newAPI(srv)
	parent := srv.AddMessage(fakeslack.Message{Channel: fakeslack.General, User: fakeslack.Alice, Text: "tell me"})
	_, ts, err := api.StartStream(fakeslack.General, slack.MsgOptionTS(parent.TS), slack.MsgOptionMarkdownText("Once "),
		slack.MsgOptionRecipientUserID(fakeslack.Alice), slack.MsgOptionRecipientTeamID(srv.TeamID()))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := api.AppendStream(fakeslack.General, ts, slack.MsgOptionChunks(slack.NewMarkdownTextChunk("upon "),
		slack.NewTaskUpdateChunk("t1", "Reading"))); err != nil {
		t.Fatal(err)
	}
	if m, _ := srv.Message(fakeslack.General, ts); !m.Streaming || m.Text != "Once upon " || len(m.Chunks) != 1 {
		t.Errorf("while streaming: %+v", m)
	}
	if _, _, err := api.StopStream(fakeslack.General, ts, slack.MsgOptionMarkdownText("a time.")); err != nil {
		t.Fatal(err)
	}
	_, _, err = api.AppendStream(fakeslack.General, ts, slack.MsgOptionMarkdownText("more"))
	if got := slackError(err); got != "message_not_in_streaming_state" {
		t.Errorf("append after stop: %s", got)
	}
	thread := srv.Thread(fakeslack.General, parent.TS)
	if len(thread) != 2 || thread[1].Text != "Once upon a time." || thread[1].Streaming || thread[1].Appends != 1 {
		t.Errorf("thread = %+v", thread)
	}
	if p := srv.Calls("chat.startStream")[0].Params; p.Get("recipient_user_id") != fakeslack.Alice || p.Get("thread_ts") != parent.TS {
		t.Errorf("startStream params = %v", p)
	}
}

func TestStatusEphemeralAndInfo(t *testing.T) {
	t.Parallel()
	srv := fakeslack.New(t, fakeslack.WithUser(fakeslack.User{ID: "U0CAROL", Name: "carol"}),
		fakeslack.WithChannel(fakeslack.Channel{ID: "G0SECRET", Name: "secret"}))
	api := newAPI(srv)
	err := api.SetAssistantThreadsStatus(slack.AssistantThreadsSetStatusParameters{
		ChannelID: fakeslack.General, ThreadTS: "1700000000.000100", Status: "is thinking…", LoadingMessages: []string{"Reading", "Writing"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if st := srv.Statuses(); len(st) != 1 || st[0].Status != "is thinking…" || len(st[0].LoadingMessages) != 2 {
		t.Errorf("statuses = %+v", st)
	}
	if _, err := api.PostEphemeral(fakeslack.General, fakeslack.Bob, slack.MsgOptionText("only for you", false)); err != nil {
		t.Fatal(err)
	}
	if e := srv.Ephemerals(); len(e) != 1 || e[0].User != fakeslack.Bob || e[0].Text != "only for you" {
		t.Errorf("ephemerals = %+v", e)
	}
	if len(srv.Messages(fakeslack.General)) != 0 {
		t.Error("an ephemeral message is in the channel")
	}

	u, err := api.GetUserInfo(fakeslack.Alice)
	if err != nil || !u.IsAdmin || u.Name != "alice" {
		t.Errorf("users.info(alice) = %+v, %v", u, err)
	}
	if u, err := api.GetUserInfo("U0CAROL"); err != nil || u.IsAdmin {
		t.Errorf("users.info(carol) = %+v, %v", u, err)
	}
	if _, err := api.GetUserInfo("U0NOBODY"); slackError(err) != "user_not_found" {
		t.Errorf("users.info of nobody: %v", err)
	}
	ch, err := api.GetConversationInfo(&slack.GetConversationInfoInput{ChannelID: "G0SECRET"})
	if err != nil || ch.Name != "secret" || !ch.IsPrivate || ch.IsIM {
		t.Errorf("conversations.info = %+v, %v", ch, err)
	}

	_, err = api.GetConversationHistory(&slack.GetConversationHistoryParameters{ChannelID: fakeslack.General})
	if got := slackError(err); got != "unknown_method" {
		t.Errorf("conversations.history: %s", got)
	}
	if calls := srv.Calls("conversations.history"); len(calls) != 1 || calls[0].Params.Get("channel") != fakeslack.General {
		t.Errorf("the unknown method was not recorded: %+v", calls)
	}
}

func TestSocketModeAck(t *testing.T) {
	t.Parallel()
	srv := fakeslack.New(t)
	events := make(chan socketmode.Event, 10)
	startSocket(t, srv, ackAll(events))

	ev := srv.Mention(fakeslack.General, fakeslack.Alice, "status?").InThread("1700000000.000100")
	id := srv.SendEvent(ev)
	got := receive(t, events)
	if got.Request.EnvelopeID != id || got.Request.RetryAttempt != 0 {
		t.Errorf("request = %+v", got.Request)
	}
	outer := got.Data.(slackevents.EventsAPIEvent)
	cb := outer.Data.(*slackevents.EventsAPICallbackEvent)
	m, ok := outer.InnerEvent.Data.(*slackevents.AppMentionEvent)
	if !ok || cb.EventID != ev.ID || outer.TeamID != srv.TeamID() {
		t.Fatalf("event = %+v", outer)
	}
	if m.User != fakeslack.Alice || m.Channel != fakeslack.General || m.TimeStamp != ev.TS() ||
		m.ThreadTimeStamp != "1700000000.000100" || m.Text != "<@U0BOT> status?" {
		t.Errorf("app_mention = %+v", m)
	}

	ack, ok := srv.WaitAck(id, wait)
	if !ok || ack.EnvelopeID != id || ack.First != id || ack.RetryAttempt != 0 || ack.Latency <= 0 || ack.Conn != 1 {
		t.Errorf("ack = %+v, %v", ack, ok)
	}
	if n := len(srv.Envelopes()); n != 1 {
		t.Errorf("%d envelopes sent, want 1", n)
	}
	// The mention is in Slack, so in its thread.
	if _, ok := srv.Message(fakeslack.General, ev.TS()); !ok {
		t.Error("the mention was not stored")
	}
}

func TestSocketModeRetriesUnackedEnvelope(t *testing.T) {
	t.Parallel()
	srv := fakeslack.New(t, fakeslack.WithAckTimeout(50*time.Millisecond))
	events := make(chan socketmode.Event, 10)
	startSocket(t, srv, func(sm *socketmode.Client, ev socketmode.Event) {
		if ev.Type != socketmode.EventTypeEventsAPI {
			return
		}
		// A client too busy to ack the first delivery.
		if ev.Request.RetryAttempt > 0 {
			_ = sm.Ack(*ev.Request)
		}
		events <- ev
	})
	ev := srv.UserMessage(fakeslack.General, fakeslack.Bob, "hello")
	id := srv.SendEvent(ev)
	first, second := receive(t, events), receive(t, events)
	if first.Request.RetryAttempt != 0 || second.Request.RetryAttempt != 1 || second.Request.RetryReason != "timeout" {
		t.Errorf("attempts = %+v then %+v", first.Request, second.Request)
	}
	if second.Request.EnvelopeID == id {
		t.Error("the retry reused the envelope ID")
	}
	for _, e := range []socketmode.Event{first, second} {
		cb := e.Data.(slackevents.EventsAPIEvent).Data.(*slackevents.EventsAPICallbackEvent)
		if cb.EventID != ev.ID {
			t.Errorf("event_id = %s, want %s on every attempt", cb.EventID, ev.ID)
		}
	}
	ack, ok := srv.WaitAck(id, wait)
	if !ok || ack.RetryAttempt != 1 || ack.First != id || ack.EnvelopeID != second.Request.EnvelopeID {
		t.Errorf("ack = %+v, %v", ack, ok)
	}
}

func TestSocketModeGivesUpAfterMaxRetries(t *testing.T) {
	t.Parallel()
	srv := fakeslack.New(t, fakeslack.WithAckTimeout(10*time.Millisecond), fakeslack.WithMaxRetries(2))
	startSocket(t, srv, func(*socketmode.Client, socketmode.Event) {}) // never acks
	id := srv.SendEvent(srv.UserMessage(fakeslack.General, fakeslack.Bob, "anyone?"))
	if !srv.WaitFor(wait, func() bool { return len(srv.Envelopes()) == 3 }) {
		t.Fatalf("envelopes = %+v", srv.Envelopes())
	}
	if _, ok := srv.WaitAck(id, 100*time.Millisecond); ok {
		t.Error("acked without an ack")
	}
	if n := len(srv.Envelopes()); n != 3 {
		t.Errorf("%d envelopes, want the first and 2 retries", n)
	}
}

func TestSocketModeReconnectsAfterDrop(t *testing.T) {
	t.Parallel()
	srv := fakeslack.New(t)
	events := make(chan socketmode.Event, 10)
	startSocket(t, srv, ackAll(events))
	if !srv.WaitConnections(1, wait) {
		t.Fatal("the client did not connect")
	}
	srv.DropConnections()
	if !srv.WaitConnections(2, wait) {
		t.Fatalf("the client did not reconnect: %d connections", srv.Connections())
	}
	id := srv.SendEvent(srv.DirectMessage(fakeslack.Alice, "still there?"))
	receive(t, events)
	if ack, ok := srv.WaitAck(id, wait); !ok || ack.Conn != 2 {
		t.Errorf("ack = %+v, %v; want one on the second connection", ack, ok)
	}
	if n := srv.Count("apps.connections.open"); n != 2 {
		t.Errorf("apps.connections.open called %d times, want 2", n)
	}
}

func TestSocketModeDisconnectMessage(t *testing.T) {
	t.Parallel()
	srv := fakeslack.New(t)
	startSocket(t, srv, func(*socketmode.Client, socketmode.Event) {})
	if !srv.WaitConnections(1, wait) {
		t.Fatal("the client did not connect")
	}
	srv.Disconnect("refresh_requested")
	if !srv.WaitConnections(2, wait) {
		t.Fatal("the client did not reconnect after disconnect")
	}
	if !srv.WaitFor(wait, func() bool { return srv.OpenConnections() == 1 }) {
		t.Errorf("%d connections open, want the old one closed", srv.OpenConnections())
	}
}

func TestSocketModePingsKeepTheClientConnected(t *testing.T) {
	t.Parallel()
	srv := fakeslack.New(t, fakeslack.WithPingInterval(10*time.Millisecond))
	// The client gives up on a connection after 500 ms without a ping.
	startSocket(t, srv, func(*socketmode.Client, socketmode.Event) {}, socketmode.OptionPingInterval(500*time.Millisecond))
	if !srv.WaitFor(wait, func() bool { return srv.Pongs() >= 70 }) {
		t.Fatalf("%d pongs", srv.Pongs())
	}
	if n := srv.Connections(); n != 1 {
		t.Errorf("%d connections: the client reconnected although pinged", n)
	}
}

func TestSocketModeWithoutPingsTheClientReconnects(t *testing.T) {
	t.Parallel()
	srv := fakeslack.New(t, fakeslack.WithPingInterval(0))
	startSocket(t, srv, func(*socketmode.Client, socketmode.Event) {}, socketmode.OptionPingInterval(30*time.Millisecond))
	if !srv.WaitConnections(2, wait) {
		t.Error("slack-go's client kept a connection without pings")
	}
}

func TestSocketModeQueuesUntilConnected(t *testing.T) {
	t.Parallel()
	srv := fakeslack.New(t)
	ev := srv.DirectMessage(fakeslack.Bob, "are you up?")
	id := srv.SendEvent(ev)
	events := make(chan socketmode.Event, 10)
	startSocket(t, srv, ackAll(events))
	m, ok := receive(t, events).Data.(slackevents.EventsAPIEvent).InnerEvent.Data.(*slackevents.MessageEvent)
	if !ok || m.ChannelType != "im" || !strings.HasPrefix(m.Channel, "D") || m.Text != "are you up?" {
		t.Errorf("message.im = %+v", m)
	}
	if _, ok := srv.WaitAck(id, wait); !ok {
		t.Error("not acked")
	}
}

func TestSocketModeCommandsAndInteractions(t *testing.T) {
	t.Parallel()
	srv := fakeslack.New(t)
	got := make(chan socketmode.Event, 10)
	startSocket(t, srv, func(sm *socketmode.Client, ev socketmode.Event) {
		switch ev.Type {
		case socketmode.EventTypeSlashCommand:
			_ = sm.Ack(*ev.Request, map[string]any{"response_type": "ephemeral", "text": "Usage: /firstmate help"})
			got <- ev
		case socketmode.EventTypeInteractive:
			_ = sm.Ack(*ev.Request)
			got <- ev
		}
	})
	cmd := srv.SlashCommand(fakeslack.General, fakeslack.Alice, "/firstmate", "help")
	id := srv.SendSlashCommand(cmd)
	ev := receive(t, got)
	sc := ev.Data.(slack.SlashCommand)
	if sc.Command != "/firstmate" || sc.Text != "help" || sc.UserName != "alice" || sc.ChannelName != "general" ||
		!ev.Request.AcceptsResponsePayload || !strings.HasPrefix(sc.ResponseURL, srv.URL()) {
		t.Errorf("slash command = %+v (request %+v)", sc, ev.Request)
	}
	ack, ok := srv.WaitAck(id, wait)
	if !ok || !strings.Contains(string(ack.Payload), "Usage: /firstmate help") {
		t.Errorf("ack = %+v (payload %s)", ack, ack.Payload)
	}

	// A response URL records what is posted to it.
	if _, _, _, err := newAPI(srv).SendMessage("", slack.MsgOptionResponseURL(sc.ResponseURL, slack.ResponseTypeEphemeral), slack.MsgOptionText("later", false)); err != nil {
		t.Errorf("posting to the response URL: %v", err)
	}
	if r := srv.Responses(); len(r) != 1 || !strings.Contains(string(r[0].Body), "later") {
		t.Errorf("responses = %+v", r)
	}

	id = srv.SendInteractive(slack.InteractionCallback{Type: slack.InteractionTypeBlockActions, User: slack.User{ID: fakeslack.Bob},
		Channel: slack.Channel{GroupConversation: slack.GroupConversation{Conversation: slack.Conversation{ID: fakeslack.General}}}})
	ia := receive(t, got).Data.(slack.InteractionCallback)
	if ia.Type != slack.InteractionTypeBlockActions || ia.User.ID != fakeslack.Bob {
		t.Errorf("interaction = %+v", ia)
	}
	if _, ok := srv.WaitAck(id, wait); !ok {
		t.Error("interaction not acked")
	}
}

// TestEventBuilders checks that slack-go reads every built event as Slack's.
func TestEventBuilders(t *testing.T) {
	t.Parallel()
	srv := fakeslack.New(t, fakeslack.WithUser(fakeslack.User{ID: "U0OTHERBOT", Name: "otherbot", IsBot: true, BotID: "B0OTHER"}))
	events := make(chan socketmode.Event, 20)
	startSocket(t, srv, ackAll(events))
	inner := func() any {
		t.Helper()
		return receive(t, events).Data.(slackevents.EventsAPIEvent).InnerEvent.Data
	}

	mention := srv.Mention(fakeslack.General, fakeslack.Alice, "<@U0BOT> look <!channel>")
	srv.SendEvent(mention)
	srv.SendEvent(mention.AsMessage())
	if m := inner().(*slackevents.AppMentionEvent); m.Text != "<@U0BOT> look <!channel>" {
		t.Errorf("app_mention = %+v", m)
	}
	if m := inner().(*slackevents.MessageEvent); m.TimeStamp != mention.TS() || m.ChannelType != "channel" {
		t.Errorf("its message twin = %+v", m)
	}

	srv.SendEvent(srv.BotMessage(fakeslack.General, srv.BotUserID(), "my own words"))
	if m := inner().(*slackevents.MessageEvent); m.BotID != srv.BotID() || m.User != srv.BotUserID() || m.SubType != "" {
		t.Errorf("own message = %+v", m)
	}
	srv.SendEvent(srv.BotMessage(fakeslack.General, "U0OTHERBOT", "beep"))
	if m := inner().(*slackevents.MessageEvent); m.BotID != "B0OTHER" || m.User != "U0OTHERBOT" {
		t.Errorf("other bot = %+v", m)
	}
	srv.SendEvent(srv.BotMessage(fakeslack.General, "B0HOOK", "deploy done"))
	if m := inner().(*slackevents.MessageEvent); m.SubType != "bot_message" || m.BotID != "B0HOOK" {
		t.Errorf("integration = %+v", m)
	}

	original := srv.UserMessage(fakeslack.General, fakeslack.Bob, "tpyo").InThread(mention.TS())
	srv.SendEvent(original)
	inner()
	srv.SendEvent(srv.MessageChanged(fakeslack.General, original.TS(), "typo"))
	if m := inner().(*slackevents.MessageEvent); m.SubType != "message_changed" || m.Message == nil ||
		m.Message.Text != "typo" || m.Message.Timestamp != original.TS() || m.PreviousMessage.Text != "tpyo" {
		t.Errorf("message_changed = %+v", m)
	}
	if m, _ := srv.Message(fakeslack.General, original.TS()); m.Text != "typo" || m.Edits != 1 {
		t.Errorf("the edit was not applied: %+v", m)
	}
	srv.SendEvent(srv.MessageDeleted(fakeslack.General, original.TS()))
	if m := inner().(*slackevents.MessageEvent); m.SubType != "message_deleted" || m.DeletedTimeStamp != original.TS() {
		t.Errorf("message_deleted = %+v", m)
	}
	if len(srv.Thread(fakeslack.General, mention.TS())) != 1 {
		t.Error("the deleted reply is still in the thread")
	}

	file := srv.AddFile("notes.txt", "text/plain", []byte("remember the milk"))
	share := srv.UserMessage(fakeslack.General, fakeslack.Alice, "see attached").WithFiles(file)
	srv.SendEvent(share)
	m := inner().(*slackevents.MessageEvent)
	if m.SubType != "file_share" || len(m.Message.Files) != 1 || m.Message.Files[0].URLPrivate != file.URL || m.Message.Files[0].Size != 17 {
		t.Fatalf("file_share = %+v", m)
	}
	var buf bytes.Buffer
	if err := newAPI(srv).GetFile(m.Message.Files[0].URLPrivateDownload, &buf); err != nil || buf.String() != "remember the milk" {
		t.Errorf("download of the shared file: %q, %v", buf.String(), err)
	}

	// Raw JSON, as a test may write it.
	srv.SendEvent(`{"type":"reaction_added","user":"U0ALICE","reaction":"tada","item":{"type":"message","channel":"C0GENERAL","ts":"1.1"},"event_ts":"1.2"}`)
	if r, ok := inner().(*slackevents.ReactionAddedEvent); !ok || r.Reaction != "tada" {
		t.Errorf("raw event = %+v", r)
	}
}

func TestEcho(t *testing.T) {
	t.Parallel()
	srv := fakeslack.New(t, fakeslack.WithEcho())
	events := make(chan socketmode.Event, 10)
	startSocket(t, srv, ackAll(events))
	api := newAPI(srv)
	_, ts, err := api.PostMessage(fakeslack.General, slack.MsgOptionText("hello", false))
	if err != nil {
		t.Fatal(err)
	}
	if m := receive(t, events).Data.(slackevents.EventsAPIEvent).InnerEvent.Data.(*slackevents.MessageEvent); m.BotID != srv.BotID() || m.TimeStamp != ts {
		t.Errorf("echo of a post = %+v", m)
	}
	if _, _, _, err := api.UpdateMessage(fakeslack.General, ts, slack.MsgOptionText("hello!", false)); err != nil {
		t.Fatal(err)
	}
	if m := receive(t, events).Data.(slackevents.EventsAPIEvent).InnerEvent.Data.(*slackevents.MessageEvent); m.SubType != "message_changed" || m.Message.Text != "hello!" {
		t.Errorf("echo of an edit = %+v", m)
	}
	if m, _ := srv.Message(fakeslack.General, ts); m.Edits != 1 {
		t.Errorf("edits = %d, want 1: the echo is not a second edit", m.Edits)
	}
}

// eventsEndpoint is an app's HTTP endpoint as the Slack docs describe it,
// built on slack-go: signature checked, url_verification answered.
func eventsEndpoint(t *testing.T, secret string, got chan<- *http.Request) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		sv, err := slack.NewSecretsVerifier(r.Header, secret)
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		_, _ = sv.Write(body)
		if err := sv.Ensure(); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		if r.Header.Get("Content-Type") == "application/json" {
			ev, err := slackevents.ParseEvent(body, slackevents.OptionNoVerifyToken())
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			if ev.Type == slackevents.URLVerification {
				fmt.Fprint(w, ev.Data.(*slackevents.EventsAPIURLVerificationEvent).Challenge)
				return
			}
		}
		got <- r
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestDeliverHTTP(t *testing.T) {
	t.Parallel()
	const secret = "8f742231b10e8888abcd99yyyzzz85a5"
	srv := fakeslack.New(t)
	got := make(chan *http.Request, 10)
	url := eventsEndpoint(t, secret, got)
	ctx := context.Background()

	if err := srv.VerifyURL(ctx, url, secret); err != nil {
		t.Fatal(err)
	}

	ev := srv.Mention(fakeslack.General, fakeslack.Alice, "over HTTP")
	d, err := srv.DeliverHTTP(ctx, url, ev, secret)
	if err != nil || d.Status != http.StatusOK {
		t.Fatalf("signed delivery: %+v, %v", d, err)
	}
	r := receive(t, got)
	body, _ := io.ReadAll(r.Body)
	parsed, err := slackevents.ParseEvent(body, slackevents.OptionNoVerifyToken())
	if err != nil {
		t.Fatal(err)
	}
	if m := parsed.InnerEvent.Data.(*slackevents.AppMentionEvent); m.TimeStamp != ev.TS() || m.Text != "<@U0BOT> over HTTP" {
		t.Errorf("delivered mention = %+v", m)
	}
	if _, ok := srv.Message(fakeslack.General, ev.TS()); !ok {
		t.Error("the mention delivered over HTTP was not stored")
	}

	d, err = srv.DeliverHTTP(ctx, url, ev, secret, fakeslack.Retry(1, "http_timeout"))
	if err != nil || d.Status != http.StatusOK {
		t.Fatalf("retry: %+v, %v", d, err)
	}
	if r := receive(t, got); r.Header.Get("X-Slack-Retry-Num") != "1" || r.Header.Get("X-Slack-Retry-Reason") != "http_timeout" {
		t.Errorf("retry headers = %v", r.Header)
	}

	for name, opt := range map[string]fakeslack.DeliverOption{
		"bad signature":   fakeslack.BadSignature(),
		"stale timestamp": fakeslack.StaleTimestamp(),
	} {
		d, err := srv.DeliverHTTP(ctx, url, ev, secret, opt)
		if err != nil || d.Status != http.StatusUnauthorized {
			t.Errorf("%s: %d %s, %v; want 401", name, d.Status, d.Body, err)
		}
	}
	if !strings.Contains(string(mustDeliver(t, srv, url, ev, secret, fakeslack.StaleTimestamp()).Body), slack.ErrExpiredTimestamp.Error()) {
		t.Error("a stale timestamp was not refused for its age")
	}

	cmd := srv.SlashCommand(fakeslack.General, fakeslack.Bob, "/firstmate", "status")
	if d, err := srv.DeliverHTTP(ctx, url, cmd, secret); err != nil || d.Status != http.StatusOK {
		t.Fatalf("slash command: %+v, %v", d, err)
	}
	parsedCmd, err := slack.SlashCommandParse(receive(t, got))
	if err != nil || parsedCmd.Text != "status" || parsedCmd.UserID != fakeslack.Bob || parsedCmd.ResponseURL != cmd.ResponseURL {
		t.Errorf("slash command = %+v, %v", parsedCmd, err)
	}
}

func mustDeliver(t *testing.T, srv *fakeslack.Server, url string, payload any, secret string, opts ...fakeslack.DeliverOption) fakeslack.Delivery {
	t.Helper()
	d, err := srv.DeliverHTTP(context.Background(), url, payload, secret, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestSign(t *testing.T) {
	t.Parallel()
	// The example of Slack's "Verifying requests from Slack".
	body := []byte("token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c")
	got := fakeslack.Sign("8f742231b10e8888abcd99yyyzzz85a5", "1531420618", body)
	if want := "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"; got != want {
		t.Errorf("Sign = %s, want %s", got, want)
	}
}
