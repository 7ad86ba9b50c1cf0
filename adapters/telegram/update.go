package telegram

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"

	"github.com/firstmate/firstmate/adapters"
	"github.com/firstmate/firstmate/agent"
)

// Platform is the agent.SessionKey platform of Telegram sessions.
const Platform = "telegram"

// The Bot API objects the adapter reads, decoded from the raw update JSON:
// the library's types predate forum topics (message_thread_id,
// is_topic_message), so the adapter keeps its own, small, current ones.
type update struct {
	UpdateID      int64            `json:"update_id"`
	Message       *message         `json:"message,omitempty"`
	EditedMessage *message         `json:"edited_message,omitempty"`
	ChannelPost   *message         `json:"channel_post,omitempty"`
	MyChatMember  *chatMemberEvent `json:"my_chat_member,omitempty"`
	CallbackQuery *callbackQuery   `json:"callback_query,omitempty"`
}

// callbackQuery is a press of an inline keyboard button. Message is the
// message the button is under; Telegram sends it with date 0 and nothing
// but its chat and ID when the message is too old or gone (an
// InaccessibleMessage), and leaves it out for a message sent by inline
// mode (inline_message_id), which this bot never sends.
type callbackQuery struct {
	ID              string   `json:"id"`
	From            user     `json:"from"`
	Message         *message `json:"message,omitempty"`
	InlineMessageID string   `json:"inline_message_id,omitempty"`
	Data            string   `json:"data,omitempty"`
}

type message struct {
	MessageID       int64     `json:"message_id"`
	MessageThreadID int64     `json:"message_thread_id,omitempty"`
	IsTopicMessage  bool      `json:"is_topic_message,omitempty"`
	From            *user     `json:"from,omitempty"`
	SenderChat      *chat     `json:"sender_chat,omitempty"`
	Chat            chat      `json:"chat"`
	Date            int64     `json:"date"`
	Text            string    `json:"text,omitempty"`
	Caption         string    `json:"caption,omitempty"`
	Entities        []entity  `json:"entities,omitempty"`
	CaptionEntities []entity  `json:"caption_entities,omitempty"`
	ReplyToMessage  *message  `json:"reply_to_message,omitempty"`
	Document        *document `json:"document,omitempty"`
	Photo           []photo   `json:"photo,omitempty"`
}

type user struct {
	ID        int64  `json:"id"`
	IsBot     bool   `json:"is_bot"`
	FirstName string `json:"first_name"`
	LastName  string `json:"last_name,omitempty"`
	Username  string `json:"username,omitempty"`
}

type chat struct {
	ID      int64  `json:"id"`
	Type    string `json:"type"` // private, group, supergroup, channel
	Title   string `json:"title,omitempty"`
	IsForum bool   `json:"is_forum,omitempty"`
}

type entity struct {
	Type   string `json:"type"`
	Offset int    `json:"offset"` // UTF-16 code units
	Length int    `json:"length"`
	User   *user  `json:"user,omitempty"`
}

type document struct {
	FileID   string `json:"file_id"`
	FileName string `json:"file_name,omitempty"`
	MimeType string `json:"mime_type,omitempty"`
	FileSize int64  `json:"file_size,omitempty"`
}

type photo struct {
	FileID   string `json:"file_id"`
	Width    int    `json:"width"`
	Height   int    `json:"height"`
	FileSize int64  `json:"file_size,omitempty"`
}

type chatMemberEvent struct {
	Chat          chat `json:"chat"`
	From          user `json:"from"`
	NewChatMember struct {
		Status string `json:"status"`
	} `json:"new_chat_member"`
}

// normalizer decides which messages are for the bot and turns them into
// agent.Inbound.
type normalizer struct {
	me           user // from getMe
	allowBots    bool
	channelPosts bool
}

