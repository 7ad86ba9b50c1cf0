package fakeslack

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"strings"
	"time"

	fastjson "github.com/segmentio/encoding/json"
	"github.com/slack-go/slack"
)

// Event is an Events API event: the inner event Slack wraps in an
// event_callback, with the event_id it carries. Delivering the same Event
// twice delivers the same event_id twice, as a Slack retry or a replay does.
// The builders ([Server.Mention] and others) make events shaped as Slack
// sends them; change Data to send what they do not make.
type Event struct {
	ID   string         // event_id
	Time time.Time      // event_time
	Data map[string]any // the inner event, as its JSON

	channelType string
	team        string
}

// Type is the inner event's type: app_mention, message…
func (e Event) Type() string { return str(e.Data["type"]) }

// Channel is the channel the event happened in.
func (e Event) Channel() string { return str(e.Data["channel"]) }

// TS is the ts of the message the event is about.
func (e Event) TS() string { return str(e.Data["ts"]) }

// ThreadTS is the thread the message is in; empty outside threads.
func (e Event) ThreadTS() string { return str(e.Data["thread_ts"]) }

// InThread returns the event with its message made a reply in the thread
// whose parent has ts.
func (e Event) InThread(ts string) Event {
	e.Data = maps.Clone(e.Data)
	e.Data["thread_ts"] = ts
	return e
}

// WithFiles returns the event with files shared with its message, as Slack
// sends a file_share message (or a mention with files). Make the files
// with [Server.AddFile].
func (e Event) WithFiles(files ...File) Event {
	e.Data = maps.Clone(e.Data)
	wire := make([]object, len(files))
	for i := range files {
		f := files[i]
		f.User = str(e.Data["user"])
		f.Shared = e.Time
		wire[i] = wireFile(&f, e.team)
	}
	e.Data["files"] = wire
	e.Data["upload"] = false
	if e.Type() == "message" {
		e.Data["subtype"] = "file_share"
		e.Data["display_as_bot"] = false
	}
	return e
}

// AsMessage returns the message event Slack also sends for an app_mention
// of a member of the channel: the same message (same channel and ts) with
// another event_id. A bot that listens to both must answer once.
func (e Event) AsMessage() Event {
	e.Data = maps.Clone(e.Data)
	e.ID = randomID("Ev", 10)
	e.Data["type"] = "message"
	e.Data["channel_type"] = e.channelType
	if _, ok := e.Data["files"]; ok {
		e.Data["subtype"] = "file_share"
	}
	return e
}

// Mention builds the app_mention of a user who mentions the bot in a
// channel; "<@BOT> " is put before text unless it mentions the bot.
func (s *Server) Mention(channel, user, text string) Event {
	mention := "<@" + s.botUserID + ">"
	if !strings.Contains(text, mention) {
		text = mention + " " + text
	}
	return s.userEvent("app_mention", channel, user, text)
}

// UserMessage builds the message event of a user writing in a channel
// (message.channels, message.groups…).
func (s *Server) UserMessage(channel, user, text string) Event {
	return s.userEvent("message", channel, user, text)
}

// DirectMessage builds the message.im event of a user writing to the bot
// in their DM, which is opened if needed.
func (s *Server) DirectMessage(user, text string) Event {
	s.mu.Lock()
	ch := s.dmLocked(user)
	s.mu.Unlock()
	return s.userEvent("message", ch.ID, user, text)
}

func (s *Server) userEvent(typ, channel, user, text string) Event {
	s.mu.Lock()
	ts := s.nextTSLocked()
	ct := s.channelTypeLocked(channel)
	team := s.userTeamLocked(user)
	s.mu.Unlock()
	d := map[string]any{
		"type": typ, "user": user, "text": text, "ts": ts, "event_ts": ts, "channel": channel,
		"team": team, "client_msg_id": uuid(),
	}
	if team != s.teamID {
		// A person of another organisation in a shared channel.
		d["user_team"], d["source_team"] = team, team
	}
	if blocks := richText(text); blocks != nil {
		d["blocks"] = blocks
	}
	if typ == "message" {
		d["channel_type"] = ct
	}
	return s.newEvent(d, ct)
}

