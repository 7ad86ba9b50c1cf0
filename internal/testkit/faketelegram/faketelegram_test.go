package faketelegram_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/firstmate/firstmate/internal/testkit/faketelegram"
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

// leakedGoroutines waits a moment for goroutines of the fake and of
// tgbotapi to end, and describes those that do not.
func leakedGoroutines() string {
	// Idle keep-alive connections of tgbotapi's client (the default
	// transport) are not leaks of anything under test.
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	var found []string
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		found = found[:0]
		for g := range strings.SplitSeq(string(buf), "\n\n") {
			if strings.Contains(g, "faketelegram.(*") || strings.Contains(g, "telegram-bot-api/v5.") {
				found = append(found, g)
			}
		}
		if len(found) == 0 {
			return ""
		}
	}
	return strings.Join(found, "\n\n")
}

// newBot is the real tgbotapi client on srv; it calls getMe.
func newBot(t *testing.T, srv *faketelegram.Server) *tgbotapi.BotAPI {
	t.Helper()
	bot, err := tgbotapi.NewBotAPIWithAPIEndpoint(srv.Token(), srv.APIEndpoint())
	if err != nil {
		t.Fatal(err)
	}
	return bot
}

// tgError is the Bot API error tgbotapi returns. It returns *Error, not
// Error, so errors.As needs a pointer target.
func tgError(t *testing.T, err error) *tgbotapi.Error {
	t.Helper()
	var e *tgbotapi.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not a *tgbotapi.Error", err, err)
	}
	return e
}

func wantAPIError(t *testing.T, err error, code int, description string) {
	t.Helper()
	e := tgError(t, err)
	if e.Code != code || e.Message != description {
		t.Errorf("error = %d %q, want %d %q", e.Code, e.Message, code, description)
	}
}

func chatID(id int64) string { return strconv.FormatInt(id, 10) }

func updateIDs(us []tgbotapi.Update) []int {
	ids := make([]int, len(us))
	for i, u := range us {
		ids[i] = u.UpdateID
	}
	return ids
}

// The package's example: a private message polled by the bot and its
// reply recorded.
func TestPrivateMessagePolledAndAnswered(t *testing.T) {
	t.Parallel()
	srv := faketelegram.New(t)
	bot := newBot(t, srv)

	in := srv.PrivateMessage(faketelegram.Alice, "hello")
	updates, err := bot.GetUpdates(tgbotapi.UpdateConfig{Timeout: 5})
	if err != nil || len(updates) != 1 {
		t.Fatalf("getUpdates = %+v, %v", updates, err)
	}
	u := updates[0]
	if u.UpdateID != in.UpdateID || u.Message.Text != "hello" || u.Message.From.ID != faketelegram.Alice ||
		!u.Message.Chat.IsPrivate() || u.Message.Chat.ID != faketelegram.Alice {
		t.Errorf("update = %+v, message %+v", u, u.Message)
	}

	reply := tgbotapi.NewMessage(u.Message.Chat.ID, "hi Alice")
	reply.ReplyToMessageID = u.Message.MessageID
	sent, err := bot.Send(reply)
	if err != nil {
		t.Fatal(err)
	}
	if sent.ReplyToMessage == nil || sent.ReplyToMessage.MessageID != in.Message.MessageID || sent.From.ID != bot.Self.ID {
		t.Errorf("sent = %+v", sent)
	}
	msgs, ok := srv.WaitBotMessages(faketelegram.Alice, 1, wait)
	if !ok || msgs[0].Text != "hi Alice" || msgs[0].ReplyToMessage.MessageID != in.Message.MessageID {
		t.Fatalf("bot messages = %+v", msgs)
	}
	if all := srv.Messages(faketelegram.Alice); len(all) != 2 || all[0].Text != "hello" {
		t.Errorf("chat = %+v", all)
	}

	// The next poll confirms the update.
	if updates, err := bot.GetUpdates(tgbotapi.UpdateConfig{Offset: u.UpdateID + 1}); err != nil || len(updates) != 0 {
		t.Errorf("getUpdates after = %+v, %v", updates, err)
	}
	if srv.Offset() != u.UpdateID+1 || srv.Pending() != 0 {
		t.Errorf("offset %d, pending %d", srv.Offset(), srv.Pending())
	}
}

func TestGetMe(t *testing.T) {
	t.Parallel()
	srv := faketelegram.New(t, faketelegram.WithBot(4242, "mate_bot", "Mate"))
	bot := newBot(t, srv)
	if s := bot.Self; s.ID != 4242 || s.UserName != "mate_bot" || s.FirstName != "Mate" || !s.IsBot || !s.CanJoinGroups {
		t.Errorf("getMe = %+v", s)
	}
	if !strings.HasPrefix(srv.Token(), "4242:") {
		t.Errorf("token %q does not start with the bot's ID", srv.Token())
	}

	_, err := tgbotapi.NewBotAPIWithAPIEndpoint("4242:wrong", srv.APIEndpoint())
	wantAPIError(t, err, 401, "Unauthorized")
	calls := srv.Calls("getMe")
	if len(calls) != 2 || !calls[0].OK() || calls[1].Status != 401 || calls[1].Token != "4242:wrong" {
		t.Errorf("calls = %+v", calls)
	}
}

func TestLongPollReturnsWhenAnUpdateArrives(t *testing.T) {
	t.Parallel()
	srv := faketelegram.New(t)
	bot := newBot(t, srv)
	type result struct {
		updates []tgbotapi.Update
		err     error
		at      time.Time
	}
	done := make(chan result, 1)
	go func() {
		us, err := bot.GetUpdates(tgbotapi.UpdateConfig{Timeout: 30})
		done <- result{us, err, time.Now()}
	}()
	if !srv.WaitFor(wait, func() bool { return srv.Polling() == 1 }) {
		t.Fatal("getUpdates is not waiting")
	}
	select {
	case r := <-done:
		t.Fatalf("getUpdates returned with nothing to return: %+v", r)
	default:
	}
	added := time.Now()
	u := srv.PrivateMessage(faketelegram.Bob, "wake up")
	select {
	case r := <-done:
		if r.err != nil || len(r.updates) != 1 || r.updates[0].UpdateID != u.UpdateID {
			t.Fatalf("getUpdates = %+v, %v", r.updates, r.err)
		}
		// Far below the 30 s timeout: the poll ended because of the update.
		if d := r.at.Sub(added); d > 2*time.Second {
			t.Errorf("getUpdates returned %v after the update", d)
		}
	case <-time.After(wait):
		t.Fatal("getUpdates did not return after an update arrived")
	}
	if srv.Polling() != 0 {
		t.Errorf("still polling: %d", srv.Polling())
	}
}

