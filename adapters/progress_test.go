package adapters

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/firstmate/firstmate/agent"
)

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// at is an event seen s seconds into the turn.
type at struct {
	s  float64
	ev agent.Event
}

func sec(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

func args(s string) json.RawMessage { return json.RawMessage(s) }

func TestProgressRender(t *testing.T) {
	start := at{0, agent.TurnStarted{MessageIDs: []string{"m1"}}}
	tests := []struct {
		name   string
		events []at
		now    float64
		mode   Mode
		want   string
	}{
		{
			name: "nothing yet",
			now:  3,
			want: "",
		},
		{
			name:   "just started",
			events: []at{start},
			now:    2.7,
			want:   "working · 2 s",
		},
		{
			name: "one running",
			events: []at{start,
				{1, agent.ToolStarted{CallID: "a", Name: "shell", Args: args(`{"command":"go test ./..."}`)}},
			},
			now:  5.2,
			want: "⏳ shell · go test ./... · 4 s\nworking · 5 s",
		},
		{
			name: "finished and running",
			events: []at{start,
				{1, agent.ToolStarted{CallID: "a", Name: "read", Args: args(`{"path":"main.go"}`)}},
				{1.2, agent.ToolFinished{CallID: "a", Name: "read", Summary: "main.go, 120 lines", Duration: 230 * time.Millisecond}},
				{2, agent.ToolStarted{CallID: "b", Name: "shell", Args: args(`{"command":"make"}`)}},
				{4, agent.ToolFinished{CallID: "b", Name: "shell", Summary: "exit status 2", Failed: true, Duration: 2 * time.Second}},
				{5, agent.ToolStarted{CallID: "c", Name: "grep", Args: args(`{"pattern":"TODO","path":"."}`)}},
			},
			now:  12.9,
			want: "✓ read · main.go, 120 lines · 0.2 s\n✗ shell · exit status 2 · 2.0 s\n⏳ grep · . · 7 s\nworking · 12 s",
		},
		{
			name: "summary mode while running",
			events: []at{start,
				{1, agent.ToolStarted{CallID: "a", Name: "read"}},
				{2, agent.ToolFinished{CallID: "a", Name: "read", Summary: "ok", Duration: time.Second}},
				{3, agent.ToolStarted{CallID: "b", Name: "shell"}},
			},
			now:  65,
			mode: ModeSummary,
			want: "working · shell · 2 tools · 1 min 5 s",
		},
		{
			name:   "summary mode before any tool",
			events: []at{start},
			now:    1,
			mode:   ModeSummary,
			want:   "working · 1 s",
		},
		{
			name: "off",
			events: []at{start,
				{1, agent.ToolStarted{CallID: "a", Name: "read"}},
			},
			now:  3,
			mode: ModeOff,
			want: "",
		},
		{
			name: "answer shrinks to one line",
			events: []at{start,
				{1, agent.ToolStarted{CallID: "a", Name: "read"}},
				{2, agent.ToolFinished{CallID: "a", Name: "read", Summary: "ok", Duration: time.Second}},
				{2, agent.ToolStarted{CallID: "b", Name: "write"}},
				{3, agent.ToolFinished{CallID: "b", Name: "write", Summary: "ok", Duration: time.Second}},
				{3, agent.ToolStarted{CallID: "c", Name: "shell"}},
				{9, agent.ToolFinished{CallID: "c", Name: "shell", Summary: "ok", Duration: 6 * time.Second}},
				{12, agent.Answer{Text: "done", Tools: 3, Took: 12 * time.Second}},
			},
			now:  100,
			want: "3 tools · 12 s",
		},
		{
			name: "answer in summary mode is the same line",
			events: []at{start,
				{1, agent.ToolFinished{CallID: "a", Name: "read", Summary: "ok"}},
				{2.5, agent.Answer{Text: "done"}},
			},
			now:  100,
			mode: ModeSummary,
			want: "1 tool · 2.5 s",
		},
		{
			name: "one failed of one",
			events: []at{start,
				{0, agent.ToolFinished{CallID: "a", Name: "shell", Summary: "shell is not allowed in this channel", Failed: true}},
				{4, agent.Answer{Text: "sorry", Took: 4 * time.Second}},
			},
			now:  5,
			want: "1 tool failed · 4.0 s",
		},
		{
			name: "some failed",
			events: []at{start,
				{0, agent.ToolFinished{CallID: "a", Name: "shell", Failed: true}},
				{1, agent.ToolFinished{CallID: "b", Name: "read"}},
				{20, agent.Answer{Text: "ok"}},
			},
			now:  25,
			want: "2 tools, 1 failed · 20 s",
		},
		{
			name: "no tools",
			events: []at{start,
				{0.5, agent.TextDelta{Text: "hi"}},
				{0.8, agent.Answer{Text: "hi", Took: 800 * time.Millisecond}},
			},
			now:  1,
			want: "no tools · 0.8 s",
		},
		{
			name: "failed turn",
			events: []at{start,
				{1, agent.ToolStarted{CallID: "a", Name: "shell"}},
				{7, agent.Failed{Message: "stopped", Err: errors.New("canceled")}},
			},
			now:  9,
			want: "stopped · 1 tool · 7.0 s",
		},
		{
			name: "writing the answer",
			events: []at{start,
				{1, agent.ToolFinished{CallID: "a", Name: "read", Summary: "ok", Duration: time.Second}},
				{2, agent.TextDelta{Text: "Here"}},
			},
			now:  3,
			want: "✓ read · ok · 1.0 s\nwriting · 3 s",
		},
		{
			name: "waiting for approval",
			events: []at{start,
				{1, agent.ApprovalNeeded{CallID: "a", Name: "shell", Args: args(`{"command":"rm -rf build"}`)}},
			},
			now:  30,
			want: "⏸ shell · rm -rf build · waiting for approval\nwaiting for approval · 30 s",
		},
		{
			name: "approved then running keeps its place",
			events: []at{start,
				{1, agent.ApprovalNeeded{CallID: "a", Name: "shell", Args: args(`{"command":"make"}`)}},
				{2, agent.ToolFinished{CallID: "x", Name: "read", Summary: "ok", Duration: time.Second}},
				{5, agent.ToolStarted{CallID: "a", Name: "shell", Args: args(`{"command":"make"}`)}},
			},
			now:  7,
			want: "⏳ shell · make · 2 s\n✓ read · ok · 1.0 s\nworking · 7 s",
		},
		{
			name: "denied",
			events: []at{start,
				{1, agent.ApprovalNeeded{CallID: "a", Name: "shell", Args: args(`{"command":"make"}`)}},
				{5, agent.ToolFinished{CallID: "a", Name: "shell", Summary: "shell was denied by a person in the channel", Failed: true}},
			},
			now:  6,
			want: "✗ shell · shell was denied by a person in the channel · 4.0 s\nworking · 6 s",
		},
		{
			name: "calls without IDs pair by name in order",
			events: []at{start,
				{1, agent.ToolStarted{Name: "read", Args: args(`{"path":"a"}`)}},
				{1, agent.ToolStarted{Name: "read", Args: args(`{"path":"b"}`)}},
				{2, agent.ToolFinished{Name: "read", Summary: "a done", Duration: time.Second}},
			},
			now:  3,
			want: "✓ read · a done · 1.0 s\n⏳ read · b · 2 s\nworking · 3 s",
		},
		{
			name: "multi-line and hostile summary is one line",
			events: []at{start,
				{1, agent.ToolFinished{CallID: "a", Name: "shell", Summary: "line one\n\n  line\ttwo\r\n\x1b[31m\u202eevil", Duration: 12 * time.Second}},
			},
			now:  13,
			want: "✓ shell · line one line two [31mevil · 12 s\nworking · 13 s",
		},
		{
			name: "invisible characters are dropped",
			events: []at{start,
				{1, agent.ToolFinished{CallID: "a", Name: "re\u200bad", Summary: "uploads/in\u2066voice\u2069\u200e\u200f\u061c\ufeff.pdf", Duration: time.Second}},
			},
			now:  2,
			want: "✓ read · uploads/invoice.pdf · 1.0 s\nworking · 2 s",
		},
		{
			name: "events after the end are ignored",
			events: []at{start,
				{1, agent.Answer{Text: "x", Took: time.Second}},
				{2, agent.ToolStarted{CallID: "late", Name: "read"}},
				{3, agent.TextDelta{Text: "more"}},
			},
			now:  4,
			want: "no tools · 1.0 s",
		},
		{
			name: "notice does not start a turn",
			events: []at{
				{1, agent.Notice{Text: "status: idle"}},
			},
			now:  4,
			want: "",
		},
		{
			name: "tool events without TurnStarted start the timer",
			events: []at{
				{10, agent.ToolStarted{CallID: "a", Name: "fetch", Args: args(`{"url":"https://example.com"}`)}},
			},
			now:  12,
			want: "⏳ fetch · https://example.com · 2 s\nworking · 2 s",
		},
		{
			name: "a new turn resets",
			events: []at{start,
				{1, agent.ToolFinished{CallID: "a", Name: "read"}},
				{2, agent.Answer{Text: "x"}},
				{5, agent.TurnStarted{}},
			},
			now:  6,
			want: "working · 1 s",
		},
		{
			name: "clock before start",
			events: []at{
				{5, agent.TurnStarted{}},
			},
			now:  1,
			want: "working · 0 s",
		},
		{
			name: "long durations",
			events: []at{start,
				{0, agent.ToolFinished{CallID: "a", Name: "shell", Summary: "ok", Duration: 95 * time.Second}},
			},
			now:  3725,
			want: "✓ shell · ok · 1 min 35 s\nworking · 1 h 2 min",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p Progress
			for _, e := range tt.events {
				p.Apply(e.ev, sec(e.s))
			}
			got := p.Render(sec(tt.now), tt.mode)
			if got != tt.want {
				t.Errorf("Render:\n got %q\nwant %q", got, tt.want)
			}
			// Deterministic: the same events and time give the same text.
			var q Progress
			for _, e := range tt.events {
				q.Apply(e.ev, sec(e.s))
			}
			if again := q.Render(sec(tt.now), tt.mode); again != got {
				t.Errorf("second rendering differs:\n%q\n%q", again, got)
			}
		})
	}
}

