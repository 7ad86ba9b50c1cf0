package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Sandbox starts confined commands. It is safe for concurrent use.
type Sandbox struct {
	cfg Config
	cg  atomic.Pointer[cgroups] // set by Probe where a delegated cgroup v2 exists
}

// New returns a sandbox; it does not check that it works (see [Probe]).
func New(cfg Config) *Sandbox {
	if cfg.Kind == "" {
		cfg.Kind = KindNamespaces
	}
	if cfg.Exe == "" {
		cfg.Exe = "/proc/self/exe"
	}
	if cfg.UID == 0 {
		cfg.UID = os.Geteuid()
		if cfg.UID == 0 {
			cfg.UID = 65534
		}
	}
	if cfg.GID == 0 {
		cfg.GID = os.Getegid()
		if cfg.GID == 0 || os.Geteuid() == 0 {
			cfg.GID = 65534
		}
	}
	if cfg.Path == "" {
		cfg.Path = DefaultPath
	}
	cfg.Limits = cfg.Limits.withDefaults()
	return &Sandbox{cfg: cfg}
}

// Kind says where commands run.
func (s *Sandbox) Kind() Kind { return s.cfg.Kind }

// Limits are the defaults for every command.
func (s *Sandbox) Limits() Limits { return s.cfg.Limits }

// Owner is the host uid and gid that workspace files must belong to for a
// command to write them, or -1, -1 when whatever this process creates
// already does (it is not root).
func (s *Sandbox) Owner() (uid, gid int) {
	if s.cfg.Kind != KindNamespaces || s.cfg.UID == os.Geteuid() {
		return -1, -1
	}
	return s.cfg.UID, s.cfg.GID
}

// Process is a started command.
type Process struct {
	cmd      *exec.Cmd
	status   *os.File
	cancel   context.CancelFunc
	started  time.Time
	deadline context.Context
	parent   context.Context
	cleanup  func() // removes the command's cgroup
	// autogroup is how lowering the nice of the command's session's
	// autogroup went (see lowerAutogroup); nil where it was not tried.
	autogroup error
}

// Start starts c with its output (stdout and stderr interleaved) written
// to out. The command is killed when ctx ends or its timeout passes.
func (s *Sandbox) Start(ctx context.Context, c Command, out io.Writer) (*Process, error) {
	if err := checkEnv(c.Env); err != nil {
		return nil, err
	}
	l := s.merge(c.Limits)
	var dctx context.Context
	var cancel context.CancelFunc
	if c.Daemon {
		l.CPU = daemonCPU
		dctx, cancel = context.WithCancel(ctx)
	} else {
		dctx, cancel = context.WithTimeout(ctx, l.Timeout)
	}
	p := &Process{cancel: cancel, deadline: dctx, parent: ctx}
	var err error
	if s.cfg.Kind == KindHost {
		err = s.startHost(dctx, p, c, l, out)
	} else {
		err = s.startNS(dctx, p, c, l, out)
	}
	if err != nil {
		cancel()
		return nil, err
	}
	return p, nil
}

func (s *Sandbox) merge(l Limits) Limits { return l.or(s.cfg.Limits).withDefaults() }

const cloneFlags = syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWNET |
	syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS | syscall.CLONE_NEWCGROUP

func (s *Sandbox) startNS(ctx context.Context, p *Process, c Command, l Limits, out io.Writer) error {
	sp := spec{Script: c.Script, Dir: c.Dir, Path: s.cfg.Path, Limits: l, NoFSize: c.NoGrow, NoCreate: c.NoCreate,
		stdin: c.Stdin, stderr: c.Stderr, env: c.Env}
	mounts, files, err := openPaths(c.Paths)
	if err != nil {
		return err
	}
	defer closeAll(files)
	sp.Mounts, sp.mountFiles = mounts, files
	return s.startNSWith(ctx, p, sp, out)
}

