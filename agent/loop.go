package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/firstmate/firstmate/tools"
)

// DefaultMaxSteps bounds the model calls of one turn.
const DefaultMaxSteps = 20

// ErrStepLimit is reported when a turn used all its steps; the model is then
// asked once more, without tools, for an answer from what it has.
var ErrStepLimit = errors.New("step limit reached")

// Loop runs turns: it alternates model calls and tool calls until the model
// answers without calling a tool. A Loop is configuration only and is safe
// for concurrent use by many turns.
type Loop struct {
	Model    Model
	System   string
	MaxSteps int           // model calls with tools per turn; DefaultMaxSteps if 0
	Timeout  time.Duration // per-turn deadline; none if 0
	Logger   *slog.Logger

	specs sync.Map // *tools.Set → []ToolSpec; sets are immutable
}

// Turn is the input of one run of the loop.
type Turn struct {
	Key       SessionKey
	History   []Message // earlier turns, already trimmed to the context budget
	Input     Message   // the new user message
	Tools     *tools.Set
	Workspace *tools.Workspace
	Thread    Thread
	// Mode, if set, gives the channel's policy for a tool. Denied tools are
	// not offered to the model; ask needs the thread to be an Approver.
	Mode func(tool string) ToolMode
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
	set := t.Tools
	specs := l.toolSpecs(set)
	if set != nil && t.Mode != nil {
		// The filtered set is per turn; only the full set's specs are cached.
		set = set.Filter(func(name string) bool { return t.Mode(name) != ToolDeny })
		specs = ToolSpecs(set)
	}
	out := &Outcome{Messages: make([]Message, 1, 4)}
	out.Messages[0] = t.Input

	msgs := make([]Message, 0, len(t.History)+8)
	msgs = append(msgs, t.History...)
	msgs = append(msgs, t.Input)

	req := &Request{System: l.System, Tools: specs}
	if t.Thread != nil {
		req.OnText = func(s string) { l.emit(ctx, t.Thread, TextDelta{Text: s}) }
	}
	for step := 0; ; step++ {
		if step == maxSteps {
			// Out of steps: one last call without tools, so the person gets
			// an answer from what was found instead of nothing.
			req.Tools = nil
			msgs = append(msgs, Message{Role: RoleUser, Content: fmt.Sprintf(
				"[You have used all %d steps of this turn. Do not call tools. Answer now with what you have, and say what is left to do.]", maxSteps)})
		}
		req.Messages = msgs
		resp, err := l.Model.Complete(ctx, req)
		if err != nil {
			if ctxErr := ctx.Err(); ctxErr != nil {
				err = context.Cause(ctx)
			}
			return out, err
		}
		out.Steps++
		out.Usage.PromptTokens += resp.Usage.PromptTokens
		out.Usage.CompletionTokens += resp.Usage.CompletionTokens
		reply := resp.Message
		reply.Role = RoleAssistant
		if step == maxSteps {
			reply.ToolCalls = nil // the model ignored the instruction; calls cannot run now
		}
		ensureCallIDs(reply.ToolCalls, step)
		msgs = append(msgs, reply)
		out.Messages = append(out.Messages, reply)
		if len(reply.ToolCalls) == 0 {
			out.Answer = reply.Content
			return out, nil
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
			res := l.callTool(ctx, t, set, call, out)
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
	if set == nil {
		msg.Content = "error: no tools are available in this channel"
		return msg
	}
	if t.Mode != nil && t.Mode(call.Name) == ToolAsk {
		if ok, why := l.approve(ctx, t, call); !ok {
			msg.Content = "error: " + why
			l.emit(ctx, t.Thread, ToolFinished{CallID: call.ID, Name: call.Name, Summary: why, Failed: true})
			return msg
		}
	}
	l.emit(ctx, t.Thread, ToolStarted{CallID: call.ID, Name: call.Name, Args: call.Args})
	start := time.Now()
	res, err := set.Call(ctx, t.Workspace, call.Name, call.Args)
	took := time.Since(start)
	if err != nil && l.Logger != nil {
		l.Logger.LogAttrs(ctx, slog.LevelDebug, "tool failed", slog.String("session", t.Key.String()),
			slog.String("tool", call.Name), slog.String("err", err.Error()))
	}
	l.emit(ctx, t.Thread, ToolFinished{CallID: call.ID, Name: call.Name, Summary: res.Summary, Failed: err != nil, Duration: took})
	out.Files = append(out.Files, res.Files...)
	msg.Content = res.Text
	if msg.Content == "" {
		msg.Content = "(no output)"
	}
	return msg
}

func (l *Loop) approve(ctx context.Context, t *Turn, call ToolCall) (bool, string) {
	ap, ok := t.Thread.(Approver)
	if !ok {
		return false, fmt.Sprintf("%s needs approval in this channel, and this thread cannot ask for it", call.Name)
	}
	req := ApprovalNeeded{CallID: call.ID, Name: call.Name, Args: call.Args}
	l.emit(ctx, t.Thread, req)
	okd, err := ap.Approve(ctx, req)
	switch {
	case err != nil:
		return false, fmt.Sprintf("%s was not approved: %v", call.Name, err)
	case !okd:
		return false, fmt.Sprintf("%s was denied by a person in the channel; do not retry it, ask how to proceed", call.Name)
	}
	return true, ""
}

func (l *Loop) emit(ctx context.Context, th Thread, ev Event) {
	if th == nil {
		return
	}
	if err := th.Emit(ctx, ev); err != nil && l.Logger != nil {
		l.Logger.LogAttrs(ctx, slog.LevelWarn, "thread emit failed", slog.String("err", err.Error()))
	}
}

func (l *Loop) toolSpecs(set *tools.Set) []ToolSpec {
	if set == nil || len(set.Tools()) == 0 {
		return nil
	}
	if v, ok := l.specs.Load(set); ok {
		return v.([]ToolSpec)
	}
	specs := ToolSpecs(set)
	l.specs.Store(set, specs)
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

// ensureCallIDs gives every call an ID unique within the turn; a few
// compatible servers omit or repeat them, and the history needs them.
func ensureCallIDs(calls []ToolCall, step int) {
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
		if len(calls[i].Args) == 0 {
			calls[i].Args = json.RawMessage("{}")
		}
	}
}