func TestProgressCap(t *testing.T) {
	p := Progress{MaxCalls: 3}
	p.Apply(agent.TurnStarted{}, t0)
	for i := range 26 {
		id := strconv.Itoa(i)
		p.Apply(agent.ToolStarted{CallID: id, Name: "read"}, sec(float64(i)))
		p.Apply(agent.ToolFinished{CallID: id, Name: "read", Summary: "file " + id, Failed: i%10 == 0, Duration: time.Second}, sec(float64(i)+1))
	}
	p.Apply(agent.ToolStarted{CallID: "last", Name: "shell"}, sec(30))
	want := "… 24 earlier calls (3 failed)\n" +
		"✓ read · file 24 · 1.0 s\n" +
		"✓ read · file 25 · 1.0 s\n" +
		"⏳ shell · 1 s\n" +
		"working · 31 s"
	if got := p.Render(sec(31), ModeFull); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}

	// The default cap is 15 and one hidden call is "call".
	var d Progress
	d.Apply(agent.TurnStarted{}, t0)
	for i := range 16 {
		d.Apply(agent.ToolFinished{CallID: strconv.Itoa(i), Name: "ls"}, t0)
	}
	got := d.Render(t0, ModeFull)
	if lines := strings.Split(got, "\n"); len(lines) != 17 || lines[0] != "… 1 earlier call" {
		t.Errorf("default cap: %d lines, first %q", len(lines), lines[0])
	}
}

