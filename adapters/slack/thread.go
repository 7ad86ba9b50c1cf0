package slack

import (
	"context"
	"fmt"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/slack-go/slack"

	"github.com/firstmate/firstmate/adapters"
	"github.com/firstmate/firstmate/agent"
)

// Slack's limits for what we post.
const (
	// markdownLimit is the markdown block's size limit (characters).
	markdownLimit = 12000
	// fallbackLimit caps the plain-text fallback sent with blocks; it is
	// what notifications and old clients show.
	fallbackLimit = 3000
	// editInterval paces the edits of one progress message.
	editInterval = time.Second
	// signOfLife is how long a turn without a tool call goes before its
	// progress message shows: within the second people expect a sign.
	signOfLife = 700 * time.Millisecond
)

const (
	ephemeralPrefix = "ephemeral:" // Inbound.ReplyTo of a slash command: reply to this user only
	reactWorking    = "eyes"
	reactDone       = "white_check_mark"
	reactFailed     = "x"
)

// Thread implements agent.Platform.
func (a *Adapter) Thread(key agent.SessionKey, trigger agent.Inbound) agent.Thread {
	t := &thread{a: a, key: key, channel: key.Chat, threadTS: key.Thread}
	if user, ok := strings.CutPrefix(trigger.ReplyTo, ephemeralPrefix); ok {
		t.ephemeralUser = user
	} else {
		t.trigger = trigger.ReplyTo
	}
	t.allowed = map[string]bool{}
	if trigger.User.ID != "" {
		t.allowed[trigger.User.ID] = true
	}
	return t
}

// thread renders one turn (or one command's reply) in a Slack thread.
//
// What people see, and what it costs: the progress message is the sign of
// life, posted when the first tool starts (or after 700 ms without one; a
// quicker answer needs no progress message); it is edited when a tool starts (at
// most once a second, coalesced) and once at the end, when it shrinks to a
// one-line summary; the answer is a new reply, so people are notified; a
// ✅ or ❌ reaction on the message that asked marks the end. A turn with one
// tool call so makes five calls, however long the tool runs. With progress
// off, an 👀 reaction is the sign of life and is swapped for ✅ or ❌.
type thread struct {
	a             *Adapter
	key           agent.SessionKey
	channel       string
	threadTS      string
	trigger       string // ts of the message being answered (reactions)
	ephemeralUser string // slash command: reply only to this user
	allowed       map[string]bool

	mu         sync.Mutex
	status     *status     // assistant threads: the status line
	stream     *streamer   // assistant threads: the streamed answer
	live       *liveAnswer // elsewhere: the answer shown as it is written
	progress   adapters.Progress
	throttle   *adapters.Throttle
	lifeSign   *time.Timer // posts the progress message if no tool came first
	progressTS string      // the progress message, once posted
	eyes       bool        // the 👀 reaction is on the trigger
}

