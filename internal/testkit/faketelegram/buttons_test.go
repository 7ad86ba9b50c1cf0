package faketelegram_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/firstmate/firstmate/internal/testkit/faketelegram"
)

func keyboardOf(rows ...[]tgbotapi.InlineKeyboardButton) tgbotapi.InlineKeyboardMarkup {
	return tgbotapi.NewInlineKeyboardMarkup(rows...)
}

func TestInlineKeyboards(t *testing.T) {
	t.Parallel()
	srv := faketelegram.New(t)
	bot := newBot(t, srv)

	msg := tgbotapi.NewMessage(faketelegram.Group, "approve?")
	msg.ReplyMarkup = keyboardOf(
		tgbotapi.NewInlineKeyboardRow(tgbotapi.NewInlineKeyboardButtonData("Approve", "fm:ok:1"), tgbotapi.NewInlineKeyboardButtonData("Deny", "fm:no:1")),
		tgbotapi.NewInlineKeyboardRow(tgbotapi.NewInlineKeyboardButtonData("exec: ask", "fm:pol:3:deny:group:exec")),
	)
	sent, err := bot.Send(msg)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := srv.Message(faketelegram.Group, sent.MessageID)
	kb := got.Keyboard()
	if len(kb) != 2 || len(kb[0]) != 2 || kb[0][1].Text != "Deny" || kb[0][1].CallbackData != "fm:no:1" {
		t.Fatalf("keyboard %+v", kb)
	}
	if b, ok := got.Button("exec"); !ok || b.CallbackData != "fm:pol:3:deny:group:exec" {
		t.Errorf("Button by prefix = %+v, %v", b, ok)
	}
	if _, ok := got.Button("Maybe"); ok {
		t.Error("a button that is not there was found")
	}

	// Telegram's checks of a keyboard.
	bad := func(kb tgbotapi.InlineKeyboardMarkup, desc string) {
		t.Helper()
		m := tgbotapi.NewMessage(faketelegram.Group, "x")
		m.ReplyMarkup = kb
		_, err := bot.Send(m)
		wantAPIError(t, err, 400, desc)
	}
	bad(keyboardOf(tgbotapi.NewInlineKeyboardRow(tgbotapi.NewInlineKeyboardButtonData("Long", strings.Repeat("x", 65)))), "Bad Request: BUTTON_DATA_INVALID")
	bad(keyboardOf(tgbotapi.NewInlineKeyboardRow(tgbotapi.NewInlineKeyboardButtonData("", "x"))), "Bad Request: BUTTON_TEXT_INVALID")
	var many []tgbotapi.InlineKeyboardButton
	for range 101 {
		many = append(many, tgbotapi.NewInlineKeyboardButtonData("b", "b"))
	}
	bad(keyboardOf(many), "Bad Request: reply markup is too long")
	_, err = bot.MakeRequest("sendMessage", tgbotapi.Params{"chat_id": chatID(faketelegram.Group), "text": "x",
		"reply_markup": `{"inline_keyboard":[[{"text":"just text"}]]}`})
	wantAPIError(t, err, 400, "Bad Request: can't parse inline keyboard button: Text buttons are unallowed in the inline keyboard")

	// editMessageText without reply_markup removes the keyboard, as
	// Telegram does.
	if _, err := bot.Send(tgbotapi.NewEditMessageText(faketelegram.Group, sent.MessageID, "approved")); err != nil {
		t.Fatal(err)
	}
	if got, _ := srv.Message(faketelegram.Group, sent.MessageID); got.ReplyMarkup != nil || got.Keyboard() != nil {
		t.Errorf("keyboard after an edit without one: %s", got.ReplyMarkup)
	}

	// editMessageReplyMarkup puts one back, and takes it away.
	one := keyboardOf(tgbotapi.NewInlineKeyboardRow(tgbotapi.NewInlineKeyboardButtonData("Again", "again")))
	if _, err := bot.Send(tgbotapi.NewEditMessageReplyMarkup(faketelegram.Group, sent.MessageID, one)); err != nil {
		t.Fatal(err)
	}
	got, _ = srv.Message(faketelegram.Group, sent.MessageID)
	if b, ok := got.Button("Again"); !ok || b.CallbackData != "again" || got.Text != "approved" || got.Edits != 1 {
		t.Errorf("after editMessageReplyMarkup: %+v %s", got, got.ReplyMarkup)
	}
	_, err = bot.Send(tgbotapi.NewEditMessageReplyMarkup(faketelegram.Group, sent.MessageID, one))
	wantAPIError(t, err, 400, faketelegram.NotModified)
	if _, err := bot.MakeRequest("editMessageReplyMarkup", tgbotapi.Params{"chat_id": chatID(faketelegram.Group), "message_id": chatID(int64(sent.MessageID))}); err != nil {
		t.Fatal(err)
	}
	if got, _ := srv.Message(faketelegram.Group, sent.MessageID); got.ReplyMarkup != nil {
		t.Errorf("keyboard after removing it: %s", got.ReplyMarkup)
	}
	_, err = bot.Send(tgbotapi.NewEditMessageReplyMarkup(faketelegram.Group, 9999, one))
	wantAPIError(t, err, 400, "Bad Request: message to edit not found")
	mine := srv.Mention(faketelegram.Group, faketelegram.Alice, "hi")
	_, err = bot.Send(tgbotapi.NewEditMessageReplyMarkup(faketelegram.Group, mine.Message.MessageID, one))
	wantAPIError(t, err, 400, "Bad Request: message can't be edited")
}

