package faketelegram

import (
	"bytes"
	"encoding/json"
	"maps"
	"mime"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// ChatAction is a sendChatAction call.
type ChatAction struct {
	Chat     int64
	Action   string // typing, upload_document…
	ThreadID int
	At       time.Time
}

// SentDocument is a file the bot sent with sendDocument.
type SentDocument struct {
	Chat      int64
	ThreadID  int
	MessageID int
	File      File // with its content; servable by getFile
	Caption   string
	ParseMode string
	At        time.Time
}

// Draft is a sendMessageDraft call: a partial message streamed to a user.
type Draft struct {
	Chat      int64
	ThreadID  int
	DraftID   int64
	Text      string // as Telegram shows it: markup parsed
	Entities  []MessageEntity
	Source    string // the text as sent
	ParseMode string
	At        time.Time
}

// CallbackAnswer is an answerCallbackQuery call.
type CallbackAnswer struct {
	QueryID   string
	Text      string
	ShowAlert bool
	URL       string
	CacheTime int
	At        time.Time
}

// File is a file the fake serves: one a test added with AddFile (to
// share in a Document or Photo update), or one the bot uploaded.
type File struct {
	FileID       string
	FileUniqueID string
	FilePath     string // what getFile answers; the download is at FileURL(FilePath)
	Name         string
	MimeType     string
	Content      []byte
	// Size is the size Telegram reports; len(Content) when zero. A file
	// larger than its Content stands for a big file without the memory:
	// getFile refuses files over the download limit anyway.
	Size int
}

// store is what the chats hold. Guarded by Server.mu.
type store struct {
	users     map[int64]User
	chats     map[int64]*chatState
	files     map[string]*File // by file_id
	paths     map[string]*File // by file_path
	nextFile  int
	actions   []ChatAction
	documents []SentDocument
	drafts    []Draft
	answers   []CallbackAnswer
	queries   map[string]bool   // callback queries not answered yet
	admins    map[int64][]int64 // chat administrators, the creator first
	nextQuery int
	commands  map[string][]BotCommand // by scope and language
	downloads []string
}

type chatState struct {
	chat   Chat
	nextID int
	msgs   map[int]*Message
}

func (c *chatState) newID() int {
	c.nextID++
	return c.nextID
}

func (st *store) init() {
	st.users = map[int64]User{
		Alice:     {ID: Alice, FirstName: "Alice", LastName: "Admin", Username: "alice", LanguageCode: "en"},
		Bob:       {ID: Bob, FirstName: "Bob", Username: "bob", LanguageCode: "de"},
		HelperBot: {ID: HelperBot, IsBot: true, FirstName: "Helper", Username: "helper_bot"},
	}
	st.chats = map[int64]*chatState{}
	st.addChat(Chat{ID: Group, Type: ChatSupergroup, Title: "Crew"})
	st.addChat(Chat{ID: Forum, Type: ChatSupergroup, Title: "Crew Forum", IsForum: true})
	st.addChat(Chat{ID: Channel, Type: ChatChannel, Title: "Crew News", Username: "crew_news"})
	st.addChat(Chat{ID: BasicGroup, Type: ChatGroup, Title: "Old Crew"})
	st.files = map[string]*File{}
	st.paths = map[string]*File{}
	st.queries = map[string]bool{}
	st.admins = map[int64][]int64{Group: {Alice}, Forum: {Alice}, Channel: {Alice}, BasicGroup: {Alice}}
	st.commands = map[string][]BotCommand{}
}

func (st *store) addChat(c Chat) {
	if cs, ok := st.chats[c.ID]; ok {
		cs.chat = c
		return
	}
	st.chats[c.ID] = &chatState{chat: c, msgs: map[int]*Message{}}
}

// user returns a user, made up if the fake does not know the ID.
func (st *store) user(id int64) User {
	if u, ok := st.users[id]; ok {
		return u
	}
	u := User{ID: id, FirstName: "User " + itoa64(id)}
	st.users[id] = u
	return u
}

// learnChat returns the chat with id, making it if the fake does not know
// it: a private chat for a positive ID (a user's), a supergroup otherwise.
func (st *store) learnChat(id int64) *chatState {
	if cs, ok := st.chats[id]; ok {
		return cs
	}
	if id > 0 {
		u := st.user(id)
		st.addChat(Chat{ID: id, Type: ChatPrivate, FirstName: u.FirstName, LastName: u.LastName, Username: u.Username})
	} else {
		st.addChat(Chat{ID: id, Type: ChatSupergroup, Title: "Chat " + itoa64(id)})
	}
	return st.chats[id]
}

// targetChatLocked is the chat a method's chat_id names, as the bot may
// reach it: a known chat, or the private chat of a known user. s.mu must
// be held.
func (s *Server) targetChatLocked(p url.Values) (*chatState, *apiError) {
	v := strings.TrimSpace(p.Get("chat_id"))
	if v == "" {
		return nil, badRequest("chat_id is empty")
	}
	if name, ok := strings.CutPrefix(v, "@"); ok {
		for _, cs := range s.store.chats {
			if cs.chat.Type != ChatPrivate && strings.EqualFold(cs.chat.Username, name) {
				return cs, nil
			}
		}
		return nil, badRequest("chat not found")
	}
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return nil, badRequest("chat not found")
	}
	if cs, ok := s.store.chats[id]; ok {
		return cs, nil
	}
	if u, ok := s.store.users[id]; ok {
		if u.IsBot {
			return nil, &apiError{code: http.StatusForbidden, desc: "Forbidden: bot can't send messages to bots"}
		}
		return s.store.learnChat(id), nil
	}
	return nil, badRequest("chat not found")
}

