package faketelegram

import (
	"encoding/json"
	"slices"
	"strings"
	"time"
)

// The Bot API objects the fake sends and keeps, with the JSON names of
// Bot API 9.x. They are the fake's own rather than tgbotapi's because
// tgbotapi v5.5.1 lacks newer fields a bot needs (message_thread_id,
// is_topic_message, forum_topic_created).

// User is a Telegram user or bot.
type User struct {
	ID           int64  `json:"id"`
	IsBot        bool   `json:"is_bot"`
	FirstName    string `json:"first_name"`
	LastName     string `json:"last_name,omitempty"`
	Username     string `json:"username,omitempty"`
	LanguageCode string `json:"language_code,omitempty"`
}

// Chat types, as Chat.Type names them.
const (
	ChatPrivate    = "private"
	ChatGroup      = "group"
	ChatSupergroup = "supergroup"
	ChatChannel    = "channel"
)

// Chat is a conversation: a private chat with a user (whose ID is the
// user's), a group, a supergroup (a forum when IsForum) or a channel.
type Chat struct {
	ID        int64  `json:"id"`
	Type      string `json:"type"`
	Title     string `json:"title,omitempty"`
	Username  string `json:"username,omitempty"`
	FirstName string `json:"first_name,omitempty"`
	LastName  string `json:"last_name,omitempty"`
	IsForum   bool   `json:"is_forum,omitempty"`
}

// MessageEntity is a special part of a message's text. Offset and Length
// are in UTF-16 code units, as Telegram counts them.
type MessageEntity struct {
	Type          string `json:"type"`
	Offset        int    `json:"offset"`
	Length        int    `json:"length"`
	URL           string `json:"url,omitempty"`
	User          *User  `json:"user,omitempty"`
	Language      string `json:"language,omitempty"`
	CustomEmojiID string `json:"custom_emoji_id,omitempty"`
}

// Document is a general file attached to a message.
type Document struct {
	FileID       string `json:"file_id"`
	FileUniqueID string `json:"file_unique_id"`
	FileName     string `json:"file_name,omitempty"`
	MimeType     string `json:"mime_type,omitempty"`
	FileSize     int    `json:"file_size,omitempty"`
}

// PhotoSize is one size of a photo.
type PhotoSize struct {
	FileID       string `json:"file_id"`
	FileUniqueID string `json:"file_unique_id"`
	Width        int    `json:"width"`
	Height       int    `json:"height"`
	FileSize     int    `json:"file_size,omitempty"`
}

// ForumTopicCreated is the service message that starts a forum topic;
// its message_id is the topic's message_thread_id.
type ForumTopicCreated struct {
	Name      string `json:"name"`
	IconColor int    `json:"icon_color"`
}

// Message is a message as the Bot API sends it, and as the fake keeps it:
// the latest version, with edits applied. The fields tagged json:"-" are
// what the fake records besides the wire fields.
type Message struct {
	MessageID         int                `json:"message_id"`
	MessageThreadID   int                `json:"message_thread_id,omitempty"`
	From              *User              `json:"from,omitempty"`
	SenderChat        *Chat              `json:"sender_chat,omitempty"`
	Date              int64              `json:"date"`
	Chat              Chat               `json:"chat"`
	IsTopicMessage    bool               `json:"is_topic_message,omitempty"`
	ReplyToMessage    *Message           `json:"reply_to_message,omitempty"`
	EditDate          int64              `json:"edit_date,omitempty"`
	Text              string             `json:"text,omitempty"`
	Entities          []MessageEntity    `json:"entities,omitempty"`
	Document          *Document          `json:"document,omitempty"`
	Photo             []PhotoSize        `json:"photo,omitempty"`
	Caption           string             `json:"caption,omitempty"`
	CaptionEntities   []MessageEntity    `json:"caption_entities,omitempty"`
	ForumTopicCreated *ForumTopicCreated `json:"forum_topic_created,omitempty"`
	// ReplyMarkup is the inline keyboard of the message; other keyboards
	// are not part of a message.
	ReplyMarkup json.RawMessage `json:"reply_markup,omitempty"`

	// Source is the text (or caption) as the bot sent it, markup included;
	// Text is what Telegram made of it.
	Source    string `json:"-"`
	ParseMode string `json:"-"`
	// Edits counts the successful editMessageText calls on the message.
	Edits   int       `json:"-"`
	Deleted bool      `json:"-"`
	Sent    time.Time `json:"-"`
}

// FromBot reports whether the message was sent by the bot with id.
func (m Message) FromBot(id int64) bool { return m.From != nil && m.From.ID == id }

func (m *Message) clone() *Message {
	if m == nil {
		return nil
	}
	c := *m
	c.Entities = slices.Clone(m.Entities)
	c.CaptionEntities = slices.Clone(m.CaptionEntities)
	c.Photo = slices.Clone(m.Photo)
	c.ReplyMarkup = slices.Clone(m.ReplyMarkup)
	if m.From != nil {
		u := *m.From
		c.From = &u
	}
	if m.SenderChat != nil {
		ch := *m.SenderChat
		c.SenderChat = &ch
	}
	if m.Document != nil {
		d := *m.Document
		c.Document = &d
	}
	if m.ForumTopicCreated != nil {
		f := *m.ForumTopicCreated
		c.ForumTopicCreated = &f
	}
	c.ReplyToMessage = m.ReplyToMessage.clone()
	return &c
}

