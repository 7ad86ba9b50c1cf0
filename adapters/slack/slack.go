package slack

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"github.com/slack-go/slack/socketmode"
	"golang.org/x/sync/singleflight"

	"github.com/firstmate/firstmate/adapters"
	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/internal/redact"
)

// Config configures the adapter. BotToken is required, and AppToken
// (Socket Mode) or SigningSecret (HTTP Events API) or both.
type Config struct {
	BotToken      string
	AppToken      string // xapp-…: Socket Mode
	SigningSecret string // HTTP Events API
	APIURL        string // Web API base, ending in "/api/"; Slack's own if empty
	Progress      adapters.Mode
	AllowBots     bool  // answer messages from other bots
	MaxFileBytes  int64 // files shared with a message; default 20 MiB
	// WorkspaceAdmins makes the workspace's admins and owners the bot's
	// admins in its channels (see IsAdmin).
	WorkspaceAdmins bool
	HTTPClient      *http.Client
	Logger          *slog.Logger
}

// Adapter connects one Slack workspace to the dispatcher. It is the
// agent.Platform for "slack" sessions.
type Adapter struct {
	cfg  Config
	api  *slack.Client
	norm normalizer
	log  *slog.Logger
	http *http.Client

	render  *adapters.Renderer
	posts   *adapters.Buckets // chat.postMessage, per channel
	edits   *adapters.Bucket  // chat.update, across the workspace
	people  *expiring[person] // users.info answers: names, teams, guests
	lookups singleflight.Group
	// prefetching holds a token for each lookup started ahead of a lane.
	prefetching chan struct{}
	admins      *expiring[bool] // users.info answers for IsAdmin
	socket      atomic.Bool     // the Socket Mode connection is up
}

// New connects to the Web API (auth.test gives the bot's own IDs).
func New(ctx context.Context, cfg Config) (*Adapter, error) {
	if cfg.BotToken == "" {
		return nil, errors.New("slack: SLACK_BOT_TOKEN is not set")
	}
	if cfg.AppToken == "" && cfg.SigningSecret == "" {
		return nil, errors.New("slack: set SLACK_APP_TOKEN (Socket Mode) or SLACK_SIGNING_SECRET (HTTP events)")
	}
	if cfg.MaxFileBytes <= 0 {
		cfg.MaxFileBytes = 20 << 20
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 60 * time.Second}
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	opts := []slack.Option{slack.OptionHTTPClient(cfg.HTTPClient), slack.OptionLog(slog.NewLogLogger(log.Handler(), slog.LevelDebug))}
	if cfg.APIURL != "" {
		opts = append(opts, slack.OptionAPIURL(cfg.APIURL))
	}
	if cfg.AppToken != "" {
		opts = append(opts, slack.OptionAppLevelToken(cfg.AppToken))
	}
	api := slack.New(cfg.BotToken, opts...)
	auth, err := api.AuthTestContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("slack auth.test: %w (check SLACK_BOT_TOKEN and SLACK_API_URL)", redact.Error(err))
	}
	me := identity{TeamID: auth.TeamID, BotUserID: auth.UserID, BotID: auth.BotID}
	log.Info("slack connected", "team", auth.Team, "bot_user", auth.UserID)
	return &Adapter{
		cfg: cfg, api: api, log: log, http: cfg.HTTPClient,
		norm:        normalizer{me: me, allowBots: cfg.AllowBots},
		render:      adapters.NewRenderer(cfg.Progress, log),
		posts:       adapters.NewBuckets(time.Second, 3),
		edits:       adapters.NewBucket(1200*time.Millisecond, 5),
		people:      &expiring[person]{ttl: personTTL, max: maxPeople},
		prefetching: make(chan struct{}, prefetchAtOnce),
		admins:      &expiring[bool]{ttl: adminTTL, max: maxPeople},
	}, nil
}

