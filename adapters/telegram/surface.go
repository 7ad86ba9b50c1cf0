package telegram

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/firstmate/firstmate/adapters"
	"github.com/firstmate/firstmate/agent"
)

const (
	messageLimit   = 4096            // characters (UTF-16 units) of one message
	typingInterval = 4 * time.Second // Telegram shows "typing" for about five
	markupHTML     = "HTML"
	liveAfter      = time.Second // an answer written quicker arrives whole, with no draft of it
	livePending    = " …"        // marks a live answer that is still being written
)

// Thread implements agent.Platform: what the turn shows is rendered by the
// adapter's renderer on a surface for the chat (or forum topic).
//
// What people see: "typing…" while the turn runs (renewed every four
// seconds); in a private chat the progress and the answer as it is written
// live in a draft (sendMessageDraft), so a turn costs one message; in a
// group (and where the server has no drafts) one progress message replying
// to the person's message, posted when the first tool starts, edited no
// faster than the chat allows and shrunk to a summary after the answer.
// The answer replies to the question.
func (a *Adapter) Thread(key agent.SessionKey, trigger agent.Inbound) agent.Thread {
	replyTo, _ := strconv.ParseInt(trigger.ReplyTo, 10, 64)
	s := a.surface(key, replyTo)
	if !s.group && replyTo != 0 {
		return a.render.Thread(privateSurface{s})
	}
	return a.render.Thread(s)
}

// surface is the surface of a chat (or forum topic), answering the
// message replyTo (0 for none).
func (a *Adapter) surface(key agent.SessionKey, replyTo int64) *surface {
	chatID, _ := strconv.ParseInt(key.Chat, 10, 64)
	return &surface{a: a, chat: key.Chat, group: chatID < 0, topic: key.Thread, replyTo: replyTo}
}

// surface is one Telegram chat, or a forum topic of one.
type surface struct {
	a       *Adapter
	chat    string
	group   bool
	topic   string // message_thread_id of a forum topic
	replyTo int64  // the message being answered
}

// Pace: about one message a second in a private chat, twenty a minute in
// a group (edits count), thirty a second in all. Group edits are too
// scarce to show an answer as it is written.
func (s *surface) Pace() adapters.Pace {
	chat, every := s.a.privates.Get(s.chat), time.Second
	if s.group {
		chat, every = s.a.groups.Get(s.chat), 3*time.Second
	}
	buckets := []*adapters.Bucket{chat, s.a.global}
	return adapters.Pace{Posts: buckets, Edits: buckets, EditEvery: every, LiveAfter: liveAfter, LiveAnswer: !s.group, TypingEvery: typingInterval}
}

// ShowsButtons implements adapters.Asker: an inline keyboard goes under a
// message in every kind of chat (private, group, forum topic, channel).
func (s *surface) ShowsButtons() bool { return true }

// Format renders the model's Markdown to Bot API HTML in parts under the
// limit (each with its visible text as the fallback); a partial answer is
// plain text, the first message's worth; our own text is sent as it is.
// The buttons go under the last part.
func (s *surface) Format(t adapters.Text) []adapters.Part {
	parts := s.format(t)
	if len(t.Buttons) > 0 && len(parts) > 0 {
		parts[len(parts)-1].Buttons = t.Buttons
	}
	return parts
}

func (s *surface) format(t adapters.Text) []adapters.Part {
	switch {
	case t.Partial:
		text := PlainText(t.Body)
		if adapters.UTF16(text) > messageLimit-len(livePending) {
			text = adapters.Split(text, messageLimit-len(livePending), adapters.UTF16)[0]
		}
		return []adapters.Part{{Text: text + livePending}}
	case t.Markdown:
		var parts []adapters.Part
		for _, p := range SplitHTML(t.Body, messageLimit) {
			parts = append(parts, adapters.Part{Text: p, Markup: markupHTML, Fallback: VisibleText(p)})
		}
		return parts
	}
	var parts []adapters.Part
	for _, p := range adapters.Split(t.Body, messageLimit, adapters.UTF16) {
		parts = append(parts, adapters.Part{Text: p})
	}
	return parts
}

// params are the chat and topic of every message the surface sends.
func (s *surface) params() tgbotapi.Params {
	p := tgbotapi.Params{"chat_id": s.chat}
	if s.topic != "" {
		p["message_thread_id"] = s.topic
	}
	return p
}

// Post sends one message. A part Telegram refuses to parse goes again as
// its plain text: an answer is never lost to markup.
func (s *surface) Post(ctx context.Context, p adapters.Part) (adapters.MessageID, error) {
	params := s.params()
	params["text"] = p.Text
	if p.Markup != "" {
		params["parse_mode"] = p.Markup
	}
	if kb := keyboard(p.Buttons); kb != "" {
		params["reply_markup"] = kb
	}
	if p.Reply && s.replyTo != 0 {
		// reply_parameters (newer than the library) with
		// allow_sending_without_reply: a deleted question must not lose
		// the answer.
		rp, _ := json.Marshal(map[string]any{"message_id": s.replyTo, "allow_sending_without_reply": true})
		params["reply_parameters"] = string(rp)
	}
	var msg struct {
		MessageID int64 `json:"message_id"`
	}
	err := s.a.call(ctx, "sendMessage", params, &msg)
	if p.Markup != "" && refusedMarkup(err) {
		s.a.log.Warn("telegram refused the HTML; sending plain text", "err", err)
		params["text"] = p.Fallback
		delete(params, "parse_mode")
		err = s.a.call(ctx, "sendMessage", params, &msg)
	}
	return adapters.MessageID(strconv.FormatInt(msg.MessageID, 10)), wrapError(err)
}

