package slack

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/slack-go/slack"

	"github.com/firstmate/firstmate/adapters"
	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/internal/redact"
)

// Slack's limits for what we post.
const (
	// markdownLimit is the markdown block's size limit (characters).
	markdownLimit = 12000
	// fallbackLimit caps the plain-text fallback sent with blocks; it is
	// what notifications and old clients show.
	fallbackLimit = 3000
	// signOfLife is how long a turn without a tool call goes before its
	// progress message shows: within the second people expect a sign.
	signOfLife = 700 * time.Millisecond
	// statusRefresh renews an assistant thread's status line: Slack drops
	// one after two minutes.
	statusRefresh = 100 * time.Second
	// liveAfter is how long an answer is written before it streams (or
	// shows in a message edited as it grows): a quicker one is one post.
	liveAfter = time.Second
)

// markupMarkdown marks a Part whose Text is standard Markdown for a
// markdown block (with a mrkdwn Fallback); a Part without markup is our own
// text, already escaped for mrkdwn.
const markupMarkdown = "markdown"

const ephemeralPrefix = "ephemeral:" // Inbound.ReplyTo of a slash command: reply to this user only

// Thread implements agent.Platform: what the turn shows is rendered by the
// adapter's renderer on a surface for the thread.
//
// What people see: in a channel thread (or a DM) the progress message is
// the sign of life, posted when the first tool starts (or after 700 ms
// without one; a quicker answer needs none), edited at most once a second
// and shrunk to a one-line summary after the answer; the answer is a new
// reply, so people are notified; ✅ or ❌ on the message that asked marks
// the end. A one-tool turn costs four calls. With progress off, 👀 is the
// sign of life, swapped for ✅ or ❌. In an assistant thread (a thread in
// the bot's DM) the status line ("is running ls…") is the sign of life and
// the answer streams as the model writes it. A slash command's reply is
// ephemeral.
func (a *Adapter) Thread(key agent.SessionKey, trigger agent.Inbound) agent.Thread {
	s := &surface{a: a, channel: key.Chat, threadTS: key.Thread, allowed: map[string]bool{}}
	if trigger.User.ID != "" {
		s.allowed[trigger.User.ID] = true
	}
	if user, ok := strings.CutPrefix(trigger.ReplyTo, ephemeralPrefix); ok {
		s.ephemeralUser = user
		return a.render.Thread(s)
	}
	s.trigger = trigger.ReplyTo
	switch {
	case s.trigger == "":
		return a.render.Thread(s)
	case isAssistantThread(s.channel, s.threadTS):
		return a.render.Thread(assistantSurface{reactingSurface{s}})
	}
	return a.render.Thread(reactingSurface{s})
}

// isAssistantThread reports whether the conversation is a thread in a DM,
// where Slack shows the app as an assistant.
func isAssistantThread(channel, threadTS string) bool {
	return strings.HasPrefix(channel, "D") && threadTS != ""
}

// surface is one Slack conversation: a channel or DM, in a thread when
// threadTS is set.
type surface struct {
	a             *Adapter
	channel       string
	threadTS      string
	trigger       string // ts of the message being answered
	ephemeralUser string // slash command: reply only to this user
	allowed       map[string]bool
}

// Pace: chat.postMessage about one a second per channel with short
// bursts; chat.update is Tier 3 (about 50 a minute) across the workspace.
func (s *surface) Pace() adapters.Pace {
	return adapters.Pace{
		Posts:       []*adapters.Bucket{s.a.posts.Get(s.channel)},
		Edits:       []*adapters.Bucket{s.a.edits},
		LiveAfter:   liveAfter,
		LiveAnswer:  s.ephemeralUser == "",
		StreamEvery: time.Second,
		StatusEvery: statusRefresh,
		SignOfLife:  signOfLife,
	}
}

// Format makes markdown-block parts of the model's Markdown (pings
// neutralized, each with a mrkdwn fallback for notifications) and escaped
// text of ours. Buttons go on the last part.
func (s *surface) Format(t adapters.Text) []adapters.Part {
	parts := s.format(t)
	if len(t.Buttons) > 0 {
		if len(parts) == 0 {
			parts = []adapters.Part{{}}
		}
		parts[len(parts)-1].Buttons = t.Buttons
	}
	return parts
}

func (s *surface) format(t adapters.Text) []adapters.Part {
	if !t.Markdown {
		var parts []adapters.Part
		for _, p := range adapters.Split(escapeMrkdwn(t.Body), markdownLimit, adapters.Runes) {
			parts = append(parts, adapters.Part{Text: p, Fallback: p})
		}
		return parts
	}
	body := t.Body
	if t.Partial {
		body = adapters.Split(body, markdownLimit-len(livePending), adapters.Runes)[0] + livePending
	}
	var parts []adapters.Part
	for _, p := range adapters.Split(body, markdownLimit, adapters.Runes) {
		p = SafeMarkdown(p, s.allowed)
		parts = append(parts, adapters.Part{Text: p, Markup: markupMarkdown, Fallback: truncateRunes(RenderMrkdwn(p), fallbackLimit)})
	}
	return parts
}

