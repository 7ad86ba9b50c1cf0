package adapters

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
	"weak"

	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/internal/testkit/policytest"
)

// The renderer's tests run in a synctest bubble: time is the bubble's, so
// a test can say "the answer was posted the moment it was emitted" exactly,
// without sleeping or racing the clock.

// platformCall is one platform call a fake surface received.
type platformCall struct {
	op   string // post, edit, delete, react, typing, status, draft, stream, append, stop, upload, step
	id   MessageID
	text string
	at   time.Time
}

// fake is an in-memory platform: it records every call and answers with
// scripted errors.
type fake struct {
	pace Pace

	mu    sync.Mutex
	calls []platformCall
	msgs  map[MessageID]string
	seq   int
	fail  map[string][]error // per op: errors to answer the next calls with
}

func newFake(p Pace) *fake {
	return &fake{pace: p, msgs: map[MessageID]string{}, fail: map[string][]error{}}
}

func (f *fake) failNext(op string, errs ...error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail[op] = append(f.fail[op], errs...)
}

func (f *fake) record(op string, id MessageID, text string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := platformCall{op: op, id: id, text: text, at: time.Now()}
	if errs := f.fail[op]; len(errs) > 0 {
		f.fail[op] = errs[1:]
		if errs[0] != nil {
			c.op += "!"
			f.calls = append(f.calls, c)
			return errs[0]
		}
	}
	f.calls = append(f.calls, c)
	return nil
}

func (f *fake) Format(t Text) []Part {
	if !t.Markdown {
		return []Part{{Text: t.Body}}
	}
	// Messages hold 20 characters of Markdown here, so splitting shows.
	var parts []Part
	for _, p := range Split(t.Body, 20, Runes) {
		if t.Partial {
			return []Part{{Text: p + livePending, Markup: "md"}}
		}
		parts = append(parts, Part{Text: p, Markup: "md"})
	}
	return parts
}

func (f *fake) Post(_ context.Context, p Part) (MessageID, error) {
	f.mu.Lock()
	f.seq++
	id := MessageID("m" + strconv.Itoa(f.seq))
	f.mu.Unlock()
	if err := f.record("post", id, p.Text); err != nil {
		return "", err
	}
	f.mu.Lock()
	f.msgs[id] = p.Text
	f.mu.Unlock()
	return id, nil
}

func (f *fake) Edit(_ context.Context, id MessageID, p Part) error {
	f.mu.Lock()
	_, ok := f.msgs[id]
	f.mu.Unlock()
	if !ok {
		f.record("edit!", id, p.Text)
		return fmt.Errorf("edit %s: %w", id, ErrGone)
	}
	if err := f.record("edit", id, p.Text); err != nil {
		return err
	}
	f.mu.Lock()
	f.msgs[id] = p.Text
	f.mu.Unlock()
	return nil
}

func (f *fake) Delete(_ context.Context, id MessageID) error {
	f.mu.Lock()
	delete(f.msgs, id)
	f.mu.Unlock()
	return f.record("delete", id, "")
}

func (f *fake) Pace() Pace { return f.pace }

// deleteByPerson removes a message the way a person does, behind the
// bot's back.
func (f *fake) deleteByPerson(id MessageID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.msgs, id)
}

func (f *fake) log() []platformCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]platformCall(nil), f.calls...)
}

// ops lists the calls as "op text", for comparing whole sequences.
func (f *fake) ops() []string {
	var out []string
	for _, c := range f.log() {
		out = append(out, c.op+" "+c.text)
	}
	return out
}

func (f *fake) count(op string) int {
	n := 0
	for _, c := range f.log() {
		if c.op == op {
			n++
		}
	}
	return n
}

// first is the first call of op whose text contains s.
func (f *fake) first(op, s string) (platformCall, bool) {
	for _, c := range f.log() {
		if c.op == op && strings.Contains(c.text, s) {
			return c, true
		}
	}
	return platformCall{}, false
}

// The platforms, as combinations of abilities.

// channel is like a Slack channel thread: reactions and uploads.
type channel struct{ *fake }

func (s channel) React(_ context.Context, r Reaction, on bool) error {
	return s.record("react", "", fmt.Sprintf("%d %v", r, on))
}
func (s channel) Upload(_ context.Context, f agent.Attachment) error {
	return s.record("upload", "", f.Path)
}

// assistant is like a Slack assistant thread: a status line and streams.
type assistant struct{ channel }

func (s assistant) Status(_ context.Context, text string) error { return s.record("status", "", text) }
func (s assistant) Stream(_ context.Context, md string) (Stream, error) {
	if err := s.record("stream", "", md); err != nil {
		return nil, err
	}
	return fakeStream{s.fake}, nil
}

type fakeStream struct{ *fake }

func (s fakeStream) Append(_ context.Context, md string) error { return s.record("append", "", md) }
func (s fakeStream) Stop(_ context.Context, md string) error   { return s.record("stop", "", md) }

// private is like a Telegram private chat: typing and drafts.
type private struct{ *fake }

func (s private) Typing(context.Context) error { return s.record("typing", "", "") }
func (s private) Draft(_ context.Context, t Text) error {
	return s.record("draft", "", t.Body)
}
func (s private) Upload(_ context.Context, f agent.Attachment) error {
	return s.record("upload", "", f.Path)
}

