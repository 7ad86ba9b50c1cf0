package adapters

import (
	"context"
	"errors"
	"strings"
	"time"
	"unicode"
)

// Decoration: the sign of life, the answer as it is written, the progress.
// It never holds an answer back: it goes only when no delivery waits, and
// leaves each bucket's reserve for answers.

// nextSign renews typing, sets the status line, puts 👀 up.
func (t *turn) nextSign(now time.Time) (func(context.Context), time.Duration) {
	w := waiter{}
	if t.sign.eyes && !t.sign.eyesOn && !t.ended && t.reactor != nil {
		t.sign.eyesOn = true
		return func(ctx context.Context) {
			if err := t.reactor.React(ctx, ReactWorking, true); err != nil {
				t.r.log.Debug("reaction", "err", err)
				t.mu.Lock()
				t.sign.eyesOn = false
				t.sign.eyes = false
				t.mu.Unlock()
			}
		}, 0
	}
	if t.typer != nil && !t.sign.typingNext.IsZero() && !t.ended {
		if wait := t.sign.typingNext.Sub(now); wait > 0 {
			w.at(wait)
		} else {
			t.sign.typingNext = now.Add(durationOr(t.pace.TypingEvery, 4*time.Second))
			return func(ctx context.Context) {
				err := t.typer.Typing(ctx)
				if errors.Is(err, ErrUnsupported) {
					t.mu.Lock()
					t.typer = nil
					t.mu.Unlock()
				} else if err != nil {
					t.r.log.Debug("typing", "err", err)
				}
			}, 0
		}
	}
	if t.status != nil && !t.ended && t.sign.statusWant != "" {
		text := t.sign.statusWant
		if t.mode == ModeOff {
			text = "is working on it…"
		}
		due := t.sign.statusAt.Add(t.pace.editEvery())
		if text == t.sign.statusShow {
			due = t.sign.statusAt.Add(durationOr(t.pace.StatusEvery, 100*time.Second))
		}
		if wait := due.Sub(now); wait > 0 && !t.sign.statusAt.IsZero() {
			w.at(wait)
		} else {
			first := t.sign.statusAt.IsZero()
			t.sign.statusShow, t.sign.statusAt = text, now
			return func(ctx context.Context) {
				err := t.status.Status(ctx, text)
				if err == nil {
					return
				}
				t.mu.Lock()
				defer t.mu.Unlock()
				if !first && !errors.Is(err, ErrUnsupported) {
					t.r.log.Debug("status line", "err", err)
					return
				}
				// No status line here: the progress message (or 👀) is
				// the sign of life instead.
				t.r.log.Debug("no status line; showing progress instead", "err", err)
				t.status = nil
				switch {
				case t.mode == ModeOff && t.reactor != nil:
					t.sign.eyes = true
				case t.pace.SignOfLife > 0 && !t.prog.wanted && !t.ended:
					t.prog.appearAt = t.begun.Add(t.pace.SignOfLife)
				}
			}, 0
		}
	}
	return nil, w.d
}

func (t *turn) react(ctx context.Context, mark Reaction) {
	t.mu.Lock()
	eyes := t.sign.eyesOn
	t.sign.eyesOn = false
	t.mu.Unlock()
	if eyes {
		if err := t.reactor.React(ctx, ReactWorking, false); err != nil {
			t.r.log.Debug("reaction", "err", err)
		}
	}
	if err := t.reactor.React(ctx, mark, true); err != nil {
		t.r.log.Debug("reaction", "err", err)
	}
}

// nextLive shows the answer as it is written: a stream, a draft, or a
// message posted at its first words and edited as it grows.
func (t *turn) nextLive(now time.Time) (func(context.Context), time.Duration) {
	if t.ended || t.live.written.Len() == 0 {
		return nil, 0
	}
	if wait := t.live.first.Add(t.pace.LiveAfter).Sub(now); wait > 0 {
		return nil, wait
	}
	written := t.live.written.String()
	switch {
	case t.streamer != nil:
		return t.nextStream(now, written)
	case t.drafter != nil:
		if t.live.written.Len() == t.live.step {
			return nil, 0 // between steps: the draft shows progress
		}
		return t.nextDraft(now, Text{Body: written[t.live.step:], Markdown: true, Partial: true})
	case !t.pace.LiveAnswer || t.live.gone || t.live.broken:
		return nil, 0
	}
	text, ok := cutAtSpace(written)
	if !ok || text == t.live.msg.shown {
		return nil, 0
	}
	part := t.s.Format(Text{Body: text, Markdown: true, Partial: true})[0]
	return t.keep(&t.live.msg, text, part, now, func(_ bool, err error) {
		if err != nil {
			// The answer is posted whole at the end instead.
			t.r.log.Warn("showing the answer as it is written failed; it will be posted whole", "err", err)
			t.live.gone = true
		}
	})
}