// formatted is a text or caption as Telegram keeps it.
type formatted struct {
	text     string
	entities []MessageEntity
	source   string
	mode     string
}

// formatParam parses parameter field (text or caption) with parse_mode,
// or with the entities in entitiesField, and checks it against limit.
func formatParam(p url.Values, field, entitiesField string, limit int, tooLong, empty string) (formatted, *apiError) {
	f := formatted{source: p.Get(field), mode: p.Get("parse_mode")}
	if !utf8.ValidString(f.source) {
		return f, badRequest("text must be encoded in UTF-8")
	}
	switch strings.ToLower(f.mode) {
	case "html":
		text, ents, err := parseHTML(f.source)
		if err != nil {
			return f, badRequest("can't parse entities: %s", err.Error())
		}
		f.text, f.entities = text, ents
	case "markdown", "markdownv2":
		// The fake does not parse Markdown: the text is kept as sent.
		f.text, f.entities = trimText(f.source, nil)
	case "":
		var ents []MessageEntity
		if raw := jsonParam(p, entitiesField); raw != nil {
			if err := json.Unmarshal(raw, &ents); err != nil {
				return f, badRequest("can't parse entities JSON object")
			}
		}
		f.text, f.entities = trimText(f.source, ents)
	default:
		return f, badRequest("unsupported parse_mode")
	}
	if f.text == "" && empty != "" {
		return f, badRequest("%s", empty)
	}
	if utf16Count(f.text) > limit {
		return f, badRequest("%s", tooLong)
	}
	return f, nil
}

// replyTargetLocked is the message a send replies to, from
// reply_parameters or reply_to_message_id. s.mu must be held.
func (s *Server) replyTargetLocked(cs *chatState, p url.Values) (*Message, *apiError) {
	var id int64
	allow := boolParam(p, "allow_sending_without_reply")
	if raw := jsonParam(p, "reply_parameters"); raw != nil {
		var rp struct {
			MessageID                int64 `json:"message_id"`
			AllowSendingWithoutReply bool  `json:"allow_sending_without_reply"`
		}
		if err := json.Unmarshal(raw, &rp); err != nil {
			return nil, badRequest("can't parse reply parameters JSON object")
		}
		id, allow = rp.MessageID, allow || rp.AllowSendingWithoutReply
	} else if n, ok := intParam(p, "reply_to_message_id"); ok {
		id = n
	}
	if id == 0 {
		return nil, nil
	}
	if m := cs.msgs[int(id)]; m != nil && !m.Deleted {
		return m, nil
	}
	if allow {
		return nil, nil
	}
	return nil, badRequest("message to be replied not found")
}

// Limits of an inline keyboard.
const (
	MaxCallbackData    = 64  // bytes of a button's callback_data
	MaxKeyboardButtons = 100 // buttons of one inline keyboard
	MaxCallbackText    = 200 // characters of an answerCallbackQuery text
)