// group is like a Telegram group: typing only.
type group struct{ *fake }

func (s group) Typing(context.Context) error { return s.record("typing", "", "") }

// terminal cannot edit: it shows steps as lines and streams text.
type terminal struct{ *fake }

func (s terminal) Step(_ context.Context, line string) error { return s.record("step", "", line) }
func (s terminal) Stream(_ context.Context, md string) (Stream, error) {
	if err := s.record("stream", "", md); err != nil {
		return nil, err
	}
	return fakeStream(s), nil
}

func slackPace() Pace {
	return Pace{
		Posts: []*Bucket{NewBucket(time.Second, 3)}, Edits: []*Bucket{NewBucket(1200*time.Millisecond, 5)},
		LiveAfter: time.Second, LiveAnswer: true, StreamEvery: time.Second, StatusEvery: 100 * time.Second, SignOfLife: 700 * time.Millisecond,
	}
}

func telegramPace(groupChat bool) Pace {
	chat := NewBucket(time.Second, 3)
	every := time.Second
	if groupChat {
		chat, every = NewBucket(3*time.Second, 10), 3*time.Second
	}
	all := NewBucket(time.Second/30, 30)
	return Pace{Posts: []*Bucket{chat, all}, Edits: []*Bucket{chat, all}, EditEvery: every, LiveAfter: time.Second, LiveAnswer: !groupChat, TypingEvery: 4 * time.Second}
}

// start opens a turn on the surface made of a fake platform with pace p.
func start(mode Mode, p Pace, surface func(*fake) Surface) (*fake, *Renderer, agent.Thread) {
	f := newFake(p)
	r := NewRenderer(mode, nil)
	return f, r, r.Thread(surface(f))
}

// end closes the turn and waits for what it shows after its answer.
func end(r *Renderer, th agent.Thread) {
	th.(io.Closer).Close()
	r.Close(context.Background())
}

// oneToolTurn plays a turn: the model thinks modelTime, runs ls (which
// takes toolTime), thinks again and answers.
func oneToolTurn(t *testing.T, th agent.Thread, modelTime, toolTime time.Duration, answer string) {
	t.Helper()
	ctx := context.Background()
	emit := func(ev agent.Event) {
		if err := th.Emit(ctx, ev); err != nil {
			t.Errorf("Emit(%T): %v", ev, err)
		}
	}
	emit(agent.TurnStarted{})
	time.Sleep(modelTime)
	emit(agent.ToolStarted{CallID: "c1", Name: "ls", Args: []byte(`{"path":"."}`)})
	time.Sleep(toolTime)
	emit(agent.ToolFinished{CallID: "c1", Name: "ls", Summary: "listed 3 entries", Duration: toolTime})
	time.Sleep(modelTime)
	emit(agent.TextDelta{Text: answer})
	emit(agent.Answer{Text: answer, Steps: 2, Tools: 1, Took: 2*modelTime + toolTime})
	th.(io.Closer).Close()
}

// The answer is posted the moment it is ready, and the progress message's
// last edit (its summary) only after it; the ✅ also waits for the answer.
func TestAnswerBeforeProgressSummary(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(slackPace())
		r := NewRenderer(ModeFull, nil)
		start := time.Now()
		oneToolTurn(t, r.Thread(channel{f}), 200*time.Millisecond, 10*time.Millisecond, "**Done.**")
		answeredAt := start.Add(410 * time.Millisecond)
		r.Close(context.Background())

		ans, ok := f.first("post", "**Done.**")
		if !ok {
			t.Fatalf("no answer posted: %q", f.ops())
		}
		if ans.at != answeredAt {
			t.Errorf("answer posted %v after it was ready", ans.at.Sub(answeredAt))
		}
		want := []string{
			"post ⏳ ls · . · 0 s\nworking · 0 s",
			"post **Done.**",
			"react 1 true",
			"edit 1 tool · 0.4 s",
		}
		if got := f.ops(); !equal(got, want) {
			t.Errorf("calls:\n%q\nwant\n%q", got, want)
		}
	})
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// The budgets of a one-tool turn: four Slack calls with the ✅, and in a
// Telegram private chat with drafts two writes (the draft and the answer)
// plus typing.
func TestCallsOfAOneToolTurn(t *testing.T) {
	cases := []struct {
		name   string
		s      func() (Surface, *fake)
		writes int
		want   []string
	}{
		{"slack thread", func() (Surface, *fake) { f := newFake(slackPace()); return channel{f}, f }, 4, nil},
		{"slack assistant thread", func() (Surface, *fake) { f := newFake(slackPace()); return assistant{channel{f}}, f }, 3,
			[]string{"status is working on it…", "post **Done.** answer-1", "react 1 true"}},
		{"telegram private", func() (Surface, *fake) { f := newFake(telegramPace(false)); return private{f}, f }, 2,
			[]string{"typing ", "draft ⏳ ls · . · 0 s\nworking · 0 s", "post **Done.** answer-1"}},
		{"telegram group", func() (Surface, *fake) { f := newFake(telegramPace(true)); return group{f}, f }, 3, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s, f := c.s()
				r := NewRenderer(ModeFull, nil)
				oneToolTurn(t, r.Thread(s), 200*time.Millisecond, 10*time.Millisecond, "**Done.** answer-1")
				r.Close(context.Background())
				writes := len(f.log()) - f.count("typing")
				if writes > c.writes {
					t.Errorf("%d writes, budget %d: %q", writes, c.writes, f.ops())
				}
				if c.want != nil && !equal(f.ops(), c.want) {
					t.Errorf("calls:\n%q\nwant\n%q", f.ops(), c.want)
				}
				if len(f.log()) == 0 || !strings.Contains(strings.Join(f.ops(), "\n"), "answer-1") {
					t.Errorf("the answer is missing: %q", f.ops())
				}
			})
		})
	}
}