func TestProgressSummaryCap(t *testing.T) {
	p := Progress{MaxSummary: 10}
	p.Apply(agent.ToolFinished{CallID: "a", Name: "read", Summary: "abcdefghijklmnop"}, t0)
	want := "✓ read · abcdefghi…\nworking · 0 s"
	if got := p.Render(t0, ModeFull); got != want {
		t.Errorf("got %q want %q", got, want)
	}
	// A huge summary never makes a huge message.
	var q Progress
	q.Apply(agent.ToolFinished{CallID: "a", Name: strings.Repeat("n", 500), Summary: strings.Repeat("é", 10000)}, t0)
	if got := q.Render(t0, ModeFull); len([]rune(got)) > 40+DefaultMaxSummary+40 {
		t.Errorf("line not capped: %d runes", len([]rune(got)))
	}
}

func TestProgressVersion(t *testing.T) {
	var p Progress
	v0 := p.Version()
	if !p.Apply(agent.TurnStarted{}, t0) || p.Version() == v0 {
		t.Fatal("TurnStarted did not change the state")
	}
	v1 := p.Version()
	if p.Apply(agent.Notice{Text: "x"}, sec(1)) || p.Version() != v1 {
		t.Error("a notice changed the state")
	}
	if !p.Apply(agent.TextDelta{Text: "a"}, sec(1)) {
		t.Error("first text did not change the state")
	}
	if p.Apply(agent.TextDelta{Text: "b"}, sec(1)) {
		t.Error("more text changed the state")
	}
	if !p.Apply(agent.ToolStarted{CallID: "a", Name: "ls"}, sec(2)) {
		t.Error("tool start did not change the state")
	}
	if p.Done() {
		t.Error("done too early")
	}
	if !p.Apply(agent.Answer{}, sec(3)) || !p.Done() {
		t.Error("answer did not end the turn")
	}
	v := p.Version()
	if p.Apply(agent.Failed{Message: "x"}, sec(4)) || p.Version() != v {
		t.Error("a second end changed the state")
	}
	if p.Calls() != 1 {
		t.Errorf("Calls = %d", p.Calls())
	}
	// A finished progress does not depend on the time.
	if a, b := p.Render(sec(5), ModeFull), p.Render(sec(500), ModeFull); a != b {
		t.Errorf("finished rendering moved with time: %q %q", a, b)
	}
}