// inlineMarkup is the inline keyboard of reply_markup, normalized, or nil
// when there is none; other keyboards are not kept with a message. It
// checks the keyboard as Telegram does: rows of buttons, each with a text
// and an action, callback_data of 1-64 bytes, at most 100 buttons.
func inlineMarkup(p url.Values) (json.RawMessage, *apiError) {
	raw := jsonParam(p, "reply_markup")
	if raw == nil {
		return nil, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, badRequest("can't parse reply keyboard markup JSON object")
	}
	kbRaw, ok := m["inline_keyboard"]
	if !ok {
		return nil, nil
	}
	var kb [][]map[string]any
	if err := json.Unmarshal(kbRaw, &kb); err != nil {
		return nil, badRequest("can't parse inline keyboard button: Field \"inline_keyboard\" must be an Array of Arrays of Objects")
	}
	n := 0
	for _, row := range kb {
		for _, b := range row {
			n++
			if text, _ := b["text"].(string); text == "" {
				return nil, badRequest("BUTTON_TEXT_INVALID")
			}
			actions := 0
			for k := range b {
				if k != "text" && k != "style" && k != "icon_custom_emoji_id" {
					actions++
				}
			}
			if actions == 0 {
				return nil, badRequest("can't parse inline keyboard button: Text buttons are unallowed in the inline keyboard")
			}
			if v, ok := b["callback_data"]; ok {
				data, isString := v.(string)
				if !isString || data == "" || len(data) > MaxCallbackData {
					return nil, badRequest("BUTTON_DATA_INVALID")
				}
			}
		}
	}
	if n > MaxKeyboardButtons {
		return nil, badRequest("reply markup is too long")
	}
	if n == 0 {
		return nil, nil // an empty keyboard is none
	}
	out, _ := json.Marshal(map[string]any{"inline_keyboard": kb})
	return out, nil
}

func threadParam(p url.Values) int {
	n, _ := intParam(p, "message_thread_id")
	return int(n)
}

// newBotMessageLocked stores a new message of the bot in cs. s.mu must be
// held.
func (s *Server) newBotMessageLocked(cs *chatState, thread int, reply *Message) *Message {
	bot := s.bot
	now := time.Now()
	m := &Message{MessageID: cs.newID(), From: &bot, Date: now.Unix(), Chat: cs.chat, Sent: now}
	if cs.chat.Type == ChatChannel {
		ch := cs.chat
		m.SenderChat = &ch
	}
	if thread > 0 {
		m.MessageThreadID = thread
		m.IsTopicMessage = cs.chat.IsForum
	}
	switch {
	case reply != nil:
		m.ReplyToMessage = reply.quoted()
	case cs.chat.IsForum && thread > 0 && cs.msgs[thread] != nil:
		// In a forum topic, a message that replies to nothing replies to
		// the topic's service message.
		m.ReplyToMessage = cs.msgs[thread].quoted()
	}
	cs.msgs[m.MessageID] = m
	return m
}

func (s *Server) sendMessageLocked(req *request) (any, *apiError) {
	cs, aerr := s.targetChatLocked(req.p)
	if aerr != nil {
		return nil, aerr
	}
	f, aerr := formatParam(req.p, "text", "entities", MaxMessageLength, "message is too long", "message text is empty")
	if aerr != nil {
		return nil, aerr
	}
	reply, aerr := s.replyTargetLocked(cs, req.p)
	if aerr != nil {
		return nil, aerr
	}
	markup, aerr := inlineMarkup(req.p)
	if aerr != nil {
		return nil, aerr
	}
	m := s.newBotMessageLocked(cs, threadParam(req.p), reply)
	m.Text, m.Entities, m.Source, m.ParseMode, m.ReplyMarkup = f.text, f.entities, f.source, f.mode, markup
	return m.clone(), nil
}

// NotModified is Telegram's answer to an edit that changes nothing.
const NotModified = "Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message"

