package slack

import (
	"context"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/slack-go/slack"

	"github.com/firstmate/firstmate/adapters"
)

// In an assistant thread (a thread in the bot's DM, where Slack shows the
// app as an assistant) the sign of life is the thread's status line
// ("is running ls…"), kept fresh before Slack's two-minute expiry, and the
// answer is streamed (chat.startStream / appendStream / stopStream) as the
// model writes it. Slack clears the status when the answer arrives.
const (
	statusRefresh  = 100 * time.Second // Slack drops a status after two minutes
	streamInterval = time.Second       // appends coalesce to one a second
)

// isAssistantThread reports whether key is a thread in a DM.
func isAssistantThread(channel, threadTS string) bool {
	return strings.HasPrefix(channel, "D") && threadTS != ""
}

// status shows and refreshes an assistant thread's status line.
type status struct {
	t        *thread
	throttle *adapters.Throttle
	mu       sync.Mutex
	text     string
	stop     context.CancelFunc
	done     chan struct{}
}

// startStatus sets the first status; it fails when the thread is not an
// assistant thread, and the caller falls back to a progress message.
func (t *thread) startStatus(ctx context.Context, text string) (*status, error) {
	if err := t.setStatus(ctx, text); err != nil {
		return nil, err
	}
	bg, stop := context.WithCancel(context.WithoutCancel(ctx))
	s := &status{t: t, text: text, stop: stop, done: make(chan struct{})}
	s.throttle = adapters.NewThrottle(bg, editInterval, func(ctx context.Context, text string) error {
		s.mu.Lock()
		s.text = text
		s.mu.Unlock()
		return t.setStatus(ctx, text)
	})
	go func() {
		defer close(s.done)
		tick := time.NewTicker(statusRefresh)
		defer tick.Stop()
		for {
			select {
			case <-bg.Done():
				return
			case <-tick.C:
				s.mu.Lock()
				text := s.text
				s.mu.Unlock()
				t.setStatus(bg, text)
			}
		}
	}()
	return s, nil
}

func (s *status) update(text string) { s.throttle.Update(text) }

// close stops the refresh. The status itself is cleared by Slack when the
// answer (or an error message) is posted.
func (s *status) close() {
	s.throttle.Close()
	s.stop()
	<-s.done
}

func (t *thread) setStatus(ctx context.Context, text string) error {
	return retry(ctx, func() error {
		return t.a.api.SetAssistantThreadsStatusContext(ctx, slack.AssistantThreadsSetStatusParameters{
			ChannelID: t.channel, ThreadTS: t.threadTS, Status: text,
		})
	})
}

// streamer streams the model's text into one message. Text is sent in
// pieces cut at whitespace, so a mention token (which has none) is never
// split between two pieces and SafeMarkdown sees each one whole.
type streamer struct {
	t       *thread
	mu      sync.Mutex
	pending strings.Builder
	raw     strings.Builder // all text sent so far, as the model wrote it
	safe    string          // SafeMarkdown of raw: what Slack has
	ts      string          // the streaming message, once started
	failed  bool            // streaming is not available; the answer is posted whole
	last    time.Time
}

// add takes a delta and sends what can be sent, at most once a second.
func (s *streamer) add(ctx context.Context, delta string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failed {
		return
	}
	s.pending.WriteString(delta)
	if time.Since(s.last) < streamInterval {
		return
	}
	s.sendLocked(ctx, false)
}

// sendLocked sends the pending text up to its last whitespace (or all of
// it when final), starting the stream if needed.
func (s *streamer) sendLocked(ctx context.Context, final bool) {
	text := s.pending.String()
	cut := len(text)
	if !final {
		cut = strings.LastIndexFunc(text, unicode.IsSpace)
		if cut <= 0 {
			return
		}
	}
	chunk := s.safeChunk(text[:cut])
	rest := text[cut:]
	if strings.TrimSpace(chunk) == "" && s.ts == "" && !final {
		return
	}
	var err error
	switch {
	case s.ts == "":
		opts := []slack.MsgOption{slack.MsgOptionMarkdownText(chunk), slack.MsgOptionTS(s.t.threadTS)}
		err = retry(ctx, func() error {
			var e error
			_, s.ts, e = s.t.a.api.StartStreamContext(ctx, s.t.channel, opts...)
			return e
		})
	case chunk != "":
		err = retry(ctx, func() error {
			_, _, e := s.t.a.api.AppendStreamContext(ctx, s.t.channel, s.ts, slack.MsgOptionMarkdownText(chunk))
			return e
		})
	}
	if err != nil {
		s.t.a.log.Warn("slack streaming failed; the answer will be posted whole", "err", err)
		s.failed = true
		return
	}
	s.pending.Reset()
	s.pending.WriteString(rest)
	s.last = time.Now()
}

// safeChunk returns what to append for the model's next piece of text.
// Slack joins the pieces into one message, so a ping split across two
// ("[here](" then " !channel)") must be caught: the whole text so far is
// neutralized and only what is new is sent. Neutralizing inserts
// characters at the dangerous token, which is in the new part; if the
// already-sent part would change anyway, the piece is neutralized alone.
func (s *streamer) safeChunk(piece string) string {
	s.raw.WriteString(piece)
	all := SafeMarkdown(s.raw.String(), s.t.allowed)
	if !strings.HasPrefix(all, s.safe) {
		chunk := SafeMarkdown(piece, s.t.allowed)
		s.safe += chunk
		return chunk
	}
	chunk := all[len(s.safe):]
	s.safe = all
	return chunk
}

// finish sends what is left and stops the stream. It reports whether the
// answer went out as a stream (false: post it whole).
func (s *streamer) finish(ctx context.Context) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failed || s.ts == "" {
		return false
	}
	rest := s.safeChunk(s.pending.String())
	var opts []slack.MsgOption
	if rest != "" {
		opts = append(opts, slack.MsgOptionMarkdownText(rest))
	}
	err := retry(ctx, func() error {
		_, _, e := s.t.a.api.StopStreamContext(ctx, s.t.channel, s.ts, opts...)
		return e
	})
	if err != nil {
		s.t.a.log.Warn("slack stopStream failed", "err", err)
	}
	return true
}
