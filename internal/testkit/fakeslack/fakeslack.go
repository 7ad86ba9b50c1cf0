// Package fakeslack is a fake Slack for tests: the Web API, Socket Mode and
// signed Events API delivery, spoken over the wire so that the real
// github.com/slack-go/slack client, and so firstmate's Slack adapter, can be
// tested without Slack.
//
// The Web API answers the methods a bot uses (auth.test, chat.postMessage,
// chat.update, chat.postEphemeral, chat.delete, chat.startStream,
// chat.appendStream, chat.stopStream, reactions.add and .remove,
// conversations.replies and .info, users.info, assistant.threads.setStatus,
// files upload v2, views.open and apps.connections.open) with Slack's
// error codes and limits (msg_too_long over 40,000 characters of text,
// invalid_blocks over 12,000 characters of markdown blocks or for a
// malformed actions block, invalid_arguments for a malformed modal). Any other method answers
// unknown_method. Every call is recorded; messages are kept with edits
// applied, so a test reads a thread as a person would see it. Faults can be
// scripted per method: a storm of HTTP 429 with Retry-After, or error answers.
//
// The Socket Mode endpoint sends hello and WebSocket pings, delivers
// envelopes (events_api, slash_commands, interactive), records the acks, and
// re-sends an envelope that is not acked in time with retry_attempt+1, as
// Slack does. A re-sent envelope has a new envelope_id and the same
// event_id, so a client must deduplicate on event_id. Connections can be dropped abruptly or asked to refresh with a
// disconnect message. DeliverHTTP sends the same events to an HTTP endpoint,
// signed with a signing secret as Slack signs them.
//
// Events sent to the bot are also stored as messages (a mention is in its
// thread when conversations.replies is called, as in Slack), and builders
// make realistic payloads: [Server.Mention], [Server.UserMessage],
// [Server.DirectMessage], [Server.BotMessage], [Server.MessageChanged],
// [Server.MessageDeleted], [Event.WithFiles].
//
// Interactivity: buttons in a message's actions blocks are read with
// [Message.Buttons]; [Server.Click] builds the block_actions payload of a
// person clicking one, [Server.SubmitView] the view_submission of a modal
// the app opened with views.open ([Server.Views]). Deliver them with
// [Server.SendInteractive] (Socket Mode; the ack's payload is the app's
// answer) or [Server.DeliverHTTP] (signed, form-encoded). A response_url
// given with a click replaces or deletes the clicked message, ephemeral or
// not, as Slack's does.
//
// A test:
//
//	srv := fakeslack.New(t)
//	api := slack.New(srv.BotToken(), slack.OptionAPIURL(srv.APIURL()),
//		slack.OptionAppLevelToken(srv.AppToken()))
//	… run the bot on api with socketmode …
//	ev := srv.Mention(fakeslack.General, fakeslack.Alice, "what's up?")
//	id := srv.SendEvent(ev)
//	if _, ok := srv.WaitAck(id, 5*time.Second); !ok { t.Fatal("no ack") }
//	thread, ok := srv.WaitThread(fakeslack.General, ev.TS(), 2, 5*time.Second)
package fakeslack

import (
	"crypto/rand"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/firstmate/firstmate/internal/changes"
	"github.com/firstmate/firstmate/internal/testkit"
)

// The workspace every fake starts with. Options add to it.
const (
	DefaultTeamID    = "T0FAKE"
	DefaultBotUserID = "U0BOT"
	DefaultBotID     = "B0BOT"
	DefaultAppID     = "A0FAKE"
	DefaultBotToken  = "xoxb-fake-bot-token"
	DefaultAppToken  = "xapp-1-fake-app-token"

	// General is a public channel, #general.
	General = "C0GENERAL"
	// Alice is a workspace admin.
	Alice = "U0ALICE"
	// Bob is a member who is not an admin.
	Bob = "U0BOB"
)

// TB is the kits' one [testkit.TB].
type TB = testkit.TB

