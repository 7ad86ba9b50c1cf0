package faketelegram

import (
	"fmt"
	"strings"
	"time"
	"unicode"
)

// MessageOption changes a message a builder makes.
type MessageOption func(*msgSpec)

type msgSpec struct {
	thread  int
	replyTo int
}

// InTopic puts the message in a forum topic: message_thread_id, and
// is_topic_message in a forum. Unless it replies to something else, it
// replies to the topic's service message, as Telegram sends it.
func InTopic(threadID int) MessageOption { return func(m *msgSpec) { m.thread = threadID } }

// ReplyTo makes the message a reply to the message with id in the same
// chat; reply_to_message is that message as the fake keeps it.
func ReplyTo(messageID int) MessageOption { return func(m *msgSpec) { m.replyTo = messageID } }

// PrivateMessage queues a text message from a user to the bot in their
// private chat (whose ID is the user's).
func (s *Server) PrivateMessage(from int64, text string, opts ...MessageOption) Update {
	return s.userMessage(from, from, text, nil, opts)
}

// GroupMessage queues a text message of a user in a group. Mentions,
// bot commands and URLs in text get their entities, as Telegram makes
// them.
func (s *Server) GroupMessage(chat, from int64, text string, opts ...MessageOption) Update {
	return s.userMessage(chat, from, text, nil, opts)
}

// Mention queues a group message that mentions the bot by entity:
// "@botname " is put before text unless text mentions the bot already.
func (s *Server) Mention(chat, from int64, text string, opts ...MessageOption) Update {
	at := "@" + s.bot.Username
	if !strings.Contains(strings.ToLower(text), strings.ToLower(at)) {
		text = at + " " + text
	}
	return s.userMessage(chat, from, text, nil, opts)
}

// Reply queues a message of a user replying to the message with id to
// (one the bot sent, usually) in a chat.
func (s *Server) Reply(chat, from int64, to int, text string, opts ...MessageOption) Update {
	return s.userMessage(chat, from, text, nil, append(opts, ReplyTo(to)))
}

// Command queues "/command@botname args" from a user in a chat, with its
// bot_command entity.
func (s *Server) Command(chat, from int64, command, args string, opts ...MessageOption) Update {
	text := "/" + strings.TrimPrefix(command, "/") + "@" + s.bot.Username
	if args != "" {
		text += " " + args
	}
	return s.userMessage(chat, from, text, nil, opts)
}

// TopicMessage queues a message of a user in a forum topic. A topic the
// fake does not know gets its service message (not queued); CreateTopic
// makes one the bot is told about.
func (s *Server) TopicMessage(chat int64, thread int, from int64, text string, opts ...MessageOption) Update {
	return s.userMessage(chat, from, text, nil, append(opts, InTopic(thread)))
}

// CreateTopic queues the service message of a user creating a forum
// topic. Its message_id is the topic's message_thread_id.
func (s *Server) CreateTopic(chat, from int64, name string) Update {
	s.mu.Lock()
	defer s.mu.Unlock()
	cs := s.store.learnChat(chat)
	m := s.userMessageLocked(cs, from)
	m.MessageThreadID, m.IsTopicMessage = m.MessageID, true
	m.ForumTopicCreated = &ForumTopicCreated{Name: name, IconColor: 7322096}
	cs.msgs[m.MessageID] = m
	return s.enqueueLocked(Update{Message: m.clone()})
}

// BotMessage queues a message another bot sent to a chat; a bot must
// ignore it. from is made a bot if the fake does not know it; a known
// user must be a bot.
func (s *Server) BotMessage(chat, from int64, text string, opts ...MessageOption) Update {
	s.mu.Lock()
	u, ok := s.store.users[from]
	switch {
	case !ok:
		s.store.users[from] = User{ID: from, IsBot: true, FirstName: "Bot " + itoa64(from), Username: "bot" + itoa64(from) + "_bot"}
	case !u.IsBot:
		s.mu.Unlock()
		panic(fmt.Sprintf("faketelegram: BotMessage from %d, who is not a bot", from))
	}
	s.mu.Unlock()
	return s.userMessage(chat, from, text, nil, opts)
}

// Document queues a message of a user sharing a file (made with AddFile,
// or added now if f has no FileID) with a caption. The bot can download
// it with getFile.
func (s *Server) Document(chat, from int64, f File, caption string, opts ...MessageOption) Update {
	return s.userMessage(chat, from, "", func(m *Message) {
		stored := s.knownFileLocked(f, "documents")
		m.Document = stored.document()
		m.Caption, m.CaptionEntities = caption, detectEntities(caption)
	}, opts)
}

