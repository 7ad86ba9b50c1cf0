// Package shell gives the agent a shell: `shell` runs one command in a
// fresh sandbox confined to the channel's workspace, and background jobs
// (`start`, `jobs`, `stop`) run long commands — a dev server, a build —
// detached from the turn, each in its own sandbox.
package shell

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/firstmate/firstmate/tools"
	"github.com/firstmate/firstmate/tools/sandbox"
)

// Config sets up the shell tools.
type Config struct {
	Sandbox *sandbox.Sandbox
	// MaxTimeout caps the timeout a call may ask for; the sandbox's
	// Limits.Timeout is the default.
	MaxTimeout time.Duration
	// Quota (bytes) and QuotaFiles (entries: files, directories, links)
	// are the most a workspace may hold. A command or job that takes it
	// over either is stopped; over it, commands run but no file can grow
	// or be created until it is cleaned up.
	Quota      int64
	QuotaFiles int64
	Jobs       JobLimits
	// Board keeps the background jobs where every replica sees them (the
	// store); nil keeps them in this process.
	Board tools.JobBoard
	// Owner names this replica on the board (the dispatcher's lease
	// owner); "" uses the host name and process ID.
	Owner string
	// Guard is asked whether a job may start, and on every beat whether
	// each job running on this replica may go on (see tools.JobGuard);
	// nil lets every job run.
	Guard tools.JobGuard
	// Logger hears what goes wrong out of any turn's sight (a guard that
	// cannot decide); nil discards it.
	Logger *slog.Logger
}

// DefaultQuota and DefaultQuotaFiles are the workspace quota where
// Config leaves it zero.
const (
	DefaultQuota      = 1 << 30
	DefaultQuotaFiles = 100_000
)

// Shell holds the shell tools and the background jobs they started.
type Shell struct {
	cfg   Config
	jobs  *jobs
	quota *quota
}

// New returns the shell tools over sb.
func New(cfg Config) *Shell {
	if cfg.MaxTimeout <= 0 {
		cfg.MaxTimeout = 10 * time.Minute
	}
	cfg.MaxTimeout = min(cfg.MaxTimeout, sandbox.MaxTimeout)
	if cfg.Quota <= 0 {
		cfg.Quota = DefaultQuota
	}
	if cfg.QuotaFiles <= 0 {
		cfg.QuotaFiles = DefaultQuotaFiles
	}
	// Landlock is what forbids creating files over quota; the helper runs
	// on this kernel, so asking it here is asking the sandbox's.
	noCreate := cfg.Sandbox != nil && cfg.Sandbox.Kind() == sandbox.KindNamespaces && landlockABI() > 0
	s := &Shell{cfg: cfg, quota: newQuota(Usage{cfg.Quota, cfg.QuotaFiles}, noCreate)}
	s.jobs = newJobs(cfg, s.quota)
	return s
}

// Names are the tools this package provides; all run commands.
var Names = []string{"jobs", "shell", "start", "stop"}

// Unavailable names this package's tools as known but not offered, and
// why (no working sandbox): policy still governs them.
func Unavailable(why string) []tools.SetOption {
	opts := make([]tools.SetOption, len(Names))
	for i, n := range Names {
		opts[i] = tools.WithUnavailable(n, tools.PowerExec, why)
	}
	return opts
}

// Tools returns shell, start, jobs and stop.
func (s *Shell) Tools() []tools.Tool {
	return []tools.Tool{
		tools.New("shell", tools.PowerExec, s.shellDesc(), s.shell),
		tools.New("start", tools.PowerExec, startDesc, s.jobs.start),
		tools.New("jobs", tools.PowerExec, jobsDesc, s.jobs.list),
		tools.New("stop", tools.PowerExec, stopDesc, s.jobs.stop),
	}
}

// Close stops every background job and waits for them to end.
func (s *Shell) Close() { s.jobs.close() }