// User is a member of the fake workspace, or of another organisation's
// workspace in a shared channel (Slack Connect) when TeamID is another.
type User struct {
	ID             string
	Name           string // the handle, "alice"
	RealName       string
	IsAdmin        bool
	IsOwner        bool
	IsPrimaryOwner bool
	IsBot          bool
	BotID          string // for a bot user, its B… ID
	// IsRestricted is a multi-channel guest; IsUltraRestricted (with it,
	// as Slack sends them) a single-channel guest.
	IsRestricted      bool
	IsUltraRestricted bool
	// TeamID is the user's workspace; empty means the fake's own. A user
	// of another team writes with user_team and source_team set, as in a
	// Slack Connect channel, and users.info answers their team_id.
	TeamID string
}

// Channel types, as the channel_type field of message events names them.
const (
	ChannelPublic  = "channel"
	ChannelPrivate = "group"
	ChannelIM      = "im"
	ChannelMPIM    = "mpim"
)

// Channel is a conversation of the fake workspace.
type Channel struct {
	ID   string
	Name string // empty for a DM
	// Type is one of the Channel* constants. Left empty, it follows the
	// ID: D… is a DM, G… a private channel, anything else public.
	Type string
	// User is the other member of a DM.
	User string
}

// Server is a running fake Slack. It is safe for concurrent use.
type Server struct {
	srv      *httptest.Server
	done     chan struct{}
	once     sync.Once
	wg       sync.WaitGroup // socket handlers, pingers and retry timers
	client   *http.Client   // for DeliverHTTP
	upgrader websocket.Upgrader
	logger   *slog.Logger

	// Fixed once New returns.
	teamID, teamDomain     string
	botUserID, botID, name string
	appID                  string
	botToken, appToken     string
	verificationToken      string
	ackTimeout             time.Duration
	maxRetries             int
	pingInterval           time.Duration
	echo                   bool
	spread                 bool

	mu       sync.Mutex
	closed   bool
	changes  changes.Signal // notified on every recorded change
	lastTS   int64          // microseconds of the last ts handed out
	users    map[string]User
	channels map[string]Channel
	dms      map[string]string // user → the ID of their DM, as dmLocked last found it
	web      webState
	store    store
	sock     socketState
}

// Option configures a Server.
type Option func(*Server)

// WithTeam sets the workspace's ID and domain (default T0FAKE, "fake").
func WithTeam(id, domain string) Option {
	return func(s *Server) { s.teamID, s.teamDomain = id, domain }
}

// WithBot sets the bot's user ID, bot ID and name (default U0BOT, B0BOT,
// "firstmate"), what auth.test answers.
func WithBot(userID, botID, name string) Option {
	return func(s *Server) { s.botUserID, s.botID, s.name = userID, botID, name }
}

// WithAppID sets the app's ID (default A0FAKE).
func WithAppID(id string) Option { return func(s *Server) { s.appID = id } }

// WithTokens sets the bot token (xoxb-…) the Web API accepts and the
// app-level token (xapp-…) apps.connections.open accepts.
func WithTokens(bot, app string) Option {
	return func(s *Server) { s.botToken, s.appToken = bot, app }
}

// WithUser adds a user, or replaces the one with the same ID.
func WithUser(u User) Option { return func(s *Server) { s.users[u.ID] = u } }

// SetUser adds a user, or replaces the one with the same ID, while the
// fake runs: an admin demoted, a member made owner.
func (s *Server) SetUser(u User) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.users[u.ID] = u
	s.notifyLocked()
}

// userTeamLocked is the team of a user: its own, or the fake's. s.mu must
// be held.
func (s *Server) userTeamLocked(id string) string {
	if t := s.users[id].TeamID; t != "" {
		return t
	}
	return s.teamID
}

// WithChannel adds a channel, or replaces the one with the same ID.
func WithChannel(c Channel) Option {
	return func(s *Server) { s.channels[c.ID] = normalizeChannel(c) }
}

// WithAckTimeout sets how long an envelope may wait for its ack before it
// is sent again with retry_attempt+1 (default 3 s, as Slack).
func WithAckTimeout(d time.Duration) Option { return func(s *Server) { s.ackTimeout = d } }

// WithMaxRetries sets how many times an unacked envelope is sent again
// (default 3, as Slack). Zero sends each envelope once.
func WithMaxRetries(n int) Option { return func(s *Server) { s.maxRetries = max(n, 0) } }

