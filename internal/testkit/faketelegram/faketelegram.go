// Package faketelegram is a fake Telegram Bot API server for tests, spoken
// over the wire so that the real github.com/go-telegram-bot-api/telegram-bot-api/v5
// client, and so firstmate's Telegram adapter, can be tested without
// Telegram.
//
// Requests go to URL()+"/bot<token>/<method>" (give tgbotapi
// [Server.APIEndpoint]), as form fields, multipart uploads, query
// parameters or JSON bodies; method names are case-insensitive, as in
// Telegram. The fake answers getMe, getUpdates, sendMessage,
// editMessageText, editMessageReplyMarkup, deleteMessage, sendChatAction,
// sendMessageDraft, sendDocument, getFile, setWebhook, deleteWebhook,
// getWebhookInfo, setMyCommands, getMyCommands, answerCallbackQuery and
// getChatAdministrators with Telegram's errors and limits; files are
// downloaded from
// URL()+"/file/bot<token>/<file_path>". Any other method answers 404, and
// a wrong token 401.
//
// getUpdates long-polls for real: it blocks until an update arrives or its
// timeout passes. Its offset confirms updates as Telegram does (an update
// is delivered again until a call's offset passes it, then it is forgotten),
// allowed_updates is remembered, a new getUpdates ends one that is waiting
// with 409 Conflict ("terminated by other getUpdates request", as when two
// bot instances poll; a call whose client hung up is no conflict, and
// [Server.Conflicts] does not count it), and getUpdates while a webhook is
// set answers 409.
// With [WithWebhookDelivery] updates are POSTed to the webhook instead,
// with the X-Telegram-Bot-Api-Secret-Token header; [Server.DeliverWebhook]
// posts one update by hand.
//
// sendMessage and editMessageText parse parse_mode HTML strictly, as
// Telegram does: only Telegram's tags, balanced, with its entity escapes,
// answering "can't parse entities" otherwise; the text Telegram keeps (tags
// stripped, entities unescaped) may have at most 4096 UTF-16 code units.
// Markdown and MarkdownV2 are accepted but not parsed.
//
// Inline keyboards (reply_markup with inline_keyboard) are checked as
// Telegram checks them and kept with the message ([Message.Keyboard],
// [Message.Button]); editMessageText without reply_markup removes the
// keyboard, as Telegram does, and editMessageReplyMarkup changes or
// removes it. A press of a button is a callback_query update
// ([Server.CallbackQuery], [Server.PressButton]); answerCallbackQuery is
// recorded ([Server.CallbackAnswer], [Server.WaitCallbackAnswer]) and a
// query can be answered once. getChatAdministrators answers the admins
// set with [Server.SetChatAdmins] (Alice created the fake's groups and
// channel).
//
// Builders make realistic updates and queue them: [Server.PrivateMessage],
// [Server.GroupMessage], [Server.Mention], [Server.Reply],
// [Server.Command], [Server.TopicMessage], [Server.BotMessage],
// [Server.EditMessage], [Server.ChannelPost], [Server.Document],
// [Server.Photo], [Server.MyChatMember], [Server.CallbackQuery],
// [Server.PressButton], [Server.InlineCallbackQuery]. Every
// call is recorded; messages are kept per chat with edits applied. Faults
// can be scripted per method: 429 with retry_after, any error answer, or
// a dropped connection.
//
// A test:
//
//	srv := faketelegram.New(t)
//	bot, _ := tgbotapi.NewBotAPIWithAPIEndpoint(srv.Token(), srv.APIEndpoint())
//	… run the bot's polling loop on bot …
//	in := srv.PrivateMessage(faketelegram.Alice, "hello")
//	replies, ok := srv.WaitBotMessages(faketelegram.Alice, 1, 5*time.Second)
//	// replies[0].ReplyToMessage.MessageID == in.Message.MessageID
package faketelegram

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/firstmate/firstmate/internal/changes"
	"github.com/firstmate/firstmate/internal/testkit"
)

