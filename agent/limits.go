package agent

import (
	"fmt"

	"github.com/firstmate/firstmate/tools"
)

// Defaults of [Limits].
const (
	DefaultCallsPerStep    = 32
	DefaultStepResultBytes = 256 << 10
	DefaultTurnResultBytes = 1 << 20
	// DefaultContextTokens is the context budget when none is given: a
	// model whose window is not known is assumed to be small.
	DefaultContextTokens = 32_000
)

// Limits bound what one turn may pile up. A model may ask for any number
// of tool calls in one reply, and each result is sent again with every
// later call and kept in the history: without these, one reply asking for
// 1,500 reads made a request of tens of MB and held it all in memory. What
// a limit cuts is said to the model in a tool result, so the history stays
// valid and the model can ask for less, and once a turn to the person in
// a [Notice].
//
// A zero field takes its default; a negative one means no limit.
type Limits struct {
	// CallsPerStep is the most tool calls run for one model reply; the
	// calls past it are not run and each gets a result saying why.
	CallsPerStep int
	// StepResultBytes and TurnResultBytes bound the tool results the model
	// reads from one step and from one turn. A result that does not fit
	// in what is left is replaced by a short error saying so; the call
	// did run (it may have changed something), only its output is not
	// shown. A single result is already capped by the tool set
	// ([tools.DefaultMaxResult]).
	StepResultBytes int
	TurnResultBytes int
	// ContextTokens is the budget, in [EstimateTokens] estimates, of the
	// messages sent with each model call: the history and this turn's own
	// messages (the system prompt and the tools come on top). Over it, the
	// oldest turns of the history are left out first (see [TrimHistory]),
	// then the oldest tool results still sent are elided, in the request
	// only (the history keeps them); the newest step's results never are.
	ContextTokens int
}

func (l Limits) withDefaults() Limits {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&l.CallsPerStep, DefaultCallsPerStep)
	def(&l.StepResultBytes, DefaultStepResultBytes)
	def(&l.TurnResultBytes, DefaultTurnResultBytes)
	def(&l.ContextTokens, DefaultContextTokens)
	return l
}

// cut names a limit that cut something, for the turn's notes.
type cut int

const (
	cutNone cut = iota
	cutCalls
	cutStep
	cutTurn
	cutContext
	nCuts
)

// turnLimits applies Limits to one turn.
type turnLimits struct {
	Limits
	stepBytes, turnBytes int // result bytes shown to the model
	histTokens           int // estimate of the turn's history, counted once
	noted                [nCuts]bool
}

func newTurnLimits(l Limits, history []Message) *turnLimits {
	tl := &turnLimits{Limits: l.withDefaults()}
	if tl.ContextTokens > 0 {
		for i := range history {
			tl.histTokens += EstimateTokens(&history[i])
		}
	}
	return tl
}

// newStep starts a step's result budget.
func (tl *turnLimits) newStep() { tl.stepBytes = 0 }

// runs reports whether the i-th call of a step (from 0) may run.
func (tl *turnLimits) runs(i int) bool { return tl.CallsPerStep < 0 || i < tl.CallsPerStep }

// notRun is the result of a call past the step's cap.
func (tl *turnLimits) notRun(c ToolCall, asked int) Message {
	return Message{Role: RoleTool, ToolCallID: c.ID, ToolName: c.Name, Content: fmt.Sprintf(
		"error: not run: a step may make at most %d tool calls and this one asked for %d; make fewer calls per step", tl.CallsPerStep, asked)}
}

// admit counts a result against the step's and the turn's budgets, or
// replaces its content by an error saying it is not shown when it does
// not fit in what is left of either.
func (tl *turnLimits) admit(m *Message) cut {
	n := len(m.Content)
	switch {
	case tl.TurnResultBytes >= 0 && tl.turnBytes+n > tl.TurnResultBytes:
		m.Content = fmt.Sprintf("error: this call ran, but its result (%s) is not shown: this turn's results passed %s; "+
			"answer with what you have, or read less (a line range, grep) and say what is left to do",
			tools.FormatSize(int64(n)), tools.FormatSize(int64(tl.TurnResultBytes)))
		return cutTurn
	case tl.StepResultBytes >= 0 && tl.stepBytes+n > tl.StepResultBytes:
		m.Content = fmt.Sprintf("error: this call ran, but its result (%s) is not shown: this step's results passed %s; "+
			"read less at once, e.g. a line range or grep, and fewer calls per step",
			tools.FormatSize(int64(n)), tools.FormatSize(int64(tl.StepResultBytes)))
		return cutStep
	}
	tl.stepBytes += n
	tl.turnBytes += n
	return cutNone
}

// note returns what to tell the person about a cut, the first time this
// turn that limit cut something; "" otherwise.
func (tl *turnLimits) note(c cut, notRun, asked int) string {
	if c == cutNone || tl.noted[c] {
		return ""
	}
	tl.noted[c] = true
	switch c {
	case cutCalls:
		return fmt.Sprintf("✂ %d of %d tool calls %s not run: a step may make at most %d.", notRun, asked, plural(notRun, "was", "were"), tl.CallsPerStep)
	case cutStep:
		return fmt.Sprintf("✂ Some tool results were not shown to the model: a step's results may hold at most %s.", tools.FormatSize(int64(tl.StepResultBytes)))
	case cutTurn:
		return fmt.Sprintf("✂ Some tool results were not shown to the model: a turn's results may hold at most %s.", tools.FormatSize(int64(tl.TurnResultBytes)))
	case cutContext:
		return fmt.Sprintf("✂ Older tool results were left out of what the model sees, to keep within its context budget (%d tokens).", tl.ContextTokens)
	}
	return ""
}

// fit returns the messages to send: msgs (the history up to turnStart,
// then this turn's) as they are when they fit the context budget, else a
// copy with the oldest history turns left out and then the oldest tool
// results before newest (where the newest step begins) elided, until it
// fits or nothing more may go. It reports whether a result was elided.
func (tl *turnLimits) fit(msgs []Message, turnStart, newest int) ([]Message, bool) {
	budget := tl.ContextTokens
	if budget <= 0 {
		return msgs, false
	}
	turnTokens := 0
	for i := turnStart; i < len(msgs); i++ {
		turnTokens += EstimateTokens(&msgs[i])
	}
	if tl.histTokens+turnTokens <= budget {
		return msgs, false
	}
	hist := msgs[:turnStart]
	if tl.histTokens > 0 {
		// TrimHistory takes no budget as none: 1 keeps only its newest turn.
		hist = TrimHistory(hist, max(budget-turnTokens, 1))
	}
	total := turnTokens
	for i := range hist {
		total += EstimateTokens(&hist[i])
	}
	sent := make([]Message, 0, len(hist)+len(msgs)-turnStart)
	sent = append(sent, hist...)
	sent = append(sent, msgs[turnStart:]...)
	protect := len(hist) + newest - turnStart
	elided := false
	for i := 0; i < protect && total > budget; i++ {
		m := &sent[i] // a copy: the history keeps the result
		if m.Role != RoleTool {
			continue
		}
		name := m.ToolName
		if name == "" {
			name = "a tool"
		}
		marker := fmt.Sprintf("[result of %s elided: %d bytes; call again if needed]", name, len(m.Content))
		if len(marker) >= len(m.Content) {
			continue
		}
		before := EstimateTokens(m)
		m.Content = marker
		total -= before - EstimateTokens(m)
		elided = true
	}
	return sent, elided
}
