package adapters

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/firstmate/firstmate/agent"
)

// Mode is how much the progress message shows: the `progress:` setting.
type Mode int

const (
	// ModeFull lists every tool call (up to a cap) with a running timer.
	ModeFull Mode = iota
	// ModeSummary shows one line while the turn runs.
	ModeSummary
	// ModeOff shows nothing: Render returns "".
	ModeOff
)

// ParseMode reads "full", "summary" or "off"; "" is full.
func ParseMode(s string) (Mode, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "full":
		return ModeFull, nil
	case "summary":
		return ModeSummary, nil
	case "off":
		return ModeOff, nil
	}
	return ModeFull, fmt.Errorf("progress mode %q: want full, summary or off", s)
}

func (m Mode) String() string {
	switch m {
	case ModeFull:
		return "full"
	case ModeSummary:
		return "summary"
	case ModeOff:
		return "off"
	}
	return "Mode(" + strconv.Itoa(int(m)) + ")"
}

// Defaults for the zero [Progress].
const (
	DefaultMaxCalls   = 15
	DefaultMaxSummary = 80
)

// Marks of a tool call's line.
const (
	markRunning = "⏳"
	markOK      = "✓"
	markFailed  = "✗"
	markAsk     = "⏸"
)

type callStatus int

const (
	callAsking callStatus = iota // waiting for a person's approval
	callRunning
	callOK
	callFailed
)

type call struct {
	id      string
	name    string
	summary string // the result's summary, or a hint from the arguments while running
	status  callStatus
	started time.Time
	took    time.Duration
}

type phase int

const (
	phaseIdle phase = iota
	phaseWorking
	phaseWriting // the model streams its answer
	phaseAnswered
	phaseFailed
)

// Progress is the state of one turn's progress message: a pure state
// machine fed the turn's events, rendered on demand. It does not read the
// clock: events carry the time they were seen and Render takes "now", so the
// same events and times always give the same text.
//
// Progress is not safe for concurrent use; the adapter's thread owns it.
type Progress struct {
	// MaxCalls caps the tool lines shown; older calls fold into one
	// "… N earlier calls" line. 0 means [DefaultMaxCalls].
	MaxCalls int
	// MaxSummary caps a line's summary, in runes. 0 means [DefaultMaxSummary].
	MaxSummary int

	phase   phase
	started time.Time
	took    time.Duration // of a finished turn
	calls   []call
	byID    map[string]int
	queued  int // model calls waiting before this turn's (agent.Queued)
	version uint64
}

// Apply records one event seen at time at. It returns whether the state
// changed (and so the rendering may have).
func (p *Progress) Apply(ev agent.Event, at time.Time) bool {
	before := p.version
	switch ev.(type) {
	case agent.TurnStarted:
	case agent.TextDelta, agent.ApprovalNeeded, agent.ToolStarted, agent.ToolFinished:
		if p.Done() {
			return false // a finished turn's message no longer changes
		}
		if p.phase == phaseIdle {
			// No TurnStarted seen: the turn began no later than this.
			p.start(at)
		}
	default:
		if p.Done() {
			return false
		}
	}
	switch ev := ev.(type) {
	case agent.TurnStarted:
		p.reset()
		p.start(at)
	case agent.Queued:
		if ev.Ahead != p.queued {
			p.queued = ev.Ahead
			p.version++
		}
	case agent.TextDelta:
		if ev.Text != "" && p.running() && p.phase != phaseWriting {
			p.phase = phaseWriting
			p.version++
		}
	case agent.ApprovalNeeded:
		c := p.find(ev.CallID, ev.Name, callAsking)
		if c == nil {
			c = p.add(ev.CallID, ev.Name, at)
		}
		c.status = callAsking
		c.summary = argsHint(ev.Args)
		p.working()
		p.version++
	case agent.ToolStarted:
		c := p.find(ev.CallID, ev.Name, callAsking)
		if c == nil {
			c = p.add(ev.CallID, ev.Name, at)
		}
		c.status = callRunning
		c.started = at
		c.summary = argsHint(ev.Args)
		p.working()
		p.version++
	case agent.ToolFinished:
		c := p.find(ev.CallID, ev.Name, callRunning)
		if c == nil {
			c = p.find(ev.CallID, ev.Name, callAsking)
		}
		if c == nil {
			c = p.add(ev.CallID, ev.Name, at)
		}
		c.status = callOK
		if ev.Failed {
			c.status = callFailed
		}
		c.summary = ev.Summary
		c.took = ev.Duration
		if c.took <= 0 && !c.started.IsZero() && at.After(c.started) {
			c.took = at.Sub(c.started)
		}
		p.working()
		p.version++
	case agent.Answer:
		p.phase = phaseAnswered
		p.took = p.turnTook(ev.Took, at)
		p.version++
	case agent.Failed:
		p.phase = phaseFailed
		p.took = p.turnTook(0, at)
		p.version++
	case agent.Notice:
		// A command's reply is not part of the turn's progress.
	}
	return p.version != before
}