// The bot, people and chats every fake starts with. Options add to them.
const (
	DefaultBotID       int64 = 7000000001
	DefaultBotUsername       = "firstmate_bot"
	DefaultBotName           = "Firstmate"

	// Alice and Bob are people; a private chat with either has their ID.
	Alice int64 = 1001
	Bob   int64 = 1002
	// HelperBot is another bot, @helper_bot, member of the groups.
	HelperBot int64 = 7000000002

	// Group is a supergroup, "Crew".
	Group int64 = -1001000000001
	// Forum is a supergroup with topics, "Crew Forum".
	Forum int64 = -1001000000002
	// Channel is a channel, @crew_news.
	Channel int64 = -1001000000003
	// BasicGroup is a basic (legacy) group, "Old Crew".
	BasicGroup int64 = -4000000001
)

// Limits of the cloud Bot API.
const (
	MaxMessageLength = 4096     // UTF-16 code units of text after entity parsing
	MaxCaptionLength = 1024     // the same, for captions
	MaxDownloadSize  = 20 << 20 // getFile refuses larger files
	MaxUploadSize    = 50 << 20 // sendDocument refuses larger uploads
)

// tokenSecret is the part of a bot token after "<bot id>:".
const tokenSecret = "AAFakeTokenForFirstmateTests_012345"

// TB is the kits' one [testkit.TB].
type TB = testkit.TB

// Server is a running fake Bot API. It is safe for concurrent use.
type Server struct {
	srv    *httptest.Server
	done   chan struct{}
	once   sync.Once
	wg     sync.WaitGroup // the webhook deliverer
	cancel func()         // cancels a webhook delivery in flight
	client *http.Client   // for webhook deliveries
	logger *slog.Logger

	// Fixed once New returns.
	bot           User
	token         string
	deliverHooks  bool
	hookRetry     time.Duration
	disabled      map[string]bool // lower-case method names answered 404
	firstUpdateID int
	downloadLimit int

	mu      sync.Mutex
	closed  bool
	changes changes.Signal // notified on every recorded change
	web     webState
	store   store
	upd     updateState
}

// Option configures a Server.
type Option func(*Server)

// WithBot sets the bot's ID, username and first name (default
// 7000000001, firstmate_bot, "Firstmate"), what getMe answers. The token
// follows the ID unless WithToken sets it.
func WithBot(id int64, username, firstName string) Option {
	return func(s *Server) {
		s.bot.ID, s.bot.Username, s.bot.FirstName = id, username, firstName
	}
}

// WithToken sets the token the fake accepts (default "<bot id>:AAFake…").
func WithToken(token string) Option { return func(s *Server) { s.token = token } }

// WithUser adds a user, or replaces the one with the same ID. A user can
// write to the bot privately, in the private chat whose ID is theirs.
func WithUser(u User) Option { return func(s *Server) { s.store.users[u.ID] = u } }

// WithChat adds a group, supergroup or channel, or replaces the one with
// the same ID.
func WithChat(c Chat) Option { return func(s *Server) { s.store.addChat(c) } }

// WithChatAdmins makes users the administrators of a chat, the first its
// creator; see [Server.SetChatAdmins].
func WithChatAdmins(chat int64, users ...int64) Option {
	return func(s *Server) { s.store.admins[chat] = append([]int64(nil), users...) }
}

// WithWebhookDelivery makes the fake POST updates to the webhook while
// one is set, as Telegram does: one at a time, in order, each with the
// secret_token of setWebhook in X-Telegram-Bot-Api-Secret-Token. An
// update answered with a 2xx status is confirmed; otherwise it is sent
// again after retry (Telegram waits longer), and getWebhookInfo reports
// the error.
func WithWebhookDelivery(retry time.Duration) Option {
	return func(s *Server) { s.deliverHooks, s.hookRetry = true, retry }
}

// WithoutMethods makes the fake answer 404 Not Found to methods, as a Bot
// API server older than them does (sendMessageDraft came in Bot API 9.3).
func WithoutMethods(methods ...string) Option {
	return func(s *Server) {
		for _, m := range methods {
			s.disabled[strings.ToLower(m)] = true
		}
	}
}

// WithFirstUpdateID sets the update_id of the first update (default
// 100000001); the next ones follow.
func WithFirstUpdateID(id int) Option { return func(s *Server) { s.firstUpdateID = id } }

