package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"github.com/firstmate/firstmate/internal/config"
	"github.com/firstmate/firstmate/tools"
	"github.com/firstmate/firstmate/tools/files"
	"github.com/firstmate/firstmate/tools/sandbox"
	"github.com/firstmate/firstmate/tools/shell"
	"github.com/firstmate/firstmate/tools/web"
)

// toolbox is every tool this process offers, and what it needs to run
// them: the shell's sandbox (when this host has a working one) and its
// background jobs.
type toolbox struct {
	set     *tools.Set
	shell   *shell.Shell // nil when the shell is unavailable
	sandbox string       // one line on where shell commands run, or why they cannot
	// shellErr says why the shell is unavailable; nil when it is offered.
	shellErr error
	// wsOpts make workspace files belong to the sandbox's user, so that
	// commands can change what the file tools wrote.
	wsOpts []tools.WorkspaceOption
}

// close stops the background jobs.
func (b *toolbox) close() {
	if b.shell != nil {
		b.shell.Close()
	}
}

// newToolbox builds the tool set. It probes the sandbox (a few
// sandboxed commands, tens of milliseconds); with sandbox: namespaces a
// failed probe is an error.
func newToolbox(ctx context.Context, cfg *config.Config, env func(string) (string, bool), log *slog.Logger) (*toolbox, error) {
	b := &toolbox{}
	all := files.All(files.Options{})
	var opts []tools.SetOption

	sb, line, err := newSandbox(ctx, cfg, env, log)
	b.sandbox = line
	switch {
	case err == nil:
		b.shell = shell.New(shell.Config{
			Sandbox:    sb,
			MaxTimeout: cfg.Shell.MaxTimeout,
			Quota:      int64(cfg.Shell.QuotaMB) << 20,
			Jobs:       shell.JobLimits{PerChannel: cfg.Shell.Jobs.PerChannel, Lifetime: cfg.Shell.Jobs.Lifetime},
		})
		all = append(all, b.shell.Tools()...)
		if uid, gid := sb.Owner(); uid >= 0 {
			b.wsOpts = append(b.wsOpts, tools.WithOwner(tools.Owner{UID: uid, GID: gid}))
		}
	case cfg.Sandbox == "namespaces":
		return nil, fmt.Errorf("sandbox: namespaces is set, but %w", err)
	default:
		b.shellErr = err
		b.sandbox = err.Error()
		for _, n := range shell.Names {
			opts = append(opts, tools.WithUnavailable(n, err.Error()))
		}
	}

	f := cfg.Web.Fetch
	fc := web.FetchConfig{Timeout: f.Timeout, MaxBody: int64(f.MaxBodyMB) << 20}
	for _, n := range f.AllowNetworks {
		p, err := netip.ParsePrefix(n)
		if err != nil {
			return nil, fmt.Errorf("web.fetch.allow_networks: %w", err) // Load validated it
		}
		fc.AllowNetworks = append(fc.AllowNetworks, p)
	}
	for _, p := range f.Ports {
		fc.Ports = append(fc.Ports, uint16(p))
	}
	all = append(all, web.Fetch(fc))
	if s := cfg.Web.Search; s.URL != "" {
		t, err := web.Search(web.SearchConfig{Kind: s.Kind, URL: s.URL})
		if err != nil {
			return nil, fmt.Errorf("web.search: %w", err)
		}
		all = append(all, t)
	} else {
		opts = append(opts, tools.WithUnavailable("search", "no search engine is configured; an operator can set web.search.url (or FIRSTMATE_SEARCH_URL) to a SearXNG instance"))
	}

	opts = append(opts, tools.WithSecrets(cfg.Secrets()...))
	b.set = tools.NewSet(all, opts...)
	return b, nil
}

// newSandbox returns the sandbox shell commands run in, probed, with a line
// saying what it is; or why there is none.
func newSandbox(ctx context.Context, cfg *config.Config, env func(string) (string, bool), log *slog.Logger) (*sandbox.Sandbox, string, error) {
	unsafe := config.UnsafeHostShell(env)
	s := cfg.Shell
	sc := sandbox.Config{Kind: sandbox.KindNamespaces, Limits: sandbox.Limits{
		Timeout: s.Timeout, Output: s.OutputKB << 10, TmpSize: int64(s.TmpMB) << 20,
		Procs: s.Processes, OpenFiles: s.OpenFiles, FileSize: int64(s.FileMB) << 20, Memory: int64(s.MemoryMB) << 20,
	}}
	if cfg.Sandbox == "off" {
		if unsafe {
			return hostSandbox(sc, log)
		}
		err := errors.New("the operator turned the shell off (sandbox: off)")
		return nil, err.Error(), err
	}
	helpers, err := helperCandidates(s.Helper)
	if err != nil {
		return nil, err.Error(), err
	}
	var probeErr error
	for _, exe := range helpers {
		sc.Exe = exe
		sb := sandbox.New(sc)
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		rep, err := sb.Probe(pctx)
		cancel()
		if err == nil {
			helper := "firstmate itself"
			if exe != "" {
				helper = exe
			}
			return sb, fmt.Sprintf("%s; helper %s", rep, helper), nil
		}
		probeErr = err
		log.Warn("sandbox probe failed", "helper", exe, "err", probeErr)
	}
	if unsafe && cfg.Sandbox == "auto" {
		return hostSandbox(sc, log)
	}
	return nil, probeErr.Error(), probeErr
}

func hostSandbox(sc sandbox.Config, log *slog.Logger) (*sandbox.Sandbox, string, error) {
	sc.Kind = sandbox.KindHost
	log.Error("UNSAFE: shell commands run on the host WITHOUT A SANDBOX because " + config.EnvUnsafeHostShell +
		"=1: anyone who can talk to the bot can run any command as this process's user, read its configuration and reach its network")
	return sandbox.New(sc), "commands run on the HOST WITHOUT A SANDBOX (" + config.EnvUnsafeHostShell + "=1)", nil
}

// helperCandidates lists the sandbox helpers to try, best first: the one
// configured, else firstmate-sandbox beside this binary (it starts ~2 ms
// faster), then this binary itself.
func helperCandidates(configured string) ([]string, error) {
	if configured != "" {
		if _, err := os.Stat(configured); err != nil {
			return nil, fmt.Errorf("shell.helper: %w", err)
		}
		return []string{configured}, nil
	}
	var out []string
	if exe, err := os.Executable(); err == nil {
		beside := filepath.Join(filepath.Dir(exe), sandbox.HelperName)
		if fi, err := os.Stat(beside); err == nil && fi.Mode().IsRegular() {
			out = append(out, beside)
		}
	}
	return append(out, ""), nil // "": this binary
}