// Photo queues a message of a user sharing a photo with a caption: two
// sizes, a thumbnail and f, largest last as Telegram sends them, each
// downloadable with getFile.
func (s *Server) Photo(chat, from int64, f File, caption string, opts ...MessageOption) Update {
	return s.userMessage(chat, from, "", func(m *Message) {
		full := s.knownFileLocked(f, "photos")
		thumb := s.addFileLocked(File{Name: "thumb.jpg", MimeType: "image/jpeg", Content: full.Content}, "photos")
		m.Photo = []PhotoSize{
			{FileID: thumb.FileID, FileUniqueID: thumb.FileUniqueID, Width: 90, Height: 68, FileSize: thumb.Size},
			{FileID: full.FileID, FileUniqueID: full.FileUniqueID, Width: 1280, Height: 960, FileSize: full.Size},
		}
		m.Caption, m.CaptionEntities = caption, detectEntities(caption)
	}, opts)
}

// knownFileLocked is the stored file f stands for, added if new. s.mu
// must be held.
func (s *Server) knownFileLocked(f File, dir string) *File {
	if stored := s.store.files[f.FileID]; f.FileID != "" && stored != nil {
		return stored
	}
	return s.addFileLocked(f, dir)
}

// EditMessage queues the edited_message update of a user editing their
// message with id in a chat to text (edited_channel_post in a channel).
// The message must be one a builder made.
func (s *Server) EditMessage(chat int64, id int, text string) Update {
	s.mu.Lock()
	defer s.mu.Unlock()
	cs := s.store.learnChat(chat)
	m := cs.msgs[id]
	if m == nil {
		panic(fmt.Sprintf("faketelegram: EditMessage of unknown message %d in chat %d", id, chat))
	}
	m.Text, m.Entities = text, detectEntities(text)
	m.EditDate = time.Now().Unix()
	m.Edits++
	if cs.chat.Type == ChatChannel {
		return s.enqueueLocked(Update{EditedChannelPost: m.clone()})
	}
	return s.enqueueLocked(Update{EditedMessage: m.clone()})
}

// ChannelPost queues a post in a channel the bot administers: no from,
// sender_chat the channel.
func (s *Server) ChannelPost(chat int64, text string) Update {
	s.mu.Lock()
	defer s.mu.Unlock()
	cs := s.store.learnChat(chat)
	now := time.Now()
	ch := cs.chat
	m := &Message{MessageID: cs.newID(), SenderChat: &ch, Date: now.Unix(), Chat: cs.chat, Sent: now,
		Text: text, Entities: detectEntities(text)}
	cs.msgs[m.MessageID] = m
	return s.enqueueLocked(Update{ChannelPost: m.clone()})
}

// MyChatMember queues the update of the bot's status in a chat changing
// from oldStatus to newStatus (member, administrator, left, kicked…) by
// the user from: added to a group, removed, or, in a private chat,
// blocked (kicked) and unblocked (member).
func (s *Server) MyChatMember(chat, from int64, oldStatus, newStatus string) Update {
	s.mu.Lock()
	defer s.mu.Unlock()
	cs := s.store.learnChat(chat)
	return s.enqueueLocked(Update{MyChatMember: &ChatMemberUpdated{
		Chat: cs.chat, From: s.store.user(from), Date: time.Now().Unix(),
		OldChatMember: ChatMember{Status: oldStatus, User: s.bot},
		NewChatMember: ChatMember{Status: newStatus, User: s.bot},
	}})
}

// CallbackQuery queues a user's press of an inline keyboard button with
// data, on the message with id (one the bot sent with reply_markup) in a
// chat, through getUpdates or the webhook, whichever the bot uses. The
// message comes as the fake keeps it (a topic's message with its
// message_thread_id); a message the fake does not know or that was
// deleted comes as an InaccessibleMessage (chat, message_id, date 0), as
// Telegram sends the button of a message too old to show. The bot answers
// the query with answerCallbackQuery (see [Server.WaitCallbackAnswer]),
// once.
func (s *Server) CallbackQuery(chat, from int64, messageID int, data string) Update {
	s.mu.Lock()
	defer s.mu.Unlock()
	cs := s.store.learnChat(chat)
	q := s.newQueryLocked(from, data)
	if m := cs.msgs[messageID]; m != nil && !m.Deleted {
		q.Message = m.clone()
	} else {
		q.Message = &Message{MessageID: messageID, Chat: cs.chat}
	}
	q.ChatInstance = fmt.Sprint(4000000000000000000 + chat)
	return s.enqueueLocked(Update{CallbackQuery: q})
}

// InlineCallbackQuery queues a press of a button with data under a
// message sent in inline mode: no message, an inline_message_id.
func (s *Server) InlineCallbackQuery(from int64, inlineMessageID, data string) Update {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.newQueryLocked(from, data)
	q.InlineMessageID = inlineMessageID
	q.ChatInstance = fmt.Sprint(5000000000000000000 + from)
	return s.enqueueLocked(Update{CallbackQuery: q})
}

// newQueryLocked is a new callback query of user from, which the bot may
// answer. s.mu must be held.
func (s *Server) newQueryLocked(from int64, data string) *CallbackQuery {
	s.store.nextQuery++
	q := &CallbackQuery{ID: fmt.Sprintf("%d%06d", from, s.store.nextQuery), From: s.store.user(from), Data: data}
	s.store.queries[q.ID] = true
	return q
}

