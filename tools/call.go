package tools

import "context"

// Call is what a tool knows of the call it serves besides its arguments:
// the conversation the turn runs in and the person it runs for. The agent
// loop puts it in the context of every tool call ([WithCall]); a tool that
// acts on the conversation's behalf later (a schedule, a wait) reads it
// with [CallFrom]. It is plain data, so tools need not know the agent.
type Call struct {
	// Session names the conversation (the agent's SessionKey.String()):
	// the thread, or the flat chat, the turn answers in.
	Session string
	// User is the platform ID of the person whose message started the
	// turn, and UserName their name as the platform gave it.
	User     string
	UserName string
	// ID is the model's ID of this tool call.
	ID string
}

type callKey struct{}

// WithCall returns ctx carrying c, for the tool called with it.
func WithCall(ctx context.Context, c Call) context.Context {
	return context.WithValue(ctx, callKey{}, c)
}

// CallFrom returns the call ctx carries; ok is false outside a tool call
// made by the agent loop (a test, a command line tool).
func CallFrom(ctx context.Context) (c Call, ok bool) {
	c, ok = ctx.Value(callKey{}).(Call)
	return c, ok
}
