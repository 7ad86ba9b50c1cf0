package fakeslack

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Interactivity: buttons on messages, modals, and the payloads Slack sends
// an app when a person clicks a button (block_actions) or submits a modal
// (view_submission).

// triggerTTL is how long a trigger_id can be exchanged for a modal.
const triggerTTL = 3 * time.Second

// Slack's limits on a modal.
const (
	maxViewBlocks   = 100
	maxViewTitle    = 24 // title, submit and close texts
	maxViewMetadata = 3000
)

// trigger is a trigger_id the fake handed out with a slash command or an
// interaction: views.open accepts it once, within triggerTTL.
type trigger struct {
	user string
	at   time.Time
	used bool
}

// responseTarget is what a response_url answers for: a slash command's
// channel, or the message (ephemeral or not) a click was on.
type responseTarget struct {
	channel, user string
	ts            string // the clicked message; empty for a slash command
	ephemeral     bool
}

// triggerLocked hands out a trigger_id for user. s.mu must be held.
func (s *Server) triggerLocked(user string) string {
	now := time.Now()
	id := fmt.Sprintf("%d.%d.%s", now.Unix(), now.UnixNano()%1e9, strings.ToLower(randomID("", 32)))
	s.store.triggers[id] = &trigger{user: user, at: now}
	return id
}

// responseURLLocked hands out a response_url for t. s.mu must be held.
func (s *Server) responseURLLocked(t responseTarget) string {
	id := randomID("", 12)
	s.store.targets[id] = t
	return s.srv.URL + responsePath + id
}

// Button is a button of a message's actions blocks.
type Button struct {
	BlockID  string
	ActionID string
	Text     string
	Value    string
	Style    string // "", "primary" or "danger"
}

// Buttons returns the buttons of the message's actions blocks, in order.
func (m Message) Buttons() []Button { return buttonsOf(m.Blocks) }

// Buttons returns the buttons of the ephemeral message's actions blocks,
// in order.
func (e Ephemeral) Buttons() []Button { return buttonsOf(e.Blocks) }

func buttonsOf(raw json.RawMessage) []Button {
	var blocks []struct {
		Type     string `json:"type"`
		BlockID  string `json:"block_id"`
		Elements []struct {
			Type     string `json:"type"`
			ActionID string `json:"action_id"`
			Text     struct {
				Text string `json:"text"`
			} `json:"text"`
			Value string `json:"value"`
			Style string `json:"style"`
		} `json:"elements"`
	}
	if json.Unmarshal(raw, &blocks) != nil {
		return nil
	}
	var out []Button
	for _, b := range blocks {
		if b.Type != "actions" {
			continue
		}
		for _, e := range b.Elements {
			if e.Type == "button" {
				out = append(out, Button{BlockID: b.BlockID, ActionID: e.ActionID, Text: e.Text.Text, Value: e.Value, Style: e.Style})
			}
		}
	}
	return out
}

// View is a modal the app opened with views.open, as it sent it.
type View struct {
	ID              string
	TriggerID       string
	User            string // whom it was opened for: the trigger's user
	CallbackID      string
	PrivateMetadata string
	Title           string
	Submit          string // the submit button's text; empty for a view without one
	Close           string
	Blocks          json.RawMessage
	Opened          time.Time

	sent object // the view as the app sent it
}

// Select is a static_select of a modal's input block.
type Select struct {
	BlockID  string
	ActionID string
	Label    string
	Options  []SelectOption
	Initial  string // the value of the initial option; empty for none
}

// SelectOption is one option of a [Select].
type SelectOption struct{ Text, Value string }

// Selects returns the static_selects of the view's input blocks, in order.
func (v View) Selects() []Select {
	var blocks []struct {
		Type    string `json:"type"`
		BlockID string `json:"block_id"`
		Label   struct {
			Text string `json:"text"`
		} `json:"label"`
		Element struct {
			Type     string       `json:"type"`
			ActionID string       `json:"action_id"`
			Options  []wireOption `json:"options"`
			Initial  *wireOption  `json:"initial_option"`
		} `json:"element"`
	}
	if json.Unmarshal(v.Blocks, &blocks) != nil {
		return nil
	}
	var out []Select
	for _, b := range blocks {
		if b.Type != "input" || b.Element.Type != "static_select" {
			continue
		}
		sel := Select{BlockID: b.BlockID, ActionID: b.Element.ActionID, Label: b.Label.Text}
		for _, o := range b.Element.Options {
			sel.Options = append(sel.Options, SelectOption{Text: o.Text.Text, Value: o.Value})
		}
		if b.Element.Initial != nil {
			sel.Initial = b.Element.Initial.Value
		}
		out = append(out, sel)
	}
	return out
}

