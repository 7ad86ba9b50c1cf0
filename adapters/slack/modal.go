package slack

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/slack-go/slack"

	"github.com/firstmate/firstmate/adapters"
	"github.com/firstmate/firstmate/agent"
)

// The tools modal: "/firstmate tools" opens it with the channel's policy,
// one select per group (the skills group and each MCP server, mcp:NAME,
// among them), per tool and per skill (skill:NAME) for an admin, the
// policy in words for anyone else. Its submission changes the rules that were changed in it,
// against the policy version it showed.

const (
	toolsCallbackID = "fm_tools"
	modeAction      = "mode"    // the action_id of every select
	inheritMode     = "inherit" // a tool's "as its group": no rule of its own here
	groupBlock      = "g:"      // block_id of a group's select: "g:exec"
	toolBlock       = "t:"      // of a tool's: "t:shell"
	maxModalBlocks  = 100
)

// toolsMeta is the modal's private_metadata: which channel, and the
// policy version it shows.
type toolsMeta struct {
	Chat    string `json:"chat"`
	Version int64  `json:"v"`
}

// openTools opens the tools modal for user, for the channel key. On
// failure the person is told in an ephemeral message.
func (a *Adapter) openTools(ctx context.Context, d agent.Submitter, key agent.SessionKey, user agent.User, triggerID string) {
	v, err := d.Policy(ctx, key, user)
	if err != nil {
		a.log.Error("slack: reading the policy for the tools modal", "chat", key.String(), "err", err)
		a.tell(ctx, key.Chat, user.ID, "", "I could not read this channel's tools just now; try again in a moment.")
		return
	}
	if _, err := a.api.OpenViewContext(ctx, triggerID, toolsModal(key, v)); err != nil {
		a.log.Warn("slack views.open failed", "chat", key.String(), "err", err)
		a.tell(ctx, key.Chat, user.ID, "", "I could not open the tools screen. Mention me with: tools, or use "+
			"/firstmate tools exec=ask web=deny to change them.")
	}
}

// toolsModal shows v: selects for an admin, text for anyone else.
func toolsModal(key agent.SessionKey, v agent.PolicyView) slack.ModalViewRequest {
	meta, _ := json.Marshal(toolsMeta{Chat: key.Channel().String(), Version: v.Version})
	m := slack.ModalViewRequest{
		Type: slack.VTModal, Title: plain("Tools here"), Close: plain("Close"),
		CallbackID: toolsCallbackID, PrivateMetadata: string(meta),
	}
	if !v.Editable {
		m.Blocks.BlockSet = sectionBlocks(escapeMrkdwn(adapters.PolicyText(v)))
		return m
	}
	m.Submit, m.Close = plain("Save"), plain("Cancel")
	blocks := []slack.Block{slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, fmtIntro(v), false, false), nil, nil)}
	shown, left := modalRows(v, maxModalBlocks-2) // the intro, and a note on what does not fit
	for _, g := range v.Groups {
		grouped := isGroup(g)
		if grouped && shown[groupBlock+g.Name] {
			blocks = append(blocks, groupInput(v, g))
		}
		for _, t := range g.Tools {
			if shown[toolBlock+t.Name] {
				blocks = append(blocks, toolInput(t, grouped))
			}
		}
	}
	if left > 0 {
		blocks = append(blocks, slack.NewContextBlock("", slack.NewTextBlockObject(slack.MarkdownType,
			escapeMrkdwn(plural(left, "more group, tool or skill does", "more groups, tools or skills do")+" not fit here; set them with /firstmate tools NAME=MODE (skill:NAME for a skill)."), false, false)))
	}
	m.Blocks.BlockSet = blocks
	return m
}

// maxBlockID is the longest block_id Slack takes.
const maxBlockID = 255

// modalRows chooses the selects of v that fit in room blocks, by block_id,
// and counts those left out: every group's (built-in, skills, each MCP
// server) first, then the tools', then the skills', each in screen order,
// so that a channel with many skills still shows its MCP servers.
func modalRows(v agent.PolicyView, room int) (map[string]bool, int) {
	var groups, tools, skills []string
	for _, g := range v.Groups {
		if isGroup(g) {
			groups = append(groups, groupBlock+g.Name)
		}
		for _, t := range g.Tools {
			if _, ok := agent.IsSkillRule(t.Name); ok {
				skills = append(skills, toolBlock+t.Name)
			} else {
				tools = append(tools, toolBlock+t.Name)
			}
		}
	}
	shown := map[string]bool{}
	left := 0
	for _, id := range slices.Concat(groups, tools, skills) {
		if room == 0 || len(id) > maxBlockID {
			left++
			continue
		}
		shown[id] = true
		room--
	}
	return shown, left
}

