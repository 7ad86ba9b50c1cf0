package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/firstmate/firstmate/adapters/slack"
	"github.com/firstmate/firstmate/adapters/telegram"
	"github.com/firstmate/firstmate/internal/config"
	"github.com/firstmate/firstmate/store/local"
)

// report prints doctor's findings, one line each, and remembers failures.
type report struct {
	w      io.Writer
	failed bool
}

func (r *report) ok(what, detail string)   { fmt.Fprintf(r.w, "ok    %-10s %s\n", what, detail) }
func (r *report) warn(what, detail string) { fmt.Fprintf(r.w, "warn  %-10s %s\n", what, detail) }
func (r *report) fail(what, detail string) {
	r.failed = true
	fmt.Fprintf(r.w, "FAIL  %-10s %s\n", what, indent(detail))
}

func indent(s string) string {
	return strings.ReplaceAll(strings.TrimSpace(s), "\n", "\n                 ")
}

// cmdDoctor checks the setup and says what is wrong and how to fix it. It
// reports ok=false when anything failed.
func cmdDoctor(ctx context.Context, args []string, stdout, stderr io.Writer) (bool, error) {
	fs, cfgPath := commonFlags("doctor", stderr)
	verbose := fs.Bool("v", false, "also print the effective configuration (secrets redacted)")
	if err := fs.Parse(args); err != nil {
		return false, errUsage
	}
	r := &report{w: stdout}
	path := *cfgPath
	if path == "" {
		path = os.Getenv(config.EnvConfig)
	}
	cfg, err := config.Load(path, os.LookupEnv)
	switch {
	case cfg == nil:
		r.fail("config", err.Error())
		return false, nil
	case err != nil:
		r.fail("config", err.Error())
	case path != "":
		r.ok("config", path)
	default:
		r.ok("config", "no file; defaults and environment")
	}
	for _, w := range cfg.Warnings() {
		r.warn("config", w)
	}
	doctorTools(ctx, r, cfg)
	if *verbose {
		fmt.Fprintf(stdout, "\neffective configuration:\n%s\n", cfg.Redacted())
	}

	doctorDataDir(r, cfg)
	doctorStore(ctx, r, cfg)
	doctorLLM(ctx, r, cfg)
	doctorPlatforms(ctx, r, cfg)
	if r.failed {
		fmt.Fprintln(stdout, "\nSomething needs fixing; see the FAIL lines above.")
	} else {
		fmt.Fprintln(stdout, "\nAll checks passed.")
	}
	return !r.failed, nil
}

// doctorTools builds the tools as serve would, which probes the sandbox
// for real, and says what is offered and what is not, and why.
func doctorTools(ctx context.Context, r *report, cfg *config.Config) {
	box, err := newToolbox(ctx, cfg, os.LookupEnv, slog.New(slog.DiscardHandler))
	if err != nil {
		r.fail("sandbox", err.Error())
		return
	}
	defer box.close()
	switch {
	case box.shellErr == nil && strings.Contains(box.sandbox, "WITHOUT A SANDBOX"):
		r.warn("sandbox", box.sandbox)
	case box.shellErr == nil:
		r.ok("sandbox", box.sandbox)
	case cfg.Sandbox == "off":
		r.warn("sandbox", "off: shell, start, jobs and stop are not offered")
	default:
		r.warn("sandbox", "shell, start, jobs and stop are not offered: "+box.sandbox)
	}
	if err := cfg.ValidateTools(box.set.Known()); err != nil {
		r.fail("tools", err.Error())
		return
	}
	r.ok("tools", strings.Join(box.set.Names(), ", "))
	for _, w := range cfg.PolicyWarnings(box.set.Known()) {
		r.warn("policy", w)
	}
	access := cfg.Access()
	var modes []string
	for _, p := range []string{"slack", "telegram"} {
		modes = append(modes, p+" "+string(access[p].Mode))
	}
	r.ok("access", strings.Join(modes, ", ")+fmt.Sprintf("; %d admin(s) configured", len(cfg.Admins)))
	if why, ok := box.set.Unavailable("search"); ok {
		r.warn("tools", "search is not offered: "+why)
	}
}

func doctorDataDir(r *report, cfg *config.Config) {
	dir := cfg.Store.DataDir
	if err := os.MkdirAll(dir, 0o700); err != nil {
		r.fail("data dir", fmt.Sprintf("%s: %v; set FIRSTMATE_DATA_DIR (or store.data_dir) to a writable directory", dir, err))
		return
	}
	f, err := os.CreateTemp(dir, ".doctor-*")
	if err != nil {
		r.fail("data dir", fmt.Sprintf("%s is not writable: %v; fix its permissions or set FIRSTMATE_DATA_DIR", dir, err))
		return
	}
	f.Close()
	os.Remove(f.Name())
	r.ok("data dir", dir)
}