func TestLongPollWaitsForItsTimeout(t *testing.T) {
	t.Parallel()
	srv := faketelegram.New(t)
	bot := newBot(t, srv)
	start := time.Now()
	updates, err := bot.GetUpdates(tgbotapi.UpdateConfig{Timeout: 1})
	elapsed := time.Since(start)
	if err != nil || len(updates) != 0 {
		t.Fatalf("getUpdates = %+v, %v", updates, err)
	}
	if elapsed < 900*time.Millisecond || elapsed > wait {
		t.Errorf("getUpdates with timeout 1 took %v", elapsed)
	}
	// Timeout 0 (tgbotapi's default, and GetUpdatesChan's) does not wait.
	start = time.Now()
	if _, err := bot.GetUpdates(tgbotapi.NewUpdate(0)); err != nil || time.Since(start) > 500*time.Millisecond {
		t.Errorf("getUpdates with timeout 0: %v after %v", err, time.Since(start))
	}
}

func TestOffsetConfirmsUpdates(t *testing.T) {
	t.Parallel()
	srv := faketelegram.New(t, faketelegram.WithFirstUpdateID(500))
	bot := newBot(t, srv)
	get := func(c tgbotapi.UpdateConfig) []int {
		t.Helper()
		us, err := bot.GetUpdates(c)
		if err != nil {
			t.Fatal(err)
		}
		return updateIDs(us)
	}
	a := srv.PrivateMessage(faketelegram.Alice, "one")
	b := srv.GroupMessage(faketelegram.Group, faketelegram.Bob, "two")
	if a.UpdateID != 500 || b.UpdateID != 501 {
		t.Fatalf("update ids %d, %d", a.UpdateID, b.UpdateID)
	}
	if got := get(tgbotapi.UpdateConfig{}); !slices.Equal(got, []int{500, 501}) {
		t.Errorf("first poll = %v", got)
	}
	// Not confirmed: delivered again.
	if got := get(tgbotapi.UpdateConfig{}); !slices.Equal(got, []int{500, 501}) {
		t.Errorf("second poll = %v", got)
	}
	if got := get(tgbotapi.UpdateConfig{Offset: 501}); !slices.Equal(got, []int{501}) {
		t.Errorf("poll with offset 501 = %v", got)
	}
	if srv.Offset() != 501 || srv.Pending() != 1 {
		t.Errorf("offset %d, pending %d", srv.Offset(), srv.Pending())
	}
	// Confirmed means forgotten: without an offset, 500 does not come back.
	if got := get(tgbotapi.UpdateConfig{}); !slices.Equal(got, []int{501}) {
		t.Errorf("poll without offset = %v", got)
	}
	c := srv.PrivateMessage(faketelegram.Alice, "three")
	if got := get(tgbotapi.UpdateConfig{Limit: 1}); !slices.Equal(got, []int{501}) {
		t.Errorf("poll with limit 1 = %v", got)
	}
	// A negative offset keeps the last updates only.
	if got := get(tgbotapi.UpdateConfig{Offset: -1}); !slices.Equal(got, []int{c.UpdateID}) {
		t.Errorf("poll with offset -1 = %v", got)
	}
	if got := get(tgbotapi.UpdateConfig{Offset: c.UpdateID + 1}); len(got) != 0 || srv.Pending() != 0 || srv.Offset() != c.UpdateID+1 {
		t.Errorf("poll past the last = %v, pending %d, offset %d", got, srv.Pending(), srv.Offset())
	}
}

func TestAllowedUpdatesAreRemembered(t *testing.T) {
	t.Parallel()
	srv := faketelegram.New(t)
	bot := newBot(t, srv)
	if _, err := bot.GetUpdates(tgbotapi.UpdateConfig{AllowedUpdates: []string{"message"}}); err != nil {
		t.Fatal(err)
	}
	// tgbotapi sends a nil AllowedUpdates as "null", which keeps the list.
	if _, err := bot.GetUpdates(tgbotapi.UpdateConfig{}); err != nil {
		t.Fatal(err)
	}
	if got := srv.Calls("getUpdates")[1].Params.Get("allowed_updates"); got != "null" {
		t.Errorf("tgbotapi sent allowed_updates=%q", got)
	}
	if got := srv.AllowedUpdates(); !slices.Equal(got, []string{"message"}) {
		t.Errorf("allowed updates = %v", got)
	}
	if u := srv.MyChatMember(faketelegram.Group, faketelegram.Alice, "left", "member"); u.UpdateID != 0 {
		t.Errorf("a my_chat_member update was queued: %+v", u)
	}
	m := srv.PrivateMessage(faketelegram.Alice, "kept")
	us, err := bot.GetUpdates(tgbotapi.UpdateConfig{})
	if err != nil || !slices.Equal(updateIDs(us), []int{m.UpdateID}) || srv.Filtered() != 1 {
		t.Errorf("updates %v, %v; filtered %d", updateIDs(us), err, srv.Filtered())
	}
	// An empty list is Telegram's default again.
	if _, err := bot.MakeRequest("getUpdates", tgbotapi.Params{"allowed_updates": "[]"}); err != nil {
		t.Fatal(err)
	}
	if srv.AllowedUpdates() != nil {
		t.Errorf("allowed updates = %v, want the default", srv.AllowedUpdates())
	}
}