// Drain waits until every turn has shown what it still had to (an end
// mark, a progress summary), or ctx ends. Call it after the dispatcher
// stopped.
func (a *Adapter) Drain(ctx context.Context) { a.render.Close(ctx) }

// BotUserID is the bot's user ID (U…), as people mention it.
func (a *Adapter) BotUserID() string { return a.norm.me.BotUserID }

// TeamID is the workspace's ID.
func (a *Adapter) TeamID() string { return a.norm.me.TeamID }

// Name is the platform of the sessions this adapter serves.
func (a *Adapter) Name() string { return Platform }

// Ready reports whether Slack can reach the bot: with Socket Mode, while
// its connection is up; with HTTP events only, always (Slack calls us).
func (a *Adapter) Ready() error {
	if a.cfg.AppToken != "" && !a.socket.Load() {
		return errors.New("slack socket mode not connected")
	}
	return nil
}

// Routes adds the HTTP Events API endpoints when a signing secret is set.
func (a *Adapter) Routes(mux *http.ServeMux, d agent.Submitter) {
	if a.cfg.SigningSecret == "" {
		return
	}
	mux.Handle("POST /slack/events", a.verified(a.eventsHandler(d)))
	mux.Handle("POST /slack/commands", a.verified(a.commandsHandler(d)))
	mux.Handle("POST /slack/interactivity", a.verified(a.interactivityHandler(d)))
}

// Run receives Socket Mode events until ctx ends, when an app token is
// set; with HTTP events only, it just waits.
func (a *Adapter) Run(ctx context.Context, d agent.Submitter) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if a.cfg.AppToken == "" {
		<-ctx.Done()
		return nil
	}
	sm := socketmode.New(a.api, socketmode.OptionLog(slog.NewLogLogger(a.log.Handler(), slog.LevelDebug)))
	defer a.socket.Store(false)
	runErr := make(chan error, 1)
	// The client reconnects on its own; it returns on ctx or a fatal error
	// (bad app token).
	wg.Go(func() { runErr <- sm.RunContext(ctx) })
	// What follows an ack (opening a modal, telling a person what their
	// click did) runs beside the event loop, and Run waits for it.
	after := func(f func(context.Context)) {
		if f == nil {
			return
		}
		wg.Go(func() {
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), followUpTimeout)
			defer cancel()
			f(fctx)
		})
	}
	// Messages are recorded by eventWorkers lanes at once: one at a time,
	// a burst is acked too late and Slack sends it all again. A channel's
	// events keep to one lane, in the order they came: the mailbox puts a
	// message after those already claimed, so two of one conversation
	// recorded side by side could be answered out of order.
	lanes := make([]chan socketmode.Event, eventWorkers)
	for i := range lanes {
		lanes[i] = make(chan socketmode.Event, laneDepth)
		wg.Go(func() {
			for {
				select {
				case evt := <-lanes[i]:
					a.onSocketEvent(ctx, sm, d, evt, after)
				case <-ctx.Done():
					return
				}
			}
		})
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-runErr:
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("slack socket mode: %w", err)
		case evt := <-sm.Events:
			if evt.Type != socketmode.EventTypeEventsAPI {
				a.onSocketEvent(ctx, sm, d, evt, after)
				continue
			}
			// Who wrote is asked of users.info now, beside the lane, so
			// that a burst of new people is not looked up one lane at a
			// time before each ack.
			a.prefetch(ctx, evt, &wg)
			// A full lane holds the loop back: the unacked rest comes
			// again.
			select {
			case lanes[laneOf(evt, len(lanes))] <- evt:
			case <-ctx.Done():
				return nil
			}
		}
	}
}

// prefetchAtOnce bounds the users.info lookups started ahead of the lanes.
const prefetchAtOnce = 64