func doctorStore(ctx context.Context, r *report, cfg *config.Config) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, kind, err := openStore(ctx, cfg)
	switch {
	case errors.Is(err, local.ErrInUse):
		r.ok("store", "embedded store "+filepath.Join(cfg.Store.DataDir, "firstmate.db")+" is open in a running firstmate")
		return
	case err != nil:
		fix := "check REDIS_URL (redis://host:6379/0) and that Redis is running"
		if cfg.Store.RedisURL == "" {
			fix = "check FIRSTMATE_DATA_DIR"
		}
		r.fail("store", fmt.Sprintf("%v; %s", err, fix))
		return
	}
	defer st.Close()
	r.ok("store", kind)
	if cfg.Store.RedisURL != "" {
		doctorSharedWorkspaces(r, workspaceDir(cfg))
	}
}

// sharedFS are the statfs magic numbers of filesystems that several
// machines mount: NFS (and EFS), SMB/CIFS, CephFS, Lustre, GPFS, FUSE
// (GlusterFS, JuiceFS, s3fs, …).
var sharedFS = map[int64]string{
	0x6969: "NFS", 0xFF534D42: "CIFS", 0xFE534D42: "SMB2", 0x517B: "SMB", 0x00C36400: "CephFS",
	0x0BD00BD0: "Lustre", 0x47504653: "GPFS", 0x65735546: "FUSE",
}

// doctorSharedWorkspaces warns when, with Redis (several replicas), the
// workspaces are on a filesystem only this machine sees: a conversation's
// next turn may run on another replica, which would not find its files.
func doctorSharedWorkspaces(r *report, dir string) {
	for d := dir; ; d = filepath.Dir(d) {
		var st syscall.Statfs_t
		if err := syscall.Statfs(d, &st); err == nil {
			if name, ok := sharedFS[int64(st.Type)]; ok {
				r.ok("workspaces", fmt.Sprintf("%s is on %s, which other replicas can share", dir, name))
			} else {
				r.warn("workspaces", fmt.Sprintf("%s is on a local filesystem (type %#x): with several replicas, put FIRSTMATE_DATA_DIR on shared storage (NFS, EFS, CephFS, a ReadWriteMany volume), or run one replica", dir, st.Type))
			}
			return
		}
		if d == filepath.Dir(d) {
			return
		}
	}
}

func doctorLLM(ctx context.Context, r *report, cfg *config.Config) {
	if err := cfg.RequireLLM(); err != nil {
		r.fail("llm", err.Error())
		return
	}
	m, err := newModel(cfg)
	if err != nil {
		r.fail("llm", err.Error())
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	models, err := m.ListModels(ctx)
	if err != nil {
		r.fail("llm", fmt.Sprintf("%s: %v", cfg.LLM.BaseURL, err))
		return
	}
	if len(models) > 0 && !slices.Contains(models, cfg.LLM.Model) {
		shown := models
		if len(shown) > 10 {
			shown = shown[:10]
		}
		r.warn("llm", fmt.Sprintf("%s does not list model %q (it lists %s); check FIRSTMATE_MODEL", cfg.LLM.BaseURL, cfg.LLM.Model, strings.Join(shown, ", ")))
		return
	}
	r.ok("llm", fmt.Sprintf("%s answers; model %s", cfg.LLM.BaseURL, cfg.LLM.Model))
}

// doctorSlack checks the bot token with auth.test.
func doctorSlack(ctx context.Context, r *report, cfg *config.Config) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	sl, err := slack.New(ctx, slack.Config{BotToken: cfg.Slack.BotToken.Reveal(), AppToken: cfg.Slack.AppToken.Reveal(),
		SigningSecret: cfg.Slack.SigningSecret.Reveal(), APIURL: cfg.Slack.APIURL})
	if err != nil {
		r.fail("slack", err.Error())
		return
	}
	how := "Socket Mode"
	if cfg.Slack.AppToken == "" {
		how = "HTTP events at " + cfg.HTTP.Addr + "/slack/events"
	}
	r.ok("slack", fmt.Sprintf("bot %s in team %s; %s", sl.BotUserID(), sl.TeamID(), how))
}

// doctorTelegram checks the bot token with getMe.
func doctorTelegram(ctx context.Context, r *report, cfg *config.Config) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	tg, err := telegram.New(ctx, telegramConfig(cfg, 0, slog.New(slog.DiscardHandler)))
	if err != nil {
		r.fail("telegram", err.Error())
		return
	}
	how := "long polling"
	if cfg.Telegram.WebhookURL != "" {
		how = "webhook at " + cfg.Telegram.WebhookURL
	}
	r.ok("telegram", fmt.Sprintf("bot @%s; %s", tg.Username(), how))
}

func doctorPlatforms(ctx context.Context, r *report, cfg *config.Config) {
	if !cfg.Slack.Enabled() && !cfg.Telegram.Enabled() {
		r.warn("platforms", "no Slack or Telegram token set; `firstmate chat` works, `firstmate serve` has nothing to serve")
		return
	}
	if cfg.Telegram.Enabled() {
		doctorTelegram(ctx, r, cfg)
	}
	if cfg.Slack.Enabled() {
		doctorSlack(ctx, r, cfg)
	}
}