// shellDesc tells the model what a command may use, the quota included:
// it should not learn the caps by running into them.
func (s *Shell) shellDesc() string {
	return "Run a shell command (sh -c) in a fresh sandbox. The channel's workspace is /workspace " +
		"(the working directory and HOME); /tmp is scratch space that is emptied after the command; /usr is " +
		"read-only; there is no network. stdout and stderr are returned together, capped. Each call is a new " +
		"sandbox: nothing but files in /workspace survives it. " +
		fmt.Sprintf("The workspace may hold at most %s in %s files (directories and links count as files); ",
			tools.FormatSize(s.cfg.Quota), thousands(s.cfg.QuotaFiles)) +
		"a command or job that takes it over either is stopped, and until files are deleted no file can grow or be created. " +
		"For servers and other long-running commands use start."
}

type shellArgs struct {
	Command string `json:"command" jsonschema:"the command line, run by sh -c in /workspace"`
	Timeout int    `json:"timeout_seconds,omitempty" jsonschema:"how long it may run before it is killed (default 60)"`
}

func (s *Shell) shell(ctx context.Context, ws *tools.Workspace, a shellArgs) (tools.Result, error) {
	if strings.TrimSpace(a.Command) == "" {
		return tools.Result{}, errors.New("command is empty")
	}
	l := s.cfg.Sandbox.Limits()
	if a.Timeout > 0 {
		l.Timeout = min(time.Duration(a.Timeout)*time.Second, s.cfg.MaxTimeout)
	}
	before := s.quota.admit(ws.Dir())
	c := sandbox.Command{Dir: ws.Dir(), Script: a.Command, Limits: l}
	before.apply(&c)
	res, over, err := s.run(ctx, c, before)
	if err != nil {
		return tools.Result{}, err
	}
	var b strings.Builder
	if s.cfg.Sandbox.Kind() == sandbox.KindHost {
		b.WriteString(hostWarning + "\n")
	}
	b.Write(res.Output)
	if len(res.Output) > 0 && res.Output[len(res.Output)-1] != '\n' {
		b.WriteByte('\n')
	}
	status := res.Status(l.Timeout)
	if over {
		status = "stopped: it took the workspace over its quota"
		if before.frozen {
			status = "stopped: it grew the workspace while it was over its quota"
		}
	}
	fmt.Fprintf(&b, "[%s · %s", status, round(res.Took))
	if res.Cut > 0 {
		fmt.Fprintf(&b, " · %s of output, %s cut from the middle", tools.FormatSize(res.Total), tools.FormatSize(res.Cut))
	}
	b.WriteString("]")
	if note := afterNote(before, s.quota.admit(ws.Dir())); note != "" {
		b.WriteString("\n" + note)
	}
	summary := oneLine(a.Command, 60) + " → " + status // the thread shows the time itself
	if s.cfg.Sandbox.Kind() == sandbox.KindHost {
		summary = "⚠ unsandboxed: " + summary
	}
	return tools.Result{Text: b.String(), Summary: summary}, nil
}

// run runs c, killing it at once if the workspace goes over its quota
// meanwhile (over is then true).
func (s *Shell) run(ctx context.Context, c sandbox.Command, a admission) (res sandbox.Result, over bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done, tripped := make(chan struct{}), make(chan bool, 1)
	go func() {
		o := s.quota.guard(done, a)
		if o {
			cancel()
		}
		tripped <- o
	}()
	res, err = s.cfg.Sandbox.Run(ctx, c)
	close(done)
	if <-tripped {
		return res, true, nil
	}
	return res, false, err
}

const hostWarning = "⚠ This command ran on the host WITHOUT a sandbox (the operator set FIRSTMATE_UNSAFE_HOST_SHELL=1)."

// QuotaEnforcement says, for an operator (firstmate doctor), how the
// workspace quota is enforced on this host for workspaces under dir (the
// data dir's workspaces directory; it need not exist yet).
func (s *Shell) QuotaEnforcement(dir string) string {
	return s.quota.enforcement(dir, s.cfg.Sandbox.Kind())
}

func round(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

func oneLine(s string, n int) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i] + " …"
	}
	if r := []rune(s); len(r) > n {
		s = string(r[:n-1]) + "…"
	}
	return s
}
