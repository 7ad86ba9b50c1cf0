package govern

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/firstmate/firstmate/agent"
)

// BudgetError ends a turn whose channel spent its tokens for the day.
type BudgetError struct {
	Used, Limit int64
}

func (e *BudgetError) Error() string {
	return fmt.Sprintf("channel token budget spent: %d of %d tokens today", e.Used, e.Limit)
}

// Told implements agent.Told.
func (e *BudgetError) Told() string {
	return fmt.Sprintf("This channel has used its model budget for today (%d of %d tokens), so I stopped. It resets at midnight UTC; an admin can raise budgets.channel_tokens_per_day.", e.Used, e.Limit)
}

// Turn implements [agent.Gate]: the channel's policy as it is now, read at
// every turn (with the claim, where the store can), so an admin's change
// applies from the next one on every replica.
func (g *Gate) Turn(ctx context.Context, t agent.TurnInfo) (agent.TurnGate, error) {
	var p *Policy
	if t.Settings != nil {
		p = NewPolicy(t.Key, g.cfg.Policy, *t.Settings, g.cfg.Tools)
	} else {
		var err error
		if p, err = g.policy(ctx, t.Key); err != nil {
			return nil, err
		}
		p.tools = g.cfg.Tools
	}
	log := t.Log
	if log == nil {
		log = g.log
	}
	return &turnGate{g: g, key: t.Key, ch: t.Key.Channel(), authors: t.Authors, trigger: t.Trigger, pol: p, log: log}, nil
}

// turnGate is one turn's [agent.TurnGate].
//
// Its budget checks the channel's tokens before each model call of the
// turn and counts them. A call's tokens are added to the count just
// before the next call, whose check gets the new total from the add; the
// last call's go with the turn's commit (Outbound.Spent). So the count is
// read once a turn, at its first check, and there is one round trip for
// each call after the first, none for the first. The total is as fresh as
// a read would be save for other turns' calls in the meantime (a day's
// budget is checked before a call, so one call past it is the most any
// turn adds).
type turnGate struct {
	g       *Gate
	key, ch agent.SessionKey
	authors []agent.User
	trigger agent.Inbound
	pol     *Policy
	log     *slog.Logger

	mu      sync.Mutex
	day     string // the day of used; "" when it must be read
	used    int64
	pending agent.Spent // counted by no store yet
}

func (t *turnGate) Mode(name string) agent.ToolMode { return t.pol.Mode(name) }

func (t *turnGate) CallMode(call agent.ToolCall) (agent.ToolMode, string) {
	return t.pol.CallMode(t.g.cfg.Tools.Current(), call)
}

// who is the turn's authors for the audit log.
func (t *turnGate) who() string { return auditUsers(t.ch.Platform, t.authors) }

// BeforeModel adds what the last call spent and checks the budget.
func (t *turnGate) BeforeModel(ctx context.Context) error {
	limit := t.g.cfg.Budgets.ChannelTokensPerDay
	if limit <= 0 {
		return nil // nothing to check: the commit counts it all
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.flushLocked(ctx)
	if day := today(); t.day != day {
		used, err := t.g.cfg.Store.Usage(ctx, t.ch, day)
		if err != nil {
			t.log.Warn("read channel usage; not enforcing the budget for this call", "err", err)
			return nil
		}
		t.day, t.used = day, used
	}
	if t.used >= limit {
		t.g.audit(ctx, AuditEntry{Action: AuditBudget, Platform: t.ch.Platform, Channel: t.ch.String(), User: t.who(),
			Outcome: "tokens", Detail: fmt.Sprintf("%d of %d tokens today", t.used, limit)})
		return &BudgetError{Used: t.used, Limit: limit}
	}
	return nil
}

// AfterModel keeps what a call spent for the next check or the commit.
func (t *turnGate) AfterModel(ctx context.Context, u agent.Usage, took time.Duration, err error) {
	if t.g.cfg.Observer != nil {
		t.g.cfg.Observer.ModelCall(took, u, err)
	}
	n := int64(u.PromptTokens + u.CompletionTokens)
	if n <= 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if day := today(); t.pending.Day != day {
		t.flushLocked(ctx) // the day turned: the old day's tokens are its own
		t.pending.Day = day
	}
	t.pending.Tokens += n
}

// Spent hands over what no store counts yet, for the commit.
func (t *turnGate) Spent() agent.Spent {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.pending
	t.pending = agent.Spent{}
	return s
}

// Flush counts what is pending now, and unspent (what Spent handed to a
// commit that failed): for a turn that ends without a commit.
func (t *turnGate) Flush(ctx context.Context, unspent agent.Spent) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if unspent.Tokens > 0 {
		if t.pending.Tokens > 0 && t.pending.Day != unspent.Day {
			t.flushLocked(ctx)
		}
		t.pending.Day = unspent.Day
		t.pending.Tokens += unspent.Tokens
	}
	t.flushLocked(ctx)
}

func (t *turnGate) flushLocked(ctx context.Context) {
	p := t.pending
	if p.Tokens <= 0 {
		return
	}
	total, err := t.g.cfg.Store.AddUsage(context.WithoutCancel(ctx), t.ch, p.Day, p.Tokens)
	if err != nil {
		// Kept for the next add or the commit; the count is read again.
		t.log.Warn("count channel usage", "err", err)
		t.day = ""
		return
	}
	t.pending = agent.Spent{}
	t.day, t.used = p.Day, total
}

// ToolDone writes each tool call to the audit log, credited to every
// author of the turn.
func (t *turnGate) ToolDone(ctx context.Context, call agent.ToolCall, args, outcome string, took time.Duration) {
	if t.g.cfg.Observer != nil {
		t.g.cfg.Observer.ToolCall(call.Name, outcome, took)
	}
	t.g.audit(ctx, AuditEntry{Action: AuditToolCall, Platform: t.ch.Platform, Channel: t.ch.String(), User: t.who(),
		Tool: call.Name, Args: agent.Shorten(args, 200), Outcome: outcome, Duration: took})
}

// Ask records an approval for the turn's pending call; see approval.go
// for how it is decided.
func (t *turnGate) Ask(ctx context.Context, p agent.Pending) (agent.Approval, error) {
	if len(p.Calls) == 0 {
		return agent.Approval{}, fmt.Errorf("%w approval: no call", agent.ErrInvalid)
	}
	now := time.Now().UTC()
	a := agent.Approval{ID: newID(), Key: t.key, CallID: p.Calls[0].ID, Tool: p.Rule, Args: string(p.Args), Authors: t.authors,
		Asked: now, Deadline: now.Add(t.g.cfg.ApprovalTimeout), State: agent.ApprovalPending, Calls: p.Calls, Trigger: t.trigger}
	if len(t.authors) > 0 {
		a.Requester = t.authors[len(t.authors)-1]
	}
	if err := t.g.cfg.Store.PutApproval(ctx, a); err != nil {
		return agent.Approval{}, fmt.Errorf("record approval: %w", err)
	}
	t.g.audit(ctx, AuditEntry{Action: AuditApprovalAsked, Platform: t.ch.Platform, Channel: t.ch.String(), User: t.who(),
		Tool: a.Tool, Args: agent.Shorten(a.Args, 200), Outcome: "pending", Detail: a.ID})
	return a, nil
}

// newID is short enough for Telegram's 64-byte callback data.
func newID() string {
	var b [9]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