// A storm of 429s on edits does not hold the answer back at all where
// posts have their own budget (Slack), and holds it exactly as long as
// the platform asked where they share one (Telegram).
func TestRateLimitedEditsAndTheAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(slackPace())
		f.failNext("edit", &RateLimitedError{After: 30 * time.Second})
		r := NewRenderer(ModeFull, nil)
		th := r.Thread(channel{f})
		ctx := context.Background()
		th.Emit(ctx, agent.TurnStarted{})
		th.Emit(ctx, agent.ToolStarted{CallID: "1", Name: "ls"})
		time.Sleep(1500 * time.Millisecond)
		th.Emit(ctx, agent.ToolFinished{CallID: "1", Name: "ls", Summary: "ok"})
		th.Emit(ctx, agent.ToolStarted{CallID: "2", Name: "read"})
		time.Sleep(2 * time.Second) // an edit was refused: edits wait 30 s
		th.Emit(ctx, agent.ToolFinished{CallID: "2", Name: "read", Summary: "ok"})
		ready := time.Now()
		th.Emit(ctx, agent.Answer{Text: "the answer"})
		ans, ok := f.first("post", "the answer")
		if !ok || ans.at != ready {
			t.Errorf("answer at %v, ready at %v (ok %v): %q", ans.at, ready, ok, f.ops())
		}
		start := time.Now()
		end(r, th)
		// The summary would wait out the 429: it is left out, and the
		// turn's writer ends at once instead of holding the budget.
		if _, ok := f.first("edit", "2 tools"); ok || time.Since(start) != 0 {
			t.Errorf("summary after a 30 s 429: %q (the writer ended %v after the answer)", f.ops(), time.Since(start))
		}
	})
	synctest.Test(t, func(t *testing.T) {
		f, r, th := start(ModeFull, telegramPace(false), func(f *fake) Surface { return group{f} })
		ctx := context.Background()
		th.Emit(ctx, agent.TurnStarted{})
		th.Emit(ctx, agent.ToolStarted{CallID: "1", Name: "ls"})
		time.Sleep(10 * time.Millisecond) // the progress message is up
		f.failNext("edit", &RateLimitedError{After: 7 * time.Second})
		th.Emit(ctx, agent.ToolFinished{CallID: "1", Name: "ls", Summary: "ok"})
		th.Emit(ctx, agent.ToolStarted{CallID: "2", Name: "read"})
		time.Sleep(1100 * time.Millisecond) // the edit is refused: 7 s
		refused, ok := f.first("edit!", "")
		if !ok {
			t.Fatalf("no refused edit: %q", f.ops())
		}
		th.Emit(ctx, agent.Answer{Text: "the answer"})
		ans, ok := f.first("post", "the answer")
		if !ok || ans.at != refused.at.Add(7*time.Second) {
			t.Errorf("answer %v after the 429, want exactly 7s: %q", ans.at.Sub(refused.at), f.ops())
		}
		end(r, th)
	})
}

// A progress message deleted by a person does not stop the answer; the
// progress goes on in a new message.
func TestDeletedProgressMessage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, r, th := start(ModeFull, slackPace(), func(f *fake) Surface { return channel{f} })
		ctx := context.Background()
		th.Emit(ctx, agent.TurnStarted{})
		th.Emit(ctx, agent.ToolStarted{CallID: "1", Name: "ls"})
		time.Sleep(10 * time.Millisecond)
		progress, ok := f.first("post", "ls")
		if !ok {
			t.Fatalf("no progress message: %q", f.ops())
		}
		f.deleteByPerson(progress.id)
		th.Emit(ctx, agent.ToolFinished{CallID: "1", Name: "ls", Summary: "ok"})
		th.Emit(ctx, agent.ToolStarted{CallID: "2", Name: "read"})
		time.Sleep(2 * time.Second)
		if _, ok := f.first("post", "read"); !ok {
			t.Errorf("no new progress message after the old one was deleted: %q", f.ops())
		}
		if err := th.Emit(ctx, agent.Answer{Text: "still here"}); err != nil {
			t.Errorf("Emit(Answer) = %v", err)
		}
		if _, ok := f.first("post", "still here"); !ok {
			t.Errorf("no answer: %q", f.ops())
		}
		end(r, th)
	})
}