// BotMessage builds the message event of a bot posting in a channel. For
// a bot user of the workspace (the fake's own bot included, BotUserID) it
// is what a bot posting with its token makes: user, bot_id, app_id. For
// any other ID it is a legacy bot_message from an integration whose
// bot_id is that ID.
func (s *Server) BotMessage(channel, user, text string) Event {
	s.mu.Lock()
	ts := s.nextTSLocked()
	ct := s.channelTypeLocked(channel)
	u, known := s.users[user]
	s.mu.Unlock()
	d := map[string]any{
		"type": "message", "text": text, "ts": ts, "event_ts": ts, "channel": channel,
		"channel_type": ct, "team": s.teamID,
	}
	if known && u.IsBot {
		app := "A" + u.BotID[min(1, len(u.BotID)):]
		if user == s.botUserID {
			app = s.appID
		}
		d["user"], d["bot_id"], d["app_id"] = user, u.BotID, app
		d["bot_profile"] = object{"id": u.BotID, "app_id": app, "name": u.Name, "team_id": s.teamID, "deleted": false}
	} else {
		d["subtype"], d["bot_id"], d["username"] = "bot_message", user, "integration"
	}
	return s.newEvent(d, ct)
}

// MessageChanged builds the message_changed event of the message at ts
// being edited to text. The message's earlier version comes from what the
// fake knows of it.
func (s *Server) MessageChanged(channel, ts, text string) Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	prev := s.knownMessageLocked(channel, ts)
	cur := maps.Clone(prev)
	cur["text"] = text
	if prev["bot_id"] == nil {
		cur["blocks"] = richText(text)
	}
	evTS := s.nextTSLocked()
	cur["edited"] = object{"user": prev["user"], "ts": evTS}
	return s.changedLocked(channel, evTS, prev, cur)
}

// MessageDeleted builds the message_deleted event of the message at ts.
func (s *Server) MessageDeleted(channel, ts string) Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deletedLocked(channel, ts, s.knownMessageLocked(channel, ts))
}

func (s *Server) knownMessageLocked(channel, ts string) object {
	if m := s.store.get(channel, ts); m != nil {
		return s.wireMessageLocked(m)
	}
	return object{"type": "message", "ts": ts, "text": "", "team": s.teamID}
}

func (s *Server) changedLocked(channel, evTS string, prev, cur object) Event {
	ct := s.channelTypeLocked(channel)
	return s.newEvent(map[string]any{
		"type": "message", "subtype": "message_changed", "hidden": true, "message": cur,
		"previous_message": prev, "channel": channel, "channel_type": ct, "ts": evTS, "event_ts": evTS,
	}, ct)
}

func (s *Server) deletedLocked(channel, ts string, prev object) Event {
	ct := s.channelTypeLocked(channel)
	evTS := s.nextTSLocked()
	return s.newEvent(map[string]any{
		"type": "message", "subtype": "message_deleted", "hidden": true, "deleted_ts": ts,
		"previous_message": prev, "channel": channel, "channel_type": ct, "ts": evTS, "event_ts": evTS,
	}, ct)
}

// The events WithEcho sends about the bot's own activity. s.mu must be held.

func (s *Server) ownMessageEventLocked(m *Message) Event {
	d := s.wireMessageLocked(m)
	ct := s.channelTypeLocked(m.Channel)
	d["channel"], d["channel_type"], d["event_ts"] = m.Channel, ct, m.TS
	return s.newEvent(d, ct)
}

func (s *Server) changedEventLocked(m *Message, prev object) Event {
	return s.changedLocked(m.Channel, m.editTS, prev, s.wireMessageLocked(m))
}

