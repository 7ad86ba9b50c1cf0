package fakeslack

import (
	"encoding/json"
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
// It returns the blocks, nil when the request has none.
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
	markdown := 0
	for _, b := range blocks {
		switch b["type"] {
		case "markdown":
			t, _ := b["text"].(string)
			markdown += utf8.RuneCountInString(t)
		case "section":
			if utf8.RuneCountInString(textOf(b["text"])) > maxSectionRunes {
				return nil, "invalid_blocks"
			}
		case "header":
			if utf8.RuneCountInString(textOf(b["text"])) > maxHeaderRunes {
				return nil, "invalid_blocks"
			}
		case nil, "":
			return nil, "invalid_blocks"
		}
	}
	if markdown > maxMarkdownRunes {
		return nil, "invalid_blocks"
	}
	return json.RawMessage(raw), ""
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
