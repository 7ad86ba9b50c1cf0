package fakeslack

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Slack's limits on what a message may carry.
const (
	maxTextRunes     = 40_000 // text; over it chat.postMessage answers msg_too_long
	maxMarkdownRunes = 12_000 // all markdown blocks of one message together
	maxSectionRunes  = 3_000  // the text of a section block
	maxHeaderRunes   = 150    // the text of a header block
	maxBlocks        = 50
)

// checkContent applies Slack's limits to the text and blocks of a message.
// It returns the blocks, nil when the request has none or "blocks=[]"
// (which removes an update's blocks).
func checkContent(p url.Values) (json.RawMessage, string) {
	if utf8.RuneCountInString(p.Get("text")) > maxTextRunes {
		return nil, "msg_too_long"
	}
	raw := p.Get("blocks")
	if raw == "" {
		return nil, ""
	}
	var blocks []map[string]any
	if err := json.Unmarshal([]byte(raw), &blocks); err != nil {
		return nil, "invalid_blocks_format"
	}
	if len(blocks) > maxBlocks {
		return nil, "invalid_blocks"
	}
	if blockProblem(blocks) != "" {
		return nil, "invalid_blocks"
	}
	markdown := 0
	for _, b := range blocks {
		if b["type"] == "markdown" {
			t, _ := b["text"].(string)
			markdown += utf8.RuneCountInString(t)
		}
	}
	if markdown > maxMarkdownRunes {
		return nil, "invalid_blocks"
	}
	if len(blocks) == 0 {
		return nil, ""
	}
	return json.RawMessage(raw), ""
}

// Block Kit's limits on what the fake checks.
const (
	maxActionElements = 25   // elements of one actions block
	maxButtonText     = 75   // a button's text
	maxButtonValue    = 2000 // a button's value
	maxIDLen          = 255  // a block_id or an action_id
	maxLabelRunes     = 2000 // an input block's label or hint
	maxOptions        = 100  // options of a static_select
	maxOptionText     = 75   // an option's text
	maxOptionValue    = 150  // an option's value
)

// blockProblem says what is wrong with blocks as Slack would refuse them,
// "" if nothing: an unknown shape, a block_id used twice, an actions block
// with more than 25 elements or two of the same action_id, a button or an
// option over its limits, an input without an element.
func blockProblem(blocks []map[string]any) string {
	ids := map[string]bool{}
	for i, b := range blocks {
		if id := str(b["block_id"]); id != "" {
			if ids[id] || len(id) > maxIDLen {
				return fmt.Sprintf("block %d: block_id %q is used twice or too long", i, id)
			}
			ids[id] = true
		}
		switch b["type"] {
		case "section":
			if utf8.RuneCountInString(textOf(b["text"])) > maxSectionRunes {
				return fmt.Sprintf("block %d: section text over %d characters", i, maxSectionRunes)
			}
		case "header":
			if utf8.RuneCountInString(textOf(b["text"])) > maxHeaderRunes {
				return fmt.Sprintf("block %d: header text over %d characters", i, maxHeaderRunes)
			}
		case "actions":
			elems, _ := b["elements"].([]any)
			if len(elems) == 0 || len(elems) > maxActionElements {
				return fmt.Sprintf("block %d: an actions block has 1 to %d elements, not %d", i, maxActionElements, len(elems))
			}
			actions := map[string]bool{}
			for j, e := range elems {
				eo, _ := e.(map[string]any)
				if p := elementProblem(eo); p != "" {
					return fmt.Sprintf("block %d element %d: %s", i, j, p)
				}
				if id := str(eo["action_id"]); id != "" {
					if actions[id] {
						return fmt.Sprintf("block %d: action_id %q is used twice", i, id)
					}
					actions[id] = true
				}
			}
		case "input":
			label, _ := b["label"].(map[string]any)
			if str(label["type"]) != "plain_text" || textOf(label) == "" || utf8.RuneCountInString(textOf(label)) > maxLabelRunes {
				return fmt.Sprintf("block %d: an input needs a plain_text label of at most %d characters", i, maxLabelRunes)
			}
			if h, ok := b["hint"].(map[string]any); ok && utf8.RuneCountInString(textOf(h)) > maxLabelRunes {
				return fmt.Sprintf("block %d: hint over %d characters", i, maxLabelRunes)
			}
			e, _ := b["element"].(map[string]any)
			if e == nil {
				return fmt.Sprintf("block %d: an input needs an element", i)
			}
			if p := elementProblem(e); p != "" {
				return fmt.Sprintf("block %d: %s", i, p)
			}
		case nil, "":
			return fmt.Sprintf("block %d has no type", i)
		}
	}
	return ""
}

