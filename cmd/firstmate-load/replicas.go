package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// replica is one `firstmate serve`, started here or by hand.
type replica struct {
	name string
	addr string // its HTTP address: /readyz
	env  []string
	pid  int
	cmd  *exec.Cmd // nil when started by hand
	log  string    // its output, when started here
	done chan error
}

// freeAddr returns a loopback address nobody listens on now.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// newReplicas names the replicas and gives each its environment: base,
// then its own name and HTTP address, then extra (the -env flags).
func newReplicas(n int, base, extra []string) ([]*replica, error) {
	out := make([]*replica, n)
	for i := range out {
		addr, err := freeAddr()
		if err != nil {
			return nil, err
		}
		name := fmt.Sprintf("load-%d", i+1)
		env := append(append(append([]string{}, base...), "FIRSTMATE_REPLICA="+name, "FIRSTMATE_HTTP_ADDR="+addr), extra...)
		out[i] = &replica{name: name, addr: addr, env: env}
	}
	return out, nil
}

// start runs the replica's process, its output in a log file in dir.
func (r *replica) start(bin, dir string) error {
	r.log = filepath.Join(dir, r.name+".log")
	f, err := os.Create(r.log)
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, "serve")
	// A clean environment: nothing of the caller's configuration leaks in.
	cmd.Env = append([]string{"HOME=" + dir, "PATH=" + os.Getenv("PATH")}, r.env...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start %s: %w", bin, err)
	}
	r.cmd, r.pid = cmd, cmd.Process.Pid
	r.done = make(chan error, 1)
	go func() {
		r.done <- cmd.Wait()
		f.Close()
	}()
	return nil
}

// exited reports the replica's end, if it ended.
func (r *replica) exited() error {
	if r.done == nil {
		return nil
	}
	select {
	case err := <-r.done:
		r.done <- err
		return fmt.Errorf("replica %s exited: %v\n%s", r.name, err, r.tail())
	default:
		return nil
	}
}

// stop ends a replica as a supervisor does: SIGTERM, then a wait.
func (r *replica) stop() error {
	if r.cmd == nil {
		return nil
	}
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-r.done:
		r.done <- err
		return err
	case <-time.After(30 * time.Second):
		_ = r.cmd.Process.Kill()
		err := <-r.done
		r.done <- err
		return errors.New("did not stop within 30s of SIGTERM")
	}
}

// tail is the end of the replica's log.
func (r *replica) tail() string {
	if r.log == "" {
		return ""
	}
	b, err := os.ReadFile(r.log)
	if err != nil {
		return ""
	}
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// waitReady waits until the replica's /readyz answers 200.
func (r *replica) waitReady(ctx context.Context) error {
	c := &http.Client{Timeout: time.Second}
	for {
		if err := r.exited(); err != nil {
			return err
		}
		resp, err := c.Get("http://" + r.addr + "/readyz")
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("replica %s (http %s) not ready: %w\n%s", r.name, r.addr, context.Cause(ctx), r.tail())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// runtimeStats is what a replica's /metrics says of its Go runtime.
type runtimeStats struct {
	goroutines int
	heapMB     float64 // heap in use
}

// readRuntime scrapes the replica's /metrics; zero values if it cannot.
func (r *replica) readRuntime() runtimeStats {
	var s runtimeStats
	c := &http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + r.addr + "/metrics")
	if err != nil {
		return s
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return s
	}
	for line := range strings.Lines(string(b)) {
		name, v, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok {
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			continue
		}
		switch name {
		case "go_goroutines":
			s.goroutines = int(f)
		case "go_memstats_heap_inuse_bytes":
			s.heapMB = f / (1 << 20)
		}
	}
	return s
}

// procMem is a process's resident memory now and at its peak, in MiB.
type procMem struct {
	RSS, HWM float64
	Anon     float64 // of RSS: heap, stacks, runtime
	File     float64 // of RSS: the binary's pages and other mapped files
}

func readMem(pid int) (procMem, error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return procMem{}, err
	}
	var m procMem
	var found int
	for line := range strings.Lines(string(status)) {
		for _, f := range []struct {
			name string
			into *float64
		}{{"VmRSS:", &m.RSS}, {"VmHWM:", &m.HWM}, {"RssAnon:", &m.Anon}, {"RssFile:", &m.File}} {
			if v, ok := strings.CutPrefix(line, f.name); ok {
				kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
				if err != nil {
					return procMem{}, err
				}
				*f.into = kb / 1024
				found++
			}
		}
	}
	if found != 4 {
		return procMem{}, fmt.Errorf("no VmRSS, VmHWM, RssAnon or RssFile in /proc/%d/status", pid)
	}
	return m, nil
}

// clockTick is USER_HZ, which /proc/PID/stat counts in; 100 on Linux.
const clockTick = 100

// cpuTime is the CPU time a process used so far, user and system.
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name, in parentheses, may hold spaces: fields count
	// from after its closing parenthesis.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	// utime and stime are fields 14 and 15 of the line, 12 and 13 here.
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: bad utime or stime", pid)
	}
	return time.Duration(ut+st) * time.Second / clockTick, nil
}

// buildFirstmate builds ./cmd/firstmate of this module into dir, the way
// releases and the container image build it (static, CGO_ENABLED=0), so
// the memory measured is that of what is shipped: a cgo build also maps
// the C library and its loader: 1.3 to 4 MB more resident pages here.
func buildFirstmate(ctx context.Context, dir string, log io.Writer) (string, error) {
	bin := filepath.Join(dir, "firstmate")
	fmt.Fprintln(log, "building firstmate (CGO_ENABLED=0 go build -trimpath ./cmd/firstmate, as released)…")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", bin, "github.com/firstmate/firstmate/cmd/firstmate")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build firstmate: %v\n%s(or give -firstmate PATH)", err, out)
	}
	return bin, nil
}

// listenerPID finds the process listening on addr (127.0.0.1:port) on
// this machine: the socket's inode in /proc/net/tcp, then the process
// holding it. 0 if there is none, or it cannot be seen.
func listenerPID(addr string) int {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return 0
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return 0
	}
	want := fmt.Sprintf(":%04X", p)
	var inode string
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(table)
		if err != nil {
			continue
		}
		for line := range strings.Lines(string(b)) {
			f := strings.Fields(line)
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			if len(f) > 9 && strings.HasSuffix(f[1], want) && f[3] == "0A" {
				inode = f[9]
			}
		}
	}
	if inode == "" {
		return 0
	}
	target := "socket:[" + inode + "]"
	procs, _ := os.ReadDir("/proc")
	for _, d := range procs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		for _, fd := range fds {
			if l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); l == target {
				return pid
			}
		}
	}
	return 0
}
