package agent

import "time"

// Observer is told what the dispatcher and the loop do, for metrics. Its
// methods are called on the hot path: they must be quick and safe for
// concurrent use. A nil Observer in DispatcherConfig observes nothing.
type Observer interface {
	// TurnDone: a turn ended. Outcome is one of the Turn* outcomes.
	TurnDone(platform, outcome string, took time.Duration)
	// ModelCall: one model call, with its tokens; err is nil when it
	// answered.
	ModelCall(took time.Duration, u Usage, err error)
	// ToolCall: one tool call; outcome is "ok", "error" or "denied".
	ToolCall(tool, outcome string, took time.Duration)
	// TakenOver: this replica claimed a session found in the ready set
	// (its holder died, or handed it back).
	TakenOver()
	// Delivered: an outbox entry was shown (or given up on, ok false).
	Delivered(ok bool)
}

// Turn outcomes for [Observer.TurnDone].
const (
	OutcomeAnswered   = "answered"
	OutcomeFailed     = "failed"      // the person was told why
	OutcomeStopped    = "stopped"     // the stop command
	OutcomeHandedOver = "handed_over" // shutdown: the mailbox is kept for another replica
	OutcomeLeaseLost  = "lease_lost"  // another replica took the session over
	OutcomeNotSaved   = "not_saved"   // the store kept failing; redone later
)