func (t *thread) Emit(ctx context.Context, ev agent.Event) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now()
	mode := t.a.cfg.Progress
	switch ev := ev.(type) {
	case agent.TurnStarted:
		t.progress.Apply(ev, now)
		if isAssistantThread(t.channel, t.threadTS) && t.trigger != "" {
			st, err := t.startStatus(ctx, "is working on it…")
			if err == nil {
				t.status, t.stream = st, &streamer{t: t}
				return nil
			}
			t.a.log.Debug("slack assistant status unavailable; showing a progress message", "err", err)
		}
		if mode == adapters.ModeOff || t.trigger == "" {
			if t.trigger != "" {
				t.eyes = t.react(ctx, reactWorking, true) == nil
			}
			return nil
		}
		// A throttle that outlives the turn's ctx: a stopped turn still
		// gets its final summary. The progress message appears with the
		// first tool, or after signOfLife if none has started by then: a
		// quick answer needs none.
		t.throttle = adapters.NewThrottle(context.WithoutCancel(ctx), editInterval, t.editProgress)
		t.lifeSign = time.AfterFunc(signOfLife, func() {
			t.mu.Lock()
			defer t.mu.Unlock()
			if !t.progress.Done() && (t.live == nil || t.progress.Calls() > 0) {
				t.throttle.Update(t.progress.Render(time.Now(), mode))
			}
		})
		return nil
	case agent.ToolStarted, agent.ApprovalNeeded:
		t.progress.Apply(ev, now)
		if t.status != nil {
			if ts, ok := ev.(agent.ToolStarted); ok {
				t.status.update("is running " + ts.Name + "…")
			}
		}
		if t.throttle != nil {
			t.throttle.Update(t.progress.Render(now, mode))
		}
		return nil
	case agent.TextDelta, agent.ToolFinished:
		// Shown with the next tool or at the end: an edit per finished tool
		// would double the calls of every turn.
		t.progress.Apply(ev, now)
		if d, ok := ev.(agent.TextDelta); ok {
			switch {
			case t.stream != nil:
				t.stream.add(ctx, d.Text)
			case t.trigger != "":
				if t.live == nil {
					t.live = t.startLiveAnswer(ctx)
				}
				t.live.add(d.Text)
			}
		}
		return nil
	case agent.Answer:
		t.progress.Apply(ev, now)
		t.finishProgress(ctx, now)
		t.closeStatus()
		var err error
		shown := false
		switch {
		case t.stream != nil:
			shown = t.stream.finish(ctx)
		case t.live != nil:
			shown, err = t.live.finish(ctx, ev.Text)
			t.live = nil
		}
		if !shown {
			err = t.postMarkdown(ctx, ev.Text)
		}
		for _, f := range ev.Files {
			if ferr := t.upload(ctx, f); ferr != nil {
				t.a.log.Warn("slack upload failed", "file", f.Path, "err", ferr)
				t.postText(ctx, fmt.Sprintf("I could not attach %s: %v", path.Base(f.Path), ferr))
			}
		}
		t.endReaction(ctx, reactDone)
		return err
	case agent.Failed:
		t.progress.Apply(ev, now)
		t.finishProgress(ctx, now)
		t.closeStatus()
		if t.stream != nil {
			t.stream.finish(ctx) // what was written so far stays
		}
		if t.live != nil {
			t.live.throttle.Flush(ctx) // what was written so far stays
			t.live.throttle.Close()
			t.live = nil
		}
		err := t.postText(ctx, ev.Message)
		t.endReaction(ctx, reactFailed)
		return err
	case agent.Notice:
		return t.postText(ctx, ev.Text)
	}
	return nil
}

// Close implements io.Closer: the dispatcher calls it when the turn is
// over, also when it ended without an answer (a lost lease).
func (t *thread) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.throttle != nil {
		t.lifeSign.Stop()
		t.throttle.Close()
	}
	if t.live != nil {
		t.live.throttle.Close()
	}
	t.closeStatus()
	return nil
}

func (t *thread) closeStatus() {
	if t.status != nil {
		t.status.close()
		t.status = nil
	}
}

// finishProgress shrinks the progress message to its summary, or deletes
// it when the turn called no tool (a "0 tools" line says nothing).
func (t *thread) finishProgress(ctx context.Context, now time.Time) {
	if t.throttle == nil {
		return
	}
	t.lifeSign.Stop()
	defer t.throttle.Close()
	if t.progress.Calls() == 0 {
		// A post may be on its way: let it land, then take it back.
		if err := t.throttle.Flush(ctx); err != nil {
			t.a.log.Warn("slack progress post", "err", err)
		}
		t.throttle.Close()
		if t.progressTS != "" {
			ts := t.progressTS
			if err := retry(ctx, func() error { _, _, err := t.a.api.DeleteMessageContext(ctx, t.channel, ts); return err }); err != nil {
				t.a.log.Warn("slack delete progress", "err", err)
			}
		}
		return
	}
	t.throttle.Update(t.progress.Render(now, t.a.cfg.Progress))
	if err := t.throttle.Flush(ctx); err != nil {
		t.a.log.Warn("slack progress edit", "err", err)
	}
}