// WithDownloadLimit sets the size above which getFile answers "file is
// too big" (default 20 MB, as the cloud Bot API; a local server has none).
func WithDownloadLimit(n int) Option { return func(s *Server) { s.downloadLimit = n } }

// WithLogger logs one line per call.
func WithLogger(l *slog.Logger) Option { return func(s *Server) { s.logger = l } }

// New starts a fake on a random loopback port. With tb (which may be nil)
// it is closed when the test ends; otherwise call Close.
func New(tb TB, opts ...Option) *Server {
	if tb != nil {
		tb.Helper()
	}
	s := &Server{
		done:          make(chan struct{}),
		bot:           User{ID: DefaultBotID, IsBot: true, FirstName: DefaultBotName, Username: DefaultBotUsername},
		disabled:      map[string]bool{},
		firstUpdateID: 100000001,
		downloadLimit: MaxDownloadSize,
		// No keep-alives: webhook deliveries leave no idle connection (and
		// its goroutines) behind for a leak check to find.
		client: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}},
	}
	s.web.init()
	s.store.init()
	for _, o := range opts {
		o(s)
	}
	s.bot.IsBot = true
	if s.token == "" {
		s.token = formatToken(s.bot.ID)
	}
	s.store.users[s.bot.ID] = s.bot
	s.upd.init(s.firstUpdateID)
	s.srv = httptest.NewServer(s)
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	if s.deliverHooks {
		s.wg.Go(func() { s.deliverLoop(ctx) })
	}
	if tb != nil {
		tb.Cleanup(s.Close)
	}
	return s
}

func formatToken(id int64) string {
	return itoa64(id) + ":" + tokenSecret
}

// URL is the server root, http://127.0.0.1:port, what a self-hosted Bot
// API server's address would be (TELEGRAM_API_URL).
func (s *Server) URL() string { return s.srv.URL }

// APIEndpoint is the endpoint format tgbotapi.NewBotAPIWithAPIEndpoint
// takes: URL()+"/bot%s/%s".
func (s *Server) APIEndpoint() string { return s.srv.URL + "/bot%s/%s" }

// FileURL is where the file at path (getFile's file_path) is downloaded:
// URL()+"/file/bot<token>/<path>". tgbotapi's File.Link ignores a custom
// endpoint and always points at api.telegram.org.
func (s *Server) FileURL(path string) string {
	return s.srv.URL + "/file/bot" + s.token + "/" + path
}

// Token is the bot token the fake accepts.
func (s *Server) Token() string { return s.token }

// Bot is the bot's user, as getMe answers it.
func (s *Server) Bot() User { return s.bot }

// Close stops the fake: waiting getUpdates calls end with no updates, a
// webhook delivery in flight is cancelled, and Close waits for the fake's
// goroutines.
func (s *Server) Close() {
	s.once.Do(func() {
		s.mu.Lock()
		s.closed = true
		close(s.done)
		s.mu.Unlock()
		s.cancel()
		s.srv.Close()
		s.wg.Wait()
		s.client.CloseIdleConnections()
	})
}

// ServeHTTP serves the Bot API under /bot<token>/ and file downloads under
// /file/bot<token>/.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	switch {
	case strings.HasPrefix(p, "/file/bot"):
		s.serveFile(w, r, strings.TrimPrefix(p, "/file/bot"))
	case strings.HasPrefix(p, "/bot"):
		token, method, ok := strings.Cut(strings.TrimPrefix(p, "/bot"), "/")
		if !ok {
			writeError(w, http.StatusNotFound, "Not Found")
			return
		}
		s.serveAPI(w, r, token, method)
	default:
		writeError(w, http.StatusNotFound, "Not Found")
	}
}

// WaitFor blocks until cond returns true or timeout passes, and reports
// whether cond held. cond is evaluated again after every change the fake
// records (a call, a message, an update, a delivery); it may call the
// fake's methods.
func (s *Server) WaitFor(timeout time.Duration, cond func() bool) bool {
	return s.changes.WaitFor(timeout, s.done, cond)
}

// notifyLocked wakes WaitFor. s.mu must be held.
func (s *Server) notifyLocked() {
	s.changes.Notify()
}

func (s *Server) log(msg string, args ...any) {
	if s.logger != nil {
		s.logger.Info(msg, args...)
	}
}