// keep returns the call that makes m show text (part): a post if m is not
// up yet, else an edit, at most once an edit interval; as decoration, it
// leaves the buckets' reserve for answers. A 429 holds the buckets and the
// text is tried again; settle gets any other result, under the lock.
func (t *turn) keep(m *keptMessage, text string, part Part, now time.Time, settle func(edit bool, err error)) (func(context.Context), time.Duration) {
	edit := m.id != ""
	buckets := t.pace.Posts
	if edit {
		buckets = t.pace.Edits
		if wait := m.editedAt.Add(t.pace.editEvery()).Sub(now); wait > 0 {
			return nil, wait
		}
	}
	if !t.pass.take(buckets, true) {
		return nil, paced
	}
	id := m.id
	m.shown, m.editedAt = text, now
	part.Reply = true
	return func(ctx context.Context) {
		var err error
		var posted MessageID
		if edit {
			err = t.s.Edit(ctx, id, part)
		} else {
			posted, err = t.s.Post(ctx, part)
		}
		t.mu.Lock()
		defer t.mu.Unlock()
		if after, limited := RetryAfter(err); limited {
			block(buckets, time.Now().Add(max(after, minRetry)))
			m.shown = ""
			return
		}
		if err == nil && !edit {
			m.id = posted
		}
		settle(edit, err)
	}, 0
}

// nextStream sends the text written since the last piece, cut at its last
// space so a mention is never split between two pieces.
func (t *turn) nextStream(now time.Time, written string) (func(context.Context), time.Duration) {
	if !t.live.sentAt.IsZero() {
		if wait := t.live.sentAt.Add(t.pace.StreamEvery).Sub(now); wait > 0 {
			return nil, wait
		}
	}
	piece, ok := cutAtSpace(written[t.live.sent:])
	if !ok {
		return nil, 0
	}
	stream := t.live.stream
	t.live.sent += len(piece)
	t.live.sentAt = now
	return func(ctx context.Context) {
		var err error
		if stream == nil {
			stream, err = t.streamer.Stream(ctx, piece)
		} else {
			err = stream.Append(ctx, piece)
		}
		t.mu.Lock()
		defer t.mu.Unlock()
		if stream != nil {
			t.live.stream = stream
		}
		if after, limited := RetryAfter(err); limited {
			// The piece goes again, with what came since, once allowed.
			t.live.sent -= len(piece)
			t.live.sentAt = time.Now().Add(max(after, minRetry) - t.pace.StreamEvery)
			return
		}
		if err != nil {
			// The answer is posted whole instead; what the stream shows
			// stays, and is ended with the turn.
			t.r.log.Warn("streaming failed; the answer will be posted whole", "err", err)
			t.streamer = nil
			t.live.broken = true
		}
	}, 0
}

// nextDraft shows text in the draft, at most once an edit interval.
func (t *turn) nextDraft(now time.Time, text Text) (func(context.Context), time.Duration) {
	if text.Body == t.draft.shown {
		return nil, 0
	}
	if wait := t.draft.at.Add(t.pace.editEvery()).Sub(now); wait > 0 {
		return nil, wait
	}
	if !t.pass.take(t.pace.Edits, true) {
		return nil, paced
	}
	t.draft.shown, t.draft.at = text.Body, now
	return func(ctx context.Context) {
		err := t.drafter.Draft(ctx, text)
		if err == nil {
			return
		}
		t.mu.Lock()
		defer t.mu.Unlock()
		if after, limited := RetryAfter(err); limited {
			block(t.pace.Edits, time.Now().Add(max(after, minRetry)))
			t.draft.shown = ""
			return
		}
		// No drafts here: progress and the live answer go to messages.
		t.r.log.Info("drafts unavailable; showing progress in a message", "err", err)
		t.drafter = nil
	}, 0
}