// Version counts state changes. A caller that remembers the version it last
// rendered knows whether anything but the timers moved since.
func (p *Progress) Version() uint64 { return p.version }

// Done reports whether the turn ended (answered or failed). A finished
// progress renders the same text whatever the time.
func (p *Progress) Done() bool { return p.phase == phaseAnswered || p.phase == phaseFailed }

// Calls is the number of tool calls seen in the turn.
func (p *Progress) Calls() int { return len(p.calls) }

// Lines are the calls' lines as Render lists them at time now, one per
// call, in order. A surface that cannot edit writes each once it finished.
func (p *Progress) Lines(now time.Time) []string {
	out := make([]string, len(p.calls))
	for i := range p.calls {
		out[i] = p.line(&p.calls[i], now)
	}
	return out
}

// Finished reports whether call i (in the order of Lines) has finished.
func (p *Progress) Finished(i int) bool {
	s := p.calls[i].status
	return s == callOK || s == callFailed
}

// Render is the progress message's text at time now, as plain text (the
// adapter escapes it for its platform). While the turn runs it lists the
// tool calls (ModeFull) or one status line (ModeSummary); once the turn is
// done both shrink to a one-line summary such as "3 tools · 12 s".
// ModeOff, and a turn that has not started, render "".
func (p *Progress) Render(now time.Time, mode Mode) string {
	if mode == ModeOff || p.phase == phaseIdle {
		return ""
	}
	if p.Done() {
		return p.summaryLine()
	}
	elapsed := formatElapsed(sub(now, p.started))
	if mode == ModeSummary {
		parts := []string{p.status()}
		if c := p.current(); c != nil {
			parts = append(parts, c.name)
		}
		if n := len(p.calls); n > 0 {
			parts = append(parts, plural(n, "tool", "tools"))
		}
		return strings.Join(append(parts, elapsed), " · ")
	}

	var b strings.Builder
	max := p.MaxCalls
	if max <= 0 {
		max = DefaultMaxCalls
	}
	shown := p.calls
	if hidden := len(p.calls) - max; hidden > 0 {
		failed := 0
		for _, c := range p.calls[:hidden] {
			if c.status == callFailed {
				failed++
			}
		}
		b.WriteString("… " + strconv.Itoa(hidden) + " earlier " + pluralWord(hidden, "call", "calls"))
		if failed > 0 {
			b.WriteString(" (" + strconv.Itoa(failed) + " failed)")
		}
		b.WriteByte('\n')
		shown = p.calls[hidden:]
	}
	for i := range shown {
		b.WriteString(p.line(&shown[i], now))
		b.WriteByte('\n')
	}
	b.WriteString(p.status() + " · " + elapsed)
	return b.String()
}

func (p *Progress) line(c *call, now time.Time) string {
	parts := make([]string, 0, 4)
	switch c.status {
	case callAsking:
		parts = append(parts, markAsk+" "+oneLine(c.name, 40))
		if s := oneLine(c.summary, p.maxSummary()); s != "" {
			parts = append(parts, s)
		}
		parts = append(parts, "waiting for approval")
	case callRunning:
		parts = append(parts, markRunning+" "+oneLine(c.name, 40))
		if s := oneLine(c.summary, p.maxSummary()); s != "" {
			parts = append(parts, s)
		}
		parts = append(parts, formatElapsed(sub(now, c.started)))
	default:
		mark := markOK
		if c.status == callFailed {
			mark = markFailed
		}
		parts = append(parts, mark+" "+oneLine(c.name, 40))
		s := oneLine(c.summary, p.maxSummary())
		if s == "" && c.status == callFailed {
			s = "failed"
		}
		if s != "" {
			parts = append(parts, s)
		}
		if c.took > 0 {
			parts = append(parts, formatTook(c.took))
		}
	}
	return strings.Join(parts, " · ")
}

// summaryLine is what a finished turn shrinks to.
func (p *Progress) summaryLine() string {
	n, failed := len(p.calls), 0
	for _, c := range p.calls {
		if c.status == callFailed {
			failed++
		}
	}
	var head string
	switch {
	case n == 0:
		head = "no tools"
	case failed == 0:
		head = plural(n, "tool", "tools")
	case failed == n:
		head = plural(n, "tool", "tools") + " failed"
	default:
		head = plural(n, "tool", "tools") + ", " + strconv.Itoa(failed) + " failed"
	}
	parts := []string{head, formatTook(p.took)}
	if p.phase == phaseFailed {
		parts = append([]string{"stopped"}, parts...)
	}
	return strings.Join(parts, " · ")
}

func (p *Progress) status() string {
	if p.queued > 0 {
		return "waiting for the model: " + plural(p.queued, "conversation", "conversations") + " ahead of you"
	}
	for _, c := range p.calls {
		if c.status == callAsking {
			return "waiting for approval"
		}
	}
	if p.phase == phaseWriting {
		return "writing"
	}
	return "working"
}