// prefetch starts the lookup of an event's author when they are not
// known yet and fewer than prefetchAtOnce lookups run; the lane finds the
// answer in the cache, or joins the call under way.
func (a *Adapter) prefetch(ctx context.Context, evt socketmode.Event, wg *sync.WaitGroup) {
	_, user := whereAndWho(evt)
	if user == "" {
		return
	}
	if _, ok := a.people.get(user); ok {
		return
	}
	select {
	case a.prefetching <- struct{}{}:
	default:
		return // the lane asks itself
	}
	wg.Go(func() {
		defer func() { <-a.prefetching }()
		if _, err := a.person(ctx, user); err != nil {
			a.log.Debug("slack users.info ahead of the lane", "user", user, "err", err)
		}
	})
}

// whereAndWho is the channel and the author of an Events API envelope's
// message, empty for other events.
func whereAndWho(evt socketmode.Event) (channel, user string) {
	api, _ := evt.Data.(slackevents.EventsAPIEvent)
	switch ev := api.InnerEvent.Data.(type) {
	case *slackevents.MessageEvent:
		return ev.Channel, ev.User
	case *slackevents.AppMentionEvent:
		return ev.Channel, ev.User
	}
	return "", ""
}

// laneOf is the lane of an Events API envelope: its channel's, so that
// one channel's events are recorded in the order they came.
func laneOf(evt socketmode.Event, n int) int {
	channel, _ := whereAndWho(evt)
	h := fnv.New32a()
	h.Write([]byte(channel))
	return int(h.Sum32() % uint32(n))
}

// eventWorkers is how many Events API envelopes are recorded at once, and
// laneDepth how many wait in each lane.
const (
	eventWorkers = 32
	laneDepth    = 16
)

// followUpTimeout bounds the Web API calls that follow an ack.
const followUpTimeout = 30 * time.Second

// onSocketEvent handles one Socket Mode event. Events are acked only after
// Submit returned, so a message Slack got no ack for is sent again; agent
// work never runs here (Submit only records the message), so the ack and
// the socket's pings are never held up by a turn. after runs what follows
// an ack in the background.
func (a *Adapter) onSocketEvent(ctx context.Context, sm *socketmode.Client, d agent.Submitter, evt socketmode.Event, after func(func(context.Context))) {
	switch evt.Type {
	case socketmode.EventTypeEventsAPI:
		api, ok := evt.Data.(slackevents.EventsAPIEvent)
		if !ok || evt.Request == nil {
			return
		}
		if err := a.submitEvent(ctx, d, api); err != nil {
			a.log.Error("slack event not recorded; Slack will send it again", "err", err)
			return
		}
		a.ack(ctx, sm, evt.Request, nil)
	case socketmode.EventTypeSlashCommand:
		cmd, ok := evt.Data.(slack.SlashCommand)
		if !ok || evt.Request == nil {
			return
		}
		reply, then, err := a.submitCommand(ctx, d, cmd)
		if err != nil {
			a.log.Error("slash command not recorded", "err", err)
			return
		}
		a.ack(ctx, sm, evt.Request, reply)
		after(then)
	case socketmode.EventTypeInteractive:
		if evt.Request == nil {
			return
		}
		// Acked whatever the payload: Slack shows the person an error for
		// an interaction without one, and never sends it again.
		var reply any
		var then func(context.Context)
		if cb, ok := evt.Data.(slack.InteractionCallback); ok {
			reply, then = a.interaction(ctx, d, cb)
		} else {
			a.log.Debug("slack interaction that slack-go could not read", "payload", truncateRunes(string(evt.Request.Payload), 200))
		}
		a.ack(ctx, sm, evt.Request, reply)
		after(then)
	case socketmode.EventTypeErrorBadMessage:
		// An envelope slack-go could not read (a payload that is not an
		// interaction, an event it does not know). It never will: ack it,
		// or Slack sends it again.
		bad, _ := evt.Data.(*socketmode.ErrorBadMessage)
		if bad == nil {
			return
		}
		var env struct {
			EnvelopeID string `json:"envelope_id"`
		}
		_ = json.Unmarshal(bad.Message, &env)
		a.log.Debug("slack socket mode envelope not understood", "err", bad.Cause, "envelope", env.EnvelopeID)
		if env.EnvelopeID != "" {
			a.ack(ctx, sm, &socketmode.Request{EnvelopeID: env.EnvelopeID}, nil)
		}
	case socketmode.EventTypeConnecting:
		a.socket.Store(false)
		a.log.Debug("slack socket mode connecting")
	case socketmode.EventTypeConnected:
		a.socket.Store(true)
		a.log.Info("slack socket mode connected")
	case socketmode.EventTypeConnectionError, socketmode.EventTypeIncomingError:
		// Readiness stays: an incoming error can be one bad frame on a
		// live connection; a dead one reconnects, which says connecting.
		a.log.Warn("slack socket mode error; reconnecting", "err", fmt.Sprint(evt.Data))
	case socketmode.EventTypeInvalidAuth:
		a.socket.Store(false)
		a.log.Error("slack socket mode: invalid app token (SLACK_APP_TOKEN)")
	}
}

