package adapters

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"unicode"
	"unicode/utf8"

	"github.com/firstmate/firstmate/agent"
)

// Approval buttons and the policy screen are built here, once, for every
// platform that shows buttons. A click's Data is all a platform hands back;
// HandleClick turns it into a decision or a policy change through the
// dispatcher, which checks who clicked: Data comes from the platform, and a
// forged payload gains nothing that the same person could not do by
// clicking.

// Button data: "fm:ok:ID", "fm:no:ID", "fm:all:ID" for an approval;
// "fm:pol:VERSION:MODE:RULE" to set a channel's rule, with "#HASH" for a
// RULE too long for Telegram's 64 bytes (see [ruleRef]); "fm:pg:N" to
// show page N of a policy screen.
const clickPrefix = "fm:"

// An approval question shows exactly what will run: arguments of up to
// maxShownArgs characters whole; longer ones as their head and tail with
// how many characters are not shown between them, and the whole call
// attached as a file (see [ApprovalFile]), never silently cut. Characters
// that change how text reads without being seen (bidi overrides, zero
// widths) are shown escaped.
const (
	maxShownArgs = 1500
	shownEnds    = 600 // characters of the head, and of the tail, of longer arguments
)

// ApprovalText is the question a turn asks in its thread, with buttons.
func ApprovalText(ev agent.ApprovalNeeded) Text { return approvalText(ev, maxShownArgs) }

// approvalText is the question with arguments of up to limit characters
// shown whole (a terminal shows them all).
func approvalText(ev agent.ApprovalNeeded, limit int) Text {
	who, needs := ev.Requester.Display(), "needs"
	if len(ev.Authors) > 1 {
		who, needs = authorNames(ev.Authors), "need"
	}
	body := fmt.Sprintf("🔐 %s %s approval to run %s", who, needs, ev.Name)
	if args, hidden := shownArgs(string(ev.Args), limit); args != "" {
		body += " with\n```\n" + args + "\n```"
		if hidden > 0 {
			body += fmt.Sprintf("\n%d characters in the middle are not shown; the whole call is attached (%s).", hidden, approvalFileName(ev.ID))
		}
	} else {
		body += "."
	}
	if !ev.Deadline.IsZero() {
		body += fmt.Sprintf("\nOnly they or an admin can decide; without a decision by %s it does not run.", ev.Deadline.UTC().Format("15:04 UTC"))
	}
	return Text{Body: body, Buttons: [][]Button{{
		{Label: "Approve", Data: clickPrefix + "ok:" + ev.ID, Style: StylePrimary},
		{Label: "Deny", Data: clickPrefix + "no:" + ev.ID, Style: StyleDanger},
		{Label: "Always allow here", Data: clickPrefix + "all:" + ev.ID},
	}}}
}

// ApprovalFile is the whole call of a question whose arguments are not all
// shown, as a file to attach beside it; ok is false when they all are.
func ApprovalFile(ev agent.ApprovalNeeded) (f agent.Attachment, ok bool) {
	if _, hidden := ShownArgs(string(ev.Args)); hidden == 0 {
		return agent.Attachment{}, false
	}
	body := fmt.Sprintf("Approval %s: %s with these arguments (JSON), exactly as they run:\n\n%s\n", ev.ID, ev.Name, ev.Args)
	return agent.Attachment{Path: approvalFileName(ev.ID), Open: func() (io.ReadCloser, int64, error) {
		return io.NopCloser(strings.NewReader(body)), int64(len(body)), nil
	}}, true
}

func approvalFileName(id string) string { return "approval-" + id + ".txt" }

// ShownArgs is how a call's arguments are shown to a person who decides on
// it: whole up to maxShownArgs characters, else head and tail; hidden
// counts the characters left out. Invisible and bidi control characters
// are escaped, so that what is shown reads as what runs.
func ShownArgs(args string) (shown string, hidden int) { return shownArgs(args, maxShownArgs) }

func shownArgs(args string, limit int) (shown string, hidden int) {
	args = strings.TrimSpace(args)
	if args == "" || args == "{}" {
		return "", 0
	}
	rs := []rune(args)
	if len(rs) > limit {
		hidden = len(rs) - 2*shownEnds
		rs = slices.Concat(rs[:shownEnds], []rune(fmt.Sprintf(" … [%d characters not shown] … ", hidden)), rs[len(rs)-shownEnds:])
	}
	var b strings.Builder
	for _, r := range rs {
		if invisible(r) || unicode.IsControl(r) && r != '\n' && r != '\t' {
			fmt.Fprintf(&b, "\\u%04x", r)
			continue
		}
		b.WriteRune(r)
	}
	// A fence in the arguments would end the code block early.
	return strings.ReplaceAll(b.String(), "```", "`\u200b``"), hidden
}

