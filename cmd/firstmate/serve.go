package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"
	goredis "github.com/redis/go-redis/v9"

	"github.com/firstmate/firstmate/adapters"
	"github.com/firstmate/firstmate/adapters/slack"
	"github.com/firstmate/firstmate/adapters/telegram"
	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/internal/config"
)

// errNothingToServe names what to set when no platform is configured.
var errNothingToServe = errors.New(`nothing to serve: no platform is configured.
  Slack:    set SLACK_BOT_TOKEN and SLACK_APP_TOKEN (Socket Mode), or SLACK_BOT_TOKEN and SLACK_SIGNING_SECRET (HTTP events)
  Telegram: set TELEGRAM_BOT_TOKEN
  Or talk to firstmate in this terminal: firstmate chat`)

// adapter is a platform connection that serve runs: it receives events,
// submits them to the dispatcher and renders the dispatcher's threads.
type adapter interface {
	agent.Platform
	Name() string // the agent.SessionKey platform it serves
	// Routes adds the adapter's webhook handlers, if it has any.
	Routes(mux *http.ServeMux, d agent.Submitter)
	// Run receives events until ctx ends.
	Run(ctx context.Context, d agent.Submitter) error
	// Drain waits until the turns have shown what they still had to, after
	// the dispatcher stopped, or until ctx ends.
	Drain(ctx context.Context)
}

// adaptersFor builds the adapters the configuration asks for; m counts
// their API calls.
func adaptersFor(ctx context.Context, cfg *config.Config, log *slog.Logger, m *metrics, lease telegram.PollLease, owner string) ([]adapter, error) {
	if !cfg.Slack.Enabled() && !cfg.Telegram.Enabled() {
		return nil, errNothingToServe
	}
	mode, err := adapters.ParseMode(cfg.Agent.Progress)
	if err != nil {
		return nil, err
	}
	var out []adapter
	if cfg.Telegram.Enabled() {
		tc := telegramConfig(cfg, mode, log)
		// Long polling: one replica polls at a time (the lease), the
		// others stand by. Webhooks reach every replica.
		tc.PollLease, tc.Owner = lease, owner
		// No client timeout: a long poll waits; every call has a ctx.
		tc.HTTPClient = m.client(telegram.Platform, telegramMethod(cfg.Telegram.APIURL), 0)
		tg, err := telegram.New(ctx, tc)
		if err != nil {
			return nil, err
		}
		out = append(out, tg)
	}
	if cfg.Slack.Enabled() {
		sl, err := slack.New(ctx, slack.Config{
			BotToken:        cfg.Slack.BotToken.Reveal(),
			AppToken:        cfg.Slack.AppToken.Reveal(),
			SigningSecret:   cfg.Slack.SigningSecret.Reveal(),
			APIURL:          cfg.Slack.APIURL,
			Progress:        mode,
			AllowBots:       cfg.Slack.AllowBots,
			WorkspaceAdmins: cfg.Slack.WorkspaceAdmins,
			HTTPClient:      m.client(slack.Platform, slackMethod(cmp.Or(cfg.Slack.APIURL, slackAPI)), 60*time.Second),
			Logger:          log.With("platform", "slack"),
		})
		if err != nil {
			return nil, err
		}
		out = append(out, sl)
	}
	return out, nil
}

func cmdServe(ctx context.Context, c *cli, args []string) error {
	stderr := c.stderr
	fs := commonFlags(c, "serve", "Run the Slack and Telegram adapters and the HTTP listener (health, metrics, webhooks).")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, err := c.load()
	if err != nil {
		return err
	}
	if !cfg.Slack.Enabled() && !cfg.Telegram.Enabled() {
		return errNothingToServe
	}
	log := newLogger(cfg, stderr)
	libraryLogs(log)
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	a, err := newApp(ctx, cfg, log, replicaName(cfg, os.LookupEnv))
	if err != nil {
		return err
	}
	defer a.close()
	logStart(log, c, cfg, a.store, servePlatforms(cfg))
	m := newMetrics(a.tools.set.Known())
	adapters, err := adaptersFor(ctx, cfg, log, m, a.store, a.owner)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.HTTP.Addr)
	if err != nil {
		return fmt.Errorf("http listener: %w (set FIRSTMATE_HTTP_ADDR to a free address)", err)
	}
	return serve(ctx, a, ln, adapters, m)
}

// slackAPI is Slack's Web API, when SLACK_API_URL does not say otherwise.
const slackAPI = "https://slack.com/api/"

func telegramConfig(cfg *config.Config, mode adapters.Mode, log *slog.Logger) telegram.Config {
	return telegram.Config{
		Token:         cfg.Telegram.BotToken.Reveal(),
		APIURL:        cfg.Telegram.APIURL,
		WebhookURL:    cfg.Telegram.WebhookURL,
		WebhookSecret: cfg.Telegram.WebhookSecret.Reveal(),
		Progress:      mode,
		AllowBots:     cfg.Telegram.AllowBots,
		ChannelPosts:  cfg.Telegram.ChannelPosts,
		ChatAdmins:    cfg.Telegram.ChatAdmins,
		Logger:        log.With("platform", "telegram"),
	}
}

// runServe is serve with metrics of its own; the adapters' API calls are
// not among them (their clients were built without).
func runServe(ctx context.Context, a *app, ln net.Listener, adapters []adapter) error {
	return serve(ctx, a, ln, adapters, newMetrics(a.tools.set.Known()))
}