func TestSecondPollerEndsTheFirstWithConflict(t *testing.T) {
	t.Parallel()
	srv := faketelegram.New(t)
	first := newBot(t, srv)
	done := make(chan error, 1)
	go func() {
		_, err := first.GetUpdates(tgbotapi.UpdateConfig{Timeout: 30})
		done <- err
	}()
	if !srv.WaitFor(wait, func() bool { return srv.Polling() == 1 }) {
		t.Fatal("the first bot is not polling")
	}
	// A second instance of the bot polls: Telegram ends the call that was
	// waiting, and serves the new one.
	second := newBot(t, srv)
	if _, err := second.GetUpdates(tgbotapi.UpdateConfig{}); err != nil {
		t.Fatalf("the second poller: %v", err)
	}
	select {
	case err := <-done:
		wantAPIError(t, err, 409, faketelegram.ConflictPoller)
	case <-time.After(wait):
		t.Fatal("the first poller was not ended")
	}
	if srv.Conflicts() != 1 {
		t.Errorf("conflicts = %d", srv.Conflicts())
	}
	if c := srv.Calls("getUpdates")[1]; c.Status != 409 || c.Description != faketelegram.ConflictPoller {
		t.Errorf("recorded %+v", c)
	}
}

func TestGetUpdatesWhileAWebhookIsSet(t *testing.T) {
	t.Parallel()
	srv := faketelegram.New(t)
	bot := newBot(t, srv)

	done := make(chan error, 1)
	go func() {
		_, err := bot.GetUpdates(tgbotapi.UpdateConfig{Timeout: 30})
		done <- err
	}()
	if !srv.WaitFor(wait, func() bool { return srv.Polling() == 1 }) {
		t.Fatal("not polling")
	}
	wh, _ := tgbotapi.NewWebhook("https://bot.example/telegram")
	resp, err := bot.Request(wh)
	if err != nil || resp.Description != "Webhook was set" {
		t.Fatalf("setWebhook = %+v, %v", resp, err)
	}
	select {
	case err := <-done:
		wantAPIError(t, err, 409, faketelegram.ConflictWebhook)
	case <-time.After(wait):
		t.Fatal("the waiting poll was not ended by setWebhook")
	}
	_, err = bot.GetUpdates(tgbotapi.UpdateConfig{})
	wantAPIError(t, err, 409, faketelegram.ConflictWebhook)

	srv.PrivateMessage(faketelegram.Alice, "pending")
	info, err := bot.GetWebhookInfo()
	if err != nil || !info.IsSet() || info.URL != "https://bot.example/telegram" || info.PendingUpdateCount != 1 {
		t.Errorf("getWebhookInfo = %+v, %v", info, err)
	}
	if resp, err := bot.Request(tgbotapi.DeleteWebhookConfig{DropPendingUpdates: true}); err != nil || resp.Description != "Webhook was deleted" {
		t.Fatalf("deleteWebhook = %+v, %v", resp, err)
	}
	if srv.Pending() != 0 {
		t.Errorf("drop_pending_updates left %d updates", srv.Pending())
	}
	if _, err := bot.GetUpdates(tgbotapi.UpdateConfig{}); err != nil {
		t.Errorf("getUpdates after deleteWebhook: %v", err)
	}
	if srv.Conflicts() != 2 {
		t.Errorf("conflicts = %d", srv.Conflicts())
	}
}

func TestSendMessageHTML(t *testing.T) {
	t.Parallel()
	srv := faketelegram.New(t)
	bot := newBot(t, srv)

	src := `<b>Done</b>: <a href="https://example.com/r?a=1&amp;b=2">report</a> &lt;ok&gt;`
	m := tgbotapi.NewMessage(faketelegram.Alice, src)
	m.ParseMode = tgbotapi.ModeHTML
	sent, err := bot.Send(m)
	if err != nil {
		t.Fatal(err)
	}
	want := []tgbotapi.MessageEntity{
		{Type: "bold", Offset: 0, Length: 4},
		{Type: "text_link", Offset: 6, Length: 6, URL: "https://example.com/r?a=1&b=2"},
	}
	if sent.Text != "Done: report <ok>" || !slices.Equal(sent.Entities, want) {
		t.Errorf("sent %q %+v", sent.Text, sent.Entities)
	}
	if got := srv.BotMessages(faketelegram.Alice)[0]; got.Source != src || got.ParseMode != "HTML" {
		t.Errorf("recorded %+v", got)
	}

	for _, c := range []struct{ text, want string }{
		{"<script>alert(1)</script>", `Unsupported start tag "script" at byte offset 0`},
		{"<b>unclosed", `Can't find end tag corresponding to start tag "b"`},
		{"<b><i>x</b></i>", `Unmatched end tag at byte offset 7, expected "</i>", found "</b>"`},
		{"1 < 2", `Unsupported start tag "" at byte offset 2`},
	} {
		m := tgbotapi.NewMessage(faketelegram.Alice, c.text)
		m.ParseMode = tgbotapi.ModeHTML
		_, err := bot.Send(m)
		wantAPIError(t, err, 400, "Bad Request: can't parse entities: "+c.want)
		// The same text without parse_mode is fine.
		if _, err := bot.Send(tgbotapi.NewMessage(faketelegram.Alice, c.text)); err != nil {
			t.Errorf("plain %q: %v", c.text, err)
		}
	}
	if n := len(srv.BotMessages(faketelegram.Alice)); n != 5 {
		t.Errorf("%d messages kept, want the 5 accepted", n)
	}
	m = tgbotapi.NewMessage(faketelegram.Alice, "<b>x</b>")
	m.ParseMode = "html5"
	_, err = bot.Send(m)
	wantAPIError(t, err, 400, "Bad Request: unsupported parse_mode")
	_, err = bot.Send(tgbotapi.NewMessage(faketelegram.Alice, ""))
	wantAPIError(t, err, 400, "Bad Request: message text is empty")
	m = tgbotapi.NewMessage(faketelegram.Alice, "<b> </b>")
	m.ParseMode = tgbotapi.ModeHTML
	_, err = bot.Send(m)
	wantAPIError(t, err, 400, "Bad Request: message text is empty")
}

