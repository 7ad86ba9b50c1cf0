package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"runtime"
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
	Model    Model
	System   string
	MaxSteps int           // model calls with tools per turn; DefaultMaxSteps if 0
	Timeout  time.Duration // per-turn deadline; none if 0
	Logger   *slog.Logger
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
	Key       SessionKey
	History   []Message // earlier turns, already trimmed to the context budget
	Input     Message   // the new user message
	Tools     *tools.Set
	Workspace *tools.Workspace
	Thread    Thread
	User      User // whose message the turn answers; tools learn of them, and of Key, through tools.CallFrom
	// Mode, if set, gives the channel's policy for a tool. Denied tools are
	// not offered to the model; ask needs Approve or the thread to be an
	// Approver.
	Mode func(tool string) ToolMode
	// Approve, if set, asks a person about a call in ask mode and waits;
	// it reports whether the call may run, and if not why (for the model).
	// Without it the thread must be an [Approver].
	Approve func(ctx context.Context, req ApprovalNeeded) (ok bool, why string)
	// BeforeModel, if set, runs before each model call; an error ends the
	// turn with it (a budget spent).
	BeforeModel func(ctx context.Context) error
	// AfterModel, if set, is told each model call's usage, how long it
	// took and, if it failed, why.
	AfterModel func(ctx context.Context, u Usage, took time.Duration, err error)
	// ToolDone, if set, is told each tool call's outcome ("ok", "error",
	// "denied"), its arguments as shown to people, and how long it ran.
	ToolDone func(ctx context.Context, call ToolCall, shownArgs string, outcome string, took time.Duration)
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
}

// Run executes one turn. It returns the outcome and, when the turn did not
// end with an answer, the reason (ctx cancelled, deadline, model failure).
// Tool failures are not errors: they go back to the model as results.
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
	if t.Mode != nil {
		specs = offered(specs, t.Mode)
	}
	out := &Outcome{Messages: make([]Message, 1, 4)}
	out.Messages[0] = t.Input

	msgs := make([]Message, 0, len(t.History)+8)
	msgs = append(msgs, t.History...)
	msgs = append(msgs, t.Input)
	lim := newTurnLimits(l.Limits, t.History)
	// Where this turn's messages begin in msgs, and its newest step's: the
	// results the model has not seen yet are never elided.
	turnStart, newest := len(t.History), len(msgs)
	notify := func(c cut, notRun, asked int) {
		if note := lim.note(c, notRun, asked); note != "" {
			emit(ctx, t.Thread, Notice{Text: note}, l.Logger)
		}
	}

	req := &Request{System: l.system(ctx, t, specs), Tools: specs}
	if t.Thread != nil {
		req.OnText = func(s string) { emit(ctx, t.Thread, TextDelta{Text: s}, l.Logger) }
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
		if t.BeforeModel != nil {
			if err := t.BeforeModel(ctx); err != nil {
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
		if t.AfterModel != nil {
			t.AfterModel(ctx, u, time.Since(began), err)
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
		msgs = append(msgs, reply)
		out.Messages = append(out.Messages, reply)
		if len(reply.ToolCalls) == 0 {
			out.Answer = reply.Content
			return out, nil
		}
		lim.newStep()
		if n := len(reply.ToolCalls); !lim.runs(n - 1) {
			notify(cutCalls, n-lim.CallsPerStep, n)
		}
		for i, call := range reply.ToolCalls {
			if err := ctx.Err(); err != nil {
				// Stopped between calls: the rest get a result saying so,
				// keeping the history valid.
				for _, c := range reply.ToolCalls[i:] {
					res := Message{Role: RoleTool, ToolCallID: c.ID, ToolName: c.Name, Content: "error: not run; the turn was stopped"}
					msgs = append(msgs, res)
					out.Messages = append(out.Messages, res)
				}
				return out, context.Cause(ctx)
			}
			var res Message
			if lim.runs(i) {
				res = l.callTool(ctx, t, set, call, out)
				notify(lim.admit(&res), 0, 0)
			} else {
				res = lim.notRun(call, len(reply.ToolCalls))
			}
			msgs = append(msgs, res)
			out.Messages = append(out.Messages, res)
		}
		if err := ctx.Err(); err != nil {
			return out, context.Cause(ctx)
		}
	}
}

func (l *Loop) callTool(ctx context.Context, t *Turn, set *tools.Set, call ToolCall, out *Outcome) Message {
	out.ToolCalls++
	msg := Message{Role: RoleTool, ToolCallID: call.ID, ToolName: call.Name}
	var shownArgs json.RawMessage
	done := func(outcome string, took time.Duration) {
		if t.ToolDone != nil {
			t.ToolDone(ctx, call, string(shownArgs), outcome, took)
		}
	}
	fail := func(outcome, text string) Message {
		msg.Content = "error: " + text
		emit(ctx, t.Thread, ToolFinished{CallID: call.ID, Name: call.Name, Summary: text, Failed: true}, l.Logger)
		done(outcome, 0)
		return msg
	}
	if set == nil {
		return fail("error", "no tools are available here")
	}
	// Shown to people: scrub secrets the model may have repeated.
	shownArgs = json.RawMessage(set.Redact(string(call.Args)))
	mode, rule := ToolAllow, call.Name
	if t.Mode != nil {
		mode, rule = callMode(set, call, t.Mode)
	}
	if mode == ToolDeny {
		return fail("denied", deniedText(rule))
	}
	if mode == ToolAsk {
		// Ask only about calls that could run: a malformed call fails here
		// with the same message Call would give.
		if err := set.Check(call.Name, call.Args); err != nil {
			return fail("error", set.Redact(err.Error()))
		}
		if ok, why := l.approve(ctx, t, ApprovalNeeded{CallID: call.ID, Name: rule, Args: shownArgs}); !ok {
			return fail("denied", why)
		}
	}
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
	return msg
}

func (l *Loop) approve(ctx context.Context, t *Turn, req ApprovalNeeded) (bool, string) {
	if _, ok := t.Thread.(Approver); !ok && t.Approve != nil {
		return t.Approve(ctx, req)
	}
	ap, ok := t.Thread.(Approver)
	if !ok {
		return false, fmt.Sprintf("%s needs approval in this channel, and this thread cannot ask for it", req.Name)
	}
	emit(ctx, t.Thread, req, l.Logger)
	okd, err := ap.Approve(ctx, req)
	switch {
	case err != nil:
		return false, fmt.Sprintf("%s was not approved: %v", req.Name, err)
	case !okd:
		return false, fmt.Sprintf("%s was denied by a person in the channel; do not retry it, ask how to proceed", req.Name)
	}
	return true, ""
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

// offered returns the specs of the tools the policy does not deny.
func offered(specs []ToolSpec, mode func(string) ToolMode) []ToolSpec {
	out := make([]ToolSpec, 0, len(specs))
	for _, s := range specs {
		if mode(s.Name) != ToolDeny {
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
