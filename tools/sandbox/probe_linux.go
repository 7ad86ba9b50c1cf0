package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"

	"github.com/firstmate/firstmate/tools"
)

// probeProcs is the process limit the probe checks: small, so that a
// limit that does not bind shows up at once.
const probeProcs = 16

// Probe checks for real that a command cannot break out: a world-readable
// canary file outside the workspace must be unreadable, a listening host
// loopback port and a host unix socket unreachable, no capability left,
// and the process limit must hold. It returns an *Unavailable naming the
// cause when the sandbox cannot be used. A host sandbox is not probed.
func (s *Sandbox) Probe(ctx context.Context) (Report, error) {
	start := time.Now()
	rep := Report{Kind: s.cfg.Kind}
	if s.cfg.Kind == KindHost {
		return rep, nil
	}
	abi, _ := ll.LandlockGetABIVersion()
	rep.Landlock = max(abi, 0)
	l := s.cfg.Limits
	rep.Tmp = l.TmpCap()
	cg, why := findCgroups()
	if cg != nil {
		s.cg.Store(cg)
		rep.Cgroup = cg.parent
		rep.Memory = fmt.Sprintf("%s per command, /tmp within it, and %d processes (cgroup v2 %s)", tools.FormatSize(l.Memory), l.Procs, cg.parent)
	} else {
		rep.Memory = fmt.Sprintf("%s of private memory per process (RLIMIT_DATA; no cgroup: %s)", tools.FormatSize(l.Memory), why)
	}
	dir, err := os.MkdirTemp("", "firstmate-probe-")
	if err != nil {
		return rep, &Unavailable{Cause: "cannot create a probe directory: " + err.Error(), Err: err}
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	canary := filepath.Join(dir, "canary")
	if err := os.WriteFile(canary, []byte("secret"), 0o644); err != nil {
		return rep, &Unavailable{Cause: err.Error(), Err: err}
	}
	ws := filepath.Join(dir, "workspace")
	if err := os.Mkdir(ws, 0o777); err != nil {
		return rep, &Unavailable{Cause: err.Error(), Err: err}
	}
	if uid, gid := s.Owner(); uid >= 0 {
		os.Chown(ws, uid, gid)
	}
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return rep, &Unavailable{Cause: "cannot listen on loopback for the probe: " + err.Error(), Err: err}
	}
	defer tcp.Close()
	sock := filepath.Join(dir, "probe.sock")
	unix, err := net.Listen("unix", sock)
	if err != nil {
		return rep, &Unavailable{Cause: "cannot create a unix socket for the probe: " + err.Error(), Err: err}
	}
	defer unix.Close()
	os.Chmod(sock, 0o777)

	// 1. From inside, in Go: what must fail does.
	autogroup, err := s.runProbe(ctx, ws, &probe{Canary: canary, Loopback: tcp.Addr().String(), Socket: sock})
	if err != nil {
		return rep, err
	}
	rep.CPU = cpuReport(cg, autogroup)
	// 2. A real shell: it runs, and cannot fork past the limit.
	script := `i=0; while [ $i -lt 64 ]; do sleep 10 & i=$((i+1)); done; echo all-started`
	res, err := s.Run(ctx, Command{Dir: ws, Script: script, Limits: Limits{Procs: probeProcs, Timeout: 20 * time.Second}})
	if err != nil {
		return rep, asUnavailable(err)
	}
	out := string(res.Output)
	switch {
	case strings.Contains(out, "all-started"):
		return rep, &Unavailable{Cause: fmt.Sprintf("the process limit did not hold: 64 processes started under a limit of %d", probeProcs),
			Fix: "run firstmate as an unprivileged user, or report this host's setup as a bug"}
	case !strings.Contains(strings.ToLower(out), "fork"):
		return rep, &Unavailable{Cause: fmt.Sprintf("a test command did not run as expected (%s): %q", res.Status(20*time.Second), tail(out, 300)),
			Fix: "check that /bin/sh and sleep exist under /usr"}
	}
	rep.Took = time.Since(start)
	return rep, nil
}

