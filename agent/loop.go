package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"
	"weak"

	"github.com/firstmate/firstmate/tools"
)

// DefaultMaxSteps bounds the model calls of one turn.
const DefaultMaxSteps = 20

// Loop runs turns: it alternates model calls and tool calls until the model
// answers without calling a tool. Set its fields before the first turn and
// not after; then it is safe for concurrent use by many turns.
type Loop struct {
	Model     Model
	ModelName string // shown by the status command
	System    string
	MaxSteps  int           // model calls with tools per turn; DefaultMaxSteps if 0
	Timeout   time.Duration // per-turn deadline; none if 0
	Logger    *slog.Logger
	// Skills, if set, lists the skills a turn's channel may use at the end
	// of its system prompt, after System, which stays a stable prefix for
	// the provider's prompt cache (see skills.go).
	Skills SkillLister
	// Limits bound the tool calls and results of a turn and what is sent
	// with each model call; zero fields take their defaults.
	Limits Limits

	// specs holds the specs of each tool set a turn used: sets are
	// immutable, and a provider's new tools come as a new set (Set.Current).
	// Keys are weak and an entry goes when its set does, so tool lists that
	// change all day do not pile up here.
	specs sync.Map // weak.Pointer[tools.Set] → []ToolSpec
}

// Turn is the input of one run of the loop.
type Turn struct {
	Key     SessionKey
	History []Message // earlier turns, already trimmed to the context budget
	// Resume are the decided approvals this turn goes on from, in order:
	// each one's calls run (approved) or are reported (denied, expired)
	// before Input.
	Resume []Approval
	// Input is the new user message; a turn that only resumes has none
	// (Role empty).
	Input     Message
	Tools     *tools.Set
	Workspace *tools.Workspace
	Thread    Thread
	User      User // whose message the turn answers; tools learn of them, and of Key, through tools.CallFrom
	// Gate governs the turn: the policy of each tool and call (denied
	// tools are not offered; a call in ask mode ends the turn with it
	// pending), the budgets before each model call, the audit. nil allows
	// everything and counts nothing.
	Gate TurnGate
}

// Outcome is what a turn produced. Messages (the input, then every
// assistant message and tool result, in order) are valid history even when
// the turn failed part way: calls that never ran get a result saying so.
type Outcome struct {
	Messages  []Message
	Answer    string
	Files     []string
	Usage     Usage
	Steps     int // model calls
	ToolCalls int
	// Pending, when set, ended the turn: a call needs a person's approval.
	// Its result in Messages says it waits; the approval, once decided,
	// resumes the session with these calls ([Turn.Resume]).
	Pending *Pending
}

// Pending is what a turn that waits for a person leaves to run: the call
// in ask mode, then the rest of its step, which run after it.
type Pending struct {
	Calls []ToolCall
	Rule  string          // the rule that asks: the tool's, or what the call needs (skill:NAME)
	Args  json.RawMessage // the first call's arguments as people see them (secrets scrubbed)
}