// editProgress posts the progress message on its first call and edits it
// after. It runs on the throttle's goroutine.
func (t *thread) editProgress(ctx context.Context, text string) error {
	text = escapeText(text)
	if t.progressTS == "" {
		ts, err := t.post(ctx, slack.MsgOptionText(text, false))
		if err != nil {
			return err
		}
		t.progressTS = ts
		return nil
	}
	if err := t.a.limits.edit(ctx); err != nil {
		return err
	}
	_, _, _, err := t.a.api.UpdateMessageContext(ctx, t.channel, t.progressTS, slack.MsgOptionText(text, false))
	if err == nil {
		return nil
	}
	if !messageGone(err) {
		return wrapRateLimit(err) // a 429 waits; a passing fault tries again with the next text
	}
	// The message is gone or cannot be edited (deleted by someone, too
	// old): the progress goes on in a new one.
	t.a.log.Warn("slack progress edit failed; posting a new progress message", "err", err)
	ts, perr := t.post(ctx, slack.MsgOptionText(text, false))
	if perr != nil {
		return perr
	}
	t.progressTS = ts
	return nil
}

// postMarkdown posts an answer: parts of at most the markdown block's
// limit, each with a plain-text fallback for notifications.
func (t *thread) postMarkdown(ctx context.Context, md string) error {
	if strings.TrimSpace(md) == "" {
		md = "(no answer)"
	}
	md = SafeMarkdown(md, t.allowed)
	var firstErr error
	for _, part := range adapters.Split(md, markdownLimit, adapters.Runes) {
		fallback := truncateRunes(RenderMrkdwn(part), fallbackLimit)
		_, err := t.post(ctx,
			slack.MsgOptionBlocks(slack.NewMarkdownBlock("", part)),
			slack.MsgOptionText(fallback, false))
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return firstErr
}

// postText posts a short message of ours (an error, a command's reply).
func (t *thread) postText(ctx context.Context, text string) error {
	text = escapeText(text)
	if t.ephemeralUser != "" {
		return retry(ctx, func() error {
			_, err := t.a.api.PostEphemeralContext(ctx, t.channel, t.ephemeralUser, slack.MsgOptionText(text, false))
			return err
		})
	}
	_, err := t.post(ctx, slack.MsgOptionText(text, false))
	return err
}

// post sends one message into the thread, paced per channel, waiting out
// Slack's 429s.
func (t *thread) post(ctx context.Context, opts ...slack.MsgOption) (string, error) {
	if t.threadTS != "" {
		opts = append(opts, slack.MsgOptionTS(t.threadTS))
	}
	var ts string
	err := retry(ctx, func() error {
		if err := t.a.limits.post(ctx, t.channel); err != nil {
			return err
		}
		var err error
		_, ts, err = t.a.api.PostMessageContext(ctx, t.channel, opts...)
		return err
	})
	return ts, err
}

// react adds (or removes) a reaction on the message being answered.
func (t *thread) react(ctx context.Context, name string, add bool) error {
	ref := slack.NewRefToMessage(t.channel, t.trigger)
	err := retry(ctx, func() error {
		if add {
			return t.a.api.AddReactionContext(ctx, name, ref)
		}
		return t.a.api.RemoveReactionContext(ctx, name, ref)
	})
	if err != nil {
		t.a.log.Debug("slack reaction", "name", name, "add", add, "err", err)
	}
	return err
}

func (t *thread) endReaction(ctx context.Context, name string) {
	if t.trigger == "" {
		return
	}
	if t.eyes {
		t.react(ctx, reactWorking, false)
		t.eyes = false
	}
	t.react(ctx, name, true)
}

// messageGone reports whether an edit failed because the message cannot be
// edited any more (deleted, too old), not for a passing fault.
func messageGone(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "message_not_found") || strings.Contains(msg, "cant_update_message") ||
		strings.Contains(msg, "edit_window_closed")
}

func wrapRateLimit(err error) error {
	if rl, ok := err.(*slack.RateLimitedError); ok {
		return &adapters.RateLimitedError{After: rl.RetryAfter, Err: err}
	}
	return err
}

// escapeText makes our own plain text safe for mrkdwn: Slack reads <…> as
// links and mentions and & as an entity.
func escapeText(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
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
