package fakeslack

import (
	"encoding/json"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Message is a message as the fake keeps it: the latest version, with
// edits, stream appends and deletion applied.
type Message struct {
	Channel  string
	TS       string
	ThreadTS string // the thread's parent ts; empty for a message outside threads
	User     string
	BotID    string // set for a message posted by a bot
	Subtype  string // "" for a plain message; file_share, bot_message…
	Text     string
	Blocks   json.RawMessage // the blocks JSON array, nil without blocks
	Files    []File
	// Chunks are the stream chunks other than markdown_text (whose text
	// is in Text) given to chat.startStream, appendStream and stopStream.
	Chunks []json.RawMessage

	Edits     int  // successful chat.update calls on the message
	Appends   int  // successful chat.appendStream calls on the message
	Streaming bool // started with chat.startStream and not stopped yet
	Deleted   bool
	Posted    time.Time
	Edited    time.Time // the last edit, zero if never edited

	editTS string
}

// File is a file: one the bot uploaded (files upload v2), or one a test
// made with AddFile to share in an event.
type File struct {
	ID       string
	Name     string
	Title    string
	Mimetype string
	AltText  string
	Content  []byte
	User     string
	// URL is url_private: a download with the bot token answers Content.
	URL string
	// Where the upload was shared, with its initial comment; empty for a
	// file that was uploaded but not shared.
	Channel  string
	ThreadTS string
	Comment  string
	Shared   time.Time
}

// Status is a call to assistant.threads.setStatus.
type Status struct {
	Channel         string
	ThreadTS        string
	Status          string // empty clears the status
	LoadingMessages []string
	At              time.Time
}

// Ephemeral is a message posted with chat.postEphemeral, in its latest
// version: a response_url of a click on it can replace or delete it.
type Ephemeral struct {
	Channel  string
	User     string
	ThreadTS string
	Text     string
	Blocks   json.RawMessage
	TS       string
	At       time.Time
	Edits    int  // replaced through a response_url
	Deleted  bool // deleted through a response_url
}

// Response is a POST to a response_url of a slash command or interaction.
type Response struct {
	URL  string
	Body json.RawMessage
	At   time.Time
}

type msgKey struct{ channel, ts string }

// store is what the workspace holds. Guarded by Server.mu.
type store struct {
	msgs       map[msgKey]*Message
	byChannel  map[string][]*Message // msgs by channel, so a thread is found without a scan of every message
	reactions  map[msgKey][]string
	statuses   []Status
	ephemerals []Ephemeral
	responses  []Response
	files      map[string]*File // every file by ID: hosted, uploaded or shared
	shared     []string         // IDs of files completed by files.completeUploadExternal, in order
	uploads    map[string]*upload
	views      []*View
	triggers   map[string]*trigger
	targets    map[string]responseTarget // response URL IDs
}

// upload is a file between files.getUploadURLExternal and
// files.completeUploadExternal.
type upload struct {
	name, alt string
	length    int
	content   []byte
	received  bool
}

func (st *store) init() {
	st.msgs = map[msgKey]*Message{}
	st.byChannel = map[string][]*Message{}
	st.reactions = map[msgKey][]string{}
	st.files = map[string]*File{}
	st.uploads = map[string]*upload{}
	st.triggers = map[string]*trigger{}
	st.targets = map[string]responseTarget{}
}

func (st *store) put(m *Message) {
	k := msgKey{m.Channel, m.TS}
	if old := st.msgs[k]; old != nil {
		ms := st.byChannel[m.Channel]
		ms[slices.Index(ms, old)] = m
	} else {
		st.byChannel[m.Channel] = append(st.byChannel[m.Channel], m)
	}
	st.msgs[k] = m
}

func (st *store) get(channel, ts string) *Message { return st.msgs[msgKey{channel, ts}] }

// thread returns the messages of the thread whose parent is ts, parent
// first, in order, deleted ones left out.
func (st *store) thread(channel, ts string) []*Message {
	var out []*Message
	for _, m := range st.byChannel[channel] {
		if !m.Deleted && (m.TS == ts || m.ThreadTS == ts) {
			out = append(out, m)
		}
	}
	slices.SortFunc(out, func(a, b *Message) int { return compareTS(a.TS, b.TS) })
	return out
}

// compareTS orders Slack timestamps numerically ("9.5" before "10.1").
func compareTS(a, b string) int {
	as, af, _ := strings.Cut(a, ".")
	bs, bf, _ := strings.Cut(b, ".")
	ai, _ := strconv.ParseInt(as, 10, 64)
	bi, _ := strconv.ParseInt(bs, 10, 64)
	if ai != bi {
		if ai < bi {
			return -1
		}
		return 1
	}
	af, bf = af+strings.Repeat("0", max(0, len(bf)-len(af))), bf+strings.Repeat("0", max(0, len(af)-len(bf)))
	return strings.Compare(af, bf)
}

func cloneMessage(m *Message) Message {
	c := *m
	c.Files = slices.Clone(m.Files)
	c.Chunks = slices.Clone(m.Chunks)
	return c
}

func cloneMessages(ms []*Message) []Message {
	out := make([]Message, len(ms))
	for i, m := range ms {
		out[i] = cloneMessage(m)
	}
	return out
}

// AddMessage stores a message as if it had been posted before the test,
// without delivering an event: context for conversations.replies. TS is
// given a fresh value if empty, Posted the current time if zero. It
// returns the message as stored.
func (s *Server) AddMessage(m Message) Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m.TS == "" {
		m.TS = s.nextTSLocked()
	}
	if m.Posted.IsZero() {
		m.Posted = time.Now()
	}
	s.learnChannelLocked(m.Channel, "")
	stored := cloneMessage(&m)
	s.store.put(&stored)
	s.notifyLocked()
	return cloneMessage(&stored)
}