// With progress off there is no progress message at all: 👀 is the sign of
// life, swapped for ✅ at the end.
func TestProgressOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(slackPace())
		r := NewRenderer(ModeOff, nil)
		oneToolTurn(t, r.Thread(channel{f}), 2*time.Second, 3*time.Second, "the answer")
		r.Close(context.Background())
		want := []string{"react 0 true", "post the answer", "react 0 false", "react 1 true"}
		if got := f.ops(); !equal(got, want) {
			t.Errorf("calls %q, want %q", got, want)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		f := newFake(telegramPace(false))
		r := NewRenderer(ModeOff, nil)
		oneToolTurn(t, r.Thread(private{f}), 2*time.Second, 3*time.Second, "the answer")
		r.Close(context.Background())
		for _, c := range f.log() {
			if c.op == "draft" || c.op == "post" && c.text != "the answer" {
				t.Errorf("progress shown with progress off: %q", f.ops())
			}
		}
	})
}

// The terminal shows the same steps, as lines, as the progress message
// lists; and the summary after the answer.
func TestTerminalShowsTheSameSteps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, r, th := start(ModeFull, slackPace(), func(f *fake) Surface { return channel{f} })
		var p Progress
		ctx := context.Background()
		events := []agent.Event{
			agent.TurnStarted{},
			agent.ToolStarted{CallID: "1", Name: "ls", Args: []byte(`{"path":"."}`)},
			agent.ToolFinished{CallID: "1", Name: "ls", Summary: "listed 3 entries", Duration: 20 * time.Millisecond},
			agent.ToolStarted{CallID: "2", Name: "write", Args: []byte(`{"path":"a.txt"}`)},
			agent.ToolFinished{CallID: "2", Name: "write", Summary: "denied", Failed: true, Duration: 5 * time.Millisecond},
		}
		for _, ev := range events {
			th.Emit(ctx, ev)
			p.Apply(ev, time.Now())
			time.Sleep(1100 * time.Millisecond)
		}
		th.Emit(ctx, agent.Answer{Text: "done"})
		end(r, th)

		tf := newFake(Pace{})
		tr := NewRenderer(ModeFull, nil)
		tth := tr.Thread(terminal{tf})
		for _, ev := range events {
			tth.Emit(ctx, ev)
			time.Sleep(1100 * time.Millisecond)
		}
		tth.Emit(ctx, agent.TextDelta{Text: "done "})
		time.Sleep(time.Millisecond)
		tth.Emit(ctx, agent.Answer{Text: "done "})
		tth.(io.Closer).Close()
		tr.Close(context.Background())

		var steps []string
		for _, c := range tf.log() {
			if c.op == "step" {
				steps = append(steps, c.text)
			}
		}
		lines := p.Lines(time.Now())
		if len(steps) != 3 || steps[0] != lines[0] || steps[1] != lines[1] {
			t.Fatalf("terminal steps %q, progress lines %q", steps, lines)
		}
		// The channel's progress message listed the same lines.
		edit, ok := f.first("edit", lines[0])
		if !ok || !strings.Contains(edit.text, lines[1]) && !strings.Contains(f.msgs[edit.id], "2 tools") {
			t.Errorf("progress message never listed %q: %q", lines, f.ops())
		}
		if steps[2] != "2 tools, 1 failed · 5.5 s" {
			t.Errorf("summary line %q", steps[2])
		}
		// The answer streamed, and was not printed twice.
		if got := tf.ops(); !strings.Contains(strings.Join(got, "\n"), "stream done") || tf.count("post") != 0 {
			t.Errorf("terminal calls %q", got)
		}
	})
}

// Where the server has no drafts, the first draft says so and the turn
// goes on with a progress message, and the answer as it is written in a
// message edited as it grows.
func TestDraftsUnavailable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(telegramPace(false))
		f.failNext("draft", fmt.Errorf("no such method: %w", ErrUnsupported))
		r := NewRenderer(ModeFull, nil)
		th := r.Thread(private{f})
		ctx := context.Background()
		th.Emit(ctx, agent.TurnStarted{})
		th.Emit(ctx, agent.ToolStarted{CallID: "1", Name: "ls"})
		time.Sleep(10 * time.Millisecond)
		th.Emit(ctx, agent.ToolFinished{CallID: "1", Name: "ls", Summary: "ok"})
		for _, w := range strings.Fields("one two three four five six seven eight nine ten") {
			th.Emit(ctx, agent.TextDelta{Text: w + " "})
			time.Sleep(300 * time.Millisecond)
		}
		th.Emit(ctx, agent.Answer{Text: "the answer"})
		end(r, th)
		if f.count("draft!") != 1 || f.count("draft") != 0 {
			t.Errorf("drafts tried again after the server said it has none: %q", f.ops())
		}
		if _, ok := f.first("post", "⏳ ls"); !ok {
			t.Errorf("no progress message instead of the draft: %q", f.ops())
		}
		live, ok := f.first("post", "one two three")
		if !ok {
			t.Fatalf("the answer was not shown as it was written: %q", f.ops())
		}
		if final, ok := f.first("edit", "the answer"); !ok || final.id != live.id {
			t.Errorf("the live message did not become the answer: %q", f.ops())
		}
	})
}

