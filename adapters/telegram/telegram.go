package telegram

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/firstmate/firstmate/adapters"
	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/internal/redact"
)

// Config configures the adapter. Token is required.
type Config struct {
	Token         string
	APIURL        string // Bot API server root; https://api.telegram.org if empty
	WebhookURL    string // set: receive by webhook at this public URL instead of polling
	WebhookSecret string // the secret_token Telegram sends back; required with WebhookURL
	Progress      adapters.Mode
	AllowBots     bool  // answer messages from other bots
	ChannelPosts  bool  // answer posts in channels the bot is admin of
	MaxFileBytes  int64 // files shared with a message; default and Bot API cap 20 MiB
	PollTimeout   time.Duration
	HTTPClient    *http.Client
	Logger        *slog.Logger
	// ChatAdmins makes a group's Telegram administrators (its creator and
	// admins) the bot's admins in that group; see [Adapter.IsAdmin].
	ChatAdmins bool
	// PollLease, when set, lets one replica at a time long-poll (Telegram
	// answers a second getUpdates consumer 409 Conflict): the holder of
	// the lease "telegram-poll:<bot ID>" polls, the others stand by and
	// take over when it stops or dies. Nil: this process polls alone. A
	// webhook needs none; every replica serves it.
	PollLease PollLease
	// Owner names this replica's hold on PollLease (agent.Owner: unique
	// to one process's life). Required with PollLease.
	Owner string
}

// The Bot API's own cap on getFile downloads.
const botAPIFileCap = 20 << 20

// callTimeout bounds one Bot API call other than a long poll.
const callTimeout = 60 * time.Second

// allowedUpdates are the update kinds the adapter reads.
var allowedUpdates = []string{"message", "edited_message", "channel_post", "my_chat_member", "callback_query"}

// Adapter connects one Telegram bot to the dispatcher. It is the
// agent.Platform for "telegram" sessions.
type Adapter struct {
	cfg  Config
	root string
	http *http.Client
	log  *slog.Logger
	norm normalizer

	render   *adapters.Renderer
	privates *adapters.Buckets // messages per private chat
	groups   *adapters.Buckets // messages per group
	global   *adapters.Bucket  // messages in all
	noDrafts atomic.Bool       // the server has no sendMessageDraft
	admins   adminCache
	channels sync.Map    // chat IDs seen to be channels: no admins asked there
	polling  atomic.Bool // this replica runs the long poll now
	lease    leaseTiming
	// receiving: Run has set the webhook, or runs the long poll (with a
	// poll lease: polls, or stands by to).
	receiving atomic.Bool
}