// Run executes one turn. It returns the outcome and, when the turn did not
// end with an answer, the reason (ctx cancelled, deadline, model failure).
// Tool failures are not errors: they go back to the model as results. A
// call that needs a person's approval is not an error either: the turn
// ends with it pending (Outcome.Pending).
func (l *Loop) Run(ctx context.Context, t *Turn) (*Outcome, error) {
	if l.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, l.Timeout)
		defer cancel()
	}
	maxSteps := l.MaxSteps
	if maxSteps <= 0 {
		maxSteps = DefaultMaxSteps
	}
	// Read once: a set that depends on a check still running (the sandbox
	// probe) is replaced when it ends, but not within a turn.
	set := t.Tools.Current()
	specs := l.toolSpecs(set)
	if t.Gate != nil {
		specs = offered(specs, t.Gate.Mode)
	}
	out := &Outcome{Messages: make([]Message, 0, 4)}
	msgs := make([]Message, 0, len(t.History)+8)
	msgs = append(msgs, t.History...)
	lim := newTurnLimits(l.Limits, t.History)
	// Where this turn's messages begin in msgs, and its newest step's: the
	// results the model has not seen yet are never elided.
	turnStart, newest := len(t.History), len(msgs)
	notify := func(c cut, notRun, asked int) {
		if note := lim.note(c, notRun, asked); note != "" {
			emit(ctx, t.Thread, Notice{Text: note}, l.Logger)
		}
	}
	st := &stepper{l: l, t: t, set: set, out: out, lim: lim, notify: notify, msgs: &msgs}
	for _, a := range t.Resume {
		newest = len(msgs)
		if st.resume(ctx, a) {
			return out, nil // another call of the step needs a decision
		}
	}
	if t.Input.Role != "" {
		st.add(t.Input)
	}

	req := &Request{System: l.system(ctx, t, specs), Tools: specs}
	if t.Thread != nil {
		req.OnText = func(s string) { emit(ctx, t.Thread, TextDelta{Text: s}, l.Logger) }
		req.OnQueued = func(ahead int) { emit(ctx, t.Thread, Queued{Ahead: ahead}, l.Logger) }
	}
	for step := 0; ; step++ {
		if err := ctx.Err(); err != nil {
			return out, context.Cause(ctx)
		}
		if step == maxSteps {
			// Out of steps: one last call without tools, so the person gets
			// an answer from what was found instead of nothing.
			req.Tools = nil
			msgs = append(msgs, Message{Role: RoleUser, Content: fmt.Sprintf(
				"[You have used all %d steps of this turn. Do not call tools. Answer now with what you have, and say what is left to do.]", maxSteps)})
		}
		var elided bool
		req.Messages, elided = lim.fit(msgs, turnStart, newest)
		if elided {
			notify(cutContext, 0, 0)
		}
		if t.Gate != nil {
			if err := t.Gate.BeforeModel(ctx); err != nil {
				return out, err
			}
		}
		began := time.Now()
		resp, err := l.Model.Complete(ctx, req)
		var u Usage
		if resp != nil {
			u = resp.Usage
			if err == nil && u.PromptTokens == 0 && u.CompletionTokens == 0 {
				// The server sent no figures (many compatible ones do not
				// stream them): what counts tokens, a budget above all,
				// counts an estimate rather than nothing.
				u = estimateUsage(req, &resp.Message)
			}
		}
		if t.Gate != nil {
			t.Gate.AfterModel(ctx, u, time.Since(began), err)
		}
		if err != nil {
			if ctxErr := ctx.Err(); ctxErr != nil {
				err = context.Cause(ctx)
			}
			return out, err
		}
		out.Steps++
		out.Usage.PromptTokens += u.PromptTokens
		out.Usage.CompletionTokens += u.CompletionTokens
		out.Usage.Estimated = out.Usage.Estimated || u.Estimated
		reply := resp.Message
		reply.Role = RoleAssistant
		if step == maxSteps {
			reply.ToolCalls = nil // the model ignored the instruction; calls cannot run now
		}
		sanitizeCalls(reply.ToolCalls, step)
		newest = len(msgs)
		st.add(reply)
		if len(reply.ToolCalls) == 0 {
			out.Answer = reply.Content
			return out, nil
		}
		if st.run(ctx, reply.ToolCalls, false) {
			return out, nil
		}
		if err := ctx.Err(); err != nil {
			return out, context.Cause(ctx)
		}
	}
}

// stepper runs the steps of one turn: a step's calls, under the turn's
// policy and limits, each result added to what the model is sent and to
// the outcome.
type stepper struct {
	l      *Loop
	t      *Turn
	set    *tools.Set
	out    *Outcome
	lim    *turnLimits
	notify func(c cut, notRun, asked int)
	msgs   *[]Message
}

func (st *stepper) add(m ...Message) {
	*st.msgs = append(*st.msgs, m...)
	st.out.Messages = append(st.out.Messages, m...)
}

// run runs a step's calls in order, adding each result: no more of them
// than a step may make, and their results within the step's and the
// turn's bytes. A call in ask mode ends the step: it and the calls after
// it get a result saying they wait, and are left pending; run reports
// whether that happened. The first call was approved already when
// approved is set (a resumed step).
func (st *stepper) run(ctx context.Context, calls []ToolCall, approved bool) (pending bool) {
	st.lim.newStep()
	if n := len(calls); !st.lim.runs(n - 1) {
		st.notify(cutCalls, n-st.lim.CallsPerStep, n)
	}
	for i, call := range calls {
		if err := ctx.Err(); err != nil {
			// Stopped between calls: the rest get a result saying so,
			// keeping the history valid.
			for _, c := range calls[i:] {
				st.add(Message{Role: RoleTool, ToolCallID: c.ID, ToolName: c.Name, Content: "error: not run; the turn was stopped"})
			}
			return false
		}
		if !st.lim.runs(i) {
			st.add(st.lim.notRun(call, len(calls)))
			continue
		}
		res, ask := st.l.callTool(ctx, st.t, st.set, call, approved && i == 0, st.out)
		if ask == nil {
			st.notify(st.lim.admit(&res), 0, 0)
			st.add(res)
			continue
		}
		end := min(len(calls), max(i+1, st.lim.CallsPerStep))
		if st.lim.CallsPerStep < 0 {
			end = len(calls)
		}
		st.out.Pending = &Pending{Calls: slices.Clone(calls[i:end]), Rule: ask.Name, Args: ask.Args}
		st.add(Message{Role: RoleTool, ToolCallID: call.ID, ToolName: call.Name, Content: fmt.Sprintf(
			"not run yet: %s needs a person's approval in this channel, and the request is shown in the thread. This turn ends here; when someone decides, you are told, with the result if it was approved.", ask.Name)})
		for j, c := range calls[i+1:] {
			if i+1+j >= end {
				st.add(st.lim.notRun(c, len(calls)))
				continue
			}
			st.add(Message{Role: RoleTool, ToolCallID: c.ID, ToolName: c.Name, Content: fmt.Sprintf(
				"not run yet: it comes after %s in this step, which waits for a person's approval; it runs once that is approved.", call.Name)})
		}
		return true
	}
	return false
}