// A live answer is posted after a second of writing, edited at most once
// an interval, and set to the answer (split where it is long: the first
// part in the live message, the rest after it).
func TestLiveAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, r, th := start(ModeFull, slackPace(), func(f *fake) Surface { return channel{f} })
		ctx := context.Background()
		th.Emit(ctx, agent.TurnStarted{})
		start := time.Now()
		for i := range 30 {
			th.Emit(ctx, agent.TextDelta{Text: "w" + strconv.Itoa(i) + " "})
			time.Sleep(100 * time.Millisecond)
		}
		final := "the final answer is longer than twenty characters"
		th.Emit(ctx, agent.Answer{Text: final})
		end(r, th)
		var live []platformCall
		for _, c := range f.log() {
			if strings.HasSuffix(c.text, livePending) {
				live = append(live, c)
			}
		}
		if len(live) < 2 || live[0].op != "post" || live[0].at.Sub(start) < time.Second {
			t.Fatalf("live calls %+v", live)
		}
		for i := 1; i < len(live); i++ {
			if live[i].op != "edit" || live[i].at.Sub(live[i-1].at) < time.Second {
				t.Errorf("live edit %d at %v after the previous", i, live[i].at.Sub(live[i-1].at))
			}
		}
		parts := f.Format(Text{Body: final, Markdown: true})
		if len(parts) < 2 {
			t.Fatalf("the answer is not long enough to split: %+v", parts)
		}
		edit, ok := f.first("edit", parts[0].Text)
		if !ok || edit.id != live[0].id {
			t.Errorf("the live message was not set to the answer's first part: %q", f.ops())
		}
		for _, p := range parts[1:] {
			if _, ok := f.first("post", p.Text); !ok {
				t.Errorf("part %q not posted: %q", p.Text, f.ops())
			}
		}
		// The progress message that showed while nothing else did (the
		// sign of life) is taken back: a turn without tools has no summary.
		if post, ok := f.first("post", "writing · 0 s"); !ok || f.count("delete") != 1 {
			t.Errorf("sign of life %v, deletes %d: %q", post, f.count("delete"), f.ops())
		}
	})
}

// In an assistant thread the answer streams: started at the first words,
// appended at most once a second, stopped with the rest; a ping split
// across pieces never goes out whole (the surface neutralizes the whole
// text; here each piece ends at a space).
func TestStreamedAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, r, th := start(ModeFull, slackPace(), func(f *fake) Surface { return assistant{channel{f}} })
		ctx := context.Background()
		th.Emit(ctx, agent.TurnStarted{})
		text := ""
		for i := range 25 {
			w := "w" + strconv.Itoa(i) + " "
			text += w
			th.Emit(ctx, agent.TextDelta{Text: w})
			time.Sleep(100 * time.Millisecond)
		}
		th.Emit(ctx, agent.TextDelta{Text: "end"})
		th.Emit(ctx, agent.Answer{Text: text + "end"})
		end(r, th)
		var got strings.Builder
		var at []time.Time
		for _, c := range f.log() {
			switch c.op {
			case "stream", "append", "stop":
				got.WriteString(c.text)
				at = append(at, c.at)
			case "post":
				t.Errorf("the answer was posted besides the stream: %q", c.text)
			}
		}
		if got.String() != text+"end" || f.count("stream") != 1 || f.count("stop") != 1 {
			t.Fatalf("streamed %q: %q", got.String(), f.ops())
		}
		for i := 1; i < len(at)-1; i++ {
			if at[i].Sub(at[i-1]) < time.Second {
				t.Errorf("append %d came %v after the previous", i, at[i].Sub(at[i-1]))
			}
		}
	})
	// A stream that fails: the answer is posted whole.
	synctest.Test(t, func(t *testing.T) {
		f := newFake(slackPace())
		f.failNext("stream", errors.New("not an assistant thread"))
		r := NewRenderer(ModeFull, nil)
		th := r.Thread(assistant{channel{f}})
		ctx := context.Background()
		th.Emit(ctx, agent.TurnStarted{})
		th.Emit(ctx, agent.TextDelta{Text: "partial answer "})
		time.Sleep(10 * time.Millisecond)
		th.Emit(ctx, agent.Answer{Text: "whole"})
		end(r, th)
		if _, ok := f.first("post", "whole"); !ok {
			t.Errorf("the answer was lost with the stream: %q", f.ops())
		}
	})
}

// A status line that the platform refuses (not an assistant thread after
// all) gives way to the progress message.
func TestStatusUnavailable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(slackPace())
		f.failNext("status", errors.New("channel_not_found"))
		r := NewRenderer(ModeFull, nil)
		oneToolTurn(t, r.Thread(assistant{channel{f}}), time.Second, 10*time.Millisecond, "the answer")
		r.Close(context.Background())
		if f.count("status") != 0 || f.count("status!") != 1 {
			t.Errorf("status tried again: %q", f.ops())
		}
		if _, ok := f.first("post", "working"); !ok {
			t.Errorf("no progress message as the sign of life: %q", f.ops())
		}
		if _, ok := f.first("edit", "1 tool"); !ok {
			t.Errorf("no summary: %q", f.ops())
		}
	})
}