// Thread returns the thread whose parent has ts in channel, parent first,
// each message in its latest version; deleted messages are left out. A
// message that started no thread is returned alone.
func (s *Server) Thread(channel, ts string) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return cloneMessages(s.store.thread(channel, ts))
}

// WaitThread waits until the thread has at least n messages and returns
// it; ok is false if timeout passed first (the thread is then what it was).
func (s *Server) WaitThread(channel, ts string, n int, timeout time.Duration) (thread []Message, ok bool) {
	ok = s.WaitFor(timeout, func() bool {
		thread = s.Thread(channel, ts)
		return len(thread) >= n
	})
	return thread, ok
}

// Message returns one message by channel and ts, deleted or not.
func (s *Server) Message(channel, ts string) (Message, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.store.get(channel, ts)
	if m == nil {
		return Message{}, false
	}
	return cloneMessage(m), true
}

// Messages returns every message of channel, thread replies included, in
// order of ts; deleted messages are left out.
func (s *Server) Messages(channel string) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*Message
	for _, m := range s.store.byChannel[channel] {
		if !m.Deleted {
			out = append(out, m)
		}
	}
	slices.SortFunc(out, func(a, b *Message) int { return compareTS(a.TS, b.TS) })
	return cloneMessages(out)
}

// Reactions returns the names of the bot's reactions on a message, in the
// order they were added.
func (s *Server) Reactions(channel, ts string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.store.reactions[msgKey{channel, ts}])
}

// Statuses returns every assistant thread status set, in order.
func (s *Server) Statuses() []Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.store.statuses)
	for i := range out {
		out[i].LoadingMessages = slices.Clone(out[i].LoadingMessages)
	}
	return out
}

// Files returns the files the bot uploaded and completed with
// files.completeUploadExternal, in order.
func (s *Server) Files() []File {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]File, 0, len(s.store.shared))
	for _, id := range s.store.shared {
		f := *s.store.files[id]
		f.Content = slices.Clone(f.Content)
		out = append(out, f)
	}
	return out
}

// Ephemerals returns the messages posted with chat.postEphemeral, in order.
func (s *Server) Ephemerals() []Ephemeral {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.store.ephemerals)
}

// Responses returns what was posted to response URLs, in order.
func (s *Server) Responses() []Response {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.store.responses)
}

// AddFile makes a file hosted by the fake, to share in an event with
// Event.WithFiles. Its URL answers content to a request with the bot
// token, and redirects to a sign-in page otherwise, as Slack does.
func (s *Server) AddFile(name, mimetype string, content []byte) File {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := &File{ID: randomID("F", 10), Name: name, Title: name, Mimetype: mimetype, Content: slices.Clone(content)}
	f.URL = s.fileURL(f)
	s.store.files[f.ID] = f
	return *f
}

func (s *Server) fileURL(f *File) string {
	return s.srv.URL + filesPath + s.teamID + "-" + f.ID + "/" + url.PathEscape(f.Name)
}

// learnChannelLocked registers a channel first seen in an event, so that
// the bot can answer there. s.mu must be held.
func (s *Server) learnChannelLocked(id, typ string) {
	if id == "" {
		return
	}
	if _, ok := s.channels[id]; ok {
		return
	}
	if typ == "" {
		typ = typeFromID(id)
	}
	s.channels[id] = Channel{ID: id, Type: typ}
}
