package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/firstmate/firstmate/agent/schedules"
	"github.com/firstmate/firstmate/internal/config"
	"github.com/firstmate/firstmate/tools"
	"github.com/firstmate/firstmate/tools/files"
	"github.com/firstmate/firstmate/tools/mcp"
	"github.com/firstmate/firstmate/tools/sandbox"
	"github.com/firstmate/firstmate/tools/schedule"
	"github.com/firstmate/firstmate/tools/shell"
	"github.com/firstmate/firstmate/tools/skills"
	"github.com/firstmate/firstmate/tools/web"
)

// toolbox is every tool this process offers, and what it needs to run
// them: the shell's sandbox (when this host has a working one) and its
// background jobs.
//
// Probing the sandbox runs a few sandboxed commands: tens of milliseconds,
// more on a busy host. So that firstmate connects to the platforms without
// waiting for it, the probe runs in the background: until it ends, set
// offers the shell tools as if it will pass, a call of one waits for it,
// and a turn that does not call one does not wait. Then set.Current() is
// the set the probe decided.
type toolbox struct {
	set *tools.Set
	// skills are the skills offered (see skills.go); nil when off.
	skills *skills.Catalog
	// mcp runs the MCP servers and offers their tools (see mcp.go); nil
	// when none is configured.
	mcp *mcp.Hub
	sb  *sandbox.Sandbox // where shell commands run, once the probe passed
	// wsOpts make workspace files belong to the sandbox's user, so that
	// commands can change what the file tools wrote.
	wsOpts []tools.WorkspaceOption

	// probed is closed when the probe has ended; the fields below are read
	// only after it.
	probed  chan struct{}
	shell   *shell.Shell // nil when the shell is unavailable
	owner   *tools.Owner // who workspace files belong to; nil: this process
	sandbox string       // one line on where shell commands run, or why they cannot
	// shellErr says why the shell is unavailable; nil when it is offered.
	shellErr error
	// fatal is a failed probe with sandbox: namespaces: firstmate must stop.
	fatal error

	stopProbe context.CancelFunc
	wg        sync.WaitGroup // the probe
}

// close stops the probe if it still runs, then the background jobs.
func (b *toolbox) close() {
	b.mcp.Close()
	b.stopProbe()
	b.wg.Wait()
	if b.shell != nil {
		b.shell.Close()
	}
}