func fmtIntro(v agent.PolicyView) string {
	where := "the config"
	if v.Default.Layer == "channel" {
		where = "this channel"
	}
	return "*allow*: I use the tool freely. *ask*: I ask the person who started the turn, or an admin, first. *deny*: never.\n" +
		"A tool or a skill _as its group_ follows its group's mode (a skill: the skills group; an MCP server's tool: its server, mcp:NAME); " +
		"the default is *" + escapeMrkdwn(string(v.Default.Mode)) + "* (set in " + where + ")."
}

// isGroup reports whether g is a group rules can name: every tool has a
// power, and every power is a group.
func isGroup(g agent.GroupView) bool { return len(g.Tools) > 0 && g.Name != "" }

func groupInput(v agent.PolicyView, g agent.GroupView) slack.Block {
	mode, hint := v.Default.Mode, "Now "+string(v.Default.Mode)+", the default"
	if g.Rule != nil {
		mode, hint = g.Rule.Mode, "Now "+string(g.Rule.Mode)+", by its rule "+ruleSource(*g.Rule)
	}
	var names []string
	for _, t := range g.Tools {
		if s, ok := agent.IsSkillRule(t.Name); ok {
			names = append(names, s)
		} else if g.Name != agent.GroupSkills {
			names = append(names, t.Name) // the tool that loads skills is not one
		}
	}
	label := g.Name + " (group)"
	switch {
	case g.Name == agent.GroupSkills:
		label, hint = "skills (every skill)", hint+". Skills: "
	case strings.HasPrefix(g.Name, "mcp:"):
		label, hint = g.Name+" (MCP server)", hint+". Its tools: "
	default:
		hint += ". Tools: "
	}
	sel := modeSelect(false, false)
	sel.InitialOption = option(string(mode), modeLabel(string(mode), false))
	return slack.NewInputBlock(groupBlock+g.Name, plain(clipRunes(label, 2000)), plain(clipRunes(hint+strings.Join(names, ", "), 2000)), sel)
}

// ruleSource says where a rule was set, for a hint.
func ruleSource(r agent.Reason) string {
	if r.Layer == "channel" {
		return "set here"
	}
	return "from the config"
}

func toolInput(t agent.ToolView, grouped bool) slack.Block {
	initial := inheritMode
	if t.Reason.Rule == t.Name {
		initial = string(t.Reason.Mode)
	}
	sel := modeSelect(true, grouped)
	sel.InitialOption = option(initial, modeLabel(initial, grouped))
	hint := "Now " + string(t.Reason.Mode) + ", by the rule " + agent.RuleLabel(t.Reason.Rule) + " " + ruleSource(t.Reason)
	if t.Reason.Rule == agent.DefaultRule && t.Reason.Layer != "channel" {
		hint = "Now " + string(t.Reason.Mode) + ", the default"
	}
	return slack.NewInputBlock(toolBlock+t.Name, plain(clipRunes(t.Name, 2000)), plain(clipRunes(hint+".", 2000)), sel)
}

// modeSelect offers allow, ask and deny, and for a tool "as its group".
func modeSelect(tool, grouped bool) *slack.SelectBlockElement {
	var opts []*slack.OptionBlockObject
	if tool {
		opts = append(opts, option(inheritMode, modeLabel(inheritMode, grouped)))
	}
	for _, m := range []agent.ToolMode{agent.ToolAllow, agent.ToolAsk, agent.ToolDeny} {
		opts = append(opts, option(string(m), modeLabel(string(m), grouped)))
	}
	return slack.NewOptionsSelectBlockElement(slack.OptTypeStatic, plain("Mode"), modeAction, opts...)
}

func modeLabel(mode string, grouped bool) string {
	switch mode {
	case inheritMode:
		if grouped {
			return "as its group"
		}
		return "as the default"
	case string(agent.ToolAsk):
		return "ask first"
	}
	return mode
}

func option(value, label string) *slack.OptionBlockObject {
	return slack.NewOptionBlockObject(value, plain(label), nil)
}

func plain(s string) *slack.TextBlockObject {
	return slack.NewTextBlockObject(slack.PlainTextType, s, true, false)
}

