package telegram

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/firstmate/firstmate/adapters"
	"github.com/firstmate/firstmate/agent"
)

// callbackTextLimit is the most an answerCallbackQuery text may hold
// (characters, which Telegram counts in UTF-16 units); it refuses a
// longer one with MESSAGE_TOO_LONG.
const callbackTextLimit = 200

// clickAttempts bounds how often a click that failed on our side (the
// store) is tried again before the person is told to click again: the
// app shows a spinner until the click is answered, and a decision that
// lands minutes later, after "try again", would surprise them.
const (
	clickAttempts = 3
	clickRetry    = 500 * time.Millisecond
)

// click acts on a press of an inline keyboard button: the click goes to
// [adapters.HandleClick] with the chat's key and the person, and is
// always answered (answerCallbackQuery), with the notice for the person
// or, for a button that is not ours, with nothing, so the app stops its
// spinner. When the click changes what the message shows (a policy
// screen), the message is edited in place.
//
// It returns an error only when the process is stopping before the click
// took effect: the update is then not confirmed, and Telegram delivers it
// again after the restart.
func (a *Adapter) click(ctx context.Context, d agent.Submitter, q *callbackQuery) error {
	if q.ID == "" {
		a.log.Warn("telegram callback query without an ID ignored")
		return nil
	}
	m := q.Message
	if m == nil || m.Chat.ID == 0 || q.Data == "" {
		// An inline-mode message, or no data: nothing of ours.
		a.answer(ctx, q.ID, "", false)
		return nil
	}
	if m.Chat.Type == "channel" {
		a.channels.Store(m.Chat.ID, true)
	}
	var who agent.User
	if q.From.ID != 0 {
		who = agent.User{ID: strconv.FormatInt(q.From.ID, 10), Name: displayName(&q.From)}
	}
	key := m.key()
	var (
		res adapters.Clicked
		err error
	)
	for attempt := 1; ; attempt++ {
		res, err = adapters.HandleClick(ctx, d, key, who, q.Data)
		if err == nil || errors.Is(err, adapters.ErrNotOurs) || attempt == clickAttempts || !sleep(ctx, clickRetry) {
			break
		}
	}
	switch {
	case errors.Is(err, adapters.ErrNotOurs):
		a.answer(ctx, q.ID, "", false)
		return nil
	case err != nil && (ctx.Err() != nil || errors.Is(err, agent.ErrShutdown)):
		return err
	case err != nil:
		a.log.Error("telegram click not handled", "chat", key.String(), "user", who.ID, "err", err)
		a.answer(ctx, q.ID, res.Notice, true)
		return nil
	}
	a.answer(ctx, q.ID, res.Notice, false)
	if res.Replace != nil && m.Date != 0 {
		a.replace(ctx, key, m.MessageID, *res.Replace)
	}
	return nil
}

// answer answers a callback query: text (cut to Telegram's limit) shown
// to the person who clicked, as an alert when alert is set. A query that
// is too old to answer is no error of ours.
func (a *Adapter) answer(ctx context.Context, queryID, text string, alert bool) {
	p := tgbotapi.Params{"callback_query_id": queryID}
	if adapters.UTF16(text) > callbackTextLimit {
		text = adapters.Split(text, callbackTextLimit-1, adapters.UTF16)[0] + "…"
	}
	if text != "" {
		p["text"] = text
		if alert {
			p["show_alert"] = "true"
		}
	}
	if err := a.call(ctx, "answerCallbackQuery", p, nil); err != nil && ctx.Err() == nil {
		a.log.Info("telegram answerCallbackQuery failed", "err", err)
	}
}

// replace edits the clicked message to t, with its new buttons.
func (a *Adapter) replace(ctx context.Context, key agent.SessionKey, id int64, t adapters.Text) {
	s := a.surface(key, 0)
	parts := s.Format(t)
	if len(parts) == 0 {
		return
	}
	p := parts[0]
	if len(parts) > 1 {
		// One message is all there is to edit; the buttons go with it.
		a.log.Warn("telegram: a replaced message is longer than one message; cut", "parts", len(parts))
		p.Buttons = parts[len(parts)-1].Buttons
	}
	err := s.Edit(ctx, adapters.MessageID(strconv.FormatInt(id, 10)), p)
	if err != nil && ctx.Err() == nil {
		a.log.Info("telegram: the clicked message could not be edited", "chat", key.String(), "err", err)
	}
}

// answerUnreadable answers the callback query of an update that could not
// be decoded, if an ID can be found in it, so the person's app does not
// spin until it gives up.
func (a *Adapter) answerUnreadable(ctx context.Context, raw json.RawMessage) {
	var u struct {
		CallbackQuery *struct {
			ID json.RawMessage `json:"id"`
		} `json:"callback_query"`
	}
	if json.Unmarshal(raw, &u) != nil || u.CallbackQuery == nil {
		return
	}
	var id string
	if json.Unmarshal(u.CallbackQuery.ID, &id) != nil || id == "" {
		return
	}
	a.answer(ctx, id, "", false)
}

// updateID is the update_id of an update that could not be decoded
// whole; 0 if it has none.
func updateID(raw json.RawMessage) int64 {
	var u struct {
		UpdateID int64 `json:"update_id"`
	}
	_ = json.Unmarshal(raw, &u)
	return u.UpdateID
}