// livePending marks a live answer that is still being written.
const livePending = " …"

// ShowsButtons implements adapters.Asker: Block Kit buttons work in
// channels, DMs, assistant threads and ephemeral replies alike.
func (s *surface) ShowsButtons() bool { return true }

// options are the message's content: the text alone, or blocks (a
// markdown block, or our text in sections when it has buttons, then the
// buttons) with the text as the fallback notifications show. An edit
// always says its blocks: Slack keeps the earlier ones otherwise, and the
// buttons of a decided question must go.
func (s *surface) options(p adapters.Part, edit bool) []slack.MsgOption {
	var blocks []slack.Block
	switch {
	case p.Markup == markupMarkdown:
		blocks = append(blocks, slack.NewMarkdownBlock("", p.Text))
	case len(p.Buttons) > 0:
		blocks = append(blocks, sectionBlocks(p.Text)...)
	}
	if len(p.Buttons) > 0 {
		blocks = append(blocks, actionBlocks(p.Buttons, maxMessageBlocks-len(blocks))...)
	}
	if len(blocks) == 0 {
		opts := []slack.MsgOption{slack.MsgOptionText(p.Text, false)}
		if edit {
			opts = append(opts, slack.MsgOptionBlocks()) // "blocks=[]"
		}
		return opts
	}
	fallback := p.Fallback
	if fallback == "" {
		fallback = p.Text
	}
	return []slack.MsgOption{slack.MsgOptionBlocks(blocks...), slack.MsgOptionText(fallback, false)}
}

// Block Kit's limits on what we send.
const (
	maxMessageBlocks  = 50
	maxSectionText    = 3000 // a section's text
	maxActionElements = 25   // elements of one actions block
	maxButtonLabel    = 75   // a button's text
)

// actionPrefix starts the action_id of our buttons: "fm_0", "fm_1"…
const actionPrefix = "fm_"

// sectionBlocks shows our own text (already mrkdwn) in sections.
func sectionBlocks(text string) []slack.Block {
	var out []slack.Block
	for _, t := range adapters.Split(text, maxSectionText, adapters.Runes) {
		if strings.TrimSpace(t) == "" {
			continue
		}
		out = append(out, slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, t, false, true), nil, nil))
	}
	return out
}

// actionBlocks makes one actions block per row of buttons, each button
// with its own action_id and its Data as the value. Rows that would not
// fit in room blocks are packed together, 25 buttons a block; what still
// does not fit is left out.
func actionBlocks(rows [][]adapters.Button, room int) []slack.Block {
	if room <= 0 {
		return nil
	}
	n := 0
	var packed [][]slack.BlockElement
	for _, row := range rows {
		var elems []slack.BlockElement
		for _, b := range row {
			label := b.Label
			if utf8.RuneCountInString(label) > maxButtonLabel {
				label = truncateRunes(label, maxButtonLabel-1)
			}
			if label == "" {
				label = "…"
			}
			btn := slack.NewButtonBlockElement(actionPrefix+strconv.Itoa(n), b.Data, slack.NewTextBlockObject(slack.PlainTextType, label, true, false))
			switch b.Style {
			case adapters.StylePrimary:
				btn = btn.WithStyle(slack.StylePrimary)
			case adapters.StyleDanger:
				btn = btn.WithStyle(slack.StyleDanger)
			}
			elems = append(elems, btn)
			n++
		}
		for len(elems) > 0 {
			k := min(len(elems), maxActionElements)
			packed = append(packed, elems[:k])
			elems = elems[k:]
		}
	}
	if len(packed) > room {
		var flat []slack.BlockElement
		for _, row := range packed {
			flat = append(flat, row...)
		}
		packed = nil
		for len(flat) > 0 && len(packed) < room {
			k := min(len(flat), maxActionElements)
			packed = append(packed, flat[:k])
			flat = flat[k:]
		}
	}
	out := make([]slack.Block, len(packed))
	for i, elems := range packed {
		out[i] = slack.NewActionBlock(actionPrefix+"row_"+strconv.Itoa(i), elems...)
	}
	return out
}

// Post sends one message into the thread (only to the user of a slash
// command).
func (s *surface) Post(ctx context.Context, p adapters.Part) (adapters.MessageID, error) {
	opts := s.options(p, false)
	if s.ephemeralUser != "" {
		_, err := s.a.api.PostEphemeralContext(ctx, s.channel, s.ephemeralUser, opts...)
		return "", wrapError(err)
	}
	if s.threadTS != "" {
		opts = append(opts, slack.MsgOptionTS(s.threadTS))
	}
	_, ts, err := s.a.api.PostMessageContext(ctx, s.channel, opts...)
	return adapters.MessageID(ts), wrapError(err)
}

// Edit replaces a message's content.
func (s *surface) Edit(ctx context.Context, id adapters.MessageID, p adapters.Part) error {
	if s.ephemeralUser != "" {
		return adapters.ErrUnsupported
	}
	_, _, _, err := s.a.api.UpdateMessageContext(ctx, s.channel, string(id), s.options(p, true)...)
	return wrapError(err)
}