func (a *Adapter) ack(ctx context.Context, sm *socketmode.Client, req *socketmode.Request, payload any) {
	// With a ctx: during a reconnect the client's send queue can be full,
	// and a plain Ack would then block the event loop for good.
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := sm.AckCtx(ctx, req.EnvelopeID, payload); err != nil {
		a.log.Warn("slack ack failed; Slack will send the event again", "err", err)
	}
}

// submitEvent hands one Events API event to the dispatcher, if it is a
// message for the bot.
func (a *Adapter) submitEvent(ctx context.Context, d agent.Submitter, ev slackevents.EventsAPIEvent) error {
	if ev.Type != slackevents.CallbackEvent {
		return nil
	}
	in, ok := a.norm.inbound(ev.TeamID, ev.InnerEvent.Data)
	if !ok {
		return nil
	}
	if err := a.identify(ctx, &in.User, in.Key.Team); err != nil {
		return err
	}
	return d.Submit(ctx, in)
}

// submitCommand turns /firstmate <command> into the chat command, whose
// reply is ephemeral (see Thread): the whole text, so a command's arguments
// go with it. It returns the ack's payload and what to do after the ack:
// "tools" alone opens the tools modal, which must not hold up the ack.
// Unknown text gets usage at once.
func (a *Adapter) submitCommand(ctx context.Context, d agent.Submitter, cmd slack.SlashCommand) (reply any, then func(context.Context), err error) {
	text := strings.TrimSpace(cmd.Text)
	c, args, ok := agent.ParseCommand(text, nil)
	if !ok {
		// Typed after the slash command, a command's name is a command
		// whatever follows ("/firstmate why is it off" is why, which says
		// what is wrong with its argument).
		if c, args, ok = agent.ParseCommand("/"+text, nil); ok {
			text = "/" + text
		}
	}
	if !ok {
		return map[string]string{"response_type": "ephemeral",
			"text": "Usage: " + cmd.Command + " " + UsageHint() + ". To ask me something, mention me in a channel or send me a direct message."}, nil, nil
	}
	key := agent.SessionKey{Platform: Platform, Team: orDefault(cmd.TeamID, a.norm.me.TeamID), Chat: cmd.ChannelID}
	// The payload's team is the workspace the command was run in, not its
	// author's: users.info says theirs.
	user := agent.User{ID: cmd.UserID, Name: cmd.UserName}
	if err := a.identify(ctx, &user, key.Team); err != nil {
		return nil, nil, err
	}
	if cmd.TeamID != "" && cmd.TeamID != a.norm.me.TeamID {
		user.External = true
	}
	in := agent.Inbound{
		Key:       key,
		MessageID: "slash:" + cmd.TriggerID,
		User:      user,
		Text:      text,
		Addressed: true,
		Private:   strings.HasPrefix(cmd.ChannelID, "D"),
		Time:      time.Now(),
		ReplyTo:   ephemeralPrefix + cmd.UserID,
	}
	switch cmd.ChannelName {
	case "", "directmessage", "privategroup", "mpdm":
	default:
		in.ChatName = cmd.ChannelName
	}
	if c.Name == "tools" && args == "" && cmd.TriggerID != "" {
		// The dialog is served here, not by Submit: who may talk to the
		// bot is asked first (a refused person is told, once).
		return nil, func(ctx context.Context) {
			if ok, err := d.Admit(ctx, in); err != nil || !ok {
				if err != nil {
					a.log.Error("slack: checking access for the tools modal", "err", err)
				}
				return
			}
			a.openTools(ctx, d, key, user, cmd.TriggerID)
		}, nil
	}
	return nil, nil, d.Submit(ctx, in)
}