// runProbe runs the helper in probe mode. It also says how setting the
// nice of a command's autogroup goes here (see lowerAutogroup): it is
// set once more at once, which the kernel refuses (EAGAIN) to a process
// it rate-limits.
func (s *Sandbox) runProbe(ctx context.Context, ws string, p *probe) (autogroup error, err error) {
	// The parent is kept apart from the deadline: Wait cancels the
	// deadline once the helper exits, and a parent that is the same
	// context would then read as cancelled by the caller.
	dctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	var out bytes.Buffer
	proc := &Process{}
	l := s.cfg.Limits
	l.Timeout = 20 * time.Second
	if err := s.startNSWith(dctx, proc, spec{Dir: ws, Path: s.cfg.Path, Limits: l, Probe: p}, &out); err != nil {
		return nil, asUnavailable(err)
	}
	if cg := s.cg.Load(); cg == nil || !cg.cpu {
		autogroup = proc.autogroup
		if autogroup == nil {
			autogroup = lowerAutogroup(proc.Pid())
		}
	}
	proc.cancel, proc.deadline, proc.parent = cancel, dctx, ctx
	res, err := proc.Wait()
	if err != nil {
		return autogroup, asUnavailable(err)
	}
	if res.ExitCode != 0 {
		return autogroup, &Unavailable{Cause: fmt.Sprintf("the probe helper ended with %s: %s", res.Status(l.Timeout), tail(out.String(), 300))}
	}
	return autogroup, nil
}

// cpuReport says how commands yield the CPU: the cgroup's weight where it
// applies, else nice 10 and SCHED_BATCH, which, where the kernel
// schedules sessions as autogroups, hold only once the autogroup's nice
// is set too (autogroup is how that went in the probe).
func cpuReport(cg *cgroups, autogroup error) string {
	prio := fmt.Sprintf("nice %d, SCHED_BATCH", commandNice)
	switch {
	case cg != nil && cg.cpu:
		return fmt.Sprintf("cpu.weight %d for all commands (cgroup v2), %s", sandboxWeight, prio)
	case cg != nil:
		prio += " (no cpu.weight: " + cg.noCPU + ")"
	}
	if b, _ := os.ReadFile("/proc/sys/kernel/sched_autogroup_enabled"); strings.TrimSpace(string(b)) != "1" {
		return prio
	}
	switch {
	case autogroup == nil:
		return prio + ", session autogroup nice " + strconv.Itoa(commandNice)
	case errors.Is(autogroup, syscall.EAGAIN):
		return prio + "; session autogroup nice only 100 ms after the last was set (no CAP_SYS_ADMIN), else a busy command gets as much CPU as firstmate"
	default:
		return prio + "; session autogroup nice not set (" + autogroup.Error() + "): a busy command gets as much CPU as firstmate"
	}
}

func asUnavailable(err error) error {
	var u *Unavailable
	if errors.As(err, &u) {
		return u
	}
	if errors.Is(err, ErrSetup) {
		cause := strings.TrimPrefix(err.Error(), ErrSetup.Error()+": ")
		if strings.HasPrefix(cause, "probe: ") {
			return &Unavailable{Cause: "confinement does not hold: " + strings.TrimPrefix(cause, "probe: "), Err: err,
				Fix: "do not run commands on this host; report the kernel and container setup"}
		}
		return &Unavailable{Cause: "building the sandbox failed: " + cause, Err: err, Fix: fixFor(cause)}
	}
	var ee *exec.Error
	if errors.As(err, &ee) || errors.Is(err, syscall.ENOENT) {
		return &Unavailable{Cause: "the sandbox helper could not be started: " + err.Error(), Err: err}
	}
	return &Unavailable{Cause: err.Error(), Err: err}
}

// fixFor suggests a fix for a setup step that failed.
func fixFor(cause string) string {
	switch {
	case strings.Contains(cause, "mount /proc"):
		// Docker masks parts of /proc, and the kernel refuses a new /proc
		// over a masked one, whatever the seccomp profile says.
		return "the container masks /proc: in Docker add `--security-opt systempaths=unconfined` (with `seccomp=deploy/docker/seccomp.json` and `apparmor=unconfined`); in Kubernetes set `hostUsers: false` and `procMount: Unmasked`"
	case strings.Contains(cause, "mount") || strings.Contains(cause, "pivot_root"):
		return "the container may forbid mounts in user namespaces: in Docker use `--security-opt seccomp=deploy/docker/seccomp.json --security-opt apparmor=unconfined --security-opt systempaths=unconfined`, or run firstmate outside the container"
	case strings.Contains(cause, "landlock"):
		return "the kernel refused the Landlock ruleset; upgrade the kernel or report it"
	case strings.Contains(cause, "seccomp"):
		return "seccomp filters are refused here; the kernel needs CONFIG_SECCOMP_FILTER"
	}
	return ""
}

func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
