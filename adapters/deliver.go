package adapters

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/firstmate/firstmate/agent"
)

// What a person must get: the answer (in parts, or as the end of a
// stream), files, notices, errors. They go out in order, before anything
// else, taking tokens without leaving a reserve; a 429 is waited out as
// long as the platform asked, another failure is tried a few times.

// delivery is something a person must get, in order: a message (in parts)
// or a file. Emit waits for its batch.
type delivery struct {
	ctx      context.Context
	parts    []Part // a message; or
	file     *agent.Attachment
	stopLive bool            // first end the live stream with the rest of the text
	streamed bool            // the stream was the answer: nothing to post unless it failed
	editLive bool            // the first part replaces the live message, if there is one
	editID   MessageID       // the part replaces this message (a decided approval question)
	posted   func(MessageID) // told the ID of the last part posted, under the turn's lock
	tries    int
	retryAt  time.Time // after a failure other than a 429: not before then
	batch    *batch
}

// batch is what one Emit waits for.
type batch struct {
	left int
	err  error
	done chan struct{}
	stop func() bool // stops waking the writer when the Emit's ctx ends
}

func (b *batch) finish(err error) {
	if err != nil && b.err == nil {
		b.err = err
	}
	b.left--
	if b.left == 0 {
		close(b.done)
		if b.stop != nil {
			b.stop()
		}
	}
}

// answer queues the answer and its files; the progress message shrinks to
// its summary after them.
func (t *turn) answer(ctx context.Context, ev agent.Answer) *batch {
	t.endLocked()
	md := ev.Text
	if strings.TrimSpace(md) == "" {
		md = "(no answer)"
	}
	parts := t.s.Format(Text{Body: md, Markdown: true})
	parts[0].Reply = true
	// A live message (even one still being posted: the writer is done with
	// that call before it comes to this one) becomes the answer.
	d := &delivery{parts: parts, editLive: true}
	if t.streaming() {
		// The stream ends with the rest of the text; when the last step
		// was streamed it is the answer.
		d.stopLive = true
		d.streamed = t.live.written.Len() > t.live.step && !t.live.broken
	}
	ds := []*delivery{d}
	for i := range ev.Files {
		ds = append(ds, &delivery{file: &ev.Files[i]})
	}
	t.endWith(ReactDone)
	return t.deliver(ctx, ds)
}

// fail queues the failure message; what was written so far stays.
func (t *turn) fail(ctx context.Context, ev agent.Failed) *batch {
	t.endLocked()
	parts := t.s.Format(Text{Body: ev.Message, Failure: true})
	parts[0].Reply = true
	t.endWith(ReactFailed)
	return t.deliver(ctx, []*delivery{{parts: parts, stopLive: t.streaming()}})
}

// endWith sets the mark that goes on the message being answered once the
// answer is out, where the platform has reactions.
func (t *turn) endWith(r Reaction) {
	if t.reactor != nil {
		t.end = &r
	}
}

// streaming reports whether a stream is open, or being opened.
func (t *turn) streaming() bool {
	return t.live.stream != nil || t.streamer != nil && t.live.sent > 0
}

// endLocked marks the turn's end: no more keep-alives or live text, and a
// progress message not posted yet never will be (it would come after the
// answer).
func (t *turn) endLocked() {
	t.ended = true
	t.sign.typingNext = time.Time{}
	t.sign.statusWant = ""
	if t.prog.id == "" {
		t.prog.dropped = true
	}
	t.prog.appearAt = time.Time{}
}

