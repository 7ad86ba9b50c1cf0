package slack

import (
	"context"
	"strings"
	"time"
	"unicode"

	"github.com/slack-go/slack"

	"github.com/firstmate/firstmate/adapters"
)

// liveAnswer shows an answer as the model writes it where Slack has no
// streaming for the app (channel threads): the answer is posted at the
// first words and edited at most once a second, then set to the final
// answer. Text is shown up to its last whitespace, so a mention token is
// never cut in two and SafeMarkdown sees each one whole.
type liveAnswer struct {
	t        *thread
	throttle *adapters.Throttle
	written  strings.Builder
	first    time.Time // the first delta
	handed   time.Time // when the text was last handed to the throttle
	ts       string    // the answer message, once posted (set on the throttle's goroutine)
}

func (t *thread) startLiveAnswer(ctx context.Context) *liveAnswer {
	la := &liveAnswer{t: t}
	la.throttle = adapters.NewThrottle(context.WithoutCancel(ctx), editInterval, la.show)
	return la
}

// add takes a delta of the model's text. An answer that arrives within a
// second goes out once, whole, at the end: no live message to edit.
func (la *liveAnswer) add(delta string) {
	if la.first.IsZero() {
		la.first = time.Now()
	}
	la.written.WriteString(delta)
	// Cutting the whole text on every delta would be quadratic in a long
	// answer: it is handed on a few times a second and cut when shown.
	if time.Since(la.first) < editInterval || time.Since(la.handed) < 200*time.Millisecond {
		return
	}
	la.handed = time.Now()
	text := la.written.String()
	cut := strings.LastIndexFunc(text, unicode.IsSpace)
	if cut > 0 && strings.TrimSpace(text[:cut]) != "" {
		la.throttle.Update(text[:cut] + livePending)
	}
}

// livePending marks a live answer that is still being written.
const livePending = " …"

// show posts or edits the answer message. It runs on the throttle's
// goroutine.
func (la *liveAnswer) show(ctx context.Context, md string) error {
	t := la.t
	if live, ok := strings.CutSuffix(md, livePending); ok {
		md = adapters.Split(live, markdownLimit-len(livePending), adapters.Runes)[0] + livePending
	}
	md = SafeMarkdown(md, t.allowed)
	opts := []slack.MsgOption{
		slack.MsgOptionBlocks(slack.NewMarkdownBlock("", md)),
		slack.MsgOptionText(truncateRunes(RenderMrkdwn(md), fallbackLimit), false),
	}
	if la.ts == "" {
		ts, err := t.post(ctx, opts...)
		if err == nil {
			la.ts = ts
		}
		return err
	}
	if err := t.a.limits.edit(ctx); err != nil {
		return err
	}
	_, _, _, err := t.a.api.UpdateMessageContext(ctx, t.channel, la.ts, opts...)
	return wrapRateLimit(err)
}

// finish sets the message to the final answer (its first part; the rest
// follow as new messages). It reports whether the answer was shown this
// way; if the live message never got posted, the caller posts the answer.
func (la *liveAnswer) finish(ctx context.Context, answer string) (bool, error) {
	if strings.TrimSpace(answer) == "" {
		answer = "(no answer)"
	}
	parts := adapters.Split(answer, markdownLimit, adapters.Runes)
	// The final answer goes through the same goroutine as the live text,
	// so it is the last word: an edit if the message is up, else its post.
	// Flush returns once that edit is done, so la.ts is safe to read.
	la.throttle.Update(parts[0])
	err := la.throttle.Flush(ctx)
	la.throttle.Close()
	if la.ts == "" || err != nil {
		// Not posted, or the final edit failed (the message would keep
		// the partial text): the caller posts the answer whole.
		return false, nil
	}
	for _, part := range parts[1:] {
		part = SafeMarkdown(part, la.t.allowed)
		_, perr := la.t.post(ctx,
			slack.MsgOptionBlocks(slack.NewMarkdownBlock("", part)),
			slack.MsgOptionText(truncateRunes(RenderMrkdwn(part), fallbackLimit), false))
		if perr != nil && err == nil {
			err = perr
		}
	}
	return true, err
}