type wireOption struct {
	Text struct {
		Text string `json:"text"`
	} `json:"text"`
	Value string `json:"value"`
}

// Views returns the modals opened with views.open, in order.
func (s *Server) Views() []View {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]View, len(s.store.views))
	for i, v := range s.store.views {
		out[i] = *v
		out[i].Blocks = slices.Clone(v.Blocks)
		out[i].sent = nil
	}
	return out
}

// viewsOpenLocked serves views.open: a trigger_id the fake handed out
// (invalid_trigger_id otherwise), not used before (exchanged_trigger_id)
// nor older than three seconds (expired_trigger_id), and a modal within
// Slack's limits (invalid_arguments). s.mu must be held.
func (s *Server) viewsOpenLocked(p url.Values) (object, string) {
	tid := p.Get("trigger_id")
	tr := s.store.triggers[tid]
	switch {
	case tr == nil:
		return nil, "invalid_trigger_id"
	case tr.used:
		return nil, "exchanged_trigger_id"
	case time.Since(tr.at) > triggerTTL:
		return nil, "expired_trigger_id"
	}
	v, err := parseModal(p.Get("view"))
	if err != nil {
		s.log("views.open refused", "err", err)
		return nil, "invalid_arguments"
	}
	tr.used = true
	v.ID, v.TriggerID, v.User, v.Opened = randomID("V", 10), tid, tr.user, time.Now()
	s.store.views = append(s.store.views, v)
	return object{"view": s.wireViewLocked(v, object{})}, ""
}

// parseModal checks a modal as views.open does.
func parseModal(raw string) (*View, error) {
	var sent object
	if err := json.Unmarshal([]byte(raw), &sent); err != nil {
		return nil, fmt.Errorf("view is not a JSON object: %w", err)
	}
	if t := str(sent["type"]); t != "modal" {
		return nil, fmt.Errorf("view type %q is not modal", t)
	}
	v := &View{sent: sent, CallbackID: str(sent["callback_id"]), PrivateMetadata: str(sent["private_metadata"])}
	for _, f := range []struct {
		name     string
		into     *string
		required bool
	}{{"title", &v.Title, true}, {"submit", &v.Submit, false}, {"close", &v.Close, false}} {
		o, ok := sent[f.name].(map[string]any)
		if !ok {
			if f.required || sent[f.name] != nil {
				return nil, fmt.Errorf("%s must be a plain_text object", f.name)
			}
			continue
		}
		t := textOf(o)
		if str(o["type"]) != "plain_text" || t == "" || utf8.RuneCountInString(t) > maxViewTitle {
			return nil, fmt.Errorf("%s must be plain_text of 1 to %d characters, not %q", f.name, maxViewTitle, t)
		}
		*f.into = t
	}
	if len(v.PrivateMetadata) > maxViewMetadata {
		return nil, fmt.Errorf("private_metadata is over %d characters", maxViewMetadata)
	}
	if len(v.CallbackID) > maxIDLen {
		return nil, errors.New("callback_id is too long")
	}
	blocksRaw, _ := json.Marshal(sent["blocks"])
	var blocks []map[string]any
	if err := json.Unmarshal(blocksRaw, &blocks); err != nil || len(blocks) == 0 {
		return nil, errors.New("blocks must be a non-empty array")
	}
	if len(blocks) > maxViewBlocks {
		return nil, fmt.Errorf("a modal has at most %d blocks, not %d", maxViewBlocks, len(blocks))
	}
	if p := blockProblem(blocks); p != "" {
		return nil, errors.New(p)
	}
	hasInput := slices.ContainsFunc(blocks, func(b map[string]any) bool { return b["type"] == "input" })
	if hasInput && v.Submit == "" {
		return nil, errors.New("a modal with input blocks needs a submit button")
	}
	v.Blocks = blocksRaw
	return v, nil
}

// wireViewLocked is a view as Slack returns and sends it, with the state of
// its inputs. s.mu must be held.
func (s *Server) wireViewLocked(v *View, values object) object {
	o := maps.Clone(v.sent)
	for _, f := range []string{"submit", "close"} {
		if _, ok := o[f]; !ok {
			o[f] = nil
		}
	}
	maps.Copy(o, object{
		"id": v.ID, "team_id": s.teamID, "private_metadata": v.PrivateMetadata, "callback_id": v.CallbackID,
		"state": object{"values": values}, "hash": fmt.Sprintf("%d.%s", v.Opened.Unix(), strings.ToLower(randomID("", 8))),
		"clear_on_close": false, "notify_on_close": false, "root_view_id": v.ID, "previous_view_id": nil,
		"app_id": s.appID, "external_id": "", "app_installed_team_id": s.teamID, "bot_id": s.botID,
	})
	return o
}