// nextDelivery is the call for the outbox's head, or the wait for its
// tokens.
func (t *turn) nextDelivery(d *delivery, now time.Time) (func(context.Context), time.Duration) {
	if wait := d.retryAt.Sub(now); wait > 0 {
		return nil, wait
	}
	switch {
	case d.stopLive:
		d.stopLive = false
		stream := t.live.stream
		if stream == nil {
			// The stream never opened: post the answer whole.
			d.streamed = false
			return func(context.Context) {}, 0
		}
		rest := t.live.written.String()[t.live.sent:]
		t.live.stream, t.live.sent = nil, t.live.written.Len()
		return func(context.Context) {
			err := stream.Stop(d.ctx, rest)
			t.mu.Lock()
			defer t.mu.Unlock()
			if err != nil {
				t.r.log.Warn("ending a stream failed", "err", err)
				d.streamed = false
			}
			if d.streamed || len(d.parts) == 0 {
				t.finishDelivery(d, nil)
			}
		}, 0
	case d.file != nil:
		if t.uploader == nil {
			t.outbox = t.outbox[1:]
			d.batch.finish(nil)
			return func(context.Context) {}, 0
		}
		if !t.pass.take(t.pace.Posts, false) {
			return nil, paced
		}
		f := *d.file
		return func(context.Context) {
			err := t.uploader.Upload(d.ctx, f)
			t.mu.Lock()
			defer t.mu.Unlock()
			if err != nil && !t.retryLocked(d, err, t.pace.Posts) {
				t.r.log.Warn("attaching a file failed", "file", f.Path, "err", err)
				// Said in the thread, after the rest of the answer.
				t.outbox = append(t.outbox, &delivery{ctx: d.ctx, parts: t.plain(fmt.Sprintf("I could not attach %s: %v", path.Base(f.Path), err)), batch: d.batch})
				d.batch.left++
				t.finishDelivery(d, nil)
				return
			}
			if err == nil {
				t.finishDelivery(d, nil)
			}
		}, 0
	}
	edit := d.editLive && t.live.msg.id != "" && !t.live.gone
	id := t.live.msg.id
	if d.editID != "" {
		edit, id = true, d.editID
	}
	buckets := t.pace.Posts
	if edit {
		buckets = t.pace.Edits
	}
	if !t.pass.take(buckets, false) {
		return nil, paced
	}
	part := d.parts[0]
	return func(context.Context) {
		var err error
		var posted MessageID
		if edit {
			err = t.s.Edit(d.ctx, id, part)
		} else {
			posted, err = t.s.Post(d.ctx, part)
		}
		t.mu.Lock()
		defer t.mu.Unlock()
		if err == nil && posted != "" && d.posted != nil && len(d.parts) == 1 {
			d.posted(posted)
		}
		if err != nil && d.editID != "" {
			if _, limited := RetryAfter(err); !limited && errors.Is(err, ErrGone) {
				d.editID = "" // the question is gone: say the outcome anew
				return
			}
		}
		if err != nil && edit && d.editID == "" {
			if _, limited := RetryAfter(err); !limited {
				// The live message keeps its partial text: post the answer
				// whole instead.
				t.r.log.Warn("the final edit of a live answer failed; posting the answer whole", "err", err)
				t.live.gone = true
				d.editLive = false
				return
			}
		}
		if err != nil && t.retryLocked(d, err, buckets) {
			return
		}
		if err != nil {
			t.r.log.Warn("posting an answer failed", "err", err)
		}
		d.parts = d.parts[1:]
		d.editLive = false
		d.tries, d.retryAt = 0, time.Time{}
		if len(d.parts) == 0 {
			t.finishDelivery(d, err)
		}
	}, 0
}

// retryLocked decides whether a failed delivery call is tried again: after
// a 429, as long as the platform asked (the bucket waits, for every turn of
// the chat); after another error, a few times, a little later (only this
// delivery waits).
func (t *turn) retryLocked(d *delivery, err error, buckets []*Bucket) bool {
	if after, limited := RetryAfter(err); limited {
		block(buckets, time.Now().Add(max(after, minRetry)))
		return true
	}
	d.tries++
	if d.tries >= answerTries || d.ctx.Err() != nil {
		return false
	}
	d.retryAt = time.Now().Add(time.Duration(d.tries) * time.Second)
	return true
}

// finishDelivery takes d off the outbox.
func (t *turn) finishDelivery(d *delivery, err error) {
	if len(t.outbox) > 0 && t.outbox[0] == d {
		t.outbox = t.outbox[1:]
	}
	d.batch.finish(err)
}