// Files follow the answer; one that cannot be attached (after a few tries)
// is said in the thread, and Emit still returns once everything is shown.
func TestFilesAndNotices(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(slackPace())
		tooLarge := errors.New("file too large")
		f.failNext("upload", nil, tooLarge, tooLarge, tooLarge)
		r := NewRenderer(ModeFull, nil)
		th := r.Thread(channel{f})
		ctx := context.Background()
		th.Emit(ctx, agent.TurnStarted{})
		err := th.Emit(ctx, agent.Answer{Text: "here", Files: []agent.Attachment{{Path: "out/a.csv"}, {Path: "out/big.iso"}}})
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"post here", "upload out/a.csv", "upload! out/big.iso", "upload! out/big.iso", "upload! out/big.iso", "post I could not attach big.iso: file too large"}
		if got := f.ops(); !equal(got[:min(len(got), len(want))], want) {
			t.Errorf("calls %q, want %q first", got, want)
		}
		th.(io.Closer).Close()
		n := r.Thread(channel{f})
		if err := n.Emit(ctx, agent.Notice{Text: "Idle."}); err != nil {
			t.Fatal(err)
		}
		if _, ok := f.first("post", "Idle."); !ok {
			t.Errorf("notice not posted: %q", f.ops())
		}
		n.(io.Closer).Close()
		r.Close(ctx)
	})
}

// An answer the platform keeps refusing for another reason than a rate
// limit is tried a few times, then Emit returns the error.
func TestAnswerFailsAfterRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(slackPace())
		boom := errors.New("channel_not_found")
		f.failNext("post", boom, boom, boom)
		r := NewRenderer(ModeFull, nil)
		th := r.Thread(channel{f})
		if err := th.Emit(context.Background(), agent.Answer{Text: "lost"}); !errors.Is(err, boom) {
			t.Errorf("Emit = %v, want %v", err, boom)
		}
		if n := f.count("post!"); n != answerTries {
			t.Errorf("%d tries, want %d", n, answerTries)
		}
		end(r, th)
	})
}

// Close waits for what a turn shows after its answer; a deadline abandons
// it. No writer outlives Close.
func TestRendererClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(slackPace())
		r := NewRenderer(ModeFull, nil)
		th := r.Thread(channel{f})
		ctx := context.Background()
		th.Emit(ctx, agent.TurnStarted{})
		// The answer's post is refused for an hour: it is what a person
		// must get, so the writer waits.
		f.failNext("post", &RateLimitedError{After: time.Hour})
		emitted := make(chan error, 1)
		go func() { emitted <- th.Emit(ctx, agent.Answer{Text: "done"}) }()
		time.Sleep(time.Second)
		th.(io.Closer).Close()
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		start := time.Now()
		r.Close(dctx)
		if waited := time.Since(start); waited != 5*time.Second {
			t.Errorf("Close waited %v, want the 5 s it was given", waited)
		}
		if err := <-emitted; err == nil {
			t.Error("the abandoned answer's Emit returned no error")
		}
		if err := r.Thread(channel{f}).Emit(ctx, agent.Notice{Text: "late"}); !errors.Is(err, ErrClosed) {
			t.Errorf("Emit after Close = %v", err)
		}
		// synctest fails the test if a writer goroutine is still running.
	})
}

// A finished turn whose tidying up (the progress summary) waits behind a
// long backlog of the workspace's edit budget leaves the message as it is:
// its writer does not linger, so thousands of finished turns hold nothing.
func TestTidyingGivesUpBehindABacklog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := NewRenderer(ModeFull, nil)
		pace := slackPace() // one workspace: its edit budget is shared
		var ths []agent.Thread
		var fakes []*fake
		for range 20 {
			f := newFake(pace)
			fakes = append(fakes, f)
			ths = append(ths, r.Thread(channel{f}))
		}
		ctx := context.Background()
		for _, th := range ths {
			th.Emit(ctx, agent.TurnStarted{})
			th.Emit(ctx, agent.ToolStarted{CallID: "1", Name: "ls"})
		}
		time.Sleep(time.Second)
		for _, th := range ths {
			th.Emit(ctx, agent.ToolFinished{CallID: "1", Name: "ls", Summary: "ok"})
			th.Emit(ctx, agent.Answer{Text: "done"})
			th.(io.Closer).Close()
		}
		start := time.Now()
		if err := r.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		if waited := time.Since(start); waited > tidyPatience+2*time.Second {
			t.Errorf("finished turns lingered %v to tidy up", waited)
		}
		summed := 0
		for _, f := range fakes {
			if _, ok := f.first("edit", "1 tool"); ok {
				summed++
			}
			if _, ok := f.first("post", "done"); !ok {
				t.Errorf("an answer is missing: %q", f.ops())
			}
		}
		if summed == 0 || summed == len(fakes) {
			t.Errorf("%d of %d progress messages summed up; want those the budget allowed soon, not all", summed, len(fakes))
		}
		r.Close(ctx)
	})
}