// elementProblem checks an interactive element: a button or a static_select.
func elementProblem(e map[string]any) string {
	if len(str(e["action_id"])) > maxIDLen {
		return "action_id too long"
	}
	switch str(e["type"]) {
	case "":
		return "an element without a type"
	case "button":
		text, _ := e["text"].(map[string]any)
		if str(text["type"]) != "plain_text" || textOf(text) == "" || utf8.RuneCountInString(textOf(text)) > maxButtonText {
			return fmt.Sprintf("a button needs plain_text of 1 to %d characters", maxButtonText)
		}
		if utf8.RuneCountInString(str(e["value"])) > maxButtonValue {
			return fmt.Sprintf("a button's value is at most %d characters", maxButtonValue)
		}
		switch e["style"] {
		case nil, "primary", "danger":
		default:
			return fmt.Sprintf("style %v is neither primary nor danger", e["style"])
		}
	case "static_select":
		opts, _ := e["options"].([]any)
		if len(opts) == 0 || len(opts) > maxOptions {
			return fmt.Sprintf("a static_select has 1 to %d options, not %d", maxOptions, len(opts))
		}
		values := map[string]bool{}
		for _, o := range opts {
			oo, _ := o.(map[string]any)
			text, _ := oo["text"].(map[string]any)
			v := str(oo["value"])
			if textOf(text) == "" || utf8.RuneCountInString(textOf(text)) > maxOptionText || v == "" || len(v) > maxOptionValue {
				return "an option needs text of at most 75 characters and a value of at most 150"
			}
			values[v] = true
		}
		if init, ok := e["initial_option"].(map[string]any); ok && !values[str(init["value"])] {
			return fmt.Sprintf("initial_option %q is not one of the options", str(init["value"]))
		}
	}
	return ""
}

// textOf reads the text of a text object {"type":"mrkdwn","text":"…"}.
func textOf(v any) string {
	o, _ := v.(map[string]any)
	t, _ := o["text"].(string)
	return t
}

func hasContent(p url.Values) bool {
	return p.Get("text") != "" || p.Has("blocks") || p.Get("attachments") != "" || p.Get("file_ids") != ""
}

func (s *Server) postMessageLocked(c *apiCall) (object, string) {
	ch, ok := s.channelLocked(c.p.Get("channel"))
	if !ok {
		return nil, "channel_not_found"
	}
	blocks, code := checkContent(c.p)
	if code != "" {
		return nil, code
	}
	if !hasContent(c.p) {
		return nil, "no_text"
	}
	m := &Message{
		Channel: ch.ID, TS: s.nextTSLocked(), ThreadTS: c.p.Get("thread_ts"),
		User: s.botUserID, BotID: s.botID, Text: c.p.Get("text"), Blocks: blocks, Posted: time.Now(),
	}
	s.store.put(m)
	s.echoLocked(c, func() Event { return s.ownMessageEventLocked(m) })
	return object{"channel": ch.ID, "ts": m.TS, "message": s.wireMessageLocked(m)}, ""
}

// ownMessageLocked finds a message the bot may change: the codes are
// chat.update's and chat.delete's. s.mu must be held.
func (s *Server) ownMessageLocked(p url.Values, notOwn string) (*Message, string) {
	ch, ok := s.channelLocked(p.Get("channel"))
	if !ok {
		return nil, "channel_not_found"
	}
	m := s.store.get(ch.ID, p.Get("ts"))
	if m == nil || m.Deleted {
		return nil, "message_not_found"
	}
	if m.BotID != s.botID {
		return nil, notOwn
	}
	return m, ""
}

func (s *Server) updateLocked(c *apiCall) (object, string) {
	m, code := s.ownMessageLocked(c.p, "cant_update_message")
	if code != "" {
		return nil, code
	}
	blocks, code := checkContent(c.p)
	if code != "" {
		return nil, code
	}
	if !hasContent(c.p) {
		return nil, "no_text"
	}
	before := s.wireMessageLocked(m)
	// Slack keeps what an update leaves out: text without blocks keeps
	// the blocks, and the other way round; "blocks=[]" removes them.
	if c.p.Has("text") {
		m.Text = c.p.Get("text")
	}
	if c.p.Has("blocks") {
		m.Blocks = blocks
	}
	m.Edits++
	m.Edited = time.Now()
	m.editTS = s.nextTSLocked()
	s.echoLocked(c, func() Event { return s.changedEventLocked(m, before) })
	return object{"channel": m.Channel, "ts": m.TS, "text": m.Text, "message": s.wireMessageLocked(m)}, ""
}