// Click builds the block_actions payload Slack sends when user clicks a
// button on the message at ts in channel, or on an ephemeral message with
// that ts shown to user. button names the button by its text or its
// action_id. The payload carries the message (for an ephemeral one, only
// its container), a trigger_id and a response_url that can replace or
// delete the message. Deliver it with SendInteractive or DeliverHTTP.
func (s *Server) Click(channel, ts, user, button string) (Interaction, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	u, ok := s.users[user]
	if !ok {
		return Interaction{}, fmt.Errorf("fakeslack: Click: no user %s", user)
	}
	var (
		blocks    json.RawMessage
		thread    string
		ephemeral bool
		msg       object
	)
	if m := s.store.get(channel, ts); m != nil && !m.Deleted {
		blocks, thread, msg = m.Blocks, m.ThreadTS, s.wireMessageLocked(m)
	} else if i := s.ephemeralLocked(channel, ts); i >= 0 {
		e := s.store.ephemerals[i]
		if e.User != user {
			return Interaction{}, fmt.Errorf("fakeslack: Click: only %s sees the ephemeral message %s", e.User, ts)
		}
		blocks, thread, ephemeral = e.Blocks, e.ThreadTS, true
	} else {
		return Interaction{}, fmt.Errorf("fakeslack: Click: no message %s in %s", ts, channel)
	}
	i := slices.IndexFunc(buttonsOf(blocks), func(b Button) bool { return b.Text == button || b.ActionID == button })
	if i < 0 {
		return Interaction{}, fmt.Errorf("fakeslack: Click: no button %q on %s/%s (buttons %+v)", button, channel, ts, buttonsOf(blocks))
	}
	b := buttonsOf(blocks)[i]
	container := object{"type": "message", "message_ts": ts, "channel_id": channel, "is_ephemeral": ephemeral}
	if thread != "" {
		container["thread_ts"] = thread
	}
	action := object{
		"type": "button", "action_id": b.ActionID, "block_id": b.BlockID, "value": b.Value,
		"text": object{"type": "plain_text", "text": b.Text, "emoji": true}, "action_ts": s.nextTSLocked(),
	}
	if b.Style != "" {
		action["style"] = b.Style
	}
	payload := object{
		"type": "block_actions", "user": s.interactionUserLocked(u), "api_app_id": s.appID,
		"token": s.verificationToken, "container": container, "trigger_id": s.triggerLocked(user),
		"team": object{"id": s.teamID, "domain": s.teamDomain}, "enterprise": nil, "is_enterprise_install": false,
		"channel": object{"id": channel, "name": s.channelNameLocked(channel)}, "state": object{"values": object{}},
		"response_url": s.responseURLLocked(responseTarget{channel: channel, user: user, ts: ts, ephemeral: ephemeral}),
		"actions":      []object{action},
	}
	if msg != nil {
		payload["message"] = msg
	}
	return Interaction{Payload: payload}, nil
}

