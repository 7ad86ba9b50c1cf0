// Package sandbox runs shell commands confined to one workspace directory.
//
// Each command runs in a fresh set of Linux namespaces (user, mount, PID,
// network, IPC, UTS, cgroup) entered by a small helper: the firstmate
// binary re-executed under the name [HelperName]. The helper pivots into a
// minimal root (read-only /usr and a few /etc files, the workspace at
// /workspace, a size-capped /tmp, a fresh /proc, a minimal /dev), applies
// Landlock as a second layer, a seccomp filter and rlimits, drops every
// capability, lowers its CPU priority below firstmate's and executes
// `sh -c` with an empty environment. It is PID 1 of its namespace, so
// killing it ends every process the command started.
//
// The parent side ([Sandbox.Run], [Sandbox.Start]) enforces the wall-clock
// timeout, captures output with a cap and reports the exit status. [Probe]
// checks that the confinement holds on this host before any command runs.
package sandbox

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/firstmate/firstmate/tools"
)

// HelperName is argv[0] of the re-executed helper. A binary that can run
// sandboxed commands calls [MaybeHelper] first thing in main (and in
// TestMain), which takes over when it sees this name.
const HelperName = "firstmate-sandbox"

// Kind says where commands run.
type Kind string

const (
	// KindNamespaces confines every command (the only safe kind).
	KindNamespaces Kind = "namespaces"
	// KindHost runs commands on the host with only a timeout, rlimits and
	// an empty environment: an operator's explicit, logged choice.
	KindHost Kind = "host"
)

// Limits bound one command.
type Limits struct {
	Timeout time.Duration // wall clock; the whole PID namespace is killed
	Output  int           // bytes of stdout+stderr kept for the model
	// TmpSize is the most /tmp may hold; it gets no more than half of
	// Memory (see [Limits.TmpCap]).
	TmpSize int64
	// Procs bounds the processes and threads of a command: pids.max of
	// its cgroup where a cgroup v2 is delegated, RLIMIT_NPROC elsewhere.
	// Linux 5.14 and later count RLIMIT_NPROC per user namespace, and
	// each command has one of its own, so only the command's processes
	// count; older kernels count every process of the host uid, which all
	// commands share (Config.UID), so one channel's processes count
	// against another's commands there.
	Procs     int
	OpenFiles int   // RLIMIT_NOFILE
	FileSize  int64 // RLIMIT_FSIZE: the largest file a command may write
	// CPU is RLIMIT_CPU, the CPU time each process of the command may
	// use (0: the timeout plus a margin); the timeout bounds the command
	// as a whole. How the CPU is shared with firstmate is not a limit
	// but a priority: nice 10 and SCHED_BATCH always, cpu.weight where a
	// cgroup v2 is delegated.
	CPU time.Duration
	// Memory is memory.max of the command's own cgroup where a cgroup v2
	// is delegated: everything the command holds, /tmp included.
	// Elsewhere it is RLIMIT_DATA, which bounds the private memory (heap
	// and private writable mappings) of each process separately. That
	// counts writable mappings whether touched or not (each thread's
	// stack, Go's 32 MiB arena index): a Go program needs 48 to 80 MiB
	// just to start, and a JVM needs -Xmx below the limit.
	Memory int64
}

// TmpCap is the size of a command's /tmp: TmpSize, but at most half of
// Memory. A tmpfs lives in RAM; in a cgroup its pages count against
// memory.max, elsewhere they count nowhere, so the one rule keeps /tmp
// from taking more than half of what a command may hold either way.
func (l Limits) TmpCap() int64 {
	l = l.withDefaults()
	return min(l.TmpSize, l.Memory/2)
}

// DefaultLimits are the limits used where a field is zero.
var DefaultLimits = Limits{
	Timeout:   60 * time.Second,
	Output:    64 << 10,
	TmpSize:   256 << 20,
	Procs:     256,
	OpenFiles: 1024,
	FileSize:  1 << 30,
	Memory:    1 << 30,
}

// MaxTimeout caps any timeout a caller asks for.
const MaxTimeout = 30 * time.Minute

// or fills l's zero fields from d, all but CPU, which follows each
// command's own timeout.
func (l Limits) or(d Limits) Limits {
	if l.Timeout <= 0 {
		l.Timeout = d.Timeout
	}
	if l.Output <= 0 {
		l.Output = d.Output
	}
	if l.TmpSize <= 0 {
		l.TmpSize = d.TmpSize
	}
	if l.Procs <= 0 {
		l.Procs = d.Procs
	}
	if l.OpenFiles <= 0 {
		l.OpenFiles = d.OpenFiles
	}
	if l.FileSize <= 0 {
		l.FileSize = d.FileSize
	}
	if l.Memory <= 0 {
		l.Memory = d.Memory
	}
	return l
}

func (l Limits) withDefaults() Limits {
	l = l.or(DefaultLimits)
	l.Timeout = min(l.Timeout, MaxTimeout)
	if l.CPU <= 0 {
		l.CPU = l.Timeout + 5*time.Second
	}
	return l
}

