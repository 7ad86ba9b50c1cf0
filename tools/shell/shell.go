// Package shell gives the agent a shell: `shell` runs one command in a
// fresh sandbox confined to the channel's workspace, and background jobs
// (`start`, `jobs`, `stop`) run long commands — a dev server, a build —
// detached from the turn, each in its own sandbox.
package shell

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
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
	// Quota is the most a workspace may hold, checked after each command;
	// over it, commands run but no file can grow until it is cleaned up.
	Quota int64
	Jobs  JobLimits
}

// DefaultQuota is the workspace quota when Config.Quota is zero.
const DefaultQuota = 1 << 30

// Shell holds the shell tools and the background jobs they started.
type Shell struct {
	cfg  Config
	jobs *jobs

	mu   sync.Mutex
	over map[string]bool // workspace dir → over its quota at the last check
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
	s := &Shell{cfg: cfg, over: map[string]bool{}}
	s.jobs = newJobs(cfg.Sandbox, cfg.Jobs.withDefaults(), func(dir string) bool { return s.quotaAfter(dir) != "" })
	return s
}

// Names are the tools this package provides.
var Names = []string{"jobs", "shell", "start", "stop"}

// Tools returns shell, start, jobs and stop.
func (s *Shell) Tools() []tools.Tool {
	return []tools.Tool{
		tools.New("shell", shellDesc, s.shell),
		tools.New("start", startDesc, s.jobs.start),
		tools.New("jobs", jobsDesc, s.jobs.list),
		tools.New("stop", stopDesc, s.jobs.stop),
	}
}

// Close stops every background job and waits for them to end.
func (s *Shell) Close() { s.jobs.close() }

const shellDesc = "Run a shell command (sh -c) in a fresh sandbox. The channel's workspace is /workspace " +
	"(the working directory and HOME); /tmp is scratch space that is emptied after the command; /usr is " +
	"read-only; there is no network. stdout and stderr are returned together, capped. Each call is a new " +
	"sandbox: nothing but files in /workspace survives it. For servers and other long-running commands use start."

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
	noGrow, note := s.quotaBefore(ws.Dir())
	res, err := s.cfg.Sandbox.Run(ctx, sandbox.Command{Dir: ws.Dir(), Script: a.Command, Limits: l, NoGrow: noGrow})
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
	fmt.Fprintf(&b, "[%s · %s", status, round(res.Took))
	if res.Cut > 0 {
		fmt.Fprintf(&b, " · %s of output, %s cut from the middle", tools.FormatSize(res.Total), tools.FormatSize(res.Cut))
	}
	b.WriteString("]")
	switch q := s.quotaAfter(ws.Dir()); {
	case q != "" && note != "":
		b.WriteString("\n" + note)
	case q != "":
		b.WriteString("\n" + q)
	case note != "":
		fmt.Fprintf(&b, "\nThe workspace is back under its %s quota; files can grow again.", tools.FormatSize(s.cfg.Quota))
	}
	summary := oneLine(a.Command, 60) + " → " + status // the thread shows the time itself
	if s.cfg.Sandbox.Kind() == sandbox.KindHost {
		summary = "⚠ unsandboxed: " + summary
	}
	return tools.Result{Text: b.String(), Summary: summary}, nil
}

const hostWarning = "⚠ This command ran on the host WITHOUT a sandbox (the operator set FIRSTMATE_UNSAFE_HOST_SHELL=1)."

// quotaBefore says whether the workspace is still over its quota (checked
// again only when it was over at the last look).
func (s *Shell) quotaBefore(dir string) (noGrow bool, note string) {
	s.mu.Lock()
	over := s.over[dir]
	s.mu.Unlock()
	if !over {
		return false, ""
	}
	used := usage(dir)
	if used <= s.cfg.Quota {
		s.setOver(dir, false)
		return false, ""
	}
	return true, fmt.Sprintf("The workspace holds %s, over its %s quota, so this command could not grow any file; delete files to get under it.",
		tools.FormatSize(used), tools.FormatSize(s.cfg.Quota))
}

// quotaAfter measures the workspace after a command and says so if it is
// over its quota.
func (s *Shell) quotaAfter(dir string) string {
	used := usage(dir)
	over := used > s.cfg.Quota
	s.setOver(dir, over)
	if !over {
		return ""
	}
	return fmt.Sprintf("The workspace now holds %s, over its %s quota: until files are deleted, commands cannot grow any file.",
		tools.FormatSize(used), tools.FormatSize(s.cfg.Quota))
}

func (s *Shell) setOver(dir string, over bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if over {
		s.over[dir] = true
	} else {
		delete(s.over, dir)
	}
}

// usage is the disk space the files under dir take (like du: allocated
// blocks, so a sparse file counts for what it really uses).
func usage(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if fi, err := d.Info(); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				n += st.Blocks * 512
			}
		}
		return nil
	})
	return n
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