// SubmitView builds the view_submission payload Slack sends when user
// submits the modal viewID: the view with the state of its inputs, each
// static_select at its initial option unless selected names another value
// for its block_id. Normally user is the one the view was opened for
// (View.User); another user makes a submission Slack would never send.
// It fails for a view without a submit button, an unknown block_id or a
// value that is not one of the block's options.
func (s *Server) SubmitView(viewID, user string, selected map[string]string) (Interaction, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := slices.IndexFunc(s.store.views, func(v *View) bool { return v.ID == viewID })
	if i < 0 {
		return Interaction{}, fmt.Errorf("fakeslack: SubmitView: no view %s", viewID)
	}
	v := s.store.views[i]
	if v.Submit == "" {
		return Interaction{}, fmt.Errorf("fakeslack: SubmitView: view %s has no submit button", viewID)
	}
	u, ok := s.users[user]
	if !ok {
		return Interaction{}, fmt.Errorf("fakeslack: SubmitView: no user %s", user)
	}
	left := maps.Clone(selected)
	values := object{}
	for _, sel := range v.Selects() {
		value := sel.Initial
		if want, ok := left[sel.BlockID]; ok {
			delete(left, sel.BlockID)
			value = want
		}
		state := object{"type": "static_select", "selected_option": nil}
		if value != "" {
			j := slices.IndexFunc(sel.Options, func(o SelectOption) bool { return o.Value == value })
			if j < 0 {
				return Interaction{}, fmt.Errorf("fakeslack: SubmitView: %q is not an option of %s", value, sel.BlockID)
			}
			state["selected_option"] = object{"text": object{"type": "plain_text", "text": sel.Options[j].Text, "emoji": true}, "value": value}
		}
		values[sel.BlockID] = object{sel.ActionID: state}
	}
	if len(left) > 0 {
		return Interaction{}, fmt.Errorf("fakeslack: SubmitView: view %s has no select %v", viewID, slices.Sorted(maps.Keys(left)))
	}
	return Interaction{Payload: object{
		"type": "view_submission", "team": object{"id": s.teamID, "domain": s.teamDomain},
		"user": s.interactionUserLocked(u), "api_app_id": s.appID, "token": s.verificationToken,
		"trigger_id": s.triggerLocked(user), "view": s.wireViewLocked(v, values), "response_urls": []object{},
		"is_enterprise_install": false, "enterprise": nil,
	}}, nil
}

// interactionUserLocked is the user object of an interaction payload.
// s.mu must be held.
func (s *Server) interactionUserLocked(u User) object {
	return object{"id": u.ID, "username": u.Name, "name": u.Name, "team_id": s.userTeamLocked(u.ID)}
}

// channelNameLocked is a channel's name as interaction payloads give it.
// s.mu must be held.
func (s *Server) channelNameLocked(id string) string {
	c, _ := s.channelLocked(id)
	switch {
	case c.Type == ChannelIM:
		return "directmessage"
	case c.Name == "" && c.Type == ChannelPrivate:
		return "privategroup"
	}
	return c.Name
}

// ephemeralLocked finds an ephemeral message that is not deleted; -1 if
// none. s.mu must be held.
func (s *Server) ephemeralLocked(channel, ts string) int {
	return slices.IndexFunc(s.store.ephemerals, func(e Ephemeral) bool {
		return e.Channel == channel && e.TS == ts && !e.Deleted
	})
}

// respondLocked applies a post to a response_url: replace_original or
// delete_original change the clicked message; anything else from a click
// or a slash command is a new ephemeral message to the person, as Slack
// shows it (unless response_type is in_channel: a message in the channel).
// s.mu must be held.
func (s *Server) respondLocked(t responseTarget, body []byte) {
	var r struct {
		Text            string          `json:"text"`
		Blocks          json.RawMessage `json:"blocks"`
		ResponseType    string          `json:"response_type"`
		ReplaceOriginal bool            `json:"replace_original"`
		DeleteOriginal  bool            `json:"delete_original"`
		ThreadTS        string          `json:"thread_ts"`
	}
	if json.Unmarshal(body, &r) != nil {
		return
	}
	blocks := r.Blocks
	if b := strings.TrimSpace(string(blocks)); b == "" || b == "null" || b == "[]" {
		blocks = nil
	}
	switch {
	case (r.ReplaceOriginal || r.DeleteOriginal) && t.ts != "" && t.ephemeral:
		if i := s.ephemeralLocked(t.channel, t.ts); i >= 0 {
			e := &s.store.ephemerals[i]
			if r.DeleteOriginal {
				e.Deleted = true
				return
			}
			e.Text, e.Blocks = r.Text, blocks
			e.Edits++
		}
	case (r.ReplaceOriginal || r.DeleteOriginal) && t.ts != "":
		if m := s.store.get(t.channel, t.ts); m != nil && !m.Deleted {
			if r.DeleteOriginal {
				m.Deleted = true
				return
			}
			m.Text, m.Blocks = r.Text, blocks
			m.Edits++
			m.Edited = time.Now()
			m.editTS = s.nextTSLocked()
		}
	case r.ResponseType == "in_channel":
		s.store.put(&Message{Channel: t.channel, TS: s.nextTSLocked(), ThreadTS: r.ThreadTS, User: s.botUserID, BotID: s.botID,
			Text: r.Text, Blocks: blocks, Posted: time.Now()})
	default:
		s.store.ephemerals = append(s.store.ephemerals, Ephemeral{Channel: t.channel, User: t.user, ThreadTS: r.ThreadTS,
			Text: r.Text, Blocks: blocks, TS: s.nextTSLocked(), At: time.Now()})
	}
}