// editableLocked is the bot's message an edit names, or Telegram's error.
func (s *Server) editableLocked(req *request) (*Message, *apiError) {
	if req.p.Get("inline_message_id") != "" {
		return nil, badRequest("MESSAGE_ID_INVALID")
	}
	cs, aerr := s.targetChatLocked(req.p)
	if aerr != nil {
		return nil, aerr
	}
	id, ok := intParam(req.p, "message_id")
	if !ok {
		return nil, badRequest("message identifier is not specified")
	}
	m := cs.msgs[int(id)]
	if m == nil || m.Deleted {
		return nil, badRequest("message to edit not found")
	}
	if !m.FromBot(s.bot.ID) {
		return nil, badRequest("message can't be edited")
	}
	return m, nil
}

func (s *Server) editMessageTextLocked(req *request) (any, *apiError) {
	m, aerr := s.editableLocked(req)
	if aerr != nil {
		return nil, aerr
	}
	if m.Text == "" {
		return nil, badRequest("there is no text in the message to edit")
	}
	f, aerr := formatParam(req.p, "text", "entities", MaxMessageLength, "message is too long", "message text is empty")
	if aerr != nil {
		return nil, aerr
	}
	markup, aerr := inlineMarkup(req.p)
	if aerr != nil {
		return nil, aerr
	}
	if f.text == m.Text && slices.EqualFunc(f.entities, m.Entities, entityEqual) && bytes.Equal(markup, m.ReplyMarkup) {
		return nil, &apiError{code: http.StatusBadRequest, desc: NotModified}
	}
	m.Text, m.Entities, m.Source, m.ParseMode, m.ReplyMarkup = f.text, f.entities, f.source, f.mode, markup
	m.Edits++
	m.EditDate = time.Now().Unix()
	return m.clone(), nil
}

// editMessageReplyMarkupLocked changes a message's inline keyboard, or
// removes it when reply_markup is absent.
func (s *Server) editMessageReplyMarkupLocked(req *request) (any, *apiError) {
	m, aerr := s.editableLocked(req)
	if aerr != nil {
		return nil, aerr
	}
	markup, aerr := inlineMarkup(req.p)
	if aerr != nil {
		return nil, aerr
	}
	if bytes.Equal(markup, m.ReplyMarkup) {
		return nil, &apiError{code: http.StatusBadRequest, desc: NotModified}
	}
	m.ReplyMarkup = markup
	m.EditDate = time.Now().Unix()
	return m.clone(), nil
}

func entityEqual(a, b MessageEntity) bool {
	return a.Type == b.Type && a.Offset == b.Offset && a.Length == b.Length && a.URL == b.URL &&
		a.Language == b.Language && a.CustomEmojiID == b.CustomEmojiID
}

func (s *Server) deleteMessageLocked(req *request) (any, *apiError) {
	cs, aerr := s.targetChatLocked(req.p)
	if aerr != nil {
		return nil, aerr
	}
	id, _ := intParam(req.p, "message_id")
	m := cs.msgs[int(id)]
	if m == nil || m.Deleted {
		return nil, badRequest("message to delete not found")
	}
	m.Deleted = true
	return true, nil
}

var chatActions = map[string]bool{
	"typing": true, "upload_photo": true, "record_video": true, "upload_video": true,
	"record_voice": true, "upload_voice": true, "upload_document": true, "choose_sticker": true,
	"find_location": true, "record_video_note": true, "upload_video_note": true,
}

func (s *Server) sendChatActionLocked(req *request) (any, *apiError) {
	cs, aerr := s.targetChatLocked(req.p)
	if aerr != nil {
		return nil, aerr
	}
	action := req.p.Get("action")
	if !chatActions[action] {
		return nil, badRequest("wrong parameter action in request")
	}
	s.store.actions = append(s.store.actions, ChatAction{Chat: cs.chat.ID, Action: action, ThreadID: threadParam(req.p), At: time.Now()})
	return true, nil
}

func (s *Server) sendMessageDraftLocked(req *request) (any, *apiError) {
	cs, aerr := s.targetChatLocked(req.p)
	if aerr != nil {
		return nil, aerr
	}
	if cs.chat.Type != ChatPrivate {
		return nil, badRequest("message drafts can be sent only to private chats")
	}
	draftID, _ := intParam(req.p, "draft_id")
	if draftID == 0 {
		return nil, badRequest("draft_id must be non-zero")
	}
	// An empty draft shows a "Thinking…" placeholder.
	f, aerr := formatParam(req.p, "text", "entities", MaxMessageLength, "message is too long", "")
	if aerr != nil {
		return nil, aerr
	}
	s.store.drafts = append(s.store.drafts, Draft{
		Chat: cs.chat.ID, ThreadID: threadParam(req.p), DraftID: draftID, Text: f.text,
		Entities: f.entities, Source: f.source, ParseMode: f.mode, At: time.Now(),
	})
	return true, nil
}