// New checks the token with getMe.
func New(ctx context.Context, cfg Config) (*Adapter, error) {
	if cfg.Token == "" {
		return nil, errors.New("telegram: TELEGRAM_BOT_TOKEN is not set")
	}
	if cfg.WebhookURL != "" && cfg.WebhookSecret == "" {
		return nil, errors.New("telegram: a webhook needs a secret (TELEGRAM_WEBHOOK_SECRET), so forged updates can be refused")
	}
	if cfg.PollLease != nil && cfg.Owner == "" {
		return nil, errors.New("telegram: a poll lease needs an owner")
	}
	if cfg.APIURL == "" {
		cfg.APIURL = "https://api.telegram.org"
	}
	if cfg.MaxFileBytes <= 0 || cfg.MaxFileBytes > botAPIFileCap {
		cfg.MaxFileBytes = botAPIFileCap
	}
	if cfg.PollTimeout <= 0 {
		cfg.PollTimeout = 25 * time.Second
	}
	if cfg.HTTPClient == nil {
		// No client timeout: a long poll waits PollTimeout; every call has
		// a ctx (see call).
		cfg.HTTPClient = &http.Client{}
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a := &Adapter{cfg: cfg, root: strings.TrimRight(cfg.APIURL, "/"), http: cfg.HTTPClient, log: log,
		render: adapters.NewRenderer(cfg.Progress, log),
		// Telegram asks for about one message a second per chat with short
		// bursts, and twenty a minute per group: with a burst of four a
		// group never sees more than 24 in a minute.
		privates: adapters.NewBuckets(time.Second, 3),
		groups:   adapters.NewBuckets(3*time.Second, 4),
		global:   adapters.NewBucket(time.Second/30, 30),
		lease:    defaultLeaseTiming,
	}
	var me user
	if err := a.call(ctx, "getMe", nil, &me); err != nil {
		return nil, fmt.Errorf("telegram getMe: %w (check TELEGRAM_BOT_TOKEN and TELEGRAM_API_URL)", err)
	}
	a.norm = normalizer{me: me, allowBots: cfg.AllowBots, channelPosts: cfg.ChannelPosts}
	log.Info("telegram connected", "bot", "@"+me.Username)
	return a, nil
}

// Drain waits until every turn has shown what it still had to (a progress
// summary), or ctx ends. Call it after the dispatcher stopped.
func (a *Adapter) Drain(ctx context.Context) { a.render.Close(ctx) }

// Name is the platform of the sessions this adapter serves.
func (a *Adapter) Name() string { return Platform }

// Ready reports whether updates reach this replica: its webhook is set,
// or it long-polls (with a poll lease: or stands by to).
func (a *Adapter) Ready() error {
	switch {
	case a.receiving.Load():
		return nil
	case a.cfg.WebhookURL != "":
		return errors.New("telegram webhook not set")
	}
	return errors.New("telegram not polling")
}

// Username is the bot's @username.
func (a *Adapter) Username() string { return a.norm.me.Username }

// ctxClient gives each request the ctx of the call that makes it: the
// library's MakeRequest takes none, so a bot value is made per call.
type ctxClient struct {
	ctx context.Context
	c   *http.Client
}

func (c ctxClient) Do(req *http.Request) (*http.Response, error) {
	return c.c.Do(req.WithContext(c.ctx))
}

func (a *Adapter) bot(ctx context.Context) *tgbotapi.BotAPI {
	b := &tgbotapi.BotAPI{Token: a.cfg.Token, Client: ctxClient{ctx, a.http}}
	b.SetAPIEndpoint(a.root + "/bot%s/%s")
	return b
}

// call makes one Bot API request through the library and decodes its
// result into out (if not nil). Errors are *tgbotapi.Error when Telegram
// answered; the token never appears in them.
func (a *Adapter) call(ctx context.Context, method string, params tgbotapi.Params, out any) error {
	// A half-open connection must not hang a call (or the poll loop) until
	// TCP gives up: every call has a deadline, a long poll its own timeout
	// and some slack.
	limit := callTimeout
	if method == "getUpdates" {
		limit = a.cfg.PollTimeout + 10*time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	resp, err := a.bot(ctx).MakeRequest(method, params)
	if err != nil {
		return a.scrub(err)
	}
	if out != nil {
		if err := json.Unmarshal(resp.Result, out); err != nil {
			return fmt.Errorf("telegram %s: decode result: %w", method, err)
		}
	}
	return nil
}

// scrub keeps the bot token out of an error (a URL error quotes the URL,
// which holds the token), and any credentials the API URL holds.
func (a *Adapter) scrub(err error) error {
	err = redact.Error(err)
	if err == nil || !strings.Contains(err.Error(), a.cfg.Token) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), a.cfg.Token, "[token]"))
}

// apiError returns Telegram's answer if err is one.
func apiError(err error) (*tgbotapi.Error, bool) {
	var e *tgbotapi.Error
	if errors.As(err, &e) {
		return e, true
	}
	var v tgbotapi.Error
	if errors.As(err, &v) {
		return &v, true
	}
	return nil, false
}