// resume goes on from a decided approval: the person's decision is told to
// the model, and when it was approved the call and the rest of its step
// run now, as a step of this turn (the gate's policy applies to each
// again: a tool denied since is not run). It reports whether a call
// needs another decision.
func (st *stepper) resume(ctx context.Context, a Approval) bool {
	st.add(Message{Role: RoleUser, Content: decisionNote(a)})
	if a.State != ApprovalApproved || len(a.Calls) == 0 {
		return false
	}
	calls := slices.Clone(a.Calls)
	for i := range calls {
		// IDs of their own: the calls' first IDs are in the history with
		// the results that said they wait.
		calls[i].ID += "-" + a.ID
	}
	st.add(Message{Role: RoleAssistant, ToolCalls: calls})
	return st.run(ctx, calls, true)
}

// decisionNote tells the model how a person decided on a call it asked
// for in an earlier turn.
func decisionNote(a Approval) string {
	who := a.DecidedBy.Display()
	rest := ""
	if len(a.Calls) > 1 {
		rest = ", nor the calls after it in that step"
	}
	switch a.State {
	case ApprovalApproved:
		return fmt.Sprintf("[Approval %s: %s approved the %s call you asked for. It ran now; its result follows.]", a.ID, who, a.Tool)
	case ApprovalDenied:
		why := ""
		if a.Why != "" {
			why = " (" + a.Why + ")"
		}
		return fmt.Sprintf("[Approval %s: %s denied the %s call%s. It did not run%s; do not retry it, ask how to proceed.]", a.ID, who, a.Tool, why, rest)
	}
	return fmt.Sprintf("[Approval %s: nobody decided on the %s call in time, so it did not run%s; ask whether to try again.]", a.ID, a.Tool, rest)
}

// callTool runs one call under the turn's policy. A call in ask mode that
// could run (its arguments are well formed) is not run unless approved:
// callTool returns what to ask, and no result.
func (l *Loop) callTool(ctx context.Context, t *Turn, set *tools.Set, call ToolCall, approved bool, out *Outcome) (Message, *ApprovalNeeded) {
	msg := Message{Role: RoleTool, ToolCallID: call.ID, ToolName: call.Name}
	var shownArgs json.RawMessage
	done := func(outcome string, took time.Duration) {
		if t.Gate != nil {
			t.Gate.ToolDone(ctx, call, string(shownArgs), outcome, took)
		}
	}
	fail := func(outcome, text string) (Message, *ApprovalNeeded) {
		out.ToolCalls++
		msg.Content = "error: " + text
		emit(ctx, t.Thread, ToolFinished{CallID: call.ID, Name: call.Name, Summary: text, Failed: true}, l.Logger)
		done(outcome, 0)
		return msg, nil
	}
	if set == nil {
		return fail("error", "no tools are available here")
	}
	// Shown to people: scrub secrets the model may have repeated.
	shownArgs = json.RawMessage(set.Redact(string(call.Args)))
	mode, rule := ToolAllow, call.Name
	if t.Gate != nil {
		mode, rule = t.Gate.CallMode(call)
	}
	if mode == ToolDeny {
		return fail("denied", deniedText(rule))
	}
	if mode == ToolAsk && !approved {
		// Ask only about calls that could run: a malformed call fails here
		// with the same message Call would give.
		if err := set.Check(call.Name, call.Args); err != nil {
			return fail("error", set.Redact(err.Error()))
		}
		return Message{}, &ApprovalNeeded{CallID: call.ID, Name: rule, Args: shownArgs}
	}
	out.ToolCalls++
	emit(ctx, t.Thread, ToolStarted{CallID: call.ID, Name: call.Name, Args: shownArgs}, l.Logger)
	start := time.Now()
	cctx := tools.WithCall(ctx, tools.Call{Session: t.Key.String(), User: t.User.ID, UserName: t.User.Name, ID: call.ID})
	res, err := set.Call(cctx, t.Workspace, call.Name, call.Args)
	took := time.Since(start)
	if err != nil && l.Logger != nil {
		l.Logger.LogAttrs(ctx, slog.LevelDebug, "tool failed", slog.String("session", t.Key.String()),
			slog.String("tool", call.Name), slog.String("err", set.Redact(err.Error())))
	}
	emit(ctx, t.Thread, ToolFinished{CallID: call.ID, Name: call.Name, Summary: res.Summary, Failed: err != nil, Duration: took}, l.Logger)
	if err != nil {
		done("error", took)
	} else {
		done("ok", took)
	}
	out.Files = append(out.Files, res.Files...)
	msg.Content = res.Text
	if msg.Content == "" {
		msg.Content = "(no output)"
	}
	return msg, nil
}