func TestMessageLengthLimit(t *testing.T) {
	t.Parallel()
	srv := faketelegram.New(t)
	bot := newBot(t, srv)
	for _, c := range []struct {
		name, text, mode string
		ok               bool
	}{
		{"4096 ASCII", strings.Repeat("a", 4096), "", true},
		{"4097 ASCII", strings.Repeat("a", 4097), "", false},
		{"2048 emoji, 4096 UTF-16 units", strings.Repeat("😀", 2048), "", true},
		{"2049 emoji, 4098 UTF-16 units", strings.Repeat("😀", 2049), "", false},
		{"4096 Cyrillic, 8192 bytes", strings.Repeat("ж", 4096), "", true},
		{"tags do not count", "<b>" + strings.Repeat("a", 4096) + "</b>", tgbotapi.ModeHTML, true},
		{"an escape counts once", strings.Repeat("&lt;", 4096), tgbotapi.ModeHTML, true},
		{"4097 escapes", strings.Repeat("&lt;", 4097), tgbotapi.ModeHTML, false},
		{"trailing space is trimmed", strings.Repeat("a", 4096) + "   \n", "", true},
	} {
		m := tgbotapi.NewMessage(faketelegram.Bob, c.text)
		m.ParseMode = c.mode
		_, err := bot.Send(m)
		if c.ok && err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
		if !c.ok {
			if err == nil {
				t.Errorf("%s: accepted", c.name)
				continue
			}
			wantAPIError(t, err, 400, "Bad Request: message is too long")
		}
	}
}

func TestEditMessageText(t *testing.T) {
	t.Parallel()
	srv := faketelegram.New(t)
	bot := newBot(t, srv)
	sent, err := bot.Send(tgbotapi.NewMessage(faketelegram.Alice, "working…"))
	if err != nil {
		t.Fatal(err)
	}

	_, err = bot.Send(tgbotapi.NewEditMessageText(faketelegram.Alice, sent.MessageID, "working…"))
	wantAPIError(t, err, 400, faketelegram.NotModified)
	// The same text in HTML that parses to the same is not a change either.
	e := tgbotapi.NewEditMessageText(faketelegram.Alice, sent.MessageID, " working… ")
	e.ParseMode = tgbotapi.ModeHTML
	_, err = bot.Send(e)
	wantAPIError(t, err, 400, faketelegram.NotModified)

	edited, err := bot.Send(tgbotapi.NewEditMessageText(faketelegram.Alice, sent.MessageID, "<b>done</b> ✓"))
	if err != nil || edited.Text != "<b>done</b> ✓" || edited.EditDate == 0 || edited.MessageID != sent.MessageID {
		t.Fatalf("edit = %+v, %v", edited, err)
	}
	// New markup is a change.
	kb := tgbotapi.NewInlineKeyboardMarkup(tgbotapi.NewInlineKeyboardRow(tgbotapi.NewInlineKeyboardButtonData("Stop", "stop")))
	if _, err := bot.Send(tgbotapi.NewEditMessageTextAndMarkup(faketelegram.Alice, sent.MessageID, "<b>done</b> ✓", kb)); err != nil {
		t.Errorf("edit with markup: %v", err)
	}
	got, _ := srv.Message(faketelegram.Alice, sent.MessageID)
	if got.Edits != 2 || got.Text != "<b>done</b> ✓" || !strings.Contains(string(got.ReplyMarkup), `"callback_data":"stop"`) {
		t.Errorf("kept %+v (markup %s)", got, got.ReplyMarkup)
	}

	_, err = bot.Send(tgbotapi.NewEditMessageText(faketelegram.Alice, 9999, "x"))
	wantAPIError(t, err, 400, "Bad Request: message to edit not found")
	in := srv.PrivateMessage(faketelegram.Alice, "mine")
	_, err = bot.Send(tgbotapi.NewEditMessageText(faketelegram.Alice, in.Message.MessageID, "yours"))
	wantAPIError(t, err, 400, "Bad Request: message can't be edited")
	_, err = bot.Send(tgbotapi.NewEditMessageText(faketelegram.Alice, sent.MessageID, strings.Repeat("x", 4097)))
	wantAPIError(t, err, 400, "Bad Request: message is too long")

	if _, err := bot.Request(tgbotapi.NewDeleteMessage(faketelegram.Alice, sent.MessageID)); err != nil {
		t.Fatal(err)
	}
	_, err = bot.Request(tgbotapi.NewDeleteMessage(faketelegram.Alice, sent.MessageID))
	wantAPIError(t, err, 400, "Bad Request: message to delete not found")
	if n := len(srv.BotMessages(faketelegram.Alice)); n != 0 {
		t.Errorf("%d bot messages after the delete", n)
	}
}

func TestRepliesThreadsAndChats(t *testing.T) {
	t.Parallel()
	srv := faketelegram.New(t)
	bot := newBot(t, srv)
	in := srv.TopicMessage(faketelegram.Forum, 7, faketelegram.Alice, "help")
	if in.Message.ReplyToMessage == nil || in.Message.ReplyToMessage.ForumTopicCreated == nil || !in.Message.IsTopicMessage {
		t.Errorf("topic message = %+v", in.Message)
	}

	// tgbotapi has no message_thread_id nor reply_parameters: MakeRequest.
	resp, err := bot.MakeRequest("sendMessage", tgbotapi.Params{
		"chat_id": chatID(faketelegram.Forum), "text": "on it", "message_thread_id": "7",
		"reply_parameters": fmt.Sprintf(`{"message_id":%d}`, in.Message.MessageID),
	})
	if err != nil {
		t.Fatal(err)
	}
	var got faketelegram.Message
	if err := json.Unmarshal(resp.Result, &got); err != nil {
		t.Fatal(err)
	}
	if got.MessageThreadID != 7 || !got.IsTopicMessage || got.ReplyToMessage.MessageID != in.Message.MessageID {
		t.Errorf("sent = %+v", got)
	}
	// Without a reply, a message in a topic replies to the topic's start.
	resp, err = bot.MakeRequest("sendMessage", tgbotapi.Params{"chat_id": chatID(faketelegram.Forum), "text": "x", "message_thread_id": "7"})
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(resp.Result, &got); err != nil || got.ReplyToMessage == nil || got.ReplyToMessage.MessageID != 7 {
		t.Errorf("sent = %+v, %v", got, err)
	}

	m := tgbotapi.NewMessage(faketelegram.Alice, "to nothing")
	m.ReplyToMessageID = 4242
	_, err = bot.Send(m)
	wantAPIError(t, err, 400, "Bad Request: message to be replied not found")
	m.AllowSendingWithoutReply = true
	if sent, err := bot.Send(m); err != nil || sent.ReplyToMessage != nil {
		t.Errorf("allow_sending_without_reply: %+v, %v", sent, err)
	}
	_, err = bot.Send(tgbotapi.NewMessage(-100999, "x"))
	wantAPIError(t, err, 400, "Bad Request: chat not found")
	_, err = bot.Send(tgbotapi.NewMessage(faketelegram.HelperBot, "x"))
	wantAPIError(t, err, 403, "Forbidden: bot can't send messages to bots")
	if _, err := bot.Send(tgbotapi.NewMessageToChannel("@crew_news", "news")); err != nil {
		t.Errorf("to @crew_news: %v", err)
	}
}

