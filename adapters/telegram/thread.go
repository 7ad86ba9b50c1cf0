package telegram

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/firstmate/firstmate/adapters"
	"github.com/firstmate/firstmate/agent"
)

const (
	messageLimit   = 4096            // characters (UTF-16 units) of one message
	typingInterval = 4 * time.Second // Telegram shows "typing" for about five
	maxRateWait    = 3 * time.Minute // total 429 waits before a send gives up
)

// Thread implements agent.Platform.
func (a *Adapter) Thread(key agent.SessionKey, trigger agent.Inbound) agent.Thread {
	chatID, _ := strconv.ParseInt(key.Chat, 10, 64)
	replyTo, _ := strconv.ParseInt(trigger.ReplyTo, 10, 64)
	return &thread{a: a, key: key, chat: key.Chat, group: chatID < 0, topic: key.Thread, replyTo: replyTo}
}

// thread renders one turn (or a command's reply) in a Telegram chat or
// forum topic: "typing" while the turn runs (renewed every four seconds),
// one progress message replying to the person's message, posted when the
// first tool starts and edited no faster than the chat allows, then the
// answer as a reply. A one-tool turn costs four calls besides typing:
// the progress message, an edit when the tool starts if the post came
// before it, the final summary, the answer.
type thread struct {
	a       *Adapter
	key     agent.SessionKey
	chat    string
	group   bool
	topic   string // message_thread_id of a forum topic
	replyTo int64  // the message being answered

	mu        sync.Mutex
	draft     *adapters.Throttle // private chats: the answer streamed as a draft
	drafted   strings.Builder    // the text streamed so far
	noDrafts  atomic.Bool        // the server has no sendMessageDraft (set off the Emit lock)
	live      *adapters.Throttle // without drafts: the answer posted early and edited
	liveID    int64              // that message, once sent (written on live's goroutine)
	liveFirst time.Time          // the first delta
	lastShown time.Time          // when the streamed text was last handed on
	progress  adapters.Progress
	throttle  *adapters.Throttle
	messageID int64 // the progress message, once sent
	typing    context.CancelFunc
	typingEnd chan struct{}
}

func (t *thread) Emit(ctx context.Context, ev agent.Event) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now()
	mode := t.a.cfg.Progress
	switch ev := ev.(type) {
	case agent.TurnStarted:
		t.progress.Apply(ev, now)
		t.startTyping(ctx)
	case agent.ToolStarted, agent.ApprovalNeeded:
		t.progress.Apply(ev, now)
		if mode == adapters.ModeOff {
			return nil
		}
		if t.throttle == nil {
			interval := time.Second
			if t.group {
				interval = 3 * time.Second // twenty edits a minute in a group
			}
			t.throttle = adapters.NewThrottle(context.WithoutCancel(ctx), interval, t.editProgress)
		}
		t.throttle.Update(t.progress.Render(now, mode))
	case agent.TextDelta:
		t.progress.Apply(ev, now)
		t.streamDraft(ctx, ev.Text)
	case agent.ToolFinished:
		t.progress.Apply(ev, now) // shown with the next tool or at the end
	case agent.Answer:
		t.progress.Apply(ev, now)
		t.finish(ctx, now)
		shown, err := t.finishLive(ctx, ev.Text)
		if !shown {
			err = t.sendMarkdown(ctx, ev.Text)
		}
		for _, f := range ev.Files {
			if ferr := t.sendDocument(ctx, f); ferr != nil {
				t.a.log.Warn("telegram sendDocument failed", "file", f.Path, "err", ferr)
				t.sendText(ctx, fmt.Sprintf("I could not attach %s: %v", path.Base(f.Path), ferr))
			}
		}
		return err
	case agent.Failed:
		t.progress.Apply(ev, now)
		t.finish(ctx, now)
		if t.live != nil {
			t.live.Flush(ctx) // what was written so far stays
			t.live.Close()
			t.live = nil
		}
		return t.sendText(ctx, ev.Message)
	case agent.Notice:
		return t.sendText(ctx, ev.Text)
	}
	return nil
}

// Close implements io.Closer: the dispatcher calls it when the turn is
// over, however it ended.
func (t *thread) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stopTyping()
	if t.throttle != nil {
		t.throttle.Close()
	}
	if t.draft != nil {
		t.draft.Close()
	}
	if t.live != nil {
		t.live.Close()
	}
	return nil
}

