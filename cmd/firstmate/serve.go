package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

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

// adaptersFor builds the adapters the configuration asks for.
func adaptersFor(ctx context.Context, cfg *config.Config, log *slog.Logger) ([]adapter, error) {
	if !cfg.Slack.Enabled() && !cfg.Telegram.Enabled() {
		return nil, errNothingToServe
	}
	mode, err := adapters.ParseMode(cfg.Agent.Progress)
	if err != nil {
		return nil, err
	}
	var out []adapter
	if cfg.Telegram.Enabled() {
		tg, err := telegram.New(ctx, telegramConfig(cfg, mode, log))
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
			Logger:          log.With("platform", "slack"),
		})
		if err != nil {
			return nil, err
		}
		out = append(out, sl)
	}
	return out, nil
}

func cmdServe(ctx context.Context, args []string, _, stderr io.Writer) error {
	fs, cfgPath := commonFlags("serve", stderr)
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	cfg, err := loadConfig(*cfgPath)
	if err != nil {
		return err
	}
	if !cfg.Slack.Enabled() && !cfg.Telegram.Enabled() {
		return errNothingToServe
	}
	log := newLogger(cfg, stderr)
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	a, err := newApp(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer a.close()
	adapters, err := adaptersFor(ctx, cfg, log)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.HTTP.Addr)
	if err != nil {
		return fmt.Errorf("http listener: %w (set FIRSTMATE_HTTP_ADDR to a free address)", err)
	}
	return runServe(ctx, a, ln, adapters)
}

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

// runServe runs the dispatcher, the HTTP listener on ln and the adapters
// until ctx ends or one of them fails, then shuts down in order: first
// what receives messages (the adapters, and the listener, which drains its
// webhook requests), then the dispatcher, which gives running turns its
// grace period. So no message is accepted that nobody will answer.
func runServe(ctx context.Context, a *app, ln net.Listener, adapters []adapter) error {
	platforms := map[string]agent.Platform{}
	mux := http.NewServeMux()
	mux.Handle("GET /healthz", healthz(a.store))
	for _, ad := range adapters {
		platforms[ad.Name()] = ad
	}
	d := a.dispatcher(platforms)
	for _, ad := range adapters {
		ad.Routes(mux, d)
	}
	dctx, stopDispatcher := context.WithCancel(context.WithoutCancel(ctx))
	defer stopDispatcher()
	dispatcherDone := make(chan struct{})
	go func() { d.Run(dctx); close(dispatcherDone) }()

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
	a.log.Info("serving", "http", ln.Addr().String(), "platforms", len(adapters))
	<-ctx.Done()
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
func healthz(st agent.Store) http.Handler {
	probe := agent.SessionKey{Platform: "health", Chat: "probe"}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if _, err := st.Pending(ctx, probe); err != nil {
			http.Error(w, "store unavailable", http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ok\n")
	})
}