func (s *Server) sendDocumentLocked(req *request) (any, *apiError) {
	cs, aerr := s.targetChatLocked(req.p)
	if aerr != nil {
		return nil, aerr
	}
	var f *File
	if up, ok := req.files["document"]; ok {
		if len(up.data) == 0 {
			return nil, badRequest("file must be non-empty")
		}
		mt := up.contentType
		if byExt := mime.TypeByExtension(path.Ext(up.name)); byExt != "" && (mt == "" || mt == "application/octet-stream") {
			mt = byExt
		}
		f = s.addFileLocked(File{Name: up.name, MimeType: mt, Content: up.data}, "documents")
	} else if v := req.p.Get("document"); v != "" {
		switch {
		case s.store.files[v] != nil:
			f = s.store.files[v]
		case strings.HasPrefix(v, "https://") || strings.HasPrefix(v, "http://"):
			// The fake does not fetch URLs; it keeps a file without content.
			f = s.addFileLocked(File{Name: path.Base(v), Size: 1}, "documents")
		default:
			return nil, badRequest("wrong file identifier/HTTP URL specified")
		}
	} else {
		return nil, badRequest("there is no document in the request")
	}
	c, aerr := formatParam(req.p, "caption", "caption_entities", MaxCaptionLength, "message caption is too long", "")
	if aerr != nil {
		return nil, aerr
	}
	reply, aerr := s.replyTargetLocked(cs, req.p)
	if aerr != nil {
		return nil, aerr
	}
	markup, aerr := inlineMarkup(req.p)
	if aerr != nil {
		return nil, aerr
	}
	thread := threadParam(req.p)
	m := s.newBotMessageLocked(cs, thread, reply)
	m.Document = f.document()
	m.Caption, m.CaptionEntities, m.Source, m.ParseMode, m.ReplyMarkup = c.text, c.entities, c.source, c.mode, markup
	s.store.documents = append(s.store.documents, SentDocument{
		Chat: cs.chat.ID, ThreadID: thread, MessageID: m.MessageID, File: f.clone(),
		Caption: c.text, ParseMode: c.mode, At: m.Sent,
	})
	return m.clone(), nil
}

func (f *File) document() *Document {
	return &Document{FileID: f.FileID, FileUniqueID: f.FileUniqueID, FileName: f.Name, MimeType: f.MimeType, FileSize: f.Size}
}

func (f *File) clone() File {
	c := *f
	c.Content = slices.Clone(f.Content)
	return c
}

func (s *Server) getFileLocked(req *request) (any, *apiError) {
	id := req.p.Get("file_id")
	if id == "" {
		return nil, badRequest("file_id is empty")
	}
	f := s.store.files[id]
	if f == nil {
		return nil, badRequest("invalid file_id")
	}
	if f.Size > s.downloadLimit {
		return nil, badRequest("file is too big")
	}
	return map[string]any{"file_id": f.FileID, "file_unique_id": f.FileUniqueID, "file_size": f.Size, "file_path": f.FilePath}, nil
}