func TestRateLimit(t *testing.T) {
	t.Parallel()
	srv := faketelegram.New(t)
	bot := newBot(t, srv)
	srv.RateLimitNext("sendMessage", 1, 3)
	_, err := bot.Send(tgbotapi.NewMessage(faketelegram.Alice, "hi"))
	e := tgError(t, err)
	if e.Code != 429 || e.RetryAfter != 3 || e.Message != "Too Many Requests: retry after 3" {
		t.Errorf("error = %+v", e)
	}
	if _, err := bot.Send(tgbotapi.NewMessage(faketelegram.Alice, "hi")); err != nil {
		t.Errorf("after the limit: %v", err)
	}
	if c := srv.Calls("sendMessage")[0]; c.Status != 429 || c.RetryAfter != 3 {
		t.Errorf("recorded %+v", c)
	}

	// tgbotapi's UploadFiles forgets error_code: a 429 on an upload comes
	// as Code 0, with RetryAfter.
	srv.RateLimitNext("sendDocument", 1, 7)
	_, err = bot.Send(tgbotapi.NewDocument(faketelegram.Alice, tgbotapi.FileBytes{Name: "a.txt", Bytes: []byte("a")}))
	if e := tgError(t, err); e.Code != 0 || e.RetryAfter != 7 {
		t.Errorf("upload error = %+v", e)
	}

	srv.RateLimitFor("sendChatAction", time.Hour, 1)
	for range 3 {
		_, err := bot.Request(tgbotapi.NewChatAction(faketelegram.Alice, tgbotapi.ChatTyping))
		if e := tgError(t, err); e.Code != 429 {
			t.Errorf("storm: %+v", e)
		}
	}
}

func TestFaults(t *testing.T) {
	t.Parallel()
	srv := faketelegram.New(t)
	bot := newBot(t, srv)
	srv.FailNext("sendMessage", 1, 403, "Forbidden: bot was blocked by the user")
	_, err := bot.Send(tgbotapi.NewMessage(faketelegram.Alice, "hi"))
	wantAPIError(t, err, 403, "Forbidden: bot was blocked by the user")

	srv.DisconnectNext("sendMessage", 1)
	_, err = bot.Send(tgbotapi.NewMessage(faketelegram.Alice, "hi"))
	var e *tgbotapi.Error
	if err == nil || errors.As(err, &e) {
		t.Errorf("dropped connection: %v", err)
	}
	if c := srv.Calls("sendMessage")[1]; c.Status != 0 || c.OK() {
		t.Errorf("recorded %+v", c)
	}
	if n := len(srv.BotMessages(faketelegram.Alice)); n != 0 {
		t.Errorf("a failed call kept %d messages", n)
	}

	// Unknown methods answer 404 and are recorded; names are
	// case-insensitive.
	_, err = bot.MakeRequest("sendSticker", tgbotapi.Params{"chat_id": "1001"})
	wantAPIError(t, err, 404, "Not Found")
	if c := srv.Calls("sendSticker"); len(c) != 1 || c[0].Status != 404 {
		t.Errorf("recorded %+v", c)
	}
	if _, err := bot.MakeRequest("SENDMESSAGE", tgbotapi.Params{"chat_id": "1001", "text": "x"}); err != nil {
		t.Errorf("SENDMESSAGE: %v", err)
	}
	if n := srv.Count("sendMessage"); n != 3 {
		t.Errorf("Count(sendMessage) = %d", n)
	}
}

func TestSendDocument(t *testing.T) {
	t.Parallel()
	srv := faketelegram.New(t)
	bot := newBot(t, srv)
	doc := tgbotapi.NewDocument(faketelegram.Alice, tgbotapi.FileBytes{Name: "report.txt", Bytes: []byte("all good")})
	doc.Caption = "<i>the</i> report"
	doc.ParseMode = tgbotapi.ModeHTML
	sent, err := bot.Send(doc)
	if err != nil {
		t.Fatal(err)
	}
	if sent.Document == nil || sent.Document.FileName != "report.txt" || sent.Document.FileSize != 8 || sent.Caption != "the report" {
		t.Errorf("sent = %+v (document %+v)", sent, sent.Document)
	}
	docs := srv.Documents()
	if len(docs) != 1 || docs[0].Chat != faketelegram.Alice || docs[0].File.Name != "report.txt" ||
		string(docs[0].File.Content) != "all good" || docs[0].Caption != "the report" || docs[0].File.MimeType != "text/plain; charset=utf-8" {
		t.Errorf("documents = %+v", docs)
	}
	if f := srv.Calls("sendDocument")[0].Files; len(f) != 1 || f[0].Field != "document" || f[0].Size != 8 {
		t.Errorf("recorded files %+v", f)
	}

	// Into a forum topic, with message_thread_id through UploadFiles.
	topic := srv.CreateTopic(faketelegram.Forum, faketelegram.Alice, "Reports")
	thread := topic.Message.MessageID
	resp, err := bot.UploadFiles("sendDocument",
		tgbotapi.Params{"chat_id": chatID(faketelegram.Forum), "message_thread_id": strconv.Itoa(thread)},
		[]tgbotapi.RequestFile{{Name: "document", Data: tgbotapi.FileBytes{Name: "data.csv", Bytes: []byte("a,b\n1,2\n")}}})
	if err != nil {
		t.Fatal(err)
	}
	var m faketelegram.Message
	if err := json.Unmarshal(resp.Result, &m); err != nil || m.MessageThreadID != thread || !m.IsTopicMessage {
		t.Errorf("sent = %+v, %v", m, err)
	}
	if d := srv.Documents()[1]; d.Chat != faketelegram.Forum || d.ThreadID != thread || d.File.Name != "data.csv" {
		t.Errorf("document = %+v", d)
	}

	// The bot's own file can be fetched back; a file_id can be sent again.
	f, err := bot.GetFile(tgbotapi.FileConfig{FileID: sent.Document.FileID})
	if err != nil || f.FileSize != 8 {
		t.Fatalf("getFile = %+v, %v", f, err)
	}
	if got := download(t, srv.FileURL(f.FilePath)); got != "all good" {
		t.Errorf("download = %q", got)
	}
	if _, err := bot.Send(tgbotapi.NewDocument(faketelegram.Bob, tgbotapi.FileID(sent.Document.FileID))); err != nil {
		t.Errorf("by file_id: %v", err)
	}
	_, err = bot.Send(tgbotapi.NewDocument(faketelegram.Bob, tgbotapi.FileID("nonsense")))
	wantAPIError(t, err, 400, "Bad Request: wrong file identifier/HTTP URL specified")
}

