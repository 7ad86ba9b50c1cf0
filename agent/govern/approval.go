package govern

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/firstmate/firstmate/agent"
)

// Approvals are data: a turn whose call needs a person's decision ends
// with the call stored in an approval (turnGate.Ask), the thread shows the
// question, and a click, on any replica, decides it here; the dispatcher
// then resumes the session with the decision. Nothing waits for a person.
// A decision is checked when it is made (who may decide; whether the
// people it was asked for may still talk to the bot) and the policy once
// more when the call runs.

// Approval implements [agent.Gate].
func (g *Gate) Approval(ctx context.Context, id string) (agent.Approval, error) {
	return g.cfg.Store.Approval(ctx, id)
}

// Decide implements [agent.Gate]. An admin of the chat, or one of the
// people whose messages the turn answered who may still talk to the bot
// here, decides; "always" is for admins. An approval asked for someone
// who lost access since is void: it is denied, whoever clicks. A second
// click (a double click, two people, another replica) finds the decision
// made and changes nothing.
func (g *Gate) Decide(ctx context.Context, dec agent.Decision) (agent.Decided, error) {
	a, err := g.cfg.Store.Approval(ctx, dec.ApprovalID)
	if errors.Is(err, agent.ErrNotFound) {
		return agent.Decided{Notice: "This request is no longer open."}, nil
	}
	if err != nil {
		return agent.Decided{}, fmt.Errorf("read approval: %w", err)
	}
	refuse := func(why string) (agent.Decided, error) {
		g.audit(ctx, AuditEntry{Action: AuditApprovalRefused, Platform: a.Key.Platform, Channel: a.Key.Channel().String(),
			User: AuditUser(a.Key.Platform, dec.User.ID), Tool: a.Tool, Outcome: "refused", Detail: a.ID + ": " + why})
		return agent.Decided{Approval: a, Notice: why}, nil
	}
	if dec.Chat.Platform != a.Key.Platform || dec.Chat.Channel() != a.Key.Channel() {
		return refuse("This request belongs to another conversation.")
	}
	if a.State != agent.ApprovalPending {
		return agent.Decided{Approval: a, Notice: outcomeLine(a)}, nil
	}
	if dec.User.ID == "" {
		return refuse("I cannot tell who clicked.")
	}
	authors := a.Authors
	if len(authors) == 0 {
		authors = []agent.User{a.Requester}
	}
	for _, u := range authors {
		ok, err := g.Admitted(ctx, a.Key, u, false)
		if err != nil {
			return agent.Decided{}, fmt.Errorf("check access of %s: %w", u.Display(), err)
		}
		if !ok {
			return g.decide(ctx, a, ApprovalDecision{State: agent.ApprovalDenied, At: time.Now().UTC(),
				Why: u.Display() + ", who asked, may no longer talk to me here"}, dec.User)
		}
	}
	admin := g.Admin(ctx, a.Key, dec.User)
	if !admin {
		author := slices.ContainsFunc(authors, func(u agent.User) bool { return u.ID == dec.User.ID })
		switch {
		case dec.Always:
			return refuse("Only an admin can allow " + a.Tool + " here for good.")
		case !author:
			return refuse("Only " + names(authors) + ", who asked, or an admin can decide this.")
		}
		if ok, err := g.Admitted(ctx, a.Key, dec.User, false); err != nil || !ok {
			if err != nil {
				return agent.Decided{}, fmt.Errorf("check access: %w", err)
			}
			return refuse("You may no longer talk to me here, so you cannot decide this.")
		}
	}
	state := agent.ApprovalDenied
	if dec.Approve || dec.Always {
		state = agent.ApprovalApproved
	}
	d := ApprovalDecision{State: state, By: dec.User, At: time.Now().UTC(), Always: dec.Always && state == agent.ApprovalApproved}
	if d.At.After(a.Deadline) {
		d = ApprovalDecision{State: agent.ApprovalExpired, At: d.At, Why: "no decision before the deadline"}
	}
	return g.decide(ctx, a, d, dec.User)
}

// decide writes d and audits it; clicker is who clicked.
func (g *Gate) decide(ctx context.Context, a agent.Approval, d ApprovalDecision, clicker agent.User) (agent.Decided, error) {
	final, decided, err := g.cfg.Store.DecideApproval(ctx, a.ID, d)
	if err != nil {
		return agent.Decided{}, fmt.Errorf("decide approval: %w", err)
	}
	if !decided {
		return agent.Decided{Approval: final, Notice: outcomeLine(final)}, nil
	}
	detail := a.ID + alwaysNote(final)
	if d.Why != "" {
		detail += ": " + d.Why
	}
	g.audit(ctx, AuditEntry{Action: AuditApprovalDecided, Platform: a.Key.Platform, Channel: a.Key.Channel().String(), User: AuditUser(a.Key.Platform, clicker.ID),
		Tool: a.Tool, Args: agent.Shorten(a.Args, 200), Outcome: string(final.State), Detail: detail + " for " + auditUsers(a.Key.Platform, a.Authors)})
	if final.Always {
		if _, err := ChangePolicy(ctx, g.cfg.Store, a.Key, AuditUser(a.Key.Platform, clicker.ID),
			agent.PolicyChange{Version: -1, Set: map[string]agent.ToolMode{a.Tool: agent.ToolAllow}}, g.known()); err != nil {
			g.log.Error("always allow: policy not saved", "tool", a.Tool, "err", err)
		}
	}
	return agent.Decided{Approval: final, Applied: true, Notice: outcomeLine(final)}, nil
}

func names(us []agent.User) string {
	var out []string
	for _, u := range us {
		if n := u.Display(); !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	switch len(out) {
	case 0:
		return "the person"
	case 1:
		return out[0]
	}
	s := out[0]
	for _, n := range out[1 : len(out)-1] {
		s += ", " + n
	}
	return s + " or " + out[len(out)-1]
}

func alwaysNote(a agent.Approval) string {
	if a.Always {
		return " (always allow here)"
	}
	return ""
}

// outcomeLine says how an approval ended, for people.
func outcomeLine(a agent.Approval) string {
	switch a.State {
	case agent.ApprovalApproved:
		if a.Always {
			return fmt.Sprintf("Approved by %s; %s is allowed here from now on.", a.DecidedBy.Display(), a.Tool)
		}
		return "Approved by " + a.DecidedBy.Display() + "."
	case agent.ApprovalDenied:
		if a.Why != "" && a.DecidedBy.ID == "" {
			return "Denied: " + a.Why + "."
		}
		return "Denied by " + a.DecidedBy.Display() + "."
	case agent.ApprovalExpired:
		return "No decision in time, so " + a.Tool + " did not run."
	}
	return "Waiting for a decision."
}