// streamDraft shows the answer as the model writes it, in private chats,
// with sendMessageDraft (Bot API 9.3) at most once a second. A server
// without it answers 404 once, and the answer then comes whole at the end.
func (t *thread) streamDraft(ctx context.Context, delta string) {
	if t.group || t.replyTo == 0 || t.a.cfg.Progress == adapters.ModeOff {
		return
	}
	t.drafted.WriteString(delta)
	if t.liveFirst.IsZero() {
		t.liveFirst = time.Now()
	}
	// Rendering the whole text on every delta would be quadratic in a long
	// answer; the text is handed on a few times a second and rendered only
	// when it is sent.
	if time.Since(t.lastShown) < 200*time.Millisecond {
		return
	}
	t.lastShown = time.Now()
	if t.noDrafts.Load() {
		t.liveAnswer(ctx)
		return
	}
	if t.draft == nil {
		draftID := strconv.FormatInt(t.replyTo, 10)
		t.draft = adapters.NewThrottle(context.WithoutCancel(ctx), time.Second, func(ctx context.Context, text string) error {
			p := t.params()
			p["draft_id"] = draftID
			p["text"] = draftText(text)
			err := t.a.call(ctx, "sendMessageDraft", p, nil)
			if e, ok := apiError(err); ok && (e.Code == http.StatusNotFound || strings.Contains(e.Message, "method")) {
				t.a.log.Info("telegram server has no sendMessageDraft; answers come whole")
				t.noDrafts.Store(true)
				return nil
			}
			return err
		})
	}
	t.draft.Update(t.drafted.String())
}

// draftText is what a draft of the Markdown written so far shows: plain
// text, the newest part once the answer outgrows one message.
func draftText(md string) string {
	text := PlainText(md)
	if adapters.UTF16(text) > messageLimit {
		parts := adapters.Split(text, messageLimit, adapters.UTF16)
		text = parts[len(parts)-1]
	}
	return text
}

// liveAnswer is the fallback where drafts are missing: an answer that
// takes more than a second to write is sent at its first words and edited
// at most once a second; the final answer replaces it (see finishLive).
func (t *thread) liveAnswer(ctx context.Context) {
	if time.Since(t.liveFirst) < time.Second {
		return
	}
	if t.live == nil {
		t.live = adapters.NewThrottle(context.WithoutCancel(ctx), time.Second, func(ctx context.Context, md string) error {
			text := PlainText(md)
			if adapters.UTF16(text) > messageLimit-2 {
				text = adapters.Split(text, messageLimit-2, adapters.UTF16)[0]
			}
			text += " …"
			if t.liveID == 0 {
				id, err := t.send(ctx, text, "", true)
				t.liveID = id
				return err
			}
			return t.edit(ctx, t.liveID, text, "")
		})
	}
	t.live.Update(t.drafted.String())
}

// finishLive puts the final answer in the live message (its first part;
// the rest follow as new messages). It reports whether there was a live
// message; if not, the caller sends the answer whole.
func (t *thread) finishLive(ctx context.Context, md string) (bool, error) {
	if t.live == nil {
		return false, nil
	}
	t.live.Flush(ctx) // a send in flight lands; then liveID is safe to read
	t.live.Close()
	t.live = nil
	if t.liveID == 0 {
		return false, nil
	}
	if strings.TrimSpace(md) == "" {
		md = "(no answer)"
	}
	parts := SplitHTML(md, messageLimit)
	err := t.edit(ctx, t.liveID, parts[0], "HTML")
	if e, ok := apiError(err); ok && e.Code == http.StatusBadRequest && strings.Contains(e.Message, "parse") {
		err = t.edit(ctx, t.liveID, VisibleText(parts[0]), "")
	}
	if err != nil {
		// The message would keep the partial text: send the answer whole.
		t.a.log.Warn("telegram final edit of the live answer failed; sending it whole", "err", err)
		return false, nil
	}
	for _, part := range parts[1:] {
		if _, serr := t.send(ctx, part, "HTML", false); serr != nil && err == nil {
			err = serr
		}
	}
	return true, err
}

// edit replaces a message's text; "message is not modified" is success.
func (t *thread) edit(ctx context.Context, id int64, text, parseMode string) error {
	p := t.params()
	delete(p, "message_thread_id")
	p["message_id"] = strconv.FormatInt(id, 10)
	p["text"] = text
	if parseMode != "" {
		p["parse_mode"] = parseMode
	}
	err := t.retry(ctx, func() error { return t.a.call(ctx, "editMessageText", p, nil) })
	if e, ok := apiError(err); ok && strings.Contains(e.Message, "message is not modified") {
		return nil
	}
	return err
}

func (t *thread) finish(ctx context.Context, now time.Time) {
	t.stopTyping()
	if t.draft != nil {
		t.draft.Close() // the answer replaces the draft
		t.draft = nil
	}
	if t.throttle == nil {
		return
	}
	t.throttle.Update(t.progress.Render(now, t.a.cfg.Progress))
	if err := t.throttle.Flush(ctx); err != nil {
		t.a.log.Warn("telegram progress edit", "err", err)
	}
	t.throttle.Close()
}

// startTyping shows "typing" now and every four seconds until the turn
// ends.
func (t *thread) startTyping(ctx context.Context) {
	bg, stop := context.WithCancel(context.WithoutCancel(ctx))
	t.typing, t.typingEnd = stop, make(chan struct{})
	send := func() {
		p := t.params()
		p["action"] = "typing"
		if err := t.a.call(bg, "sendChatAction", p, nil); err != nil && bg.Err() == nil {
			t.a.log.Debug("telegram sendChatAction", "err", err)
		}
	}
	go func() {
		defer close(t.typingEnd)
		send() // off the Emit lock: a slow server must not hold the turn's events
		tick := time.NewTicker(typingInterval)
		defer tick.Stop()
		for {
			select {
			case <-bg.Done():
				return
			case <-tick.C:
				send()
			}
		}
	}()
}