func download(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	return string(b)
}

func TestGetFileAndDownload(t *testing.T) {
	t.Parallel()
	srv := faketelegram.New(t)
	bot := newBot(t, srv)
	f := srv.AddFile(faketelegram.File{Name: "notes.md", MimeType: "text/markdown", Content: []byte("# notes")})
	in := srv.Document(faketelegram.Group, faketelegram.Alice, f, "@firstmate_bot read this")
	us, err := bot.GetUpdates(tgbotapi.UpdateConfig{})
	if err != nil || len(us) != 1 {
		t.Fatalf("getUpdates = %+v, %v", us, err)
	}
	m := us[0].Message
	if m.Document == nil || m.Document.FileID != f.FileID || m.Document.FileName != "notes.md" || m.Document.FileSize != 7 ||
		len(m.CaptionEntities) != 1 || m.CaptionEntities[0].Type != "mention" || m.MessageID != in.Message.MessageID {
		t.Errorf("message = %+v", m)
	}

	file, err := bot.GetFile(tgbotapi.FileConfig{FileID: m.Document.FileID})
	if err != nil || file.FilePath != f.FilePath || file.FileSize != 7 {
		t.Fatalf("getFile = %+v, %v", file, err)
	}
	// File.Link ignores the custom endpoint: a bot must build the URL.
	if link := file.Link(bot.Token); !strings.HasPrefix(link, "https://api.telegram.org/file/bot") {
		t.Errorf("File.Link = %s; tgbotapi changed, the adapter may use it", link)
	}
	if got := download(t, srv.URL()+"/file/bot"+bot.Token+"/"+file.FilePath); got != "# notes" {
		t.Errorf("download = %q", got)
	}
	resp, err := http.Get(srv.URL() + "/file/botwrong/" + file.FilePath)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("download with a wrong token: %d", resp.StatusCode)
	}
	if d := srv.Downloads(); !slices.Equal(d, []string{f.FilePath}) {
		t.Errorf("downloads = %v", d)
	}

	// A photo comes in sizes, largest last, each downloadable.
	p := srv.Photo(faketelegram.Alice, faketelegram.Alice, faketelegram.File{Name: "cat.jpg", MimeType: "image/jpeg", Content: []byte("JFIF…")}, "a cat")
	sizes := p.Message.Photo
	if len(sizes) != 2 || sizes[1].Width <= sizes[0].Width || p.Message.Caption != "a cat" {
		t.Fatalf("photo = %+v", p.Message)
	}
	pf, err := bot.GetFile(tgbotapi.FileConfig{FileID: sizes[1].FileID})
	if err != nil || download(t, srv.FileURL(pf.FilePath)) != "JFIF…" {
		t.Errorf("photo file = %+v, %v", pf, err)
	}

	// Past 20 MB the cloud Bot API does not serve a file.
	big := srv.AddFile(faketelegram.File{Name: "huge.zip", Size: 30 << 20})
	_, err = bot.GetFile(tgbotapi.FileConfig{FileID: big.FileID})
	wantAPIError(t, err, 400, "Bad Request: file is too big")
	_, err = bot.GetFile(tgbotapi.FileConfig{FileID: "nope"})
	wantAPIError(t, err, 400, "Bad Request: invalid file_id")
}