// deniedText tells the model a call was refused by the rule.
func deniedText(rule string) string {
	if name, ok := IsSkillRule(rule); ok {
		return fmt.Sprintf("the skill %s is not allowed in this channel; do not load it (an admin can allow it with: tools %s=allow)", name, rule)
	}
	return fmt.Sprintf("%s is not allowed in this channel; do not retry it (an admin can change the channel's tool policy)", RuleLabel(rule))
}

// emit sends ev to th, if there is one. A thread that fails to show an
// event does not fail the turn; it is logged.
func emit(ctx context.Context, th Thread, ev Event, log *slog.Logger) {
	if th == nil {
		return
	}
	if err := th.Emit(ctx, ev); err != nil && log != nil {
		log.LogAttrs(ctx, slog.LevelWarn, "thread emit failed", slog.String("event", fmt.Sprintf("%T", ev)), slog.String("err", err.Error()))
	}
}

// offered returns the specs of the tools the policy does not deny: specs
// itself when it denies none (shared by turns, read and never written),
// so that a turn waiting on the model holds no copy of its own.
func offered(specs []ToolSpec, mode func(string) ToolMode) []ToolSpec {
	denied := func(s ToolSpec) bool { return mode(s.Name) == ToolDeny }
	i := slices.IndexFunc(specs, denied)
	if i < 0 {
		return specs
	}
	out := append(make([]ToolSpec, 0, len(specs)-1), specs[:i]...)
	for _, s := range specs[i+1:] {
		if !denied(s) {
			out = append(out, s)
		}
	}
	return out
}

func (l *Loop) toolSpecs(set *tools.Set) []ToolSpec {
	if set == nil || len(set.Tools()) == 0 {
		return nil
	}
	key := weak.Make(set)
	if v, ok := l.specs.Load(key); ok {
		return v.([]ToolSpec)
	}
	specs := ToolSpecs(set)
	if _, had := l.specs.LoadOrStore(key, specs); !had {
		runtime.AddCleanup(set, func(k weak.Pointer[tools.Set]) { l.specs.Delete(k) }, key)
	}
	return specs
}

// ToolSpecs describes a set's tools to a model, in the set's sorted order.
func ToolSpecs(set *tools.Set) []ToolSpec {
	ts := set.Tools()
	specs := make([]ToolSpec, len(ts))
	for i, tl := range ts {
		specs[i] = ToolSpec{Name: tl.Name(), Description: tl.Description(), Schema: tl.Schema(), Params: tl.Params()}
	}
	return specs
}

// sanitizeCalls gives every call an ID unique within the turn (a few
// compatible servers omit or repeat them, and the history needs them) and
// arguments that are a JSON object: what is not becomes an object naming
// the problem, which no tool accepts, so the model is told and the history
// stays storable.
func sanitizeCalls(calls []ToolCall, step int) {
	for i := range calls {
		dup := false
		for j := 0; j < i; j++ {
			if calls[j].ID == calls[i].ID {
				dup = true
				break
			}
		}
		if calls[i].ID == "" || dup {
			calls[i].ID = "call_" + strconv.Itoa(step) + "_" + strconv.Itoa(i)
		}
		args := bytes.TrimSpace(calls[i].Args)
		switch {
		case len(args) == 0:
			calls[i].Args = json.RawMessage("{}")
		case args[0] != '{' || !json.Valid(args):
			calls[i].Args, _ = json.Marshal(map[string]string{tools.ParseErrorKey: "the arguments are not a JSON object", "_raw": string(calls[i].Args)})
		}
	}
}