func TestCallbackQueries(t *testing.T) {
	t.Parallel()
	srv := faketelegram.New(t)
	bot := newBot(t, srv)
	msg := tgbotapi.NewMessage(faketelegram.Forum, "approve?")
	msg.ReplyMarkup = keyboardOf(tgbotapi.NewInlineKeyboardRow(tgbotapi.NewInlineKeyboardButtonData("Approve", "fm:ok:1")))
	topic := srv.CreateTopic(faketelegram.Forum, faketelegram.Alice, "Ops")
	sent, err := bot.Send(msg)
	if err != nil {
		t.Fatal(err)
	}
	// tgbotapi has no message_thread_id: post into the topic by hand.
	resp, err := bot.MakeRequest("sendMessage", tgbotapi.Params{"chat_id": chatID(faketelegram.Forum), "text": "in the topic",
		"message_thread_id": chatID(int64(topic.Message.MessageID)),
		"reply_markup":      `{"inline_keyboard":[[{"text":"Approve","callback_data":"fm:ok:2"}]]}`})
	if err != nil {
		t.Fatal(err)
	}
	var inTopic faketelegram.Message
	_ = json.Unmarshal(resp.Result, &inTopic)

	press, err := srv.PressButton(faketelegram.Forum, faketelegram.Bob, inTopic.MessageID, "Approve")
	if err != nil {
		t.Fatal(err)
	}
	q := press.CallbackQuery
	if q.Data != "fm:ok:2" || q.From.ID != faketelegram.Bob || q.Message.MessageThreadID != topic.Message.MessageID ||
		!q.Message.IsTopicMessage || q.Message.Date == 0 || q.Message.Keyboard() == nil {
		t.Errorf("press in a topic = %+v", q)
	}
	if _, err := srv.PressButton(faketelegram.Forum, faketelegram.Bob, sent.MessageID, "Deny"); err == nil {
		t.Error("a press of a missing button was queued")
	}

	// A deleted message's button comes with an inaccessible message.
	if _, err := bot.Request(tgbotapi.NewDeleteMessage(faketelegram.Forum, sent.MessageID)); err != nil {
		t.Fatal(err)
	}
	old := srv.CallbackQuery(faketelegram.Forum, faketelegram.Alice, sent.MessageID, "fm:ok:1")
	if m := old.CallbackQuery.Message; m == nil || m.Date != 0 || m.MessageID != sent.MessageID || m.Chat.ID != faketelegram.Forum || m.Text != "" {
		t.Errorf("inaccessible message = %+v", m)
	}
	inline := srv.InlineCallbackQuery(faketelegram.Alice, "AgAAAInline", "x")
	if inline.CallbackQuery.Message != nil || inline.CallbackQuery.InlineMessageID != "AgAAAInline" {
		t.Errorf("inline query = %+v", inline.CallbackQuery)
	}
	var raw []json.RawMessage
	resp, err = bot.MakeRequest("getUpdates", tgbotapi.Params{"offset": chatID(int64(old.UpdateID))})
	if err != nil {
		t.Fatal(err)
	}
	_ = json.Unmarshal(resp.Result, &raw)
	if len(raw) != 2 || !strings.Contains(string(raw[0]), `"date":0`) {
		t.Errorf("updates %s", raw)
	}

	// Answers: recorded, once per query, at most 200 characters.
	_, err = bot.Request(tgbotapi.CallbackConfig{CallbackQueryID: q.ID, Text: strings.Repeat("x", 201)})
	wantAPIError(t, err, 400, "Bad Request: MESSAGE_TOO_LONG")
	if _, ok := srv.CallbackAnswer(q.ID); ok {
		t.Error("a refused answer was recorded")
	}
	if _, err := bot.Request(tgbotapi.CallbackConfig{CallbackQueryID: q.ID, Text: "Approved", ShowAlert: true}); err != nil {
		t.Fatal(err)
	}
	if a, ok := srv.WaitCallbackAnswer(q.ID, wait); !ok || a.Text != "Approved" || !a.ShowAlert {
		t.Errorf("answer = %+v, %v", a, ok)
	}
	_, err = bot.Request(tgbotapi.NewCallback(q.ID, ""))
	wantAPIError(t, err, 400, "Bad Request: query is too old and response timeout expired or query ID is invalid")
	_, err = bot.Request(tgbotapi.NewCallback("12345", ""))
	wantAPIError(t, err, 400, "Bad Request: query is too old and response timeout expired or query ID is invalid")
	if _, ok := srv.CallbackAnswer(inline.CallbackQuery.ID); ok {
		t.Error("an answer that was never given was found")
	}
}

