// Package govern is the gate: one place that decides every power the bot
// spends on someone's behalf. It admits people (access rules, pairing
// codes, a person's message rate), resolves a channel's tool policy for a
// tool and for what a call needs, records and decides approvals, counts
// budgets, and writes the audit log; admins' operations (in chat and from
// the command line) go through it too, so they are checked and audited the
// same way wherever they come from.
//
// The dispatcher (package agent) asks it through the small interfaces it
// declares ([agent.Gate], [agent.TurnGate]); a running job, a schedule
// that fires and a click ask it the same way. govern knows no platform
// and no database: the store it needs is [Store].
package govern