// wait waits for the probe to end and returns what must stop firstmate:
// with sandbox: namespaces, a failed probe. If ctx ends first it returns
// ctx's cause.
func (b *toolbox) wait(ctx context.Context) error {
	select {
	case <-b.probed: // first, in case ctx has ended too
		return b.fatal
	default:
	}
	select {
	case <-b.probed:
		return b.fatal
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// newToolbox builds the tool set once the sandbox probe has ended, for
// doctor, which reports on it: set is final. With sandbox: namespaces a
// failed probe is an error.
func newToolbox(ctx context.Context, cfg *config.Config, env func(string) (string, bool), log *slog.Logger) (*toolbox, error) {
	b, err := startToolbox(ctx, cfg, env, log, jobPlace{})
	if err != nil {
		return nil, err
	}
	if err := b.wait(ctx); err != nil {
		b.close()
		return nil, err
	}
	b.set = b.set.Current()
	return b, nil
}

// startToolbox builds the tool set and starts the sandbox probe on a
// goroutine that close stops and waits for. What the configuration alone
// decides (sandbox: off, a configured helper that does not exist) needs no
// probe and is settled before it returns. With sandbox: namespaces a
// failed probe is an error: returned here when no probe runs, else by wait.
func startToolbox(ctx context.Context, cfg *config.Config, env func(string) (string, bool), log *slog.Logger, jobs jobPlace) (*toolbox, error) {
	base, opts, err := otherTools(cfg, jobs)
	if err != nil {
		return nil, err
	}
	b := &toolbox{probed: make(chan struct{}), stopProbe: func() {}}
	if b.skills = newSkills(cfg, log); b.skills != nil {
		base = append(base, b.skills.Tool())
	}
	if b.mcp = newMCP(cfg, b, log); b.mcp != nil {
		opts = append(opts, tools.WithProvider(b.mcp))
	}
	// decide records where shell commands run (in sb, which line
	// describes) or why they cannot (err), and returns the set that follows.
	decide := func(sb *sandbox.Sandbox, line string, err error) *tools.Set {
		if err != nil {
			b.shellErr, b.sandbox = err, err.Error()
			return tools.NewSet(base, slices.Concat(opts, shell.Unavailable(err.Error()))...)
		}
		b.sandbox, b.sb = line, sb
		b.shell = shell.New(shellConfig(cfg, sb, jobs))
		if uid, gid := sb.Owner(); uid >= 0 {
			b.owner = &tools.Owner{UID: uid, GID: gid}
		}
		return tools.NewSet(slices.Concat(base, b.shell.Tools()), opts...)
	}

	sc := sandboxConfig(cfg)
	unsafe := config.UnsafeHostShell(env)
	var helpers []string
	switch {
	case cfg.Sandbox == "off" && unsafe:
		b.set = decide(hostSandbox(sc, log), hostLine, nil)
	case cfg.Sandbox == "off":
		b.set = decide(nil, "", errors.New("the operator turned the shell off (sandbox: off)"))
	default:
		if helpers, err = helperCandidates(cfg.Shell.Helper); err != nil {
			b.set = decide(nil, "", err)
		}
	}
	if b.set != nil { // decided without a probe
		close(b.probed)
		if err := mustStop(cfg, b.shellErr); err != nil {
			return nil, err
		}
		b.report(log)
		b.mcp.Start(ctx)
		return b, nil
	}

	// The shell tools offered until the probe ends. Only their names,
	// descriptions and schemas are used, and those do not depend on the
	// sandbox: their calls wait, then run in the set the probe decides.
	planned := sandbox.New(sc)
	p := tools.NewPending()
	b.set = tools.NewSet(slices.Concat(base, shell.New(shellConfig(cfg, planned, jobPlace{})).Tools()),
		slices.Concat(opts, []tools.SetOption{tools.WithPending(p, shell.Names...)})...)
	b.wsOpts = []tools.WorkspaceOption{b.ownerOption(planned)}
	pctx, cancel := context.WithCancel(ctx)
	b.stopProbe = cancel
	b.wg.Go(func() {
		defer close(b.probed)
		sb, line, err := probeSandbox(pctx, sc, helpers, unsafe && cfg.Sandbox == "auto", log)
		if pctx.Err() != nil {
			// Stopped before the probe ended: nothing to report, but calls
			// still waiting must be released.
			p.Settle(decide(nil, "", errors.New("firstmate stopped before the sandbox probe ended")))
			return
		}
		p.Settle(decide(sb, line, err))
		b.fatal = mustStop(cfg, err)
		b.report(log)
	})
	b.mcp.Start(ctx)
	return b, nil
}

// ownerOption gives a workspace, each time one is opened, to the user
// commands run as once the probe passed; if it failed, files stay this
// process's, as when there is no shell. While the probe runs, they are
// given as if it will pass (a turn may write a file, then run a command on
// it), unless this process cannot give files to that user at all, which
// leaves the sandbox no chance either. A workspace opened without an owner
// is handed over, whole, at its next open with one.
func (b *toolbox) ownerOption(planned *sandbox.Sandbox) tools.WorkspaceOption {
	var early *tools.Owner
	if uid, gid := planned.Owner(); uid >= 0 && idMapped("/proc/self/uid_map", uid) && idMapped("/proc/self/gid_map", gid) {
		early = &tools.Owner{UID: uid, GID: gid}
	}
	return func(w *tools.Workspace) {
		o := early
		select {
		case <-b.probed:
			o = b.owner
		default:
		}
		if o != nil {
			tools.WithOwner(*o)(w)
		}
	}
}

// idMapped reports whether id has a place in this process's user namespace
// (a uid_map or gid_map file): a file cannot be given to an id without
// one. Where the file cannot be read, chown is left to say.
func idMapped(file string, id int) bool {
	data, err := os.ReadFile(file)
	if err != nil {
		return true
	}
	for line := range strings.Lines(string(data)) {
		var inside, outside, count int64
		if n, _ := fmt.Sscan(line, &inside, &outside, &count); n == 3 && int64(id) >= inside && int64(id) < inside+count {
			return true
		}
	}
	return false
}

// mustStop is the error that stops firstmate when the shell is unavailable
// (err) although the operator asked for the sandbox (sandbox: namespaces).
func mustStop(cfg *config.Config, err error) error {
	if err == nil || cfg.Sandbox != "namespaces" {
		return nil
	}
	return fmt.Errorf("sandbox: namespaces is set, but %w", err)
}

// report logs where shell commands run, or why the shell is not offered;
// a failure that stops firstmate is reported by what stops it.
func (b *toolbox) report(log *slog.Logger) {
	switch {
	case b.fatal != nil:
	case b.shellErr != nil:
		log.Warn("the shell is not offered: " + b.sandbox)
	default:
		log.Info("shell: " + b.sandbox)
	}
}

// otherTools are the tools that need no probe: files, web and schedules,
// with the options every set shares.
func otherTools(cfg *config.Config, jobs jobPlace) ([]tools.Tool, []tools.SetOption, error) {
	all := files.All(files.Options{})
	all, opts := scheduleTools(cfg, jobs, all)
	f := cfg.Web.Fetch
	fc := web.FetchConfig{Timeout: f.Timeout, MaxBody: int64(f.MaxBodyMB) << 20}
	for _, n := range f.AllowNetworks {
		p, err := netip.ParsePrefix(n)
		if err != nil {
			return nil, nil, fmt.Errorf("web.fetch.allow_networks: %w", err) // Load validated it
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
			return nil, nil, fmt.Errorf("web.search: %w", err)
		}
		all = append(all, t)
	} else {
		opts = append(opts, tools.WithUnavailable("search", tools.PowerWeb, "no search engine is configured; an operator can set web.search.url (or FIRSTMATE_SEARCH_URL) to a SearXNG instance"))
	}
	return all, append(opts, tools.WithSecrets(cfg.Secrets()...)), nil
}

func sandboxConfig(cfg *config.Config) sandbox.Config {
	s := cfg.Shell
	return sandbox.Config{Kind: sandbox.KindNamespaces, Limits: sandbox.Limits{
		Timeout: s.Timeout, Output: s.OutputKB << 10, TmpSize: int64(s.TmpMB) << 20,
		Procs: s.Processes, OpenFiles: s.OpenFiles, FileSize: int64(s.FileMB) << 20, Memory: int64(s.MemoryMB) << 20,
	}}
}

// jobPlace is where background jobs are kept, so that every replica sees
// them: the store, and this replica's name in it. Zero keeps them in the
// process. sched keeps schedules (in the same store); nil offers none.
type jobPlace struct {
	board tools.JobBoard
	owner string
	sched *schedules.Scheduler
	guard tools.JobGuard // asked at a job's start and every beat; nil: none
}

// scheduleTools adds the schedule tools over jobs.sched to all; without a
// scheduler (scheduling is off, or doctor and admin, which run no
// dispatcher) it names them unavailable, so that a policy may still name
// them.
func scheduleTools(cfg *config.Config, jobs jobPlace, all []tools.Tool) ([]tools.Tool, []tools.SetOption) {
	var opts []tools.SetOption
	unavailable := func(why string, names ...string) {
		opts = append(opts, schedule.Unavailable(why, names...)...)
	}
	switch {
	case cfg.Schedules.PerChannel == 0:
		unavailable("scheduling is off; an operator can set schedules.per_channel above 0", schedule.Names...)
	case jobs.sched == nil:
		unavailable("schedules are kept by a running firstmate (serve or chat)", schedule.Names...)
	default:
		sc := jobs.sched.Config()
		all = append(all, schedule.Tools(schedule.Config{Scheduler: jobs.sched, Jobs: jobs.board,
			TimeZone: sc.Location.String(), MinInterval: sc.MinInterval, MaxWait: sc.MaxWait})...)
		if jobs.board == nil {
			unavailable("this store keeps no job board", "wait_for_job")
		}
	}
	return all, opts
}

func shellConfig(cfg *config.Config, sb *sandbox.Sandbox, jobs jobPlace) shell.Config {
	return shell.Config{
		Board:      jobs.board,
		Owner:      jobs.owner,
		Guard:      jobs.guard,
		Sandbox:    sb,
		MaxTimeout: cfg.Shell.MaxTimeout,
		Quota:      int64(cfg.Shell.QuotaMB) << 20,
		QuotaFiles: int64(cfg.Shell.QuotaFiles),
		Jobs:       shell.JobLimits{PerChannel: cfg.Shell.Jobs.PerChannel, Lifetime: cfg.Shell.Jobs.Lifetime, CPU: cfg.Shell.Jobs.CPU},
	}
}

// probeSandbox probes the helpers in order and returns the first sandbox
// that passes, with a line saying what it is; or, when none does, the host
// if fallback allows it, else why there is no sandbox.
func probeSandbox(ctx context.Context, sc sandbox.Config, helpers []string, fallback bool, log *slog.Logger) (*sandbox.Sandbox, string, error) {
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
		if ctx.Err() != nil {
			return nil, "", err
		}
		probeErr = err
		log.Warn("sandbox probe failed", "helper", exe, "err", probeErr)
	}
	if fallback {
		return hostSandbox(sc, log), hostLine, nil
	}
	return nil, "", probeErr
}

// hostLine describes commands run on the host.
const hostLine = "commands run on the HOST WITHOUT A SANDBOX (" + config.EnvUnsafeHostShell + "=1)"

// hostSandbox runs commands on the host, and says so loudly.
func hostSandbox(sc sandbox.Config, log *slog.Logger) *sandbox.Sandbox {
	sc.Kind = sandbox.KindHost
	log.Error("UNSAFE: shell commands run on the host WITHOUT A SANDBOX because " + config.EnvUnsafeHostShell +
		"=1: anyone who can talk to the bot can run any command as this process's user, read its configuration and reach its network")
	return sandbox.New(sc)
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