// serve runs the dispatcher, the HTTP listener on ln and the adapters
// until ctx ends or one of them fails, then shuts down in order: first
// what receives messages (the adapters, and the listener, which drains its
// webhook requests), then the dispatcher, which gives running turns its
// grace period. So no message is accepted that nobody will answer. The
// dispatcher reports to m, which /metrics shows.
func serve(ctx context.Context, a *app, ln net.Listener, adapters []adapter, m *metrics) error {
	platforms := map[string]agent.Platform{}
	var stopping atomic.Bool // /readyz says 503 from the first moment of shutdown
	mux := http.NewServeMux()
	mux.Handle("GET /healthz", healthz(a.store))
	mux.Handle("GET /readyz", readyz(a.store, adapters, &stopping, a.tools.mcp))
	mux.Handle("GET /metrics", m.handler(a.log))
	if a.cfg.HTTP.Pprof {
		routePprof(mux)
	}
	for _, ad := range adapters {
		platforms[ad.Name()] = ad
		m.platforms(ad.Name())
	}
	a.observer = m
	d := a.dispatcher(platforms)
	for _, ad := range adapters {
		ad.Routes(mux, d)
	}
	dctx, stopDispatcher := context.WithCancel(context.WithoutCancel(ctx))
	defer stopDispatcher()
	dispatcherDone := make(chan struct{})
	go func() { a.run(dctx, d); close(dispatcherDone) }()

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var receivers sync.WaitGroup
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(a.log.Handler(), slog.LevelWarn)}
	receivers.Go(func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			cancel(fmt.Errorf("http listener: %w", err))
		}
	})
	for _, ad := range adapters {
		receivers.Go(func() {
			if err := ad.Run(ctx, d); err != nil && ctx.Err() == nil {
				cancel(fmt.Errorf("%s: %w", ad.Name(), err))
			}
		})
	}
	// The adapters connect without waiting for the sandbox probe; with
	// sandbox: namespaces its failure still stops serve.
	receivers.Go(func() {
		if err := a.tools.wait(ctx); err != nil && ctx.Err() == nil {
			cancel(err)
		}
	})
	receivers.Go(func() { trimAfterBusy(ctx, &m.done, 10*time.Second) })
	a.log.Info("serving", "http", ln.Addr().String(), "platforms", len(adapters))
	<-ctx.Done()
	stopping.Store(true)
	a.log.Info("shutting down")
	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer scancel()
	srv.Shutdown(sctx)
	receivers.Wait()
	stopDispatcher()
	<-dispatcherDone
	// What the last turns still show (a progress summary, ✅) gets a few
	// seconds of its own.
	dctx, dcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer dcancel()
	for _, ad := range adapters {
		ad.Drain(dctx)
	}
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	a.log.Info("stopped")
	return nil
}

// healthz answers 200 while the store answers, 503 otherwise.
func healthz(st store) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := storeAnswers(r.Context(), st); err != nil {
			http.Error(w, "store unavailable", http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ok\n")
	})
}

// storeAnswers makes a cheap store call, waiting 2 s at most.
func storeAnswers(ctx context.Context, st store) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err := st.Pending(ctx, agent.SessionKey{Platform: "health", Chat: "probe"})
	return err
}

// readier is an adapter that knows whether its platform reaches it (Slack's
// Socket Mode connected, Telegram polling or its webhook set).
type readier interface{ Ready() error }

// readyz answers 200 while this process can take work: it is not shutting
// down, every adapter is connected, what else must be ready is (the MCP
// servers' first tool listings, which turns wait for) and the store
// answers; 503 with the first reason otherwise.
func readyz(st store, adapters []adapter, stopping *atomic.Bool, more ...readier) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if stopping.Load() {
			http.Error(w, "shutting down", http.StatusServiceUnavailable)
			return
		}
		checks := make([]readier, 0, len(adapters)+len(more))
		for _, ad := range adapters {
			if rd, ok := ad.(readier); ok {
				checks = append(checks, rd)
			}
		}
		checks = append(checks, more...)
		for _, rd := range checks {
			if err := rd.Ready(); err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		if err := storeAnswers(r.Context(), st); err != nil {
			http.Error(w, "store unavailable", http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ready\n")
	})
}

// libraryLogs sends what go-redis and telegram-bot-api print through log,
// at warn level, so that with log.format json every line is JSON (both
// keep their logger in a package variable; the standard library's log
// goes the same way). Slack's clients are given their logger in
// adapters/slack.
func libraryLogs(log *slog.Logger) {
	slog.SetDefault(log)
	goredis.SetLogger(redisLog{log.With("lib", "go-redis")})
	_ = tgbotapi.SetLogger(printfLog{log.With("lib", "telegram-bot-api")})
}

// redisLog is go-redis's internal.Logging over slog.
type redisLog struct{ log *slog.Logger }

func (l redisLog) Printf(ctx context.Context, format string, v ...any) {
	l.log.WarnContext(ctx, strings.TrimSpace(fmt.Sprintf(format, v...)))
}

// printfLog is telegram-bot-api's BotLogger over slog.
type printfLog struct{ log *slog.Logger }

func (l printfLog) Println(v ...any) { l.log.Warn(strings.TrimSpace(fmt.Sprintln(v...))) }

func (l printfLog) Printf(format string, v ...any) {
	l.log.Warn(strings.TrimSpace(fmt.Sprintf(format, v...)))
}

// trimAfterBusy gives the memory a busy spell took back to the system once
// it is over: when turns were done in one period and none in the next, it
// collects and returns the freed pages (debug.FreeOSMemory, a few
// milliseconds). Without it the Go runtime returns them slowly, and a
// replica that answered a burst holds twice its idle memory for minutes.
func trimAfterBusy(ctx context.Context, done *atomic.Int64, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	last, busy := done.Load(), false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n := done.Load()
		if n == last && busy {
			debug.FreeOSMemory()
		}
		busy, last = n != last, n
	}
}