// A press reaches a webhook like any update.
func TestCallbackQueryByWebhook(t *testing.T) {
	t.Parallel()
	srv := faketelegram.New(t, faketelegram.WithWebhookDelivery(wait))
	bot := newBot(t, srv)
	got := make(chan faketelegram.Update, 1)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var u faketelegram.Update
		body, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(body, &u)
		got <- u
	}))
	defer hook.Close()
	if _, err := bot.MakeRequest("setWebhook", tgbotapi.Params{"url": hook.URL, "allowed_updates": `["callback_query"]`}); err != nil {
		t.Fatal(err)
	}
	press := srv.CallbackQuery(faketelegram.Alice, faketelegram.Alice, 1, "fm:no:9")
	select {
	case u := <-got:
		if u.CallbackQuery == nil || u.CallbackQuery.ID != press.CallbackQuery.ID || u.CallbackQuery.Data != "fm:no:9" {
			t.Errorf("delivered %+v", u)
		}
	case <-time.After(wait):
		t.Fatal("nothing delivered")
	}
	// Delivered by hand, it can be answered once too.
	status, err := srv.DeliverWebhook(t.Context(), hook.URL, press, "")
	if err != nil || status != 200 {
		t.Fatalf("DeliverWebhook = %d, %v", status, err)
	}
	select {
	case <-got:
	case <-time.After(wait):
		t.Fatal("nothing delivered by hand")
	}
	if _, err := bot.Request(tgbotapi.NewCallback(press.CallbackQuery.ID, "")); err != nil {
		t.Error(err)
	}
}

func TestGetChatAdministrators(t *testing.T) {
	t.Parallel()
	srv := faketelegram.New(t, faketelegram.WithChatAdmins(faketelegram.Forum, faketelegram.Bob, faketelegram.Alice))
	bot := newBot(t, srv)
	admins := func(chat int64) []tgbotapi.ChatMember {
		t.Helper()
		ms, err := bot.GetChatAdministrators(tgbotapi.ChatAdministratorsConfig{ChatConfig: tgbotapi.ChatConfig{ChatID: chat}})
		if err != nil {
			t.Fatal(err)
		}
		return ms
	}
	if ms := admins(faketelegram.Group); len(ms) != 1 || ms[0].User.ID != faketelegram.Alice || !ms[0].IsCreator() {
		t.Errorf("Group admins %+v", ms)
	}
	if ms := admins(faketelegram.Forum); len(ms) != 2 || !ms[0].IsCreator() || ms[0].User.ID != faketelegram.Bob ||
		!ms[1].IsAdministrator() || ms[1].User.ID != faketelegram.Alice {
		t.Errorf("Forum admins %+v", ms)
	}
	srv.SetChatAdmins(faketelegram.Group, faketelegram.Alice, faketelegram.Bob)
	if ms := admins(faketelegram.Group); len(ms) != 2 || ms[1].User.ID != faketelegram.Bob {
		t.Errorf("Group admins after SetChatAdmins %+v", ms)
	}
	srv.SetChatAdmins(faketelegram.Group)
	if ms := admins(faketelegram.Group); len(ms) != 0 {
		t.Errorf("Group admins after clearing %+v", ms)
	}
	_, err := bot.GetChatAdministrators(tgbotapi.ChatAdministratorsConfig{ChatConfig: tgbotapi.ChatConfig{ChatID: faketelegram.Alice}})
	wantAPIError(t, err, 400, "Bad Request: there are no administrators in the private chat")
	_, err = bot.GetChatAdministrators(tgbotapi.ChatAdministratorsConfig{ChatConfig: tgbotapi.ChatConfig{ChatID: 777}})
	wantAPIError(t, err, 400, "Bad Request: chat not found")
	if n := srv.Count("getChatAdministrators"); n != 6 {
		t.Errorf("%d calls recorded", n)
	}
}