// WithPingInterval sets how often the Socket Mode endpoint sends a
// WebSocket ping (default 10 s). slack-go's client reconnects when no ping
// comes within its own interval (socketmode.OptionPingInterval, default
// 30 s), so keep this below that. Zero sends no pings.
func WithPingInterval(d time.Duration) Option { return func(s *Server) { s.pingInterval = d } }

// WithEcho makes the fake deliver, over Socket Mode, the events Slack sends
// an app about its own activity: a message event for each message the bot
// posts, message_changed for each edit, message_deleted for each deletion.
// A bot must ignore them; this makes sure it meets them.
func WithEcho() Option { return func(s *Server) { s.echo = true } }

// WithSpread delivers each envelope to the next ready Socket Mode
// connection in turn instead of the newest, as Slack spreads an app's
// events over its open connections: several replicas of a bot, each with
// its own connection, each get a share.
func WithSpread() Option { return func(s *Server) { s.spread = true } }

// WithLogger logs one line per Web API call and per envelope.
func WithLogger(l *slog.Logger) Option { return func(s *Server) { s.logger = l } }

// New starts a fake on a random loopback port. With tb (which may be nil)
// it is closed when the test ends; otherwise call Close.
func New(tb TB, opts ...Option) *Server {
	if tb != nil {
		tb.Helper()
	}
	s := &Server{
		done:              make(chan struct{}),
		teamID:            DefaultTeamID,
		teamDomain:        "fake",
		botUserID:         DefaultBotUserID,
		botID:             DefaultBotID,
		name:              "firstmate",
		appID:             DefaultAppID,
		botToken:          DefaultBotToken,
		appToken:          DefaultAppToken,
		verificationToken: "fake-verification-token",
		ackTimeout:        3 * time.Second,
		maxRetries:        3,
		pingInterval:      10 * time.Second,
		users: map[string]User{
			Alice: {ID: Alice, Name: "alice", RealName: "Alice Admin", IsAdmin: true},
			Bob:   {ID: Bob, Name: "bob", RealName: "Bob Member"},
		},
		channels: map[string]Channel{
			General: {ID: General, Name: "general", Type: ChannelPublic},
		},
		dms: map[string]string{},
		// Slack's Socket Mode clients send Origin https://api.slack.com.
		upgrader: websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }},
		// No keep-alives: DeliverHTTP leaves no idle connection (and its
		// goroutines) behind for a leak check to find.
		client: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}},
	}
	s.web.init()
	s.store.init()
	s.sock.init()
	for _, o := range opts {
		o(s)
	}
	s.users[s.botUserID] = User{ID: s.botUserID, Name: s.name, RealName: s.name, IsBot: true, BotID: s.botID}
	s.srv = httptest.NewServer(s)
	if tb != nil {
		tb.Cleanup(s.Close)
	}
	return s
}

// URL is the fake's base URL, http://127.0.0.1:port.
func (s *Server) URL() string { return s.srv.URL }

// APIURL is the Web API base to give slack.OptionAPIURL; it ends in /api/.
func (s *Server) APIURL() string { return s.srv.URL + "/api/" }

// BotToken is the bot token the Web API accepts.
func (s *Server) BotToken() string { return s.botToken }

// AppToken is the app-level token apps.connections.open accepts.
func (s *Server) AppToken() string { return s.appToken }

// BotUserID is the bot's user ID, as auth.test answers it.
func (s *Server) BotUserID() string { return s.botUserID }

// BotID is the bot's B… ID, as auth.test answers it.
func (s *Server) BotID() string { return s.botID }

// TeamID is the workspace's ID.
func (s *Server) TeamID() string { return s.teamID }

// AppID is the app's ID.
func (s *Server) AppID() string { return s.appID }

// Close stops the fake: Socket Mode connections are cut, pending retries
// dropped, and Close waits for the fake's goroutines to end.
func (s *Server) Close() {
	s.once.Do(func() {
		s.mu.Lock()
		s.closed = true
		close(s.done)
		conns := s.sock.stopLocked()
		s.mu.Unlock()
		for _, c := range conns {
			_ = c.ws.NetConn().Close()
		}
		s.srv.Close()
		s.wg.Wait()
		s.client.CloseIdleConnections()
	})
}