// Edit replaces a message's text and its buttons: an edit without
// reply_markup removes the inline keyboard, so a decided question loses
// its buttons. "message is not modified" is success.
func (s *surface) Edit(ctx context.Context, id adapters.MessageID, p adapters.Part) error {
	params := s.params()
	delete(params, "message_thread_id")
	params["message_id"] = string(id)
	params["text"] = p.Text
	if p.Markup != "" {
		params["parse_mode"] = p.Markup
	}
	if kb := keyboard(p.Buttons); kb != "" {
		params["reply_markup"] = kb
	}
	err := s.a.call(ctx, "editMessageText", params, nil)
	if p.Markup != "" && refusedMarkup(err) {
		params["text"] = p.Fallback
		delete(params, "parse_mode")
		err = s.a.call(ctx, "editMessageText", params, nil)
	}
	if e, ok := apiError(err); ok && strings.Contains(e.Message, "message is not modified") {
		return nil
	}
	return wrapError(err)
}

// Delete removes a message.
func (s *surface) Delete(ctx context.Context, id adapters.MessageID) error {
	params := s.params()
	delete(params, "message_thread_id")
	params["message_id"] = string(id)
	return wrapError(s.a.call(ctx, "deleteMessage", params, nil))
}

// Typing shows "typing…" in the chat (or topic) for about five seconds.
func (s *surface) Typing(ctx context.Context) error {
	p := s.params()
	p["action"] = "typing"
	return wrapError(s.a.call(ctx, "sendChatAction", p, nil))
}

// Upload attaches a workspace file to the chat (in its topic).
func (s *surface) Upload(ctx context.Context, f agent.Attachment) error {
	r, _, err := f.Open()
	if err != nil {
		return err
	}
	defer r.Close()
	_, err = s.a.bot(ctx).UploadFiles("sendDocument", s.params(), []tgbotapi.RequestFile{
		{Name: "document", Data: tgbotapi.FileReader{Name: path.Base(f.Path), Reader: r}},
	})
	return wrapError(s.a.scrub(err))
}

// privateSurface is a private chat, where the answer can be drafted
// (sendMessageDraft, Bot API 9.3) before it is sent.
type privateSurface struct{ *surface }

// Draft shows text as the draft of the answer: plain text, the newest
// message's worth. A server without drafts answers 404 once; the adapter
// remembers, and the renderer shows progress in a message instead.
func (s privateSurface) Draft(ctx context.Context, t adapters.Text) error {
	if s.a.noDrafts.Load() {
		return adapters.ErrUnsupported
	}
	text := t.Body
	if t.Markdown {
		text = PlainText(t.Body)
	}
	if adapters.UTF16(text) > messageLimit {
		parts := adapters.Split(text, messageLimit, adapters.UTF16)
		text = parts[len(parts)-1]
	}
	p := s.params()
	p["draft_id"] = strconv.FormatInt(s.replyTo, 10)
	p["text"] = text
	err := s.a.call(ctx, "sendMessageDraft", p, nil)
	if e, ok := apiError(err); ok && (e.Code == http.StatusNotFound || strings.Contains(e.Message, "method")) {
		if !s.a.noDrafts.Swap(true) {
			s.a.log.Info("telegram server has no sendMessageDraft; progress goes in a message")
		}
		return fmt.Errorf("%w: %w", adapters.ErrUnsupported, err)
	}
	return wrapError(err)
}

// inlineButton is an InlineKeyboardButton of the Bot API that sends a
// callback query.
type inlineButton struct {
	Text         string `json:"text"`
	CallbackData string `json:"callback_data"`
	// Style colours the button ("primary", "danger"); a Bot API server
	// older than the field ignores it.
	Style string `json:"style,omitempty"`
}

// maxButtons is the most buttons Telegram takes in one inline keyboard
// ("reply markup is too long").
const maxButtons = 100

// keyboard is the reply_markup of an inline keyboard with one row per row
// of buttons, or "" when there are none. A keyboard Telegram would refuse
// costs the whole message, so a button it would refuse (no label,
// callback_data empty or over 64 bytes) is left out, and so are those
// past the hundredth.
func keyboard(rows [][]adapters.Button) string {
	var kb [][]inlineButton
	n := 0
	for _, row := range rows {
		var r []inlineButton
		for _, b := range row {
			if b.Label == "" || b.Data == "" || len(b.Data) > adapters.MaxButtonData || n == maxButtons {
				continue
			}
			n++
			ib := inlineButton{Text: b.Label, CallbackData: b.Data}
			switch b.Style {
			case adapters.StylePrimary:
				ib.Style = "primary"
			case adapters.StyleDanger:
				ib.Style = "danger"
			}
			r = append(r, ib)
		}
		if len(r) > 0 {
			kb = append(kb, r)
		}
	}
	if len(kb) == 0 {
		return ""
	}
	out, _ := json.Marshal(map[string]any{"inline_keyboard": kb})
	return string(out)
}

// refusedMarkup reports whether Telegram could not parse the markup.
func refusedMarkup(err error) bool {
	e, ok := apiError(err)
	return ok && e.Code == http.StatusBadRequest && strings.Contains(e.Message, "parse")
}

// wrapError turns Telegram's answers into what the renderer acts on: a 429
// says how long to wait (retry_after), a message that cannot be edited is
// gone.
func wrapError(err error) error {
	e, ok := apiError(err)
	switch {
	case !ok:
		return err
	case e.RetryAfter > 0:
		return &adapters.RateLimitedError{After: time.Duration(e.RetryAfter) * time.Second, Err: err}
	case e.Code == http.StatusBadRequest && (strings.Contains(e.Message, "not found") || strings.Contains(e.Message, "can't be edited")):
		return fmt.Errorf("%w: %w", adapters.ErrGone, err)
	}
	return err
}

var _ adapters.Asker = (*surface)(nil)