func (s *Sandbox) startNSWith(ctx context.Context, p *Process, sp spec, out io.Writer) error {
	// A detached copy of the workspace mount: the helper attaches it
	// without needing any permission on the host path (the sandbox's uid
	// may not even be able to reach it).
	tfd, err := unix.OpenTree(unix.AT_FDCWD, sp.Dir, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if errors.Is(err, unix.EPERM) {
		sp.BindDir = true
		tfd, err = unix.Open(sp.Dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return fmt.Errorf("open workspace: %w", err)
	}
	ws := os.NewFile(uintptr(tfd), "workspace")
	defer ws.Close()
	sr, sw, err := os.Pipe()
	if err != nil {
		return err
	}
	defer sw.Close()
	cg := s.cg.Load()
	sp.Cgroup = cg != nil
	sp.V = protocol
	js, err := json.Marshal(sp)
	if err != nil {
		sr.Close()
		return err
	}
	cmd := exec.CommandContext(ctx, s.cfg.Exe)
	cmd.Args = []string{HelperName, string(js)}
	cmd.Env = []string{}
	for _, e := range sp.env {
		cmd.Env = append(cmd.Env, envPrefix+e)
	}
	cmd.Dir = "/"
	cmd.Stdin = sp.stdin
	cmd.Stdout, cmd.Stderr = out, out
	if sp.stderr != nil {
		cmd.Stderr = sp.stderr
	}
	cmd.ExtraFiles = append([]*os.File{ws, sw}, sp.mountFiles...)
	cmd.WaitDelay = 5 * time.Second
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  cloneFlags,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: s.cfg.UID, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: s.cfg.GID, Size: 1}},
		// The child must become the namespace's root itself: it starts as
		// the host uid, which is not mapped when running as root.
		Credential: &syscall.Credential{Uid: 0, Gid: 0, NoSetGroups: true},
		Pdeathsig:  syscall.SIGKILL,
		// A session of its own has no controlling terminal: otherwise,
		// with firstmate run from a terminal, /dev/tty would be the
		// operator's, to read keystrokes from, write to, and (without
		// Landlock's ioctl rights) type into with TIOCSTI.
		Setsid: true,
	}
	if cg != nil {
		// Straight into its own cgroup (CLONE_INTO_CGROUP): memory.max and
		// pids.max hold from the first instruction.
		f, remove, err := cg.create(sp.Limits)
		if err != nil {
			sr.Close()
			return fmt.Errorf("sandbox cgroup: %w", err)
		}
		defer f.Close()
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, int(f.Fd())
		p.cleanup = remove
	}
	p.started = time.Now()
	if err := cmd.Start(); err != nil {
		sr.Close()
		if p.cleanup != nil {
			p.cleanup()
		}
		return diagnose(err)
	}
	if cg == nil || !cg.cpu {
		p.autogroup = lowerAutogroup(cmd.Process.Pid)
	}
	p.cmd, p.status = cmd, sr
	return nil
}

// lowerAutogroup sets the nice of the autogroup the kernel made for the
// helper's session (Setsid) to the commands' nice. Where autogroup
// scheduling is on (kernel.sched_autogroup_enabled) and no cgroup
// controls the CPU, the scheduler shares the CPU between sessions first
// and by nice only within one: each command would get as much CPU as the
// whole of firstmate, whatever its own nice. Without CAP_SYS_ADMIN the
// kernel takes one such change per 100 ms, host-wide (EAGAIN otherwise);
// where autogroups are off the value is kept and unused.
func lowerAutogroup(pid int) error {
	return os.WriteFile(fmt.Sprintf("/proc/%d/autogroup", pid), []byte(strconv.Itoa(commandNice)), 0)
}

func (s *Sandbox) startHost(ctx context.Context, p *Process, c Command, l Limits, out io.Writer) error {
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", c.Script)
	cmd.Env = append([]string{"PATH=" + s.cfg.Path, "HOME=" + c.Dir, "LANG=C.UTF-8"}, c.Env...)
	cmd.Dir = c.Dir
	cmd.Stdin = c.Stdin
	cmd.Stdout, cmd.Stderr = out, out
	if c.Stderr != nil {
		cmd.Stderr = c.Stderr
	}
	cmd.WaitDelay = 5 * time.Second
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	p.started = time.Now()
	if err := cmd.Start(); err != nil {
		return err
	}
	// Without a sandbox the limits and the priority can only be set once
	// the process runs (it shares firstmate's session, so nice holds).
	for _, r := range []struct {
		res int
		val uint64
	}{{unix.RLIMIT_CORE, 0}, {unix.RLIMIT_FSIZE, uint64(l.FileSize)}, {unix.RLIMIT_CPU, uint64(l.CPU / time.Second)}} {
		unix.Prlimit(cmd.Process.Pid, r.res, &unix.Rlimit{Cur: r.val, Max: r.val}, nil)
	}
	unix.SchedSetAttr(cmd.Process.Pid, &unix.SchedAttr{Policy: unix.SCHED_BATCH, Nice: commandNice}, 0)
	p.cmd = cmd
	return nil
}