func (t *thread) stopTyping() {
	if t.typing != nil {
		t.typing()
		<-t.typingEnd
		t.typing = nil
	}
}

// params are the chat and topic of every message the thread sends.
func (t *thread) params() tgbotapi.Params {
	p := tgbotapi.Params{"chat_id": t.chat}
	if t.topic != "" {
		p["message_thread_id"] = t.topic
	}
	return p
}

// editProgress sends the progress message on its first call (a reply to
// the person's message) and edits it after. It runs on the throttle's
// goroutine. "Message is not modified" is success.
func (t *thread) editProgress(ctx context.Context, text string) error {
	if t.messageID == 0 {
		id, err := t.send(ctx, text, "", true)
		if err != nil {
			return err
		}
		t.messageID = id
		return nil
	}
	err := t.edit(ctx, t.messageID, text, "")
	if e, ok := apiError(err); ok && e.Code == http.StatusBadRequest {
		// The message is gone (deleted by someone): go on in a new one.
		id, serr := t.send(ctx, text, "", true)
		if serr != nil {
			return serr
		}
		t.messageID = id
		return nil
	}
	return err
}

// sendMarkdown sends an answer as HTML, in parts under Telegram's limit,
// the first replying to the person's message. A part Telegram refuses to
// parse goes again as plain text: an answer is never lost to markup.
func (t *thread) sendMarkdown(ctx context.Context, md string) error {
	if strings.TrimSpace(md) == "" {
		md = "(no answer)"
	}
	var firstErr error
	for i, part := range SplitHTML(md, messageLimit) {
		_, err := t.send(ctx, part, "HTML", i == 0)
		if e, ok := apiError(err); ok && e.Code == http.StatusBadRequest && strings.Contains(e.Message, "parse") {
			t.a.log.Warn("telegram refused the HTML; sending plain text", "err", e.Message)
			for j, plain := range adapters.Split(VisibleText(part), messageLimit, adapters.UTF16) {
				if _, err = t.send(ctx, plain, "", i == 0 && j == 0); err != nil {
					break
				}
			}
		}
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return firstErr
}

// sendText sends our own short text (an error, a command's reply).
func (t *thread) sendText(ctx context.Context, text string) error {
	for i, part := range adapters.Split(text, messageLimit, adapters.UTF16) {
		if _, err := t.send(ctx, part, "", i == 0); err != nil {
			return err
		}
	}
	return nil
}

// send sends one message, paced for the chat, waiting out 429s.
func (t *thread) send(ctx context.Context, text, parseMode string, reply bool) (int64, error) {
	p := t.params()
	p["text"] = text
	if parseMode != "" {
		p["parse_mode"] = parseMode
	}
	if reply && t.replyTo != 0 {
		// reply_parameters (newer than the library) with
		// allow_sending_without_reply: a deleted question must not lose
		// the answer.
		rp, _ := json.Marshal(map[string]any{"message_id": t.replyTo, "allow_sending_without_reply": true})
		p["reply_parameters"] = string(rp)
	}
	var msg struct {
		MessageID int64 `json:"message_id"`
	}
	err := t.retry(ctx, func() error {
		if err := t.a.limits.wait(ctx, t.chat, t.group); err != nil {
			return err
		}
		return t.a.call(ctx, "sendMessage", p, &msg)
	})
	return msg.MessageID, err
}

// retry runs call until it succeeds, fails with something other than a
// 429, or the waits Telegram asks for exceed maxRateWait.
func (t *thread) retry(ctx context.Context, call func() error) error {
	var waited time.Duration
	for {
		err := call()
		e, ok := apiError(err)
		if !ok || e.RetryAfter <= 0 {
			return err
		}
		wait := time.Duration(e.RetryAfter) * time.Second
		if waited+wait > maxRateWait {
			return &adapters.RateLimitedError{After: wait, Err: err}
		}
		waited += wait
		if !sleep(ctx, wait) {
			return ctx.Err()
		}
	}
}

// sendDocument attaches a workspace file to the chat (in its topic).
func (t *thread) sendDocument(ctx context.Context, f agent.Attachment) error {
	p := t.params()
	return t.retry(ctx, func() error {
		if err := t.a.limits.wait(ctx, t.chat, t.group); err != nil {
			return err
		}
		// Opened for each try: a retried upload starts from the beginning.
		r, _, err := f.Open()
		if err != nil {
			return err
		}
		defer r.Close()
		_, err = t.a.bot(ctx).UploadFiles("sendDocument", p, []tgbotapi.RequestFile{
			{Name: "document", Data: tgbotapi.FileReader{Name: path.Base(f.Path), Reader: r}},
		})
		return t.a.scrub(err)
	})
}