func TestUpdateBuilders(t *testing.T) {
	t.Parallel()
	srv := faketelegram.New(t)
	bot := newBot(t, srv)
	sent, err := bot.Send(tgbotapi.NewMessage(faketelegram.Group, "I am here"))
	if err != nil {
		t.Fatal(err)
	}
	kb := tgbotapi.NewInlineKeyboardMarkup(tgbotapi.NewInlineKeyboardRow(tgbotapi.NewInlineKeyboardButtonData("Stop", "stop")))
	withKB := tgbotapi.NewMessage(faketelegram.Alice, "running")
	withKB.ReplyMarkup = kb
	running, err := bot.Send(withKB)
	if err != nil {
		t.Fatal(err)
	}
	if running.ReplyMarkup == nil || running.ReplyMarkup.InlineKeyboard[0][0].Text != "Stop" {
		t.Errorf("inline keyboard = %+v", running.ReplyMarkup)
	}

	mention := srv.Mention(faketelegram.Group, faketelegram.Alice, "👋 hey @firstmate_bot, look")
	prefixed := srv.Mention(faketelegram.Group, faketelegram.Bob, "status?")
	command := srv.Command(faketelegram.Group, faketelegram.Bob, "status", "now")
	reply := srv.Reply(faketelegram.Group, faketelegram.Bob, sent.MessageID, "thanks")
	fromBot := srv.BotMessage(faketelegram.Group, faketelegram.HelperBot, "beep")
	edited := srv.EditMessage(faketelegram.Group, mention.Message.MessageID, "@firstmate_bot edited")
	post := srv.ChannelPost(faketelegram.Channel, "news")
	added := srv.MyChatMember(faketelegram.Group, faketelegram.Alice, "left", "member")
	blocked := srv.MyChatMember(faketelegram.Bob, faketelegram.Bob, "member", "kicked")
	press := srv.CallbackQuery(faketelegram.Alice, faketelegram.Alice, running.MessageID, "stop")

	us, err := bot.GetUpdates(tgbotapi.UpdateConfig{})
	if err != nil || len(us) != 10 {
		t.Fatalf("getUpdates = %d updates, %v", len(us), err)
	}
	byID := map[int]tgbotapi.Update{}
	for _, u := range us {
		byID[u.UpdateID] = u
	}

	m := byID[mention.UpdateID].Message
	if !slices.Equal(m.Entities, []tgbotapi.MessageEntity{{Type: "mention", Offset: 7, Length: 14}}) {
		t.Errorf("mention entities = %+v", m.Entities)
	}
	if m := byID[prefixed.UpdateID].Message; m.Text != "@firstmate_bot status?" || m.Entities[0].Offset != 0 {
		t.Errorf("prefixed mention = %q %+v", m.Text, m.Entities)
	}
	if m := byID[command.UpdateID].Message; !m.IsCommand() || m.Command() != "status" ||
		m.CommandWithAt() != "status@firstmate_bot" || m.CommandArguments() != "now" {
		t.Errorf("command = %q %+v", m.Text, m.Entities)
	}
	if m := byID[reply.UpdateID].Message; m.ReplyToMessage == nil || m.ReplyToMessage.From.UserName != bot.Self.UserName ||
		m.ReplyToMessage.MessageID != sent.MessageID || m.ReplyToMessage.ReplyToMessage != nil {
		t.Errorf("reply = %+v", m.ReplyToMessage)
	}
	if m := byID[fromBot.UpdateID].Message; !m.From.IsBot || m.From.UserName != "helper_bot" {
		t.Errorf("bot message from %+v", m.From)
	}
	if u := byID[edited.UpdateID]; u.Message != nil || u.EditedMessage == nil || u.EditedMessage.MessageID != mention.Message.MessageID ||
		u.EditedMessage.EditDate == 0 || u.EditedMessage.Text != "@firstmate_bot edited" {
		t.Errorf("edited = %+v", u)
	}
	if u := byID[post.UpdateID]; u.ChannelPost == nil || u.ChannelPost.From != nil || u.ChannelPost.SenderChat.ID != faketelegram.Channel ||
		!u.ChannelPost.Chat.IsChannel() {
		t.Errorf("channel post = %+v", u.ChannelPost)
	}
	if u := byID[added.UpdateID]; u.MyChatMember == nil || u.MyChatMember.NewChatMember.Status != "member" ||
		u.MyChatMember.NewChatMember.User.ID != bot.Self.ID || !u.MyChatMember.Chat.IsSuperGroup() {
		t.Errorf("my_chat_member = %+v", u.MyChatMember)
	}
	if u := byID[blocked.UpdateID]; !u.MyChatMember.Chat.IsPrivate() || u.MyChatMember.NewChatMember.Status != "kicked" {
		t.Errorf("blocked = %+v", u.MyChatMember)
	}
	q := byID[press.UpdateID].CallbackQuery
	if q == nil || q.Data != "stop" || q.Message.MessageID != running.MessageID || q.From.ID != faketelegram.Alice {
		t.Fatalf("callback query = %+v", q)
	}
	if _, err := bot.Request(tgbotapi.NewCallback(q.ID, "stopping")); err != nil {
		t.Errorf("answerCallbackQuery: %v", err)
	}
	_, err = bot.Request(tgbotapi.NewCallback(q.ID, "again"))
	wantAPIError(t, err, 400, "Bad Request: query is too old and response timeout expired or query ID is invalid")
	if a := srv.CallbackAnswers(); len(a) != 1 || a[0].QueryID != q.ID || a[0].Text != "stopping" {
		t.Errorf("answers = %+v", a)
	}

	// The fields tgbotapi lacks are in the raw JSON.
	topic := srv.CreateTopic(faketelegram.Forum, faketelegram.Alice, "Ideas")
	inTopic := srv.Mention(faketelegram.Forum, faketelegram.Bob, "an idea", faketelegram.InTopic(topic.Message.MessageID))
	resp, err := bot.MakeRequest("getUpdates", tgbotapi.Params{"offset": strconv.Itoa(topic.UpdateID)})
	if err != nil {
		t.Fatal(err)
	}
	var raw []faketelegram.Update
	if err := json.Unmarshal(resp.Result, &raw); err != nil || len(raw) != 2 {
		t.Fatalf("raw updates %s, %v", resp.Result, err)
	}
	if c := raw[0].Message; c.ForumTopicCreated == nil || c.ForumTopicCreated.Name != "Ideas" || c.MessageThreadID != c.MessageID {
		t.Errorf("topic created = %+v", c)
	}
	if m := raw[1].Message; m.MessageID != inTopic.Message.MessageID || m.MessageThreadID != topic.Message.MessageID ||
		!m.IsTopicMessage || m.ReplyToMessage.MessageID != topic.Message.MessageID {
		t.Errorf("topic message = %+v", m)
	}
}

func TestChatActionsDraftsAndCommands(t *testing.T) {
	t.Parallel()
	srv := faketelegram.New(t)
	bot := newBot(t, srv)
	if _, err := bot.Request(tgbotapi.NewChatAction(faketelegram.Alice, tgbotapi.ChatTyping)); err != nil {
		t.Fatal(err)
	}
	if _, err := bot.MakeRequest("sendChatAction", tgbotapi.Params{"chat_id": chatID(faketelegram.Forum), "action": "typing", "message_thread_id": "5"}); err != nil {
		t.Fatal(err)
	}
	_, err := bot.Request(tgbotapi.NewChatAction(faketelegram.Alice, "dancing"))
	wantAPIError(t, err, 400, "Bad Request: wrong parameter action in request")
	a := srv.ChatActions()
	if len(a) != 2 || a[0].Chat != faketelegram.Alice || a[0].Action != "typing" || a[1].Chat != faketelegram.Forum || a[1].ThreadID != 5 {
		t.Errorf("chat actions = %+v", a)
	}

	if _, err := bot.MakeRequest("sendMessageDraft", tgbotapi.Params{
		"chat_id": chatID(faketelegram.Alice), "draft_id": "17", "text": "<b>Think</b>ing", "parse_mode": "HTML",
	}); err != nil {
		t.Fatal(err)
	}
	if d := srv.Drafts(); len(d) != 1 || d[0].DraftID != 17 || d[0].Text != "Thinking" || d[0].Source != "<b>Think</b>ing" {
		t.Errorf("drafts = %+v", d)
	}
	_, err = bot.MakeRequest("sendMessageDraft", tgbotapi.Params{"chat_id": chatID(faketelegram.Group), "draft_id": "1", "text": "x"})
	if e := tgError(t, err); e.Code != 400 {
		t.Errorf("draft in a group: %+v", e)
	}
	old := faketelegram.New(t, faketelegram.WithoutMethods("sendMessageDraft"))
	_, err = newBot(t, old).MakeRequest("sendMessageDraft", tgbotapi.Params{"chat_id": chatID(faketelegram.Alice), "draft_id": "1", "text": "x"})
	wantAPIError(t, err, 404, "Not Found")

	cmds := []tgbotapi.BotCommand{{Command: "help", Description: "Show help"}, {Command: "reset", Description: "Start over"}}
	if _, err := bot.Request(tgbotapi.NewSetMyCommands(cmds...)); err != nil {
		t.Fatal(err)
	}
	if got := srv.Commands(); len(got) != 2 || got[1].Command != "reset" {
		t.Errorf("commands = %+v", got)
	}
	if got, err := bot.GetMyCommands(); err != nil || len(got) != 2 {
		t.Errorf("getMyCommands = %+v, %v", got, err)
	}
	_, err = bot.Request(tgbotapi.NewSetMyCommands(tgbotapi.BotCommand{Command: "Help!", Description: "x"}))
	wantAPIError(t, err, 400, "Bad Request: BOT_COMMAND_INVALID")
}