// Kill ends the command and everything it started.
func (p *Process) Kill() { p.cancel() }

// Pid is the helper's host process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Wait waits for the command to end. The Result has no Output (the writer
// given to Start has it). The error is non-nil when the sandbox could not
// run the command (ErrSetup) or ctx ended it; a command that failed is a
// Result with its exit code.
func (p *Process) Wait() (Result, error) {
	err := p.cmd.Wait()
	p.cancel()
	if p.cleanup != nil {
		p.cleanup()
	}
	res := Result{Took: time.Since(p.started), ExitCode: -1}
	if st := p.cmd.ProcessState; st != nil {
		res.ExitCode = st.ExitCode()
		res.CPU = st.UserTime() + st.SystemTime()
		if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			res.Signal = unix.SignalName(ws.Signal())
			if res.Signal == "" {
				res.Signal = ws.Signal().String()
			}
		}
	}
	if p.status != nil {
		msg, _ := io.ReadAll(p.status)
		p.status.Close()
		if len(msg) > 0 {
			return res, fmt.Errorf("%w: %s", ErrSetup, msg)
		}
	}
	if p.parent.Err() != nil {
		return res, p.parent.Err()
	}
	if errors.Is(p.deadline.Err(), context.DeadlineExceeded) {
		res.TimedOut = true
		return res, nil
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) && !errors.Is(err, exec.ErrWaitDelay) {
		return res, err
	}
	return res, nil
}

// Run runs c to its end and returns its output, cut to the limit.
func (s *Sandbox) Run(ctx context.Context, c Command) (Result, error) {
	capt := newCapture(s.merge(c.Limits).Output)
	p, err := s.Start(ctx, c, capt)
	if err != nil {
		return Result{}, err
	}
	res, err := p.Wait()
	res.Output, res.Total, res.Cut = capt.bytes()
	return res, err
}

// diagnose turns a failure to create the namespaces into what an operator
// can act on.
func diagnose(err error) error {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return err
	}
	read := func(p string) string {
		b, _ := os.ReadFile(p)
		return strings.TrimSpace(string(b))
	}
	switch {
	case errno == syscall.ENOSPC || read("/proc/sys/user/max_user_namespaces") == "0":
		return &Unavailable{Err: err, Cause: "user namespaces are disabled (user.max_user_namespaces is 0)",
			Fix: "enable them with `sysctl -w user.max_user_namespaces=15000`"}
	case read("/proc/sys/kernel/unprivileged_userns_clone") == "0" && os.Geteuid() != 0:
		return &Unavailable{Err: err, Cause: "the kernel forbids unprivileged user namespaces (kernel.unprivileged_userns_clone is 0)",
			Fix: "enable them with `sysctl -w kernel.unprivileged_userns_clone=1`"}
	case read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == "1" && os.Geteuid() != 0:
		return &Unavailable{Err: err, Cause: "AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns is 1)",
			Fix: "give the firstmate binary an AppArmor profile that allows `userns,` (see README), or set the sysctl to 0"}
	case errno == syscall.EPERM || errno == syscall.EACCES:
		return &Unavailable{Err: err, Cause: "creating namespaces was refused (" + errno.Error() + "), most likely by a container's seccomp profile or a missing capability",
			Fix: "in Docker run with `--security-opt seccomp=deploy/docker/seccomp.json --security-opt apparmor=unconfined --security-opt systempaths=unconfined` (the profile allows the namespace calls the sandbox makes, and nothing more); in Kubernetes use that profile as a Localhost seccomp profile (or Unconfined) with `hostUsers: false` and `procMount: Unmasked`"}
	case errno == syscall.EINVAL:
		return &Unavailable{Err: err, Cause: "this kernel lacks a namespace the sandbox needs (" + errno.Error() + ")",
			Fix: "use a kernel with user, mount, PID, network, IPC, UTS and cgroup namespaces (Linux 4.6 or later)"}
	}
	return &Unavailable{Err: err, Cause: "starting the sandbox failed: " + err.Error()}
}