// nextProgress keeps the progress (a message, a draft, a Stepper's lines)
// up to date.
func (t *turn) nextProgress(now time.Time) (func(context.Context), time.Duration) {
	if t.mode == ModeOff {
		return nil, 0
	}
	if t.stepper != nil {
		return t.nextStep()
	}
	if t.status != nil {
		return nil, 0 // the status line shows the progress
	}
	if t.drafter != nil {
		if t.ended || !t.prog.wanted || t.live.written.Len() > t.live.step {
			return nil, 0
		}
		text := t.progress.Render(now, t.mode)
		if wait := t.refreshWait(now, t.draft.at); wait > 0 && t.draft.shown != "" && t.sameCalls(text, t.draft.shown) {
			return nil, wait
		}
		return t.nextDraft(now, Text{Body: text})
	}
	if !t.prog.wanted && !t.prog.appearAt.IsZero() {
		if wait := t.prog.appearAt.Sub(now); wait > 0 {
			return nil, wait
		}
		if t.live.msg.id == "" {
			t.prog.wanted = true
		}
	}
	if !t.prog.wanted || t.prog.dropped {
		return nil, 0
	}
	if t.ended && t.progress.Calls() == 0 {
		// A "no tools" summary says nothing: take the message back.
		if t.prog.id == "" {
			return nil, 0
		}
		id := t.prog.id
		t.prog.id, t.prog.dropped = "", true
		return func(ctx context.Context) {
			if err := t.s.Delete(ctx, id); err != nil {
				t.r.log.Debug("deleting the progress message", "err", err)
			}
		}, 0
	}
	text := t.progress.Render(now, t.mode)
	if text == "" || text == t.prog.shown || text == t.prog.failed {
		return nil, 0
	}
	// Only a running timer moved: refresh it now and then, not every
	// second.
	if wait := t.refreshWait(now, t.prog.editedAt); wait > 0 && t.prog.id != "" && !t.ended && t.sameCalls(text, t.prog.shown) {
		return nil, wait
	}
	return t.keep(&t.prog.keptMessage, text, t.plain(text)[0], now, func(edit bool, err error) {
		switch {
		case err == nil:
			// A post that was on its way when the answer came: the
			// message is only worth its summary now.
			t.prog.dropped = false
		case errors.Is(err, ErrGone):
			// Deleted by someone, or too old to edit: go on in a new one.
			t.r.log.Info("the progress message is gone; posting a new one", "err", err)
			t.prog.id, t.prog.shown = "", ""
			t.prog.dropped = t.ended
		default:
			t.r.log.Warn("progress message", "err", err)
			t.prog.failed, t.prog.shown = text, ""
		}
	})
}

// nextStep writes the lines of the calls that finished, then the summary.
func (t *turn) nextStep() (func(context.Context), time.Duration) {
	lines := t.progress.Lines(time.Now())
	var out []string
	for t.prog.stepped < len(lines) && t.progress.Finished(t.prog.stepped) {
		out = append(out, lines[t.prog.stepped])
		t.prog.stepped++
	}
	if t.ended && !t.prog.summed && t.prog.stepped == t.progress.Calls() && len(t.outbox) == 0 {
		t.prog.summed = true
		if t.progress.Calls() > 0 {
			out = append(out, t.progress.Render(time.Now(), t.mode))
		}
	}
	if len(out) == 0 {
		return nil, 0
	}
	return func(ctx context.Context) {
		for _, l := range out {
			if err := t.stepper.Step(ctx, l); err != nil {
				t.r.log.Debug("progress line", "err", err)
			}
		}
	}, 0
}

// refreshWait is how long until a progress whose calls did not change is
// worth an edit for its timer.
func (t *turn) refreshWait(now, last time.Time) time.Duration {
	return last.Add(refreshEdits * t.pace.editEvery()).Sub(now)
}

// sameCalls reports whether two renderings differ only in their timers.
func (t *turn) sameCalls(a, b string) bool {
	return stripTimers(a) == stripTimers(b)
}

// stripTimers drops the digits of a rendering: what remains changes only
// with the calls and their status.
func stripTimers(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsDigit(r) {
			return -1
		}
		return r
	}, s)
}

// cutAtSpace is text up to its last whitespace: a mention token has none,
// so one is never cut in two, and the surface sees each whole.
func cutAtSpace(text string) (string, bool) {
	cut := strings.LastIndexFunc(text, unicode.IsSpace)
	if cut <= 0 || strings.TrimSpace(text[:cut]) == "" {
		return "", false
	}
	return text[:cut], true
}

func durationOr(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}