// UsageHint is the slash command's arguments, from the command registry:
// "help | status | … | tools [exec=ask web=deny …] | why TOOL | …". The
// app manifest carries the same.
func UsageHint() string {
	var names []string
	for _, c := range agent.Commands() {
		if c.Args != "" {
			names = append(names, c.Name+" "+c.Args)
		} else {
			names = append(names, c.Name)
		}
	}
	return strings.Join(names, " | ")
}

// maxBody caps an HTTP event body; Slack's are a few KiB.
const maxBody = 1 << 20

// verified checks Slack's v0 request signature (HMAC-SHA256 of
// "v0:timestamp:body", compared in constant time, timestamp within five
// minutes) before the handler sees the request.
func (a *Adapter) verified(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
		if err != nil || len(body) > maxBody {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		sv, err := slack.NewSecretsVerifier(r.Header, a.cfg.SigningSecret)
		if err == nil {
			sv.Write(body)
			err = sv.Ensure()
		}
		if err != nil {
			a.log.Warn("slack request with a bad or stale signature refused", "path", r.URL.Path, "err", err)
			http.Error(w, "invalid signature", http.StatusUnauthorized)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		next.ServeHTTP(w, r)
	})
}

func (a *Adapter) eventsHandler(d agent.Submitter) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		ev, err := slackevents.ParseEvent(body, slackevents.OptionNoVerifyToken())
		if err != nil {
			http.Error(w, "bad event", http.StatusBadRequest)
			return
		}
		if ev.Type == slackevents.URLVerification {
			var v slackevents.ChallengeResponse
			if err := json.Unmarshal(body, &v); err != nil {
				http.Error(w, "bad challenge", http.StatusBadRequest)
				return
			}
			w.Header().Set("Content-Type", "text/plain")
			io.WriteString(w, v.Challenge)
			return
		}
		// 200 only once the message is recorded: an error makes Slack retry.
		if err := a.submitEvent(r.Context(), d, ev); err != nil {
			a.log.Error("slack event not recorded; Slack will retry", "err", err)
			http.Error(w, "try again", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
}

func (a *Adapter) commandsHandler(d agent.Submitter) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cmd, err := slack.SlashCommandParse(r)
		if err != nil {
			http.Error(w, "bad command", http.StatusBadRequest)
			return
		}
		reply, then, err := a.submitCommand(r.Context(), d, cmd)
		if err != nil {
			http.Error(w, "try again", http.StatusServiceUnavailable)
			return
		}
		respond(w, r, reply, then)
	})
}

// respond answers Slack at once (it waits three seconds at most), then
// runs then, if any, in the handler: the server owns it and waits for it
// on shutdown.
func respond(w http.ResponseWriter, r *http.Request, reply any, then func(context.Context)) {
	var body []byte
	if reply != nil {
		var err error
		if body, err = json.Marshal(reply); err != nil {
			body = nil
		} else {
			w.Header().Set("Content-Type", "application/json")
		}
	}
	// With its length said, the answer is whole once flushed.
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
	if then == nil {
		return
	}
	_ = http.NewResponseController(w).Flush()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), followUpTimeout)
	defer cancel()
	then(ctx)
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