// current is the latest call still running or waiting.
func (p *Progress) current() *call {
	for i := len(p.calls) - 1; i >= 0; i-- {
		if s := p.calls[i].status; s == callRunning || s == callAsking {
			return &p.calls[i]
		}
	}
	return nil
}

func (p *Progress) maxSummary() int {
	if p.MaxSummary > 0 {
		return p.MaxSummary
	}
	return DefaultMaxSummary
}

func (p *Progress) reset() {
	p.phase, p.started, p.took = phaseIdle, time.Time{}, 0
	p.calls, p.byID, p.queued = nil, nil, 0
	p.version++
}

func (p *Progress) start(at time.Time) {
	p.phase = phaseWorking
	p.started = at
	p.version++
}

func (p *Progress) running() bool { return p.phase == phaseWorking || p.phase == phaseWriting }

// working: a tool event after text means the model went back to work.
func (p *Progress) working() {
	if p.phase == phaseWriting {
		p.phase = phaseWorking
	}
}

func (p *Progress) turnTook(took time.Duration, at time.Time) time.Duration {
	if took > 0 {
		return took
	}
	return sub(at, p.started)
}

// find is the call with this ID, or, for events without an ID, the oldest
// call of this name in the given status.
func (p *Progress) find(id, name string, status callStatus) *call {
	if id != "" {
		if i, ok := p.byID[id]; ok {
			return &p.calls[i]
		}
		return nil
	}
	i := slices.IndexFunc(p.calls, func(c call) bool { return c.id == "" && c.name == name && c.status == status })
	if i < 0 {
		return nil
	}
	return &p.calls[i]
}

func (p *Progress) add(id, name string, at time.Time) *call {
	p.calls = append(p.calls, call{id: id, name: name, started: at, status: callRunning})
	if id != "" {
		if p.byID == nil {
			p.byID = make(map[string]int)
		}
		p.byID[id] = len(p.calls) - 1
	}
	return &p.calls[len(p.calls)-1]
}

// hintKeys are the argument fields that say best what a running call does.
var hintKeys = []string{"command", "cmd", "path", "query", "url", "pattern", "name", "from", "to"}

// argsHint is a short description of a call from its (already redacted)
// arguments, shown until the tool's own summary arrives.
func argsHint(raw json.RawMessage) string {
	var args map[string]any
	if json.Unmarshal(raw, &args) != nil || len(args) == 0 {
		return ""
	}
	for _, k := range hintKeys {
		if s, ok := args[k].(string); ok && strings.TrimSpace(s) != "" {
			return s
		}
	}
	keys := make([]string, 0, len(args))
	for k := range args {
		keys = append(keys, k)
	}
	slices.Sort(keys) // deterministic whatever the map order
	for _, k := range keys {
		if s, ok := args[k].(string); ok && strings.TrimSpace(s) != "" {
			return s
		}
	}
	return ""
}

// oneLine folds whitespace (newlines included) to single spaces, drops
// control and invisible characters (see invisible: a bidirectional control
// can reorder the rest of a line in the reader's client) and cuts s to max
// runes, the last an ellipsis.
func oneLine(s string, max int) string {
	var b strings.Builder
	space := false
	for _, r := range s {
		switch {
		case unicode.IsSpace(r):
			space = b.Len() > 0
		case unicode.IsControl(r), r == '\u2028', r == '\u2029', invisible(r):
		default:
			if space {
				b.WriteByte(' ')
				space = false
			}
			b.WriteRune(r)
		}
	}
	out := b.String()
	if max > 0 && utf8.RuneCountInString(out) > max {
		runes := []rune(out)
		out = strings.TrimRightFunc(string(runes[:max-1]), unicode.IsSpace) + "…"
	}
	return out
}

func sub(a, b time.Time) time.Duration {
	if b.IsZero() || a.Before(b) {
		return 0
	}
	return a.Sub(b)
}

// formatElapsed is a timer: whole seconds, then minutes and hours.
func formatElapsed(d time.Duration) string {
	s := int64(d / time.Second)
	switch {
	case s < 60:
		return strconv.FormatInt(s, 10) + " s"
	case s < 3600:
		return strconv.FormatInt(s/60, 10) + " min " + strconv.FormatInt(s%60, 10) + " s"
	default:
		return strconv.FormatInt(s/3600, 10) + " h " + strconv.FormatInt(s/60%60, 10) + " min"
	}
}

// formatTook is a measured duration: tenths of a second below ten seconds.
func formatTook(d time.Duration) string {
	switch {
	case d < 100*time.Millisecond:
		return "<0.1 s"
	case d < 10*time.Second:
		tenths := int64((d + 50*time.Millisecond) / (100 * time.Millisecond))
		if tenths < 100 {
			return strconv.FormatInt(tenths/10, 10) + "." + strconv.FormatInt(tenths%10, 10) + " s"
		}
	}
	return formatElapsed(d.Round(time.Second))
}

func plural(n int, one, many string) string {
	return strconv.Itoa(n) + " " + pluralWord(n, one, many)
}

func pluralWord(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