// quoted is m as Telegram puts it in reply_to_message: without its own
// reply_to_message.
func (m *Message) quoted() *Message {
	c := m.clone()
	c.ReplyToMessage = nil
	return c
}

// ChatMember is a user's status in a chat: creator, administrator,
// member, restricted, left or kicked.
type ChatMember struct {
	Status string `json:"status"`
	User   User   `json:"user"`
}

// ChatMemberUpdated is a change of a member's status.
type ChatMemberUpdated struct {
	Chat          Chat       `json:"chat"`
	From          User       `json:"from"`
	Date          int64      `json:"date"`
	OldChatMember ChatMember `json:"old_chat_member"`
	NewChatMember ChatMember `json:"new_chat_member"`
}

// CallbackQuery is a press of an inline keyboard button. Message is the
// message the button is under; when that message is too old or gone it is
// an InaccessibleMessage, as Telegram sends it: chat and message_id, date
// 0, nothing else. A button of a message sent in inline mode has
// InlineMessageID instead of Message.
type CallbackQuery struct {
	ID              string   `json:"id"`
	From            User     `json:"from"`
	Message         *Message `json:"message,omitempty"`
	InlineMessageID string   `json:"inline_message_id,omitempty"`
	ChatInstance    string   `json:"chat_instance"`
	Data            string   `json:"data,omitempty"`
}

// InlineKeyboardButton is one button of an inline keyboard, as a message
// keeps it in reply_markup.
type InlineKeyboardButton struct {
	Text         string `json:"text"`
	CallbackData string `json:"callback_data,omitempty"`
	URL          string `json:"url,omitempty"`
	Style        string `json:"style,omitempty"` // danger, success, primary
}

// Keyboard is the message's inline keyboard, row by row; nil when it has
// none.
func (m Message) Keyboard() [][]InlineKeyboardButton {
	if len(m.ReplyMarkup) == 0 {
		return nil
	}
	var kb struct {
		InlineKeyboard [][]InlineKeyboardButton `json:"inline_keyboard"`
	}
	if json.Unmarshal(m.ReplyMarkup, &kb) != nil {
		return nil
	}
	return kb.InlineKeyboard
}

// Button is the message's inline keyboard button labelled text, or
// failing that the first whose label starts with text ("exec" finds
// "exec: ask"); ok is false when there is none.
func (m Message) Button(text string) (b InlineKeyboardButton, ok bool) {
	var prefixed *InlineKeyboardButton
	for _, row := range m.Keyboard() {
		for _, b := range row {
			if b.Text == text {
				return b, true
			}
			if prefixed == nil && strings.HasPrefix(b.Text, text) {
				prefixed = &b
			}
		}
	}
	if prefixed != nil {
		return *prefixed, true
	}
	return InlineKeyboardButton{}, false
}

// Update is one incoming update. Exactly one of the optional fields is set.
type Update struct {
	UpdateID          int                `json:"update_id"`
	Message           *Message           `json:"message,omitempty"`
	EditedMessage     *Message           `json:"edited_message,omitempty"`
	ChannelPost       *Message           `json:"channel_post,omitempty"`
	EditedChannelPost *Message           `json:"edited_channel_post,omitempty"`
	CallbackQuery     *CallbackQuery     `json:"callback_query,omitempty"`
	MyChatMember      *ChatMemberUpdated `json:"my_chat_member,omitempty"`
	ChatMember        *ChatMemberUpdated `json:"chat_member,omitempty"`
}

// Type is the update's type as allowed_updates names it: message,
// edited_message, channel_post, callback_query, my_chat_member…
func (u Update) Type() string {
	switch {
	case u.Message != nil:
		return "message"
	case u.EditedMessage != nil:
		return "edited_message"
	case u.ChannelPost != nil:
		return "channel_post"
	case u.EditedChannelPost != nil:
		return "edited_channel_post"
	case u.CallbackQuery != nil:
		return "callback_query"
	case u.MyChatMember != nil:
		return "my_chat_member"
	case u.ChatMember != nil:
		return "chat_member"
	}
	return ""
}

func (u Update) clone() Update {
	c := u
	c.Message = u.Message.clone()
	c.EditedMessage = u.EditedMessage.clone()
	c.ChannelPost = u.ChannelPost.clone()
	c.EditedChannelPost = u.EditedChannelPost.clone()
	if u.CallbackQuery != nil {
		q := *u.CallbackQuery
		q.Message = u.CallbackQuery.Message.clone()
		c.CallbackQuery = &q
	}
	if u.MyChatMember != nil {
		m := *u.MyChatMember
		c.MyChatMember = &m
	}
	if u.ChatMember != nil {
		m := *u.ChatMember
		c.ChatMember = &m
	}
	return c
}

// BotCommand is one command of setMyCommands.
type BotCommand struct {
	Command     string `json:"command"`
	Description string `json:"description"`
}