// handle submits the message an update carries, if any, or acts on the
// click it carries.
func (a *Adapter) handle(ctx context.Context, d agent.Submitter, u *update) error {
	if q := u.CallbackQuery; q != nil {
		return a.click(ctx, d, q)
	}
	if u.ChannelPost != nil {
		a.channels.Store(u.ChannelPost.Chat.ID, true)
	}
	if ev := u.MyChatMember; ev != nil {
		a.log.Info("telegram membership changed", "chat", ev.Chat.ID, "title", ev.Chat.Title, "status", ev.NewChatMember.Status, "by", ev.From.ID)
		return nil
	}
	if u.EditedMessage != nil {
		a.log.Debug("telegram edited message ignored", "chat", u.EditedMessage.Chat.ID)
		return nil
	}
	in, ok := a.norm.inbound(u)
	if !ok {
		return nil
	}
	return d.Submit(ctx, in)
}

// Run registers the commands, then receives updates until ctx ends: by
// webhook (setWebhook, then wait) or by long polling (deleteWebhook, then
// poll). With a webhook every replica serves it (Telegram spreads its
// requests over whoever answers at the URL), so no lease is taken; a
// long poll has one consumer per bot, so with Config.PollLease only the
// lease holder polls and the other replicas stand by (poll.go).
func (a *Adapter) Run(ctx context.Context, d agent.Submitter) error {
	defer a.receiving.Store(false)
	a.setCommands(ctx)
	if a.cfg.WebhookURL != "" {
		allowed, _ := json.Marshal(allowedUpdates)
		err := a.call(ctx, "setWebhook", tgbotapi.Params{"url": a.cfg.WebhookURL, "secret_token": a.cfg.WebhookSecret,
			"allowed_updates": string(allowed)}, nil)
		if err != nil {
			return fmt.Errorf("telegram setWebhook: %w", err)
		}
		a.log.Info("telegram webhook set", "url", redact.URL(a.cfg.WebhookURL))
		a.receiving.Store(true)
		<-ctx.Done()
		return nil
	}
	if err := a.call(ctx, "deleteWebhook", nil, nil); err != nil && ctx.Err() == nil {
		a.log.Warn("telegram deleteWebhook failed", "err", err)
	}
	a.receiving.Store(true)
	if a.cfg.PollLease == nil {
		a.polling.Store(true)
		defer a.polling.Store(false)
		p := &poller{a: a, d: d}
		return p.poll(ctx, ctx)
	}
	return a.pollLeased(ctx, d)
}

func (a *Adapter) setCommands(ctx context.Context) {
	cmds, _ := json.Marshal(commandMenu())
	if err := a.call(ctx, "setMyCommands", tgbotapi.Params{"commands": string(cmds)}, nil); err != nil && ctx.Err() == nil {
		a.log.Warn("telegram setMyCommands failed", "err", err)
	}
}

// commandMenu is the command registry as setMyCommands takes it: names
// of 1-32 characters of [a-z0-9_] (a name Telegram would refuse is left
// out, or the whole menu would be refused), and descriptions of 1-256
// characters that say what arguments a command takes.
func commandMenu() []map[string]string {
	var menu []map[string]string
	for _, c := range agent.Commands() {
		if !menuName.MatchString(c.Name) {
			continue
		}
		desc := c.Summary
		if desc == "" {
			desc = c.Name
		}
		desc = strings.ToUpper(desc[:1]) + desc[1:]
		if c.Args != "" {
			desc += ": /" + c.Name + " " + c.Args
		}
		if c.Who == agent.Admins {
			desc += " (admins)"
		}
		if r := []rune(desc); len(r) > 256 {
			desc = string(r[:255]) + "…"
		}
		menu = append(menu, map[string]string{"command": c.Name, "description": desc})
	}
	return menu
}

var menuName = regexp.MustCompile(`^[a-z0-9_]{1,32}$`)

// sleep waits d or until ctx ends; it reports whether the wait completed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
