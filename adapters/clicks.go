package adapters

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/firstmate/firstmate/agent"
)

// Approval buttons and the policy screen are built here, once, for every
// platform that shows buttons. A click's Data is all a platform hands back;
// HandleClick turns it into a decision or a policy change through the
// dispatcher, which checks who clicked: Data comes from the platform, and a
// forged payload gains nothing that the same person could not do by
// clicking.

// Button data: "fm:ok:ID", "fm:no:ID", "fm:all:ID" for an approval;
// "fm:pol:VERSION:MODE:RULE" to set a channel's rule.
const clickPrefix = "fm:"

// ApprovalText is the question a turn asks in its thread, with buttons.
func ApprovalText(ev agent.ApprovalNeeded) Text {
	args := oneLine(string(ev.Args), 300)
	body := fmt.Sprintf("🔐 %s needs approval to run %s", requesterName(ev.Requester), ev.Name)
	if args != "" && args != "{}" {
		body += " with " + args
	}
	body += "."
	if !ev.Deadline.IsZero() {
		body += fmt.Sprintf(" Only they or an admin can decide; without a decision within %s it does not run.", time.Until(ev.Deadline).Round(time.Second))
	}
	return Text{Body: body, Buttons: [][]Button{{
		{Label: "Approve", Data: clickPrefix + "ok:" + ev.ID, Style: StylePrimary},
		{Label: "Deny", Data: clickPrefix + "no:" + ev.ID, Style: StyleDanger},
		{Label: "Always allow here", Data: clickPrefix + "all:" + ev.ID},
	}}}
}

// DecidedText replaces the question once it is decided: no buttons.
func DecidedText(ev agent.ApprovalDecided) Text {
	a := ev.Approval
	args := oneLine(a.Args, 300)
	body := fmt.Sprintf("%s asked to run %s", requesterName(a.Requester), ev.Name)
	if args != "" && args != "{}" {
		body += " with " + args
	}
	var outcome string
	switch a.State {
	case agent.ApprovalApproved:
		outcome = "✅ Approved by " + requesterName(a.DecidedBy)
		if a.Always {
			outcome += "; " + ev.Name + " is allowed here from now on"
		}
	case agent.ApprovalDenied:
		outcome = "⛔ Denied by " + requesterName(a.DecidedBy)
	default:
		outcome = "⌛ No decision in time; it did not run"
	}
	return Text{Body: body + ".\n" + outcome + "."}
}

func requesterName(u agent.User) string {
	switch {
	case u.Name != "":
		return u.Name
	case u.ID != "":
		return u.ID
	}
	return "someone"
}

// PolicyScreen is a channel's policy with buttons for an admin: one per
// group and per tool, showing its mode; a click moves it to the next
// (allow → ask → deny → allow). Others get the text alone.
func PolicyScreen(text string, v agent.PolicyView) Text {
	t := Text{Body: text}
	if !v.Editable {
		return t
	}
	for _, g := range v.Groups {
		mode := v.Default.Mode
		if g.Rule != nil {
			mode = g.Rule.Mode
		}
		if b, ok := makeButton("▸ "+g.Name, agent.GroupRule(g.Name), mode, v.Version); ok {
			t.Buttons = append(t.Buttons, []Button{b})
		}
		var row []Button
		for _, tool := range g.Tools {
			b, ok := makeButton(tool.Name, tool.Name, tool.Reason.Mode, v.Version)
			if !ok {
				continue
			}
			row = append(row, b)
			if len(row) == 3 {
				t.Buttons = append(t.Buttons, row)
				row = nil
			}
		}
		if len(row) > 0 {
			t.Buttons = append(t.Buttons, row)
		}
	}
	return t
}

func makeButton(label, rule string, mode agent.ToolMode, version int64) (Button, bool) {
	data := fmt.Sprintf("%spol:%d:%s:%s", clickPrefix, version, nextMode(mode), rule)
	if len(data) > MaxButtonData {
		return Button{}, false
	}
	return Button{Label: label + ": " + string(mode), Data: data}, true
}

func nextMode(m agent.ToolMode) agent.ToolMode {
	switch m {
	case agent.ToolAllow:
		return agent.ToolAsk
	case agent.ToolAsk:
		return agent.ToolDeny
	}
	return agent.ToolAllow
}

// Clicked is what a click did: a short answer for the person who clicked
// (a Telegram callback answer, a Slack ephemeral message) and, when the
// clicked message should change (a policy screen), its new content.
type Clicked struct {
	Notice  string
	Replace *Text
}

// ErrNotOurs is returned for button data that is not firstmate's.
var ErrNotOurs = errors.New("not a firstmate button")

// HandleClick acts on a click on one of our buttons in chat, by user.
func HandleClick(ctx context.Context, d agent.Submitter, chat agent.SessionKey, user agent.User, data string) (Clicked, error) {
	rest, ok := strings.CutPrefix(data, clickPrefix)
	if !ok {
		return Clicked{}, ErrNotOurs
	}
	kind, rest, _ := strings.Cut(rest, ":")
	switch kind {
	case "ok", "no", "all":
		if rest == "" {
			return Clicked{}, ErrNotOurs
		}
		res, err := d.Decide(ctx, agent.Decision{ApprovalID: rest, Chat: chat, User: user, Approve: kind != "no", Always: kind == "all"})
		if err != nil {
			return Clicked{Notice: "That did not work; try again in a moment."}, err
		}
		return Clicked{Notice: res.Notice}, nil
	case "pol":
		parts := strings.SplitN(rest, ":", 3)
		if len(parts) != 3 {
			return Clicked{}, ErrNotOurs
		}
		version, err := strconv.ParseInt(parts[0], 10, 64)
		if err != nil {
			return Clicked{}, ErrNotOurs
		}
		mode, err := agent.ParseMode(parts[1])
		if err != nil {
			return Clicked{}, ErrNotOurs
		}
		v, err := d.SetPolicy(ctx, chat, user, agent.PolicyChange{Version: version, Set: map[string]agent.ToolMode{parts[2]: mode}})
		switch {
		case errors.Is(err, agent.ErrNotAdmin):
			return Clicked{Notice: "Only an admin can change this channel's tools."}, nil
		case errors.Is(err, agent.ErrVersionConflict):
			v, err = d.Policy(ctx, chat, user)
			if err != nil {
				return Clicked{Notice: "Someone changed the policy meanwhile; send tools again."}, nil
			}
			screen := PolicyScreen(PolicyText(v), v)
			return Clicked{Notice: "Someone changed the policy meanwhile; here it is now. Click again.", Replace: &screen}, nil
		case errors.Is(err, agent.ErrInvalid):
			return Clicked{Notice: "That rule does not apply here."}, nil
		case err != nil:
			return Clicked{Notice: "That did not work; try again in a moment."}, err
		}
		screen := PolicyScreen(PolicyText(v), v)
		return Clicked{Notice: agent.RuleLabel(parts[2]) + " is " + string(mode) + " here now.", Replace: &screen}, nil
	}
	return Clicked{}, ErrNotOurs
}

// PolicyText says a policy in words, for a screen.
func PolicyText(v agent.PolicyView) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Tool policy here (default %s):", v.Default.Mode)
	for _, g := range v.Groups {
		fmt.Fprintf(&b, "\n• %s:", g.Name)
		for _, t := range g.Tools {
			fmt.Fprintf(&b, " %s=%s", t.Name, t.Reason.Mode)
		}
	}
	if v.Editable {
		b.WriteString("\nClick a group or a tool to move it to the next mode (allow → ask → deny).")
	} else {
		b.WriteString("\nOnly an admin can change it.")
	}
	return b.String()
}