func clipRunes(s string, n int) string {
	if len([]rune(s)) <= n {
		return s
	}
	return truncateRunes(s, n-1)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

// submitTools applies a tools modal's submission: the rules whose select
// moved from where the modal put it, against the version it showed. A
// refusal is shown in the modal (response_action errors); on success the
// modal closes and the person is told what changed.
func (a *Adapter) submitTools(ctx context.Context, d agent.Submitter, cb slack.InteractionCallback) (any, func(context.Context)) {
	var meta toolsMeta
	if err := json.Unmarshal([]byte(cb.View.PrivateMetadata), &meta); err != nil {
		a.log.Debug("slack tools modal with unreadable metadata", "err", err)
		return nil, nil
	}
	key, err := agent.ParseSessionKey(meta.Chat)
	if err != nil || key.Platform != Platform || !validID(key.Chat, "CDG") || !validID(cb.User.ID, "UW") {
		a.log.Debug("slack tools modal for a channel or person we cannot read", "chat", truncateRunes(meta.Chat, 80), "user", truncateRunes(cb.User.ID, 40))
		return nil, nil
	}
	key = key.Channel()
	// Who opened the modal (a slash command) was looked up then: this is
	// from the cache, or else one bounded call.
	user := a.interactionUser(ctx, agent.User{ID: cb.User.ID, Name: cb.User.Name, Team: cb.User.TeamID}, orDefault(cb.Team.ID, a.norm.me.TeamID))
	var values map[string]map[string]slack.BlockAction
	if cb.View.State != nil {
		values = cb.View.State.Values
	}
	change := agent.PolicyChange{Version: meta.Version, Set: map[string]agent.ToolMode{}}
	var first string
	var said []string
	for _, b := range cb.View.Blocks.BlockSet {
		in, ok := b.(*slack.InputBlock)
		if !ok {
			continue
		}
		act, ok := values[in.BlockID][modeAction]
		if !ok || act.SelectedOption.Value == "" {
			continue
		}
		chosen, initial := act.SelectedOption.Value, ""
		if sel, ok := in.Element.(*slack.SelectBlockElement); ok && sel.InitialOption != nil {
			initial = sel.InitialOption.Value
		}
		if chosen == initial {
			continue
		}
		rule, mode, ok := ruleOf(in.BlockID, chosen)
		if !ok {
			a.log.Debug("slack tools modal with an unknown choice", "block", truncateRunes(in.BlockID, 80), "value", truncateRunes(chosen, 40))
			continue
		}
		change.Set[rule] = mode
		if first == "" {
			first = in.BlockID
		}
		if mode == "" {
			said = append(said, agent.RuleLabel(rule)+" as its group")
		} else {
			said = append(said, agent.RuleLabel(rule)+" "+string(mode))
		}
	}
	if len(change.Set) == 0 {
		return nil, nil // nothing moved: the modal closes
	}
	refuse := func(why string) (any, func(context.Context)) {
		return slack.NewErrorsViewSubmissionResponse(map[string]string{first: why}), nil
	}
	_, err = d.SetPolicy(ctx, key, user, change)
	switch {
	case errors.Is(err, agent.ErrNotAdmin):
		return refuse("Only an admin can change this channel's tools.")
	case errors.Is(err, agent.ErrVersionConflict):
		return refuse("Someone changed this channel's tools meanwhile. Cancel, and open the tools again to see them as they are.")
	case errors.Is(err, agent.ErrInvalid):
		return refuse("That rule does not apply here.")
	case err != nil:
		a.log.Error("slack: saving the tools modal", "chat", key.String(), "user", user.ID, "err", err)
		return refuse("That did not work; try again in a moment.")
	}
	note := "Saved this channel's tools: " + strings.Join(said, ", ") + "."
	return nil, func(ctx context.Context) { a.tell(ctx, key.Chat, user.ID, "", note) }
}

// ruleOf reads a select's block and chosen value as a rule and its mode
// ("" for a tool as its group).
func ruleOf(blockID, value string) (string, agent.ToolMode, bool) {
	if g, ok := strings.CutPrefix(blockID, groupBlock); ok && g != "" {
		m, err := agent.ParseMode(value)
		return agent.GroupRule(g), m, err == nil
	}
	if t, ok := strings.CutPrefix(blockID, toolBlock); ok && t != "" {
		if value == inheritMode {
			return t, "", true
		}
		m, err := agent.ParseMode(value)
		return t, m, err == nil
	}
	return "", "", false
}

// tell shows text to one person in a channel (in a thread when threadTS
// is set), in an ephemeral message.
func (a *Adapter) tell(ctx context.Context, channel, user, threadTS, text string) {
	opts := []slack.MsgOption{slack.MsgOptionText(escapeMrkdwn(text), false)}
	if threadTS != "" {
		opts = append(opts, slack.MsgOptionTS(threadTS))
	}
	if _, err := a.api.PostEphemeralContext(ctx, channel, user, opts...); err != nil {
		a.log.Warn("slack: an ephemeral message failed", "channel", channel, "user", user, "err", err)
	}
}