// serveFile serves a download, /file/bot<token>/<file_path>.
func (s *Server) serveFile(w http.ResponseWriter, r *http.Request, rest string) {
	token, p, _ := strings.Cut(rest, "/")
	s.mu.Lock()
	f := s.store.paths[p]
	if token != s.token || f == nil {
		s.mu.Unlock()
		// The file server does not tell a wrong token from a wrong path.
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	content := slices.Clone(f.Content)
	mt := f.MimeType
	s.store.downloads = append(s.store.downloads, p)
	s.notifyLocked()
	s.mu.Unlock()
	if mt == "" {
		mt = "application/octet-stream"
	}
	w.Header().Set("Content-Type", mt)
	w.Header().Set("Content-Length", strconv.Itoa(len(content)))
	if r.Method != http.MethodHead {
		_, _ = w.Write(content)
	}
}

var commandRE = regexp.MustCompile(`^[a-z0-9_]{1,32}$`)

func (s *Server) setMyCommandsLocked(req *request) (any, *apiError) {
	var cmds []BotCommand
	if raw := jsonParam(req.p, "commands"); raw != nil {
		if err := json.Unmarshal(raw, &cmds); err != nil {
			return nil, badRequest("can't parse commands JSON object")
		}
	}
	if len(cmds) > 100 {
		return nil, badRequest("too many commands specified")
	}
	for _, c := range cmds {
		if !commandRE.MatchString(c.Command) {
			return nil, badRequest("BOT_COMMAND_INVALID")
		}
		if n := utf8.RuneCountInString(c.Description); n < 1 || n > 256 {
			return nil, badRequest("BOT_COMMAND_DESCRIPTION_INVALID")
		}
	}
	key, aerr := commandsKey(req.p)
	if aerr != nil {
		return nil, aerr
	}
	s.store.commands[key] = cmds
	return true, nil
}

func (s *Server) getMyCommandsLocked(req *request) (any, *apiError) {
	key, aerr := commandsKey(req.p)
	if aerr != nil {
		return nil, aerr
	}
	out := slices.Clone(s.store.commands[key])
	if out == nil {
		out = []BotCommand{}
	}
	return out, nil
}

// commandsKey names the list of commands for a scope and language.
func commandsKey(p url.Values) (string, *apiError) {
	scope := map[string]any{"type": "default"}
	if raw := jsonParam(p, "scope"); raw != nil {
		scope = nil
		if err := json.Unmarshal(raw, &scope); err != nil || scope["type"] == nil {
			return "", badRequest("can't parse BotCommandScope JSON object")
		}
	}
	b, _ := json.Marshal(scope) // map keys are sorted: a stable key
	return string(b) + "/" + p.Get("language_code"), nil
}

func (s *Server) answerCallbackLocked(req *request) (any, *apiError) {
	id := req.p.Get("callback_query_id")
	if !s.store.queries[id] {
		return nil, badRequest("query is too old and response timeout expired or query ID is invalid")
	}
	if utf16Count(req.p.Get("text")) > MaxCallbackText {
		return nil, badRequest("MESSAGE_TOO_LONG")
	}
	delete(s.store.queries, id)
	cacheTime, _ := intParam(req.p, "cache_time")
	s.store.answers = append(s.store.answers, CallbackAnswer{
		QueryID: id, Text: req.p.Get("text"), ShowAlert: boolParam(req.p, "show_alert"),
		URL: req.p.Get("url"), CacheTime: int(cacheTime), At: time.Now(),
	})
	return true, nil
}

// AddFile makes a file the fake serves, to share in a Document or Photo
// update. FileID, FileUniqueID, FilePath and Size are filled in when
// empty. It returns the file as stored.
func (s *Server) AddFile(f File) File {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addFileLocked(f, "documents").clone()
}

func (s *Server) addFileLocked(f File, dir string) *File {
	s.store.nextFile++
	n := s.store.nextFile
	if f.FileID == "" {
		f.FileID = "BQACAgIAAxkBAAI" + strconv.Itoa(100000+n) + "FakeFileId"
	}
	if f.FileUniqueID == "" {
		f.FileUniqueID = "AgAD" + strconv.Itoa(100000+n)
	}
	if f.FilePath == "" {
		f.FilePath = dir + "/file_" + strconv.Itoa(n) + path.Ext(f.Name)
	}
	if f.Size == 0 {
		f.Size = len(f.Content)
	}
	f.Content = slices.Clone(f.Content)
	stored := &f
	s.store.files[f.FileID] = stored
	s.store.paths[f.FilePath] = stored
	return stored
}

// Messages returns the messages of a chat, the bot's and the ones
// builders made, in order, each in its latest version; deleted messages
// are left out.
func (s *Server) Messages(chat int64) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.messagesLocked(chat, func(*Message) bool { return true })
}

// BotMessages returns the messages the bot sent to a chat, in order, each
// in its latest version; deleted messages are left out.
func (s *Server) BotMessages(chat int64) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.messagesLocked(chat, func(m *Message) bool { return m.FromBot(s.bot.ID) })
}