func (s *Server) deleteLocked(c *apiCall) (object, string) {
	m, code := s.ownMessageLocked(c.p, "cant_delete_message")
	if code != "" {
		return nil, code
	}
	before := s.wireMessageLocked(m)
	m.Deleted = true
	s.echoLocked(c, func() Event { return s.deletedLocked(m.Channel, m.TS, before) })
	return object{"channel": m.Channel, "ts": m.TS}, ""
}

func (s *Server) postEphemeralLocked(c *apiCall) (object, string) {
	ch, ok := s.channelLocked(c.p.Get("channel"))
	if !ok {
		return nil, "channel_not_found"
	}
	if _, ok := s.users[c.p.Get("user")]; !ok {
		return nil, "user_not_found"
	}
	blocks, code := checkContent(c.p)
	if code != "" {
		return nil, code
	}
	if !hasContent(c.p) {
		return nil, "no_text"
	}
	e := Ephemeral{
		Channel: ch.ID, User: c.p.Get("user"), ThreadTS: c.p.Get("thread_ts"), Text: c.p.Get("text"),
		Blocks: blocks, TS: s.nextTSLocked(), At: time.Now(),
	}
	s.store.ephemerals = append(s.store.ephemerals, e)
	return object{"message_ts": e.TS}, ""
}

// streamLocked serves chat.startStream, chat.appendStream and
// chat.stopStream (slack-go: StartStream, AppendStream, StopStream), which
// send channel, ts (but for start), thread_ts, markdown_text, chunks,
// recipient_team_id and recipient_user_id as form fields.
func (s *Server) streamLocked(method string, c *apiCall) (object, string) {
	if utf8.RuneCountInString(c.p.Get("markdown_text")) > maxMarkdownRunes {
		return nil, "msg_too_long"
	}
	var chunks []json.RawMessage
	if raw := c.p.Get("chunks"); raw != "" {
		if err := json.Unmarshal([]byte(raw), &chunks); err != nil {
			return nil, "invalid_chunks"
		}
	}
	blocks, code := checkContent(url.Values{"blocks": c.p["blocks"]})
	if code != "" {
		return nil, code
	}
	var m *Message
	if method == "chat.startStream" {
		ch, ok := s.channelLocked(c.p.Get("channel"))
		if !ok {
			return nil, "channel_not_found"
		}
		m = &Message{
			Channel: ch.ID, TS: s.nextTSLocked(), ThreadTS: c.p.Get("thread_ts"),
			User: s.botUserID, BotID: s.botID, Streaming: true, Posted: time.Now(),
		}
		s.store.put(m)
	} else {
		if m, code = s.ownMessageLocked(c.p, "message_not_owned_by_app"); code != "" {
			return nil, code
		}
		if !m.Streaming {
			return nil, "message_not_in_streaming_state"
		}
		if method == "chat.appendStream" {
			m.Appends++
		}
	}
	m.Text += c.p.Get("markdown_text")
	for _, raw := range chunks {
		var ch struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if json.Unmarshal(raw, &ch) == nil && ch.Type == "markdown_text" {
			m.Text += ch.Text
		} else {
			m.Chunks = append(m.Chunks, raw)
		}
	}
	if method == "chat.stopStream" {
		m.Streaming = false
		if blocks != nil {
			m.Blocks = blocks
		}
	}
	return object{"channel": m.Channel, "ts": m.TS}, ""
}

func (s *Server) reactLocked(add bool, p url.Values) (object, string) {
	name := strings.Trim(p.Get("name"), ":")
	if name == "" {
		return nil, "invalid_name"
	}
	ch, ok := s.channelLocked(p.Get("channel"))
	if !ok {
		return nil, "channel_not_found"
	}
	m := s.store.get(ch.ID, p.Get("timestamp"))
	if m == nil || m.Deleted {
		return nil, "message_not_found"
	}
	k := msgKey{m.Channel, m.TS}
	i := slices.Index(s.store.reactions[k], name)
	switch {
	case add && i >= 0:
		return nil, "already_reacted"
	case add:
		s.store.reactions[k] = append(s.store.reactions[k], name)
	case i < 0:
		return nil, "no_reaction"
	default:
		s.store.reactions[k] = slices.Delete(s.store.reactions[k], i, i+1)
	}
	return nil, ""
}