// A turn that is closed without an answer (its lease was lost) stops
// showing signs of life and ends its stream.
func TestClosedWithoutAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, r, th := start(ModeFull, telegramPace(false), func(f *fake) Surface { return private{f} })
		ctx := context.Background()
		th.Emit(ctx, agent.TurnStarted{})
		time.Sleep(10 * time.Second)
		th.(io.Closer).Close()
		typing := f.count("typing")
		time.Sleep(time.Minute)
		if typing != 3 || f.count("typing") != typing {
			t.Errorf("typing %d times in 10 s, then %d more after Close", typing, f.count("typing")-typing)
		}
		r.Close(ctx)
	})
}

func TestRetryAfter(t *testing.T) {
	err := fmt.Errorf("edit: %w", &RateLimitedError{After: 7 * time.Second, Err: errors.New("ratelimited")})
	if d, ok := RetryAfter(err); !ok || d != 7*time.Second {
		t.Errorf("RetryAfter = %v, %v", d, ok)
	}
	if _, ok := RetryAfter(errors.New("other")); ok {
		t.Error("plain error is rate-limited")
	}
	if _, ok := RetryAfter(nil); ok {
		t.Error("nil is rate-limited")
	}
	if err.Error() != "edit: rate limited, retry after 7s: ratelimited" {
		t.Errorf("message %q", err.Error())
	}
}

// A 429 on a stream's append waits as asked, and the text comes whole.
func TestStreamRateLimited(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, r, th := start(ModeFull, slackPace(), func(f *fake) Surface { return assistant{channel{f}} })
		f.failNext("append", &RateLimitedError{After: 5 * time.Second})
		ctx := context.Background()
		th.Emit(ctx, agent.TurnStarted{})
		text := ""
		for i := range 40 {
			w := "w" + strconv.Itoa(i) + " "
			text += w
			th.Emit(ctx, agent.TextDelta{Text: w})
			time.Sleep(200 * time.Millisecond)
		}
		th.Emit(ctx, agent.Answer{Text: text})
		end(r, th)
		var got strings.Builder
		var refused, next time.Time
		for _, c := range f.log() {
			switch c.op {
			case "stream", "append", "stop":
				got.WriteString(c.text)
				if !refused.IsZero() && next.IsZero() {
					next = c.at
				}
			case "append!":
				refused = c.at
			}
		}
		if got.String() != text || refused.IsZero() || next.Sub(refused) != 5*time.Second {
			t.Errorf("streamed %q (want %q); refused at %v, next piece %v later", got.String(), text, refused, next.Sub(refused))
		}
	})
}

// Answers of many turns that share a spent bucket go out one a token, in
// the order they were ready; one whose Emit gives up leaves the queue at
// once, and the token it would have had goes to the next answer.
func TestAnswersQueueForASharedBucket(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pace := Pace{Posts: []*Bucket{NewBucket(time.Second, 1)}}
		r := NewRenderer(ModeOff, nil)
		f := newFake(pace)
		ctx := context.Background()
		start := time.Now()
		gaveUp, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
		defer cancel()
		var wg sync.WaitGroup
		var ths []agent.Thread
		for i := range 5 {
			th := r.Thread(channel{f})
			ths = append(ths, th)
			ectx := ctx
			if i == 2 {
				ectx = gaveUp // would go at 2 s
			}
			wg.Go(func() {
				err := th.Emit(ectx, agent.Answer{Text: fmt.Sprint("answer", i)})
				if (err != nil) != (i == 2) {
					t.Errorf("answer%d: Emit = %v", i, err)
				}
			})
			time.Sleep(time.Millisecond) // ready in this order
		}
		time.Sleep(1600*time.Millisecond - time.Since(start))
		paceMu.Lock()
		waiting := pace.Posts[0].answers.n
		paceMu.Unlock()
		if waiting != 2 {
			t.Errorf("%d answers wait for the bucket after one gave up; want 2", waiting)
		}
		wg.Wait()
		for _, th := range ths {
			th.(io.Closer).Close()
		}
		r.Close(ctx)
		var got []string
		for _, c := range f.log() {
			if c.op == "post" {
				got = append(got, fmt.Sprintf("%s at %v", c.text, c.at.Sub(start).Round(10*time.Millisecond)))
			}
		}
		want := []string{"answer0 at 0s", "answer1 at 1s", "answer3 at 2s", "answer4 at 3s"}
		if !equal(got, want) {
			t.Errorf("posts %q, want %q", got, want)
		}
	})
}

// A command's policy notice shows the channel's skills and MCP servers as
// buttons, each within a button's data limit, under the command's text.
func TestNoticeShowsSkillsAndServers(t *testing.T) {
	chat := agent.SessionKey{Platform: "p", Chat: "C1"}
	e := policytest.New(t, chat, []string{"U9"})
	v, err := e.D.Policy(context.Background(), chat, agent.User{ID: "U9"})
	if err != nil {
		t.Fatal(err)
	}
	synctest.Test(t, func(t *testing.T) {
		f := newFake(telegramPace(true))
		r := NewRenderer(ModeFull, nil)
		th := r.Thread(asking{channel{f}})
		th.Emit(context.Background(), agent.Notice{Text: "Tools here:", Policy: &v})
		p, ok := f.first("post", "Tools here:")
		if !ok {
			t.Fatalf("no screen: %q", f.ops())
		}
		for _, want := range []string{"[▸ skills: allow (default)=fm:pol:0:ask:group:skills]", "deploy: allow=fm:pol:0:ask:skill:deploy",
			policytest.LongSkill + ": allow=fm:pol:0:ask:#", "[▸ mcp:notes: allow (default)=fm:pol:0:ask:group:mcp:notes]"} {
			if !strings.Contains(p.text, want) {
				t.Errorf("the screen lacks %q: %s", want, p.text)
			}
		}
		end(r, th)
	})
}