// WaitBotMessages waits until the bot has sent at least n messages to a
// chat and returns them; ok is false if timeout passed first.
func (s *Server) WaitBotMessages(chat int64, n int, timeout time.Duration) (msgs []Message, ok bool) {
	ok = s.WaitFor(timeout, func() bool {
		msgs = s.BotMessages(chat)
		return len(msgs) >= n
	})
	return msgs, ok
}

func (s *Server) messagesLocked(chat int64, keep func(*Message) bool) []Message {
	cs := s.store.chats[chat]
	if cs == nil {
		return nil
	}
	var out []Message
	for _, id := range slices.Sorted(maps.Keys(cs.msgs)) {
		if m := cs.msgs[id]; !m.Deleted && keep(m) {
			out = append(out, *m.clone())
		}
	}
	return out
}

// Message returns one message of a chat, deleted or not.
func (s *Server) Message(chat int64, id int) (Message, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cs := s.store.chats[chat]; cs != nil && cs.msgs[id] != nil {
		return *cs.msgs[id].clone(), true
	}
	return Message{}, false
}

// ChatActions returns the sendChatAction calls that succeeded, in order.
func (s *Server) ChatActions() []ChatAction {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.store.actions)
}

// Documents returns the files the bot sent with sendDocument, in order.
func (s *Server) Documents() []SentDocument {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.store.documents)
	for i := range out {
		out[i].File.Content = slices.Clone(out[i].File.Content)
	}
	return out
}

// Drafts returns the sendMessageDraft calls that succeeded, in order.
func (s *Server) Drafts() []Draft {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.store.drafts)
	for i := range out {
		out[i].Entities = slices.Clone(out[i].Entities)
	}
	return out
}

// CallbackAnswers returns the answerCallbackQuery calls that succeeded,
// in order.
func (s *Server) CallbackAnswers() []CallbackAnswer {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.store.answers)
}

// CallbackAnswer returns the answer the bot gave to the callback query
// with id (an Update's CallbackQuery.ID); ok is false if it gave none.
func (s *Server) CallbackAnswer(queryID string) (a CallbackAnswer, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range s.store.answers {
		if a.QueryID == queryID {
			return a, true
		}
	}
	return CallbackAnswer{}, false
}

// WaitCallbackAnswer waits until the bot answered the callback query with
// id and returns the answer; ok is false if timeout passed first.
func (s *Server) WaitCallbackAnswer(queryID string, timeout time.Duration) (a CallbackAnswer, ok bool) {
	s.WaitFor(timeout, func() bool {
		a, ok = s.CallbackAnswer(queryID)
		return ok
	})
	return a, ok
}

// SetChatAdmins makes users the administrators of a group, supergroup or
// channel, as getChatAdministrators answers them: the first is its
// creator, the others administrators. No users: the chat has none. Alice
// is the creator of the fake's own groups and channel unless set.
func (s *Server) SetChatAdmins(chat int64, users ...int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.store.admins[chat] = slices.Clone(users)
	s.notifyLocked()
}

func (s *Server) getChatAdministratorsLocked(req *request) (any, *apiError) {
	cs, aerr := s.targetChatLocked(req.p)
	if aerr != nil {
		return nil, aerr
	}
	if cs.chat.Type == ChatPrivate {
		return nil, badRequest("there are no administrators in the private chat")
	}
	out := []map[string]any{}
	for i, id := range s.store.admins[cs.chat.ID] {
		m := map[string]any{"user": s.store.user(id), "is_anonymous": false}
		if i == 0 {
			m["status"] = "creator"
		} else {
			m["status"] = "administrator"
			m["can_be_edited"] = false
			m["can_manage_chat"] = true
			m["can_delete_messages"] = true
			m["can_restrict_members"] = true
			m["can_promote_members"] = false
			m["can_change_info"] = true
			m["can_invite_users"] = true
		}
		out = append(out, m)
	}
	return out, nil
}

// Commands returns the bot's commands for the default scope and every
// language, as setMyCommands last set them.
func (s *Server) Commands() []BotCommand {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.store.commands[`{"type":"default"}/`])
}

// Downloads returns the file paths downloaded, in order.
func (s *Server) Downloads() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.store.downloads)
}