// Delete removes a message.
func (s *surface) Delete(ctx context.Context, id adapters.MessageID) error {
	if s.ephemeralUser != "" {
		return adapters.ErrUnsupported
	}
	_, _, err := s.a.api.DeleteMessageContext(ctx, s.channel, string(id))
	return wrapError(err)
}

// Upload attaches a workspace file to the thread (files upload v2).
func (s *surface) Upload(ctx context.Context, f agent.Attachment) error {
	r, size, err := f.Open()
	if err != nil {
		return err
	}
	defer r.Close()
	if size == 0 {
		return errors.New("the file is empty")
	}
	_, err = s.a.api.UploadFileContext(ctx, slack.UploadFileParameters{
		Reader: r, FileSize: int(size), Filename: path.Base(f.Path), Title: path.Base(f.Path),
		Channel: s.channel, ThreadTimestamp: s.threadTS,
	})
	return wrapError(err)
}

// reactingSurface marks the message being answered with reactions.
type reactingSurface struct{ *surface }

var reactions = map[adapters.Reaction]string{
	adapters.ReactWorking: "eyes",
	adapters.ReactDone:    "white_check_mark",
	adapters.ReactFailed:  "x",
}

func (s reactingSurface) React(ctx context.Context, r adapters.Reaction, on bool) error {
	ref := slack.NewRefToMessage(s.channel, s.trigger)
	if on {
		return wrapError(s.a.api.AddReactionContext(ctx, reactions[r], ref))
	}
	return wrapError(s.a.api.RemoveReactionContext(ctx, reactions[r], ref))
}

// assistantSurface is an assistant thread: a status line instead of a
// progress message, and the answer streamed (chat.startStream,
// appendStream, stopStream). Slack clears the status when the answer
// arrives.
type assistantSurface struct{ reactingSurface }

func (s assistantSurface) Status(ctx context.Context, text string) error {
	return wrapError(s.a.api.SetAssistantThreadsStatusContext(ctx, slack.AssistantThreadsSetStatusParameters{
		ChannelID: s.channel, ThreadTS: s.threadTS, Status: text,
	}))
}

func (s assistantSurface) Stream(ctx context.Context, md string) (adapters.Stream, error) {
	st := &stream{s: s.surface}
	chunk := st.safeChunk(md)
	_, ts, err := s.a.api.StartStreamContext(ctx, s.channel, slack.MsgOptionMarkdownText(chunk), slack.MsgOptionTS(s.threadTS))
	if err != nil {
		return nil, wrapError(err)
	}
	st.ts = ts
	return st, nil
}

// stream is one streamed answer. Slack joins the pieces into one message,
// so a ping split across two ("[here](" then " !channel)") must be caught:
// the whole text so far is neutralized and only what is new is sent.
type stream struct {
	s    *surface
	ts   string
	raw  strings.Builder // all text sent so far, as the model wrote it
	safe string          // SafeMarkdown of raw: what Slack has
}

func (st *stream) Append(ctx context.Context, md string) error {
	chunk := st.safeChunk(md)
	if chunk == "" {
		return nil
	}
	_, _, err := st.s.a.api.AppendStreamContext(ctx, st.s.channel, st.ts, slack.MsgOptionMarkdownText(chunk))
	return wrapError(err)
}

func (st *stream) Stop(ctx context.Context, md string) error {
	var opts []slack.MsgOption
	if chunk := st.safeChunk(md); chunk != "" {
		opts = append(opts, slack.MsgOptionMarkdownText(chunk))
	}
	_, _, err := st.s.a.api.StopStreamContext(ctx, st.s.channel, st.ts, opts...)
	return wrapError(err)
}

// safeChunk returns what to send for the model's next piece of text.
// Neutralizing inserts characters at the dangerous token, which is in the
// new part; if the already-sent part would change anyway, the piece is
// neutralized alone.
func (st *stream) safeChunk(piece string) string {
	st.raw.WriteString(piece)
	all := SafeMarkdown(st.raw.String(), st.s.allowed)
	if !strings.HasPrefix(all, st.safe) {
		chunk := SafeMarkdown(piece, st.s.allowed)
		st.safe += chunk
		return chunk
	}
	chunk := all[len(st.safe):]
	st.safe = all
	return chunk
}

// wrapError turns Slack's answers into what the renderer acts on: a 429
// says how long to wait, a message that cannot be edited is gone. A URL
// the error quotes is redacted: the API URL may hold credentials.
func wrapError(err error) error {
	if err == nil {
		return nil
	}
	err = redact.Error(err)
	var rl *slack.RateLimitedError
	if errors.As(err, &rl) {
		return &adapters.RateLimitedError{After: rl.RetryAfter, Err: err}
	}
	var se slack.SlackErrorResponse
	if errors.As(err, &se) {
		switch se.Err {
		case "message_not_found", "cant_update_message", "edit_window_closed", "cant_delete_message":
			return fmt.Errorf("%w: %w", adapters.ErrGone, err)
		}
	}
	return err
}

func truncateRunes(s string, n int) string {
	i := 0
	for j := range s {
		if i == n {
			return s[:j] + "…"
		}
		i++
	}
	return s
}