func (s *Server) newEvent(d map[string]any, channelType string) Event {
	return Event{ID: randomID("Ev", 10), Time: time.Now(), Data: d, channelType: channelType, team: s.teamID}
}

// echoLocked sends, once the call is answered, the event Slack sends the
// app about what the call did, if the fake echoes. s.mu must be held.
func (s *Server) echoLocked(c *apiCall, build func() Event) {
	if !s.echo {
		return
	}
	ev := build()
	payload, err := json.Marshal(s.callback(ev))
	if err != nil {
		panic(err) // the fake's own events always marshal
	}
	c.after = append(c.after, func() { s.deliver("events_api", payload, false) })
}

func (s *Server) channelTypeLocked(channel string) string {
	if c, ok := s.channels[channel]; ok {
		return c.Type
	}
	return typeFromID(channel)
}

// callback wraps an event as Slack delivers it, over Socket Mode or HTTP.
func (s *Server) callback(e Event) *eventCallback {
	ctx, _ := json.Marshal(eventContext{Channel: e.Channel(), ID: s.teamID})
	return &eventCallback{
		Token: s.verificationToken, TeamID: s.teamID, ContextTeamID: s.teamID,
		APIAppID: s.appID, Event: e.Data, Type: "event_callback", EventID: e.ID,
		EventTime: e.Time.Unix(), IsExtSharedChannel: false,
		EventContext:   "4-" + base64.RawURLEncoding.EncodeToString(ctx),
		Authorizations: []authorization{{TeamID: s.teamID, UserID: s.botUserID, IsBot: true}},
	}
}

// eventCallback is the outer payload of an Events API event. Its fields
// are in the order of their JSON names, in which encoding/json wrote the
// map the payload was made of before: the bytes are the same, made
// faster.
type eventCallback struct {
	APIAppID           string          `json:"api_app_id"`
	Authorizations     []authorization `json:"authorizations"`
	ContextTeamID      string          `json:"context_team_id"`
	Event              map[string]any  `json:"event"`
	EventContext       string          `json:"event_context"`
	EventID            string          `json:"event_id"`
	EventTime          int64           `json:"event_time"`
	IsExtSharedChannel bool            `json:"is_ext_shared_channel"`
	TeamID             string          `json:"team_id"`
	Token              string          `json:"token"`
	Type               string          `json:"type"`
}

// authorization is the installation an event is delivered for.
type authorization struct {
	EnterpriseID        *string `json:"enterprise_id"` // always null
	IsBot               bool    `json:"is_bot"`
	IsEnterpriseInstall bool    `json:"is_enterprise_install"`
	TeamID              string  `json:"team_id"`
	UserID              string  `json:"user_id"`
}

// eventContext is what the event_context of an event encodes.
type eventContext struct {
	Channel string `json:"channel"`
	ID      string `json:"id"`
}

// eventPayload makes the body of an events_api delivery: an Event is
// wrapped; raw JSON that is an outer payload already (type event_callback,
// url_verification or app_rate_limited) is sent as it is; any other value
// is taken as an inner event, marshaled and wrapped with a new event_id.
func (s *Server) eventPayload(ev any) (json.RawMessage, error) {
	var raw []byte
	switch e := ev.(type) {
	case Event:
		return json.Marshal(s.callback(e))
	case *Event:
		return json.Marshal(s.callback(*e))
	case json.RawMessage:
		raw = e
	case []byte:
		raw = e
	case string:
		raw = []byte(e)
	default:
		var err error
		if raw, err = json.Marshal(ev); err != nil {
			return nil, err
		}
	}
	var d map[string]any
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, fmt.Errorf("an event must be a JSON object: %w", err)
	}
	switch d["type"] {
	case "event_callback", "url_verification", "app_rate_limited":
		return raw, nil
	}
	s.mu.Lock()
	ct := s.channelTypeLocked(str(d["channel"]))
	s.mu.Unlock()
	return json.Marshal(s.callback(s.newEvent(d, ct)))
}