func TestParseMode(t *testing.T) {
	for in, want := range map[string]Mode{"": ModeFull, "full": ModeFull, " Summary ": ModeSummary, "off": ModeOff} {
		got, err := ParseMode(in)
		if err != nil || got != want {
			t.Errorf("ParseMode(%q) = %v, %v", in, got, err)
		}
		if got.String() != strings.ToLower(strings.TrimSpace(in)) && in != "" {
			t.Errorf("String() = %q", got.String())
		}
	}
	if _, err := ParseMode("verbose"); err == nil {
		t.Error("ParseMode(verbose) accepted")
	}
}

func TestFormatTook(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0:                       "<0.1 s",
		99 * time.Millisecond:   "<0.1 s",
		100 * time.Millisecond:  "0.1 s",
		1949 * time.Millisecond: "1.9 s",
		9960 * time.Millisecond: "10 s",
		59 * time.Second:        "59 s",
		61 * time.Second:        "1 min 1 s",
		2 * time.Hour:           "2 h 0 min",
	} {
		if got := formatTook(d); got != want {
			t.Errorf("formatTook(%v) = %q, want %q", d, got, want)
		}
	}
}

// A turn whose model call waits under the model's limits says how many
// conversations are ahead, and stops saying it once its call goes.
func TestProgressWaitingForTheModel(t *testing.T) {
	var p Progress
	at := time.Unix(1700000000, 0)
	p.Apply(agent.TurnStarted{}, at)
	if !p.Apply(agent.Queued{Ahead: 2}, at.Add(time.Second)) {
		t.Fatal("a place in the queue changed nothing")
	}
	for _, mode := range []Mode{ModeFull, ModeSummary} {
		if got := p.Render(at.Add(2*time.Second), mode); !strings.Contains(got, "waiting for the model: 2 conversations ahead of you") {
			t.Errorf("mode %v: %q", mode, got)
		}
	}
	p.Apply(agent.Queued{Ahead: 1}, at.Add(3*time.Second))
	if got := p.Render(at.Add(3*time.Second), ModeSummary); !strings.Contains(got, "1 conversation ahead of you") {
		t.Errorf("one ahead: %q", got)
	}
	p.Apply(agent.Queued{Ahead: 0}, at.Add(4*time.Second))
	if got := p.Render(at.Add(4*time.Second), ModeSummary); strings.Contains(got, "ahead") || !strings.Contains(got, "working") {
		t.Errorf("its turn came: %q", got)
	}
}
