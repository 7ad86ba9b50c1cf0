package tools

import (
	"context"
	"errors"
)

// JobGuard decides whether a background job may run. Power is checked
// where it is spent: the shell asks when a job starts and again on every
// beat while it runs, so that a power taken away (an admin denies exec in
// the job's channel) stops the jobs already running, not only the next
// start. Whoever decides power implements it; tools does not know policy.
type JobGuard interface {
	// MayRun returns nil if j may run: start, or go on running. An error
	// that wraps ErrNotPermitted (see [NotPermitted]) is a refusal: the
	// start is refused with the error's text, or the running job is
	// stopped, its whole sandbox killed, and its board state becomes
	// "stopped: " and the text. Any other error is a failure to decide
	// (the store is down): the start is refused, but a running job goes
	// on and is asked again at the next beat, since killing work for an
	// outage is worse than a few more seconds of it.
	//
	// j is the job's record; at start it has no ID (0) yet. The channel is
	// j.Session's; j.Session is empty for a job started outside a
	// conversation. MayRun is called for every running job of a replica on
	// every beat (seconds apart), so it should be cheap, and it gets a ctx
	// of a few seconds.
	MayRun(ctx context.Context, j Job) error
	// Stopped tells the guard, once, that the running job j was stopped
	// because MayRun refused it, with why the refusal's text, after the
	// board records the end: the place to leave a note in j.Session's
	// thread. ctx lasts a few seconds, so a note is best queued (the
	// outbox) rather than sent while the caller waits.
	Stopped(ctx context.Context, j Job, why string)
}

// ErrNotPermitted marks a refusal of power, as against a failure to
// decide it. Test for it with errors.Is.
var ErrNotPermitted = errors.New("not permitted")

// NotPermitted returns a refusal (it wraps ErrNotPermitted) whose text is
// why alone: what the person and the board are told, such as "exec is
// denied in this channel".
func NotPermitted(why string) error { return notPermitted(why) }

type notPermitted string

func (e notPermitted) Error() string      { return string(e) }
func (notPermitted) Is(target error) bool { return target == ErrNotPermitted }