// PressButton queues a user's press of the button labelled text (or
// whose label starts with text, see [Message.Button]) under the bot's
// message with id in a chat, with the button's callback_data, as
// [Server.CallbackQuery] does. It fails if the message is unknown, deleted
// or has no such button that sends a callback.
func (s *Server) PressButton(chat, from int64, messageID int, text string) (Update, error) {
	m, ok := s.Message(chat, messageID)
	if !ok || m.Deleted {
		return Update{}, fmt.Errorf("faketelegram: no message %d in chat %d", messageID, chat)
	}
	b, ok := m.Button(text)
	if !ok || b.CallbackData == "" {
		return Update{}, fmt.Errorf("faketelegram: message %d in chat %d has no button %q with callback data (keyboard %s)", messageID, chat, text, m.ReplyMarkup)
	}
	return s.CallbackQuery(chat, from, messageID, b.CallbackData), nil
}

// userMessage stores and queues a message of user from in chat.
func (s *Server) userMessage(chat, from int64, text string, fill func(*Message), opts []MessageOption) Update {
	var spec msgSpec
	for _, o := range opts {
		o(&spec)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cs := s.store.learnChat(chat)
	m := s.userMessageLocked(cs, from)
	m.Text, m.Entities = text, detectEntities(text)
	if fill != nil {
		fill(m)
	}
	var topic *Message
	if spec.thread > 0 {
		m.MessageThreadID = spec.thread
		if cs.chat.IsForum {
			m.IsTopicMessage = true
			topic = s.topicLocked(cs, spec.thread, from)
		}
	}
	switch {
	case spec.replyTo > 0:
		target := cs.msgs[spec.replyTo]
		if target == nil {
			target = &Message{MessageID: spec.replyTo, Chat: cs.chat, Date: m.Date}
		}
		m.ReplyToMessage = target.quoted()
	case topic != nil:
		m.ReplyToMessage = topic.quoted()
	}
	cs.msgs[m.MessageID] = m
	return s.enqueueLocked(Update{Message: m.clone()})
}

// userMessageLocked is a new message of user from in cs, not stored yet.
func (s *Server) userMessageLocked(cs *chatState, from int64) *Message {
	u := s.store.user(from)
	now := time.Now()
	return &Message{MessageID: cs.newID(), From: &u, Date: now.Unix(), Chat: cs.chat, Sent: now}
}

// topicLocked is the service message that created topic thread in cs,
// made up if the fake does not know it. s.mu must be held.
func (s *Server) topicLocked(cs *chatState, thread int, creator int64) *Message {
	if m := cs.msgs[thread]; m != nil {
		return m
	}
	u := s.store.user(creator)
	m := &Message{
		MessageID: thread, MessageThreadID: thread, IsTopicMessage: true, From: &u,
		Date: time.Now().Unix(), Chat: cs.chat,
		ForumTopicCreated: &ForumTopicCreated{Name: fmt.Sprintf("Topic %d", thread), IconColor: 7322096},
	}
	cs.msgs[thread] = m
	cs.nextID = max(cs.nextID, thread)
	return m
}

// detectEntities finds the entities Telegram marks in a plain text:
// bot commands (/start, /start@bot), mentions (@username) and URLs, with
// offsets and lengths in UTF-16 code units.
func detectEntities(text string) []MessageEntity {
	rs := []rune(text)
	offs := make([]int, len(rs)+1) // UTF-16 offset of each rune
	for i, r := range rs {
		offs[i+1] = offs[i] + utf16Len(r)
	}
	word := func(r rune) bool {
		return r == '_' || r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r))
	}
	run := func(i int) int { // end of the run of word runes from i
		for i < len(rs) && word(rs[i]) {
			i++
		}
		return i
	}
	var ents []MessageEntity
	add := func(typ string, from, to int) {
		ents = append(ents, MessageEntity{Type: typ, Offset: offs[from], Length: offs[to] - offs[from]})
	}
	for i := 0; i < len(rs); {
		atStart := i == 0 || unicode.IsSpace(rs[i-1])
		switch {
		case rs[i] == '/' && atStart && run(i+1) > i+1 && run(i+1)-(i+1) <= 64:
			end := run(i + 1)
			if end < len(rs) && rs[end] == '@' && run(end+1)-(end+1) >= 3 {
				end = run(end + 1)
			}
			add("bot_command", i, end)
			i = end
		case rs[i] == '@' && (i == 0 || !word(rs[i-1])) && run(i+1)-(i+1) >= 5 && run(i+1)-(i+1) <= 32:
			end := run(i + 1)
			add("mention", i, end)
			i = end
		case atStart && (hasPrefixRunes(rs[i:], "https://") || hasPrefixRunes(rs[i:], "http://")):
			end := i
			for end < len(rs) && !unicode.IsSpace(rs[end]) {
				end++
			}
			for end > i && strings.ContainsRune(".,;:!?)", rs[end-1]) {
				end--
			}
			add("url", i, end)
			i = end
		default:
			i++
		}
	}
	return ents
}

func hasPrefixRunes(rs []rune, prefix string) bool {
	p := []rune(prefix)
	return len(rs) > len(p) && string(rs[:len(p)]) == prefix
}