// Unavailable says why commands cannot run here, and what fixes it.
type Unavailable struct {
	Cause string
	Fix   string
	Err   error
}

func (u *Unavailable) Error() string {
	s := "the sandbox is unavailable: " + u.Cause
	if u.Fix != "" {
		s += "; " + u.Fix
	}
	return s
}

func (u *Unavailable) Unwrap() error { return u.Err }

// ErrSetup marks a failure of the helper to build the sandbox for a command
// (as opposed to the command failing).
var ErrSetup = errors.New("sandbox setup failed")

// Result is how a command ended.
type Result struct {
	Output   []byte        // stdout and stderr interleaved, cut to Limits.Output
	Total    int64         // bytes the command wrote in all
	Cut      int64         // bytes of those not kept in Output
	ExitCode int           // -1 when killed by a signal
	Signal   string        // the signal that ended it, if any
	TimedOut bool          // the wall-clock timeout killed it
	Took     time.Duration // from start to exit
	// CPU is the CPU time (user and system) of the command and the
	// processes it waited for.
	CPU time.Duration
}

// Status is a short human description of how the command ended.
func (r Result) Status(timeout time.Duration) string {
	switch {
	case r.TimedOut:
		return fmt.Sprintf("timed out after %s and was killed", timeout.Round(time.Millisecond))
	case r.Signal != "":
		return "killed by " + r.Signal
	default:
		return fmt.Sprintf("exit code %d", r.ExitCode)
	}
}

// Config sets up a Sandbox.
type Config struct {
	Kind Kind
	// Exe is the helper executable: a binary that calls MaybeHelper. The
	// default is this very binary (/proc/self/exe), which still works
	// after the file on disk is replaced by an upgrade.
	Exe string
	// UID and GID are the host ids the sandbox's root maps to. Zero means
	// the current ids, or 65534 (nobody) when running as root: host uid 0
	// inside a namespace could write whatever root owns on the host. Every
	// command runs as them, whatever its channel: what keeps a command to
	// its own workspace is its mount namespace and Landlock, not its uid.
	UID, GID int
	Path     string // PATH inside; "" = DefaultPath
	Limits   Limits // defaults for every command
}

// DefaultPath is the PATH a command sees.
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/usr/local/go/bin"

// Command is one command to run.
type Command struct {
	Dir    string // the workspace's host directory
	Script string // run by sh -c
	Limits Limits // zero fields take the sandbox's
	// NoGrow forbids growing any file (RLIMIT_FSIZE 0): a workspace over
	// its quota can still be cleaned up, but not filled further.
	NoGrow bool
	// NoCreate forbids making anything in the workspace (Landlock, where
	// the kernel has it): over its file quota it can still be cleaned up.
	NoCreate bool

	// What a server (an MCP server on stdio) needs besides.

	// Stdin is the command's standard input; nil is /dev/null. An *os.File
	// (a pipe) is handed over as it is; another reader is copied by a
	// goroutine that Wait waits for.
	Stdin io.Reader
	// Stderr, if set, gets the command's standard error apart from its
	// output: the writer given to Start then gets stdout only.
	Stderr io.Writer
	// Env are NAME=value pairs added to the command's environment (which
	// holds only PATH, HOME and LANG otherwise); they may override those.
	// They reach the helper through its environment, never its argv,
	// which every user of the host can read.
	Env []string
	// Paths are host files or directories the command may read and
	// execute, mounted read-only at the same path (a Landlock read rule
	// too). Those under /usr and the top-level links into it (/bin, /lib,
	// …) are in view already; /workspace, /proc and /dev cannot be.
	Paths []string
	// Daemon runs the command until ctx ends or it is killed: no
	// wall-clock timeout and no CPU-time limit (a server, not a command).
	Daemon bool
}

// Report is what Probe found.
type Report struct {
	Kind     Kind
	Landlock int // the kernel's Landlock ABI version; 0 if it has none
	// Cgroup is the delegated cgroup v2 directory that commands' cgroups
	// are made in; "" when there is none.
	Cgroup string
	Memory string // how a command's memory is bounded here
	CPU    string // how commands yield the CPU to firstmate here
	Tmp    int64  // bytes a command's /tmp holds: the sandbox's Limits.TmpCap()
	Took   time.Duration
}

func (r Report) String() string {
	if r.Kind == KindHost {
		return "commands run on the host WITHOUT a sandbox (FIRSTMATE_UNSAFE_HOST_SHELL=1)"
	}
	ll := "no Landlock in this kernel: namespaces, seccomp and rlimits only"
	if r.Landlock > 0 {
		ll = fmt.Sprintf("Landlock ABI %d", r.Landlock)
	}
	return fmt.Sprintf("namespaces (user, mount, pid, net, ipc, uts, cgroup), %s, seccomp, rlimits; memory: %s; /tmp: %s; CPU: %s; probe passed in %s",
		ll, r.Memory, tools.FormatSize(r.Tmp), r.CPU, r.Took.Round(time.Millisecond))
}