// ServeHTTP serves the Web API under /api/, the Socket Mode WebSocket,
// file uploads and downloads, and response URLs.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	switch {
	case strings.HasPrefix(p, "/api/"):
		s.serveAPI(w, r, strings.TrimPrefix(p, "/api/"))
	case p == linkPath:
		s.serveSocket(w, r)
	case strings.HasPrefix(p, uploadPath):
		s.serveUpload(w, r, strings.TrimPrefix(p, uploadPath))
	case strings.HasPrefix(p, filesPath):
		s.serveFile(w, r)
	case strings.HasPrefix(p, responsePath):
		s.serveResponseURL(w, r, strings.TrimPrefix(p, responsePath))
	case p == signinPath:
		// Where files.slack.com sends a download without a valid token.
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, "<html><body>Sign in to fake Slack</body></html>")
	default:
		http.NotFound(w, r)
	}
}

const (
	linkPath     = "/link/"
	uploadPath   = "/upload/v1/"
	filesPath    = "/files-pri/"
	responsePath = "/response/"
	signinPath   = "/signin"
)

// WaitFor blocks until cond returns true or timeout passes, and reports
// whether cond held. cond is evaluated again after every change the fake
// records (a call, a message, an ack, a connection); it may call the
// fake's methods.
func (s *Server) WaitFor(timeout time.Duration, cond func() bool) bool {
	return s.changes.WaitFor(timeout, s.done, cond)
}

// notifyLocked wakes WaitFor. s.mu must be held.
func (s *Server) notifyLocked() {
	s.changes.Notify()
}

// nextTSLocked hands out message timestamps as Slack writes them
// ("1700000000.000100"): wall-clock microseconds, strictly increasing, so
// that the order of ts is the order of posting. s.mu must be held.
func (s *Server) nextTSLocked() string {
	now := time.Now().UnixMicro()
	if now <= s.lastTS {
		now = s.lastTS + 1
	}
	s.lastTS = now
	return fmt.Sprintf("%d.%06d", now/1_000_000, now%1_000_000)
}

func (s *Server) log(msg string, args ...any) {
	if s.logger != nil {
		s.logger.Info(msg, args...)
	}
}

// channelLocked returns a known channel. A user ID stands for the DM with
// that user, as chat.postMessage accepts it. s.mu must be held.
func (s *Server) channelLocked(id string) (Channel, bool) {
	if c, ok := s.channels[id]; ok {
		return c, true
	}
	if _, ok := s.users[id]; ok && strings.HasPrefix(id, "U") {
		return s.dmLocked(id), true
	}
	return Channel{}, false
}

// dmLocked returns the DM with user, opening it if needed. s.mu must be held.
func (s *Server) dmLocked(user string) Channel {
	// The DM found last time, if it still is one: no look through every
	// channel for each message of a person.
	if c, ok := s.channels[s.dms[user]]; ok && c.Type == ChannelIM && c.User == user {
		return c
	}
	for _, c := range s.channels {
		if c.Type == ChannelIM && c.User == user {
			s.dms[user] = c.ID
			return c
		}
	}
	id := "D" + strings.TrimPrefix(user, "U")
	for s.channels[id].ID != "" {
		id += "X"
	}
	c := Channel{ID: id, Type: ChannelIM, User: user}
	s.channels[id] = c
	s.dms[user] = id
	return c
}

func normalizeChannel(c Channel) Channel {
	if c.Type == "" {
		c.Type = typeFromID(c.ID)
	}
	return c
}

func typeFromID(id string) string {
	switch {
	case strings.HasPrefix(id, "D"):
		return ChannelIM
	case strings.HasPrefix(id, "G"):
		return ChannelPrivate
	default:
		return ChannelPublic
	}
}

const idAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// randomID is prefix and n characters of Slack's ID alphabet.
func randomID(prefix string, n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = idAlphabet[int(b[i])%len(idAlphabet)]
	}
	return prefix + string(b)
}

// uuid is a random version 4 UUID, the form of envelope IDs and tickets.
func uuid() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}