// BenchmarkStreamedAnswer is a turn whose answer streams in as a model
// sends it, four characters a piece, quicker than LiveAfter: the writer
// hears of the first piece, not of each. (Between two pieces the model's
// reader waits for the network, and the writer gets to run.)
func BenchmarkStreamedAnswer(b *testing.B) {
	p := slackPace()
	p.Posts = []*Bucket{NewBucket(time.Microsecond, 1<<20)} // no waits for the pace
	f := newFake(p)
	r := NewRenderer(ModeFull, nil)
	defer r.Close(context.Background())
	ctx := context.Background()
	answer := strings.Repeat("word ", 20)
	b.ReportAllocs()
	for b.Loop() {
		th := r.Thread(channel{f})
		th.Emit(ctx, agent.TurnStarted{})
		for i := 0; i < len(answer); i += 4 {
			th.Emit(ctx, agent.TextDelta{Text: answer[i:min(i+4, len(answer))]})
			runtime.Gosched()
		}
		if err := th.Emit(ctx, agent.Answer{Text: answer, Steps: 1}); err != nil {
			b.Fatal(err)
		}
		th.(io.Closer).Close()
	}
}

// A turn that waits on the model holds no goroutine: its writer parks
// between the calls it makes (the sign of life, the keep-alives, the
// progress) and its timer or the next event starts it again. Every turn
// still gets its progress and its answer.
func TestWaitingTurnsHoldNoWriter(t *testing.T) {
	for _, c := range []struct {
		name   string
		s      func() (Surface, *fake)
		typing int // keep-alives in the 30 s: the parked writer's timer
	}{
		{"slack thread", func() (Surface, *fake) { f := newFake(slackPace()); return channel{f}, f }, 0},
		{"telegram private", func() (Surface, *fake) { f := newFake(telegramPace(false)); return private{f}, f }, 7},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := NewRenderer(ModeFull, nil)
				synctest.Wait()
				before := runtime.NumGoroutine()
				const turns = 50
				ths := make([]agent.Thread, turns)
				fakes := make([]*fake, turns)
				ctx := context.Background()
				for i := range ths {
					s, f := c.s()
					ths[i], fakes[i] = r.Thread(s), f
					ths[i].Emit(ctx, agent.TurnStarted{})
					ths[i].Emit(ctx, agent.ToolStarted{CallID: "c1", Name: "ls", Args: []byte(`{"path":"."}`)})
					ths[i].Emit(ctx, agent.ToolFinished{CallID: "c1", Name: "ls", Summary: "listed 3 entries", Duration: time.Millisecond})
				}
				// The model thinks for 30 s: keep-alives and progress
				// edits come due meanwhile, and each writer parks again.
				for range 30 {
					time.Sleep(time.Second)
					synctest.Wait()
					// NumGoroutine counts the whole test process, where one
					// may come and go outside the bubble: not one a turn.
					if n := runtime.NumGoroutine() - before; n > 1 {
						t.Fatalf("%d goroutines for %d turns waiting on the model", n, turns)
					}
				}
				for i, f := range fakes {
					if n := f.count("typing"); n < c.typing || len(f.log()) == n {
						t.Fatalf("turn %d waiting on the model made %q; want its progress and %d keep-alives", i, f.ops(), c.typing)
					}
				}
				for i, th := range ths {
					th.Emit(ctx, agent.Answer{Text: "answer-" + strconv.Itoa(i), Steps: 2, Tools: 1})
					th.(io.Closer).Close()
				}
				r.Close(ctx)
				for i, f := range fakes {
					if !strings.Contains(strings.Join(f.ops(), "\n"), "answer-"+strconv.Itoa(i)) {
						t.Fatalf("turn %d's answer is missing: %q", i, f.ops())
					}
				}
			})
		})
	}
}

// A finished turn is let go: the renderer, which lives as long as the
// process, keeps nothing of it.
func TestFinishedTurnsAreLetGo(t *testing.T) {
	r := NewRenderer(ModeFull, nil)
	defer r.Close(context.Background())
	ctx := context.Background()
	var gone []weak.Pointer[turn]
	for i := range 20 {
		th := r.Thread(channel{newFake(slackPace())})
		th.Emit(ctx, agent.TurnStarted{})
		th.Emit(ctx, agent.Answer{Text: "answer-" + strconv.Itoa(i)})
		th.(io.Closer).Close()
		gone = append(gone, weak.Make(th.(*turn)))
	}
	idle, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := r.Wait(idle); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.GC()
	kept := 0
	for _, w := range gone {
		if w.Value() != nil {
			kept++
		}
	}
	if kept > 0 {
		t.Errorf("%d of 20 finished turns are still held", kept)
	}
}