// inbound returns the message an update carries for the bot, and false
// when there is none: edits (they do not start a second turn), messages
// from bots, channel posts (unless enabled), service messages, and group
// messages that neither mention the bot (by entity), reply to it, address
// a /command to it, nor start with one of its commands without an
// @botname (what a group's command menu sends when the bot is the only
// one there).
func (n *normalizer) inbound(u *update) (agent.Inbound, bool) {
	m := u.Message
	if m == nil && n.channelPosts {
		m = u.ChannelPost
	}
	if m == nil {
		return agent.Inbound{}, false
	}
	if m.From != nil && m.From.IsBot && (!n.allowBots || m.From.ID == n.me.ID) {
		return agent.Inbound{}, false
	}
	text, ents := m.Text, m.Entities
	if text == "" {
		text, ents = m.Caption, m.CaptionEntities
	}
	files := m.files()
	if strings.TrimSpace(text) == "" && len(files) == 0 {
		return agent.Inbound{}, false // joins, pins, topic changes, stickers…
	}
	addressed := m.Chat.Type == "private" || m.Chat.Type == "channel"
	if !addressed {
		addressed = m.ReplyToMessage != nil && m.ReplyToMessage.From != nil && m.ReplyToMessage.From.ID == n.me.ID &&
			// In a forum, every message in a topic "replies" to the
			// topic's first message; that is no reply to the bot.
			!(m.IsTopicMessage && m.ReplyToMessage.MessageID == m.MessageThreadID)
	}
	text, mentioned := n.stripAddress(text, ents)
	addressed = addressed || mentioned || bareCommand(text, ents)
	if !addressed {
		return agent.Inbound{}, false
	}
	in := agent.Inbound{
		Key:       m.key(),
		MessageID: strconv.FormatInt(m.MessageID, 10),
		Text:      strings.TrimSpace(text),
		Files:     files,
		Addressed: true,
		Time:      time.Unix(m.Date, 0).UTC(),
		ReplyTo:   strconv.FormatInt(m.MessageID, 10),
		Private:   m.Chat.Type == "private",
		// message_id grows in a chat: zero-padded, it sorts as a string.
		Seq: fmt.Sprintf("%020d", m.MessageID),
	}
	if !in.Private {
		in.ChatName = m.Chat.Title
	}
	if m.From != nil {
		in.User = agent.User{ID: strconv.FormatInt(m.From.ID, 10), Name: displayName(m.From)}
	} else if m.SenderChat != nil {
		in.User = agent.User{ID: strconv.FormatInt(m.SenderChat.ID, 10), Name: m.SenderChat.Title}
	}
	return in, true
}

// stripAddress removes the bot's @mention (by entity, not by substring:
// "@firstmate_botanist" is someone else) and the @botname of a
// /command@botname, and reports whether either was there.
func (n *normalizer) stripAddress(text string, ents []entity) (string, bool) {
	if n.me.Username == "" || len(ents) == 0 {
		return text, false
	}
	units := utf16.Encode([]rune(text))
	mention := "@" + strings.ToLower(n.me.Username)
	found := false
	// Cut from the end so earlier offsets stay valid.
	for i := len(ents) - 1; i >= 0; i-- {
		e := ents[i]
		if e.Offset < 0 || e.Length <= 0 || e.Offset+e.Length > len(units) {
			continue
		}
		part := strings.ToLower(string(utf16.Decode(units[e.Offset : e.Offset+e.Length])))
		switch {
		case e.Type == "mention" && part == mention,
			e.Type == "text_mention" && e.User != nil && e.User.ID == n.me.ID:
			units = append(units[:e.Offset:e.Offset], units[e.Offset+e.Length:]...)
			found = true
		case e.Type == "bot_command" && strings.HasSuffix(part, mention):
			cut := e.Offset + e.Length - len(utf16.Encode([]rune(mention)))
			units = append(units[:cut:cut], units[e.Offset+e.Length:]...)
			found = true
		}
	}
	return string(utf16.Decode(units)), found
}

// key is the session a message belongs to: its chat and, in a forum, its
// topic. Messages and clicks on the bot's messages are keyed alike.
func (m *message) key() agent.SessionKey {
	key := agent.SessionKey{Platform: Platform, Chat: strconv.FormatInt(m.Chat.ID, 10)}
	if m.IsTopicMessage && m.MessageThreadID != 0 {
		key.Thread = strconv.FormatInt(m.MessageThreadID, 10)
	}
	return key
}

// bareCommand reports whether text starts with one of firstmate's
// commands, marked as a command by Telegram and addressed to no bot in
// particular: "/why shell", not "/start@other_bot".
func bareCommand(text string, ents []entity) bool {
	if len(ents) == 0 || ents[0].Type != "bot_command" || ents[0].Offset != 0 {
		return false
	}
	name, _, _ := strings.Cut(strings.TrimSpace(text), " ")
	if strings.Contains(name, "@") {
		return false
	}
	_, _, ok := agent.ParseCommand(text, nil)
	return ok
}

// files lists the document or the largest photo of a message.
func (m *message) files() []agent.File {
	var out []agent.File
	if d := m.Document; d != nil {
		name := d.FileName
		if name == "" {
			name = "document-" + strconv.FormatInt(m.MessageID, 10)
		}
		out = append(out, agent.File{ID: d.FileID, Name: adapters.SafeFileName(name), MIME: d.MimeType, Size: d.FileSize})
	}
	if len(m.Photo) > 0 {
		best := m.Photo[0]
		for _, p := range m.Photo[1:] {
			if p.Width*p.Height > best.Width*best.Height {
				best = p
			}
		}
		out = append(out, agent.File{ID: best.FileID, Name: "photo-" + strconv.FormatInt(m.MessageID, 10) + ".jpg", MIME: "image/jpeg", Size: best.FileSize})
	}
	return out
}

func displayName(u *user) string {
	name := strings.TrimSpace(u.FirstName + " " + u.LastName)
	if name == "" {
		name = u.Username
	}
	return name
}