func authorNames(us []agent.User) string {
	var names []string
	for _, u := range us {
		if n := u.Display(); !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return strings.Join(names, ", ")
}

// DecidedText replaces the question once it is decided: no buttons.
func DecidedText(a agent.Approval) Text {
	who := a.Requester.Display()
	if len(a.Authors) > 1 {
		who = authorNames(a.Authors)
	}
	body := fmt.Sprintf("%s asked to run %s", who, a.Tool)
	if args, hidden := ShownArgs(a.Args); args != "" {
		body += " with\n```\n" + args + "\n```"
		if hidden > 0 {
			body += fmt.Sprintf("\n(%d characters not shown; the whole call is attached to the question.)", hidden)
		}
	}
	var outcome string
	switch a.State {
	case agent.ApprovalApproved:
		outcome = "✅ Approved by " + a.DecidedBy.Display()
		if a.Always {
			outcome += "; " + a.Tool + " is allowed here from now on"
		}
	case agent.ApprovalDenied:
		if a.DecidedBy.ID == "" && a.Why != "" {
			outcome = "⛔ Denied: " + a.Why
		} else {
			outcome = "⛔ Denied by " + a.DecidedBy.Display()
		}
	default:
		outcome = "⌛ No decision in time; it did not run"
	}
	return Text{Body: body + "\n" + outcome + "."}
}

// PolicyScreen is a channel's policy with buttons for an admin: one per
// group (the built-in groups, the skills group, each MCP server mcp:SERVER),
// per tool and per skill (skill:NAME), showing its mode and where the mode
// comes from; a click moves it to the next (allow → ask → deny → allow).
// Others get the text alone. A screen with more buttons than
// [maxPageButtons] shows its first page, with buttons to the others.
func PolicyScreen(text string, v agent.PolicyView) Text {
	return policyPage(text, v, 0, "")
}

// maxPageButtons bounds the rule buttons of one page of a policy screen:
// Telegram takes at most 100 buttons under a message, Slack 50 blocks in
// one, and a person reads a few dozen.
const maxPageButtons = 48

// A row of a policy screen holds at most maxRowButtons buttons, and
// labels of about maxRowLabels characters in all: a phone cuts a label
// that has less room.
const (
	maxRowButtons = 3
	maxRowLabels  = 50
)

// policyPage is page n of v's screen or, when focus names a rule, the page
// that shows it.
func policyPage(text string, v agent.PolicyView, n int, focus string) Text {
	t := Text{Body: text}
	if !v.Editable {
		return t
	}
	pages := policyPages(v)
	if len(pages) == 0 {
		return t
	}
	if focus != "" {
		ref := ruleRef(focus)
		shows := func(b Button) bool { r := buttonRule(b.Data); return r != "" && (r == focus || r == ref) }
		for i, p := range pages {
			if slices.ContainsFunc(p, func(row []Button) bool { return slices.ContainsFunc(row, shows) }) {
				n = i
				break
			}
		}
	}
	n = max(0, min(n, len(pages)-1))
	t.Buttons = pages[n]
	if len(pages) > 1 {
		var nav []Button
		if n > 0 {
			nav = append(nav, Button{Label: fmt.Sprintf("◀ page %d", n), Data: fmt.Sprintf("%spg:%d", clickPrefix, n-1)})
		}
		if n < len(pages)-1 {
			nav = append(nav, Button{Label: fmt.Sprintf("page %d ▶", n+2), Data: fmt.Sprintf("%spg:%d", clickPrefix, n+1)})
		}
		t.Buttons = append(slices.Clone(t.Buttons), nav)
		t.Body += fmt.Sprintf("\n(Page %d of %d of the buttons.)", n+1, len(pages))
	}
	return t
}

// policyPages lays v's buttons out in pages: each group's button on a row
// of its own, then its tools' (or skills') buttons, several to a row. A
// group that would not fit on the current page starts a new one; one
// bigger than a page goes on over the next.
func policyPages(v agent.PolicyView) [][][]Button {
	var pages [][][]Button
	var page [][]Button
	count := 0
	flush := func() {
		if len(page) > 0 {
			pages = append(pages, page)
		}
		page, count = nil, 0
	}
	for _, g := range v.Groups {
		var rows [][]Button
		n := 0
		if rule, ok := groupRule(g); ok {
			mode, src := groupMode(v, g)
			rows = append(rows, []Button{ruleButton("▸ "+g.Name, rule, mode, src, v.Version)})
			n++
		}
		var row []Button
		width := 0
		for _, tool := range g.Tools {
			b := ruleButton(rowLabel(tool.Name), tool.Name, tool.Reason.Mode, toolSource(tool), v.Version)
			w := utf8.RuneCountInString(b.Label)
			if len(row) == maxRowButtons || (len(row) > 0 && width+w > maxRowLabels) {
				rows = append(rows, row)
				row, width = nil, 0
			}
			row = append(row, b)
			width += w
			n++
		}
		if len(row) > 0 {
			rows = append(rows, row)
		}
		if count > 0 && count+n > maxPageButtons && n <= maxPageButtons {
			flush() // the group fits on a page of its own
		}
		for _, row := range rows {
			if count+len(row) > maxPageButtons {
				flush()
			}
			page = append(page, row)
			count += len(row)
		}
	}
	flush()
	return pages
}

// groupRule is the rule a group's button sets: every tool has a power,
// and every power is a group.
func groupRule(g agent.GroupView) (string, bool) {
	return agent.GroupRule(g.Name), g.Name != ""
}

// groupMode is a group's mode (its rule's, or the default) and where it
// comes from.
func groupMode(v agent.PolicyView, g agent.GroupView) (agent.ToolMode, string) {
	if g.Rule == nil {
		return v.Default.Mode, "default"
	}
	return g.Rule.Mode, layerLabel(*g.Rule)
}

// toolSource says where a tool's (or a skill's) mode comes from when it
// has a rule of its own (set here, or in the config); "" when it follows
// its group or the default, as the screen's text says.
func toolSource(t agent.ToolView) string {
	if t.Reason.Rule == t.Name {
		return layerLabel(t.Reason)
	}
	return ""
}

func layerLabel(r agent.Reason) string {
	if r.Layer == "channel" {
		return "here"
	}
	return "config"
}

// rowLabel names a tool or a skill (skill:NAME, under the skills group's
// heading) on a screen.
func rowLabel(rule string) string {
	if name, ok := agent.IsSkillRule(rule); ok {
		return name
	}
	return rule
}

// ruleButton is the button that moves rule from mode to the next, its
// label saying the mode and, if given, where it comes from. Its
// data names the rule, or, when that would not fit in [MaxButtonData] (a
// long skill or MCP name), a hash of it that a click finds among the
// rules the screen shows (see [ruleRef]).
func ruleButton(label, rule string, mode agent.ToolMode, source string, version int64) Button {
	data := fmt.Sprintf("%spol:%d:%s:%s", clickPrefix, version, nextMode(mode), rule)
	if len(data) > MaxButtonData {
		data = fmt.Sprintf("%spol:%d:%s:%s", clickPrefix, version, nextMode(mode), ruleRef(rule))
	}
	label += ": " + string(mode)
	if source != "" {
		label += " (" + source + ")"
	}
	return Button{Label: label, Data: data}
}

// refMark starts a rule's hash in button data; no rule name starts with it.
const refMark = "#"

// ruleRef is a short stand-in for a rule in button data: 72 bits of its
// SHA-256, so two rules of one screen never share one, and a click whose
// rule is no longer shown finds none rather than a wrong one.
func ruleRef(rule string) string {
	sum := sha256.Sum256([]byte(rule))
	return refMark + base64.RawURLEncoding.EncodeToString(sum[:9])
}

// screenRules lists the rules v's screen has buttons for.
func screenRules(v agent.PolicyView) []string {
	var rules []string
	for _, g := range v.Groups {
		if rule, ok := groupRule(g); ok {
			rules = append(rules, rule)
		}
		for _, t := range g.Tools {
			rules = append(rules, t.Name)
		}
	}
	return rules
}

// resolveRule finds the rule a button's data names among those v shows:
// the rule itself, or the one whose [ruleRef] it is.
func resolveRule(ref string, v agent.PolicyView) (string, bool) {
	if !strings.HasPrefix(ref, refMark) {
		return ref, true
	}
	for _, r := range screenRules(v) {
		if ruleRef(r) == ref {
			return r, true
		}
	}
	return "", false
}

// buttonRule is what a policy button's data names: a rule or a
// [ruleRef]; "" for other data.
func buttonRule(data string) string {
	rest, ok := strings.CutPrefix(data, clickPrefix+"pol:")
	if !ok {
		return ""
	}
	parts := strings.SplitN(rest, ":", 3)
	if len(parts) != 3 {
		return ""
	}
	return parts[2]
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
		c := Clicked{Notice: res.Notice}
		if res.Applied && res.Approval.ID != "" {
			// The question becomes its outcome, wherever the click landed.
			done := DecidedText(res.Approval)
			c.Replace = &done
		}
		return c, nil
	case "pol":
		parts := strings.SplitN(rest, ":", 3)
		if len(parts) != 3 || parts[2] == "" {
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
		rule := parts[2]
		if strings.HasPrefix(rule, refMark) {
			v, err := d.Policy(ctx, chat, user)
			if err != nil {
				return Clicked{Notice: tryAgain}, err
			}
			r, ok := resolveRule(rule, v)
			switch {
			case !ok && !v.Editable:
				return Clicked{Notice: notAdmin}, nil
			case !ok:
				screen := PolicyScreen(PolicyText(v), v)
				return Clicked{Notice: "That is no longer on this screen; here it is as it is now.", Replace: &screen}, nil
			}
			rule = r
		}
		return setRule(ctx, d, chat, user, version, rule, mode)
	case "pg":
		n, err := strconv.Atoi(rest)
		if err != nil || n < 0 {
			return Clicked{}, ErrNotOurs
		}
		v, err := d.Policy(ctx, chat, user)
		if err != nil {
			return Clicked{Notice: tryAgain}, err
		}
		if !v.Editable {
			return Clicked{Notice: notAdmin}, nil
		}
		screen := policyPage(PolicyText(v), v, n, "")
		return Clicked{Replace: &screen}, nil
	}
	return Clicked{}, ErrNotOurs
}

// Notices of policy clicks.
const (
	notAdmin = "Only an admin can change this channel's tools."
	tryAgain = "That did not work; try again in a moment."
)

// setRule sets rule to mode for a click made on the screen of version,
// and shows the screen as it is now, on the page with the rule.
func setRule(ctx context.Context, d agent.Submitter, chat agent.SessionKey, user agent.User, version int64, rule string, mode agent.ToolMode) (Clicked, error) {
	v, err := d.SetPolicy(ctx, chat, user, agent.PolicyChange{Version: version, Set: map[string]agent.ToolMode{rule: mode}})
	switch {
	case errors.Is(err, agent.ErrNotAdmin):
		return Clicked{Notice: notAdmin}, nil
	case errors.Is(err, agent.ErrVersionConflict):
		v, err = d.Policy(ctx, chat, user)
		if err != nil {
			return Clicked{Notice: "Someone changed the policy meanwhile; send tools again."}, nil
		}
		screen := policyPage(PolicyText(v), v, 0, rule)
		return Clicked{Notice: "Someone changed the policy meanwhile; here it is now. Click again.", Replace: &screen}, nil
	case errors.Is(err, agent.ErrInvalid):
		return Clicked{Notice: "That rule does not apply here."}, nil
	case err != nil:
		return Clicked{Notice: tryAgain}, err
	}
	screen := policyPage(PolicyText(v), v, 0, rule)
	return Clicked{Notice: agent.RuleLabel(rule) + " is " + string(mode) + " here now.", Replace: &screen}, nil
}

// maxPolicyText bounds the words of a policy screen, so that it stays one
// Telegram message (4096 characters) that a click can edit: past it,
// groups are listed without their tools.
const maxPolicyText = 3000

// maxGroupItems bounds the tools or skills listed for one group.
const maxGroupItems = 25

// PolicyText says a policy in words, for a screen: each group's mode and
// where it comes from (set here, in the config, or the default), then its
// tools (or skills) and their modes, marking those with a rule of their
// own.
func PolicyText(v agent.PolicyView) string {
	var b strings.Builder
	src := "the configured default"
	if v.Default.Layer == "channel" {
		src = "set here"
	}
	fmt.Fprintf(&b, "Tool policy here (default %s, %s):", v.Default.Mode, src)
	for i, g := range v.Groups {
		head := "\n• " + g.Name + ":"
		if _, ok := groupRule(g); ok {
			mode, from := groupMode(v, g)
			head += fmt.Sprintf(" %s (%s);", mode, from)
		}
		if b.Len()+len(head) > maxPolicyText {
			fmt.Fprintf(&b, "\n• and %d more groups.", len(v.Groups)-i)
			break
		}
		var items strings.Builder
		for j, t := range g.Tools {
			if j == maxGroupItems {
				fmt.Fprintf(&items, " and %d more", len(g.Tools)-j)
				break
			}
			fmt.Fprintf(&items, " %s=%s", rowLabel(t.Name), t.Reason.Mode)
			if t.Reason.Rule == t.Name {
				fmt.Fprintf(&items, " (%s)", layerLabel(t.Reason))
			}
		}
		b.WriteString(head)
		if b.Len()+items.Len() > maxPolicyText {
			fmt.Fprintf(&b, " %d not listed", len(g.Tools))
			continue
		}
		b.WriteString(items.String())
	}
	if v.Editable {
		b.WriteString("\nClick a group, a tool or a skill to move it to the next mode (allow → ask → deny). " +
			"(here) marks a rule set in this channel, (config) one of the config; a tool or a skill without either follows its group.")
	} else {
		b.WriteString("\nOnly an admin can change it.")
	}
	return b.String()
}