// A request with a JSON body, as other clients send them.
func TestJSONBody(t *testing.T) {
	t.Parallel()
	srv := faketelegram.New(t)
	in := srv.PrivateMessage(faketelegram.Alice, "hi")
	body := fmt.Sprintf(`{"chat_id":%d,"text":"<i>json</i>","parse_mode":"HTML","reply_parameters":{"message_id":%d}}`,
		faketelegram.Alice, in.Message.MessageID)
	resp, err := http.Post(srv.URL()+"/bot"+srv.Token()+"/sendMessage", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got struct {
		OK     bool                 `json:"ok"`
		Result faketelegram.Message `json:"result"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || !got.OK {
		t.Fatalf("answer %+v, %v", got, err)
	}
	if got.Result.Text != "json" || got.Result.Entities[0].Type != "italic" || got.Result.ReplyToMessage.MessageID != in.Message.MessageID {
		t.Errorf("sent = %+v", got.Result)
	}
	c := srv.Calls("sendMessage")[0]
	if c.Params.Get("chat_id") != "1001" || c.Params.Get("reply_parameters") != fmt.Sprintf(`{"message_id":%d}`, in.Message.MessageID) {
		t.Errorf("params = %v", c.Params)
	}
}

func TestWebhookDelivery(t *testing.T) {
	t.Parallel()
	const secret = "s3cret_token-1"
	var failures atomic.Int32
	failures.Store(1)
	got := make(chan tgbotapi.Update, 10)
	endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Telegram-Bot-Api-Secret-Token") != secret {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var u tgbotapi.Update
		if err := json.NewDecoder(r.Body).Decode(&u); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if failures.Add(-1) >= 0 {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		got <- u
	}))
	defer endpoint.Close()

	srv := faketelegram.New(t, faketelegram.WithWebhookDelivery(10*time.Millisecond))
	bot := newBot(t, srv)
	// tgbotapi's WebhookConfig has no secret_token: MakeRequest.
	if _, err := bot.MakeRequest("setWebhook", tgbotapi.Params{
		"url": endpoint.URL, "secret_token": secret, "allowed_updates": `["message","callback_query"]`,
	}); err != nil {
		t.Fatal(err)
	}
	if wh, ok := srv.Webhook(); !ok || wh.URL != endpoint.URL || wh.SecretToken != secret || !slices.Equal(wh.AllowedUpdates, []string{"message", "callback_query"}) {
		t.Errorf("webhook = %+v", wh)
	}

	u := srv.PrivateMessage(faketelegram.Alice, "via webhook")
	select {
	case d := <-got:
		if d.UpdateID != u.UpdateID || d.Message.Text != "via webhook" {
			t.Errorf("delivered %+v", d)
		}
	case <-time.After(wait):
		t.Fatal("nothing delivered")
	}
	if !srv.WaitFor(wait, func() bool { return srv.Pending() == 0 }) {
		t.Error("the delivered update is still pending")
	}
	ds := srv.Deliveries()
	if len(ds) != 2 || ds[0].Status != 500 || ds[1].Status != 200 || ds[1].UpdateID != u.UpdateID || ds[1].Secret != secret {
		t.Errorf("deliveries = %+v", ds)
	}
	info, err := bot.GetWebhookInfo()
	if err != nil || info.LastErrorMessage != "Wrong response from the webhook: 500 Internal Server Error" || info.LastErrorDate == 0 {
		t.Errorf("getWebhookInfo = %+v, %v", info, err)
	}

	ctx := context.Background()
	for _, c := range []struct {
		name string
		opts []faketelegram.DeliverOption
		want int
	}{
		{"right secret", nil, 200},
		{"wrong secret", []faketelegram.DeliverOption{faketelegram.WrongSecret()}, 401},
		{"no secret", []faketelegram.DeliverOption{faketelegram.NoSecret()}, 401},
	} {
		status, err := srv.DeliverWebhook(ctx, endpoint.URL, u, secret, c.opts...)
		if err != nil || status != c.want {
			t.Errorf("%s: %d, %v", c.name, status, err)
		}
	}
	if d := <-got; d.UpdateID != u.UpdateID {
		t.Errorf("redelivered %+v", d)
	}
	if _, err := srv.DeliverWebhook(ctx, "http://127.0.0.1:1/nothing", u, secret); err == nil {
		t.Error("a delivery to nothing did not fail")
	}
}

// Close ends a long poll in flight instead of waiting for its timeout.
func TestCloseEndsLongPoll(t *testing.T) {
	t.Parallel()
	srv := faketelegram.New(nil)
	bot := newBot(t, srv)
	done := make(chan error, 1)
	go func() {
		_, err := bot.GetUpdates(tgbotapi.UpdateConfig{Timeout: 60})
		done <- err
	}()
	if !srv.WaitFor(wait, func() bool { return srv.Polling() == 1 }) {
		t.Fatal("not polling")
	}
	closed := make(chan struct{})
	go func() {
		srv.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(wait):
		t.Fatal("Close waited for the long poll")
	}
	if err := <-done; err != nil {
		t.Errorf("getUpdates at Close: %v", err)
	}
	// After Close, requests fail.
	if _, err := bot.GetMe(); err == nil {
		t.Error("getMe after Close succeeded")
	}
}