// SendEvent delivers an Events API event over Socket Mode and returns the
// envelope's ID (for WaitAck). ev is an Event from a builder, an inner
// event (any value that marshals to one, such as a slackevents type or a
// map), or raw JSON: a whole event_callback, or an inner event. Without a
// connected client the envelope waits for one. A message event is also
// stored, so that the message is there when the bot reads its thread.
// SendEvent panics on a value that is not a JSON object.
func (s *Server) SendEvent(ev any) string {
	payload, err := s.eventPayload(ev)
	if err != nil {
		panic("fakeslack: SendEvent: " + err.Error())
	}
	switch ev.(type) {
	case Event, *Event:
		s.observeMarshaled(payload)
	default:
		s.observe(payload)
	}
	return s.deliver("events_api", payload, false)
}

// SlashCommand builds the slash command a user types in a channel, with a
// response_url on the fake (see Responses) and a trigger_id that views.open
// accepts once, within three seconds.
func (s *Server) SlashCommand(channel, user, command, text string) slack.SlashCommand {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch, _ := s.channelLocked(channel)
	name := ch.Name
	if ch.Type == ChannelIM {
		name = "directmessage"
	}
	return slack.SlashCommand{
		Token: s.verificationToken, TeamID: s.teamID, TeamDomain: s.teamDomain, ChannelID: channel,
		ChannelName: name, UserID: user, UserName: s.users[user].Name, Command: command, Text: text,
		ResponseURL: s.responseURLLocked(responseTarget{channel: channel, user: user}),
		TriggerID:   s.triggerLocked(user),
		APIAppID:    s.appID,
	}
}

// SendSlashCommand delivers a slash command over Socket Mode (an envelope
// of type slash_commands that accepts a response payload) and returns the
// envelope's ID.
func (s *Server) SendSlashCommand(cmd slack.SlashCommand) string {
	payload, err := json.Marshal(cmd)
	if err != nil {
		panic(err) // a SlashCommand is strings and a bool
	}
	return s.deliver("slash_commands", payload, true)
}

// SendInteractive delivers an interaction (block_actions, view_submission,
// shortcut…) over Socket Mode and returns the envelope's ID; the ack's
// payload (WaitAck) is the app's answer, such as a view submission's
// response_action. payload is an Interaction from [Server.Click] or
// [Server.SubmitView], a slack.InteractionCallback, raw JSON (sent as it
// is: a test can send any JSON value Slack would never send), or anything
// that marshals to the payload. SendInteractive panics on a payload that
// is not JSON: a Socket Mode frame cannot carry it.
func (s *Server) SendInteractive(payload any) string {
	raw, err := marshalInteraction(payload)
	if err == nil && !json.Valid(raw) {
		err = fmt.Errorf("the payload is not JSON: %.100q", raw)
	}
	if err != nil {
		panic("fakeslack: SendInteractive: " + err.Error())
	}
	return s.deliver("interactive", raw, true)
}

func marshalInteraction(payload any) ([]byte, error) {
	switch p := payload.(type) {
	case Interaction:
		return marshalInteraction(p.Payload)
	case *Interaction:
		return marshalInteraction(p.Payload)
	case slack.InteractionCallback:
		// InteractionCallback marshals itself only through a pointer.
		return json.Marshal(&p)
	case json.RawMessage:
		return p, nil
	case []byte:
		return p, nil
	case string:
		return []byte(p), nil
	}
	return json.Marshal(payload)
}

// observe keeps what a delivered event says about messages: a new message
// is stored, an edit applied, a deletion marked.
func (s *Server) observe(payload json.RawMessage) {
	var outer eventOuter
	if json.Unmarshal(payload, &outer) == nil {
		s.observeEvent(outer)
	}
}

// observeMarshaled is observe for a payload the fake marshaled itself with
// encoding/json, which segmentio's decoder reads as encoding/json does,
// in a fraction of the time: the load generator observes every message
// it sends.
func (s *Server) observeMarshaled(payload json.RawMessage) {
	var outer eventOuter
	if fastjson.Unmarshal(payload, &outer) == nil {
		s.observeEvent(outer)
	}
}

// eventOuter is what observe reads of a payload.
type eventOuter struct {
	Type  string         `json:"type"`
	Event map[string]any `json:"event"`
}

// observeEvent keeps what the event of a decoded payload says.
func (s *Server) observeEvent(outer eventOuter) {
	if outer.Type != "event_callback" || outer.Event == nil {
		return
	}
	d := outer.Event
	typ, sub, ch := str(d["type"]), str(d["subtype"]), str(d["channel"])
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	switch {
	case typ == "app_mention" || typ == "message" && (sub == "" || sub == "file_share" || sub == "bot_message" || sub == "thread_broadcast"):
		ts := str(d["ts"])
		if ch == "" || ts == "" || s.store.get(ch, ts) != nil {
			return
		}
		s.learnChannelLocked(ch, str(d["channel_type"]))
		m := &Message{
			Channel: ch, TS: ts, ThreadTS: str(d["thread_ts"]), User: str(d["user"]), BotID: str(d["bot_id"]),
			Subtype: sub, Text: str(d["text"]), Posted: now,
		}
		if b, ok := d["blocks"]; ok {
			m.Blocks, _ = json.Marshal(b)
		}
		files, _ := d["files"].([]any)
		for _, f := range files {
			fo, _ := f.(map[string]any)
			if known := s.store.files[str(fo["id"])]; known != nil {
				m.Files = append(m.Files, *known)
			} else {
				m.Files = append(m.Files, File{ID: str(fo["id"]), Name: str(fo["name"]), Title: str(fo["title"]),
					Mimetype: str(fo["mimetype"]), URL: str(fo["url_private"]), User: str(fo["user"])})
			}
		}
		s.store.put(m)
	case typ == "message" && sub == "message_changed":
		cur, _ := d["message"].(map[string]any)
		m := s.store.get(ch, str(cur["ts"]))
		if m == nil || m.Deleted || m.Text == str(cur["text"]) {
			return
		}
		m.Text = str(cur["text"])
		m.Edits++
		m.Edited = now
		m.editTS = str(d["ts"])
	case typ == "message" && sub == "message_deleted":
		if m := s.store.get(ch, str(d["deleted_ts"])); m != nil {
			m.Deleted = true
		}
	default:
		return
	}
	s.notifyLocked()
}

var mentionRE = regexp.MustCompile(`<@([UW][A-Z0-9]+)(?:\|[^>]*)?>|<!(channel|here|everyone)(?:\|[^>]*)?>`)

// richText makes the rich_text block Slack's clients attach to what a
// person types: user mentions and broadcasts become elements of their own.
func richText(text string) []object {
	if text == "" {
		return nil
	}
	var elems []object
	last := 0
	for _, m := range mentionRE.FindAllStringSubmatchIndex(text, -1) {
		if m[0] > last {
			elems = append(elems, object{"type": "text", "text": text[last:m[0]]})
		}
		if m[2] >= 0 {
			elems = append(elems, object{"type": "user", "user_id": text[m[2]:m[3]]})
		} else {
			elems = append(elems, object{"type": "broadcast", "range": text[m[4]:m[5]]})
		}
		last = m[1]
	}
	if last < len(text) {
		elems = append(elems, object{"type": "text", "text": text[last:]})
	}
	return []object{{
		"type": "rich_text", "block_id": randomID("", 5),
		"elements": []object{{"type": "rich_text_section", "elements": elems}},
	}}
}

func str(v any) string {
	s, _ := v.(string)
	return s
}
