//go:build linux

package sandbox

// The hostile battery: each test does, from inside the sandbox, something a
// command must not be able to do, and asserts exactly how it failed (the
// errno, the shell's message, the exit code or signal) and that nothing
// happened on the host. testdata/hostile is a small Go program run inside
// for what the shell cannot do by itself (raw system calls, sockets).
//
// Tests that look at processes on the host (the fork bomb, daemons, the
// helper's uid, inherited descriptors, t.Setenv) are not parallel; the
// others are, and the testing package runs those only after every
// sequential test has finished.

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/firstmate/firstmate/tools"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// hostileBuild is testdata/hostile, built once per test run (not with the
// race detector: it runs inside, as it would ship) and removed by TestMain.
var hostileBuild struct {
	once sync.Once
	dir  string
	path string
	err  error
}

func hostileBin(t *testing.T) string {
	t.Helper()
	b := &hostileBuild
	b.once.Do(func() {
		b.dir, b.err = os.MkdirTemp("", "firstmate-hostile-")
		if b.err != nil {
			return
		}
		b.path = filepath.Join(b.dir, "hostile")
		cmd := exec.Command("go", "build", "-o", b.path, "./testdata/hostile")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build ./testdata/hostile: %v\n%s", err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

func removeHostile() {
	if hostileBuild.dir != "" {
		os.RemoveAll(hostileBuild.dir)
	}
}

// workspace is a fresh workspace directory that the sandbox's root owns.
func workspace(t *testing.T, sb *Sandbox) string {
	t.Helper()
	dir := t.TempDir()
	own(t, sb, dir)
	return dir
}

func own(t *testing.T, sb *Sandbox, path string) {
	t.Helper()
	if uid, gid := sb.Owner(); uid >= 0 {
		if err := os.Chown(path, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
}

// withHostile copies the hostile program into dir, as /workspace/hostile.
func withHostile(t *testing.T, dir string) {
	t.Helper()
	data, err := os.ReadFile(hostileBin(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "hostile"), data, 0o755); err != nil {
		t.Fatal(err)
	}
}

func run(t *testing.T, sb *Sandbox, dir, script string, l Limits) Result {
	t.Helper()
	res, err := sb.Run(t.Context(), Command{Dir: dir, Script: script, Limits: l})
	if err != nil {
		t.Fatalf("run %q: %v\n%s", script, err, res.Output)
	}
	return res
}

func wantOutput(t *testing.T, res Result, want string) {
	t.Helper()
	if got := string(res.Output); got != want {
		t.Errorf("output:\n%s\nwant:\n%s", got, want)
	}
}

func randomName(prefix string) string { return fmt.Sprintf("%s%016x", prefix, rand.Uint64()) }

func mustNotExist(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s on the host: want it absent, got %v", path, err)
	}
}

// TestHostileReadSecrets: no host file is readable, not even a
// world-readable one right beside the workspace.
func TestHostileReadSecrets(t *testing.T) {
	t.Parallel()
	sb := New(Config{})
	// The bot's config, world-readable, right beside the workspace.
	base := t.TempDir()
	for _, d := range []string{filepath.Dir(base), base} {
		os.Chmod(d, 0o755)
	}
	config := filepath.Join(base, "config.yaml")
	const token = "xoxb-TEST-SECRET"
	if err := os.WriteFile(config, []byte("slack:\n  token: "+token+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(base, "ws")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	own(t, sb, dir)
	script := fmt.Sprintf(`cat /etc/shadow; echo rc=$?
cat %s; echo rc=$?
cat /workspace/../config.yaml; echo rc=$?
cat /proc/1/root/%s; echo rc=$?`, config, config)
	res := run(t, sb, dir, script, Limits{})
	wantOutput(t, res, fmt.Sprintf(`cat: /etc/shadow: No such file or directory
rc=1
cat: %[1]s: No such file or directory
rc=1
cat: /workspace/../config.yaml: No such file or directory
rc=1
cat: /proc/1/root/%[1]s: No such file or directory
rc=1
`, config))
	if bytes.Contains(res.Output, []byte(token)) {
		t.Errorf("the token leaked: %s", res.Output)
	}
}

// TestHostileEnvironment: the command's environment is PATH, HOME and
// LANG, and no process it can see holds the bot's.
func TestHostileEnvironment(t *testing.T) {
	const secret = "sk-FIRSTMATE-ENV-SECRET"
	t.Setenv("FIRSTMATE_TEST_SECRET", secret)
	sb := New(Config{})
	dir := workspace(t, sb)

	res := run(t, sb, dir, `cat /proc/1/environ`, Limits{})
	wantOutput(t, res, "PATH="+DefaultPath+"\x00HOME=/workspace\x00LANG=C.UTF-8\x00")

	script := `cat /proc/self/environ /proc/1/environ
sh -c 'cat /proc/$PPID/environ'
for f in /proc/[0-9]*/environ; do cat "$f"; done
echo; echo ---; env`
	res = run(t, sb, dir, script, Limits{})
	out := string(res.Output)
	if strings.Contains(out, secret) {
		t.Fatalf("the secret leaked into the sandbox:\n%s", out)
	}
	_, env, ok := strings.Cut(out, "\n---\n")
	if !ok {
		t.Fatalf("no env output:\n%s", out)
	}
	want := map[string]string{"PATH": DefaultPath, "HOME": "/workspace", "LANG": "C.UTF-8"}
	shellOwn := []string{"PWD", "OLDPWD", "SHLVL", "_"} // what sh sets itself
	for line := range strings.Lines(env) {
		k, v, _ := strings.Cut(strings.TrimSuffix(line, "\n"), "=")
		switch w, ok := want[k]; {
		case ok && v != w:
			t.Errorf("%s=%q, want %q", k, v, w)
		case ok:
			delete(want, k)
		case !slices.Contains(shellOwn, k):
			t.Errorf("unexpected variable %s=%q", k, v)
		}
	}
	if len(want) > 0 {
		t.Errorf("missing from the environment: %v", want)
	}
}

// TestHostileInheritedDescriptors: a descriptor this process holds without
// close-on-exec (as one inherited from a supervisor would be) does not
// reach the command.
func TestHostileInheritedDescriptors(t *testing.T) {
	sb := New(Config{})
	dir := workspace(t, sb)
	secret := filepath.Join(t.TempDir(), "secret")
	const content = "inherited-fd-SECRET"
	if err := os.WriteFile(secret, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(secret, unix.O_RDONLY, 0) // no O_CLOEXEC
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	res := run(t, sb, dir, fmt.Sprintf("ls /proc/self/fd; cat /proc/self/fd/%d", fd), Limits{})
	// 3 is ls's own directory.
	wantOutput(t, res, fmt.Sprintf("0\n1\n2\n3\ncat: /proc/self/fd/%d: No such file or directory\n", fd))
	if bytes.Contains(res.Output, []byte(content)) {
		t.Errorf("the inherited file was readable: %s", res.Output)
	}
}

// TestHostileHostPaths: of the host's layout, a command sees only its own
// workspace's path, and only where the kernel puts it: as the root field
// (the fourth) of /workspace in /proc/self/mountinfo, the path of the
// mount's root inside its filesystem, which no bind mount can change (see
// buildRootFS). Nothing else of the data directory (its own path as a
// mount, the other workspaces, its files) and no other host path shows.
func TestHostileHostPaths(t *testing.T) {
	t.Parallel()
	sb := New(Config{})
	data := filepath.Join(t.TempDir(), randomName("firstmate-data-"))
	dir := filepath.Join(data, "workspaces", "slack_T1_C1")
	other := filepath.Join(data, "workspaces", "slack_T1_C2")
	for _, d := range []string{dir, other} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	own(t, sb, dir)
	if err := os.WriteFile(filepath.Join(data, "state.db"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	res := run(t, sb, dir, `cat /proc/self/mountinfo; echo ---
cat /proc/self/mounts /proc/self/mountstats /proc/1/cmdline /proc/1/environ /proc/self/cgroup; pwd; ls -a / /workspace`, Limits{})
	info, rest, ok := strings.Cut(string(res.Output), "---\n")
	if !ok {
		t.Fatalf("output:\n%s", res.Output)
	}
	base := filepath.Dir(data)
	if strings.Contains(rest, base) || strings.Contains(rest, "slack_T1_C") || strings.Contains(info, "slack_T1_C2") {
		t.Errorf("a host path shows:\n%s", res.Output)
	}
	for line := range strings.Lines(info) {
		f := strings.Fields(line)
		if len(f) < 5 {
			t.Fatalf("mountinfo line %q", line)
		}
		root, at := f[3], f[4]
		switch {
		case at == "/workspace":
			if root != dir {
				t.Errorf("/workspace's root is %s, want %s (the workspace itself)", root, dir)
			}
		case strings.Contains(line, base) || strings.Contains(line, "firstmate-data-"):
			t.Errorf("a host path shows: %s", line)
		case root != "/" && !strings.HasSuffix(at, root):
			t.Errorf("%s shows the host's %s", at, root)
		}
	}
}

// TestHostileWriteOutside: every place outside /workspace and /tmp is
// read-only, and nothing written there reaches the host.
func TestHostileWriteOutside(t *testing.T) {
	t.Parallel()
	sb := New(Config{})
	dir := workspace(t, sb)
	m := randomName("firstmate-hostile-")
	corePattern, err := os.ReadFile("/proc/sys/kernel/core_pattern")
	if err != nil {
		t.Fatal(err)
	}
	script := strings.ReplaceAll(`for p in /usr/M /etc/M /M /proc/M /proc/sys/kernel/core_pattern /dev/M /tmp/../usr/M; do echo x > $p; echo "$p rc=$?"; done
mkdir /usr/M; echo rc=$?
touch /etc/M; echo rc=$?
cp /bin/sh /usr/bin/M; echo rc=$?`, "M", m)
	res := run(t, sb, dir, script, Limits{})
	wantOutput(t, res, strings.ReplaceAll(`sh: 1: cannot create /usr/M: Read-only file system
/usr/M rc=2
sh: 1: cannot create /etc/M: Read-only file system
/etc/M rc=2
sh: 1: cannot create /M: Read-only file system
/M rc=2
sh: 1: cannot create /proc/M: Directory nonexistent
/proc/M rc=2
sh: 1: cannot create /proc/sys/kernel/core_pattern: Read-only file system
/proc/sys/kernel/core_pattern rc=2
sh: 1: cannot create /dev/M: Permission denied
/dev/M rc=2
sh: 1: cannot create /tmp/../usr/M: Read-only file system
/tmp/../usr/M rc=2
mkdir: cannot create directory ‘/usr/M’: Read-only file system
rc=1
touch: cannot touch '/etc/M': Read-only file system
rc=1
cp: cannot create regular file '/usr/bin/M': Read-only file system
rc=1
`, "M", m))
	for _, p := range []string{"/usr", "/etc", "/", "/dev", "/usr/bin"} {
		mustNotExist(t, filepath.Join(p, m))
	}
	if now, _ := os.ReadFile("/proc/sys/kernel/core_pattern"); !bytes.Equal(now, corePattern) {
		t.Errorf("core_pattern changed from %q to %q", corePattern, now)
	}
}

// TestHostileLinks: symlinks and hard links planted by the shell do not
// lead the file tools (which run on the host) out of the workspace.
func TestHostileLinks(t *testing.T) {
	t.Parallel()
	sb := New(Config{})
	ws, err := tools.OpenWorkspace(t.TempDir(), "hostile links")
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	own(t, sb, ws.Dir())
	m := randomName("firstmate-hostile-")
	script := `echo inside > a; ln a h
ln -s /etc/passwd p; ln -s ../../../../../../../../.. up; ln -s / root; ln -s /workspace/a abs
echo fine > plain; ln -s plain rel; mkfifo fifo
ln /usr/bin/env e; echo rc=$?`
	res := run(t, sb, ws.Dir(), script, Limits{})
	wantOutput(t, res, "ln: failed to create hard link 'e' => '/usr/bin/env': Invalid cross-device link\nrc=1\n")
	passwd, err := os.ReadFile("/etc/passwd")
	if err != nil {
		t.Fatal(err)
	}

	const max = 1 << 20
	for _, c := range []struct {
		path string
		want error
	}{
		{"p", tools.ErrPathEscapes},
		{"up/etc/passwd", tools.ErrPathEscapes},
		{"root/etc/passwd", tools.ErrPathEscapes},
		{"abs", tools.ErrPathEscapes},
		{"/workspace/up/etc/passwd", tools.ErrPathEscapes},
		{"a", tools.ErrHardLinked},
		{"h", tools.ErrHardLinked},
		{"fifo", tools.ErrNotRegular},
	} {
		if _, _, err := ws.ReadText(c.path, max); !errors.Is(err, c.want) {
			t.Errorf("ReadText(%q): %v, want %v", c.path, err, c.want)
		}
		if f, _, err := ws.OpenRead(c.path); !errors.Is(err, c.want) {
			if f != nil {
				f.Close()
			}
			t.Errorf("OpenRead(%q): %v, want %v", c.path, err, c.want)
		}
	}
	if text, _, err := ws.ReadText("rel", max); err != nil || text != "fine\n" {
		t.Errorf("ReadText(rel) through a symlink inside: %q, %v", text, err)
	}

	for _, c := range []struct {
		path string
		want error
	}{
		{"p", tools.ErrPathEscapes},
		{"up/" + m, tools.ErrPathEscapes},
		{"root/tmp/" + m, tools.ErrPathEscapes},
		{"h", tools.ErrHardLinked},
		{"a", tools.ErrHardLinked},
	} {
		if _, err := ws.WriteFile(c.path, []byte("written by the file tool\n"), max); !errors.Is(err, c.want) {
			t.Errorf("WriteFile(%q): %v, want %v", c.path, err, c.want)
		}
	}
	if now, _ := os.ReadFile("/etc/passwd"); !bytes.Equal(now, passwd) {
		t.Error("/etc/passwd changed")
	}
	mustNotExist(t, "/"+m)
	mustNotExist(t, "/tmp/"+m)
	if a, _ := os.ReadFile(filepath.Join(ws.Dir(), "a")); string(a) != "inside\n" {
		t.Errorf("the hard-linked file changed: %q", a)
	}
}

// TestHostileNetwork: nothing of the host's network is reachable (its
// loopback, its other addresses, the metadata service, the internet, its
// unix sockets by path or abstract name), while the sandbox's own
// loopback works.
func TestHostileNetwork(t *testing.T) {
	t.Parallel()
	sb := New(Config{})
	dir := workspace(t, sb)
	withHostile(t, dir)

	var accepted atomic.Int32
	var wg sync.WaitGroup
	var listeners []net.Listener
	listen := func(network, addr string) net.Listener {
		l, err := net.Listen(network, addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		listeners = append(listeners, l)
		wg.Go(func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				accepted.Add(1)
				c.Close()
			}
		})
		return l
	}
	// On every address, so the host's own non-loopback address has a
	// listener too.
	tcp := listen("tcp4", "0.0.0.0:0")
	port := tcp.Addr().(*net.TCPAddr).Port
	sockDir := t.TempDir()
	for _, d := range []string{filepath.Dir(sockDir), sockDir} {
		os.Chmod(d, 0o755)
	}
	sock := filepath.Join(sockDir, "bot.sock")
	listen("unix", sock)
	os.Chmod(sock, 0o777)
	abstract := listen("unix", "@"+randomName("firstmate-hostile-"))
	udp, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()

	const (
		refused     = "errno ECONNREFUSED (connection refused)"
		unreachable = "errno ENETUNREACH (network is unreachable)"
	)
	cases := []struct{ cmd, want string }{
		// The sandbox has a loopback of its own, where nothing listens.
		{fmt.Sprintf("connect tcp 127.0.0.1:%d", port), refused},
		{"connect tcp 169.254.169.254:80", unreachable},
		// A datagram to a closed local port comes back as ECONNREFUSED.
		{"udp " + udp.LocalAddr().String(), refused},
		{"udp 8.8.8.8:53", unreachable},
		{"connect unix " + sock, "errno ENOENT (no such file or directory)"},
		{"connect unix " + abstract.Addr().String(), refused},
		{"loopback", "ok"},
	}
	if ip := hostAddr(); ip != nil {
		cases = append(cases, struct{ cmd, want string }{fmt.Sprintf("connect tcp %s:%d", ip, port), unreachable})
	}
	var script, want strings.Builder
	for _, c := range cases {
		fmt.Fprintf(&script, "./hostile %s\n", c.cmd)
		fmt.Fprintf(&want, "%s\n", c.want)
	}
	wantOutput(t, run(t, sb, dir, script.String(), Limits{}), want.String())

	for _, l := range listeners {
		l.Close()
	}
	wg.Wait()
	if n := accepted.Load(); n != 0 {
		t.Errorf("the host's listeners accepted %d connections", n)
	}
	// Anything sent has arrived by now; wait a little anyway.
	udp.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if n, from, err := udp.ReadFrom(make([]byte, 64)); err == nil {
		t.Errorf("the host's UDP listener received %d bytes from %v", n, from)
	}
}

// hostAddr is one of the host's IPv4 addresses other than loopback, or nil.
func hostAddr() net.IP {
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return n.IP
		}
	}
	return nil
}

// TestHostileNestedNamespaces: no new namespace, no mount, from the shell
// or from raw system calls. clone cannot be filtered by seccomp (clone3
// takes its flags in memory); the namespace's own user.max_user_namespaces
// of 0 (ENOSPC) and the missing capabilities (EPERM) stop it.
func TestHostileNestedNamespaces(t *testing.T) {
	t.Parallel()
	sb := New(Config{})
	dir := workspace(t, sb)
	withHostile(t, dir)
	res := run(t, sb, dir, `unshare -U true; echo rc=$?
unshare -m true; echo rc=$?
unshare -n true; echo rc=$?
cat /proc/sys/user/max_user_namespaces
echo 100 > /proc/sys/user/max_user_namespaces; echo rc=$?`, Limits{})
	wantOutput(t, res, `unshare: unshare failed: Operation not permitted
rc=1
unshare: unshare failed: Operation not permitted
rc=1
unshare: unshare failed: Operation not permitted
rc=1
0
sh: 5: cannot create /proc/sys/user/max_user_namespaces: Read-only file system
rc=2
`)

	// mount(8)'s wording belongs to util-linux; its exit code 32 is
	// "mount failure".
	res = run(t, sb, dir, `mount -t tmpfs x /tmp; echo rc=$?`, Limits{})
	if out := string(res.Output); !strings.HasPrefix(out, "mount: /tmp: permission denied.") || !strings.HasSuffix(out, "\nrc=32\n") {
		t.Errorf("mount -t tmpfs: %q", out)
	}

	var script, want strings.Builder
	for _, c := range []struct{ cmd, want string }{
		{"syscall unshare-user", "errno EPERM (operation not permitted)"},
		{"syscall unshare-mount", "errno EPERM (operation not permitted)"},
		{"syscall setns", "errno EPERM (operation not permitted)"},
		{"syscall mount", "errno EPERM (operation not permitted)"},
		{"syscall umount", "errno EPERM (operation not permitted)"},
		{"syscall pivot_root", "errno EPERM (operation not permitted)"},
		{"syscall chroot", "errno EPERM (operation not permitted)"},
		{"syscall open_tree", "errno EPERM (operation not permitted)"},
		{"syscall fsopen", "errno EPERM (operation not permitted)"},
		{"clone user", "errno ENOSPC (no space left on device)"},
		{"clone mount", "errno EPERM (operation not permitted)"},
		{"clone net", "errno EPERM (operation not permitted)"},
		{"clone pid", "errno EPERM (operation not permitted)"},
		{"clone ipc", "errno EPERM (operation not permitted)"},
		{"clone uts", "errno EPERM (operation not permitted)"},
		{"clone cgroup", "errno EPERM (operation not permitted)"},
	} {
		fmt.Fprintf(&script, "echo \"%[1]s: $(./hostile %[1]s)\"\n", c.cmd)
		fmt.Fprintf(&want, "%s: %s\n", c.cmd, c.want)
	}
	wantOutput(t, run(t, sb, dir, script.String(), Limits{}), want.String())
}

// TestHostileDeniedSyscalls: the kernel attack surface the seccomp filter
// closes. Each call is one an unprivileged process could otherwise make,
// so EPERM is the filter's doing.
func TestHostileDeniedSyscalls(t *testing.T) {
	t.Parallel()
	sb := New(Config{})
	dir := workspace(t, sb)
	withHostile(t, dir)
	var script, want strings.Builder
	for _, name := range []string{"io_uring_setup", "bpf", "perf_event_open", "userfaultfd", "keyctl", "add_key",
		"ptrace", "process_vm_readv", "open_by_handle_at"} {
		fmt.Fprintf(&script, "r=$(./hostile syscall %[1]s); echo \"%[1]s: $r rc=$?\"\n", name)
		fmt.Fprintf(&want, "%s: errno EPERM (operation not permitted) rc=1\n", name)
	}
	wantOutput(t, run(t, sb, dir, script.String(), Limits{}), want.String())

	// A foreign ABI is killed outright: SIGSYS, which sh reports as "Bad
	// system call" and status 128+31.
	if runtime.GOARCH == "amd64" {
		wantOutput(t, run(t, sb, dir, `./hostile x32; echo rc=$?`, Limits{}), "Bad system call\nrc=159\n")
	}
}

// int80 makes the 32-bit getpid (20) through int 0x80, which a filter
// listing only x86-64 numbers would not recognise, then says it survived.
// No libc: nothing but the two system calls.
const int80 = `
static long sys3(long n, long a, long b, long c) {
	long r;
	asm volatile("syscall" : "=a"(r) : "a"(n), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
	return r;
}

void _start(void) {
	static const char msg[] = "survived\n";
	long r;
	asm volatile("int $0x80" : "=a"(r) : "a"(20L) : "memory");
	sys3(1, 1, (long)msg, sizeof msg - 1);
	sys3(60, 0, 0, 0);
	for (;;) {}
}
`

// TestHostileInt80: a 32-bit system call from a 64-bit process is killed.
func TestHostileInt80(t *testing.T) {
	t.Parallel()
	if runtime.GOARCH != "amd64" {
		t.Skip("int 0x80 is x86")
	}
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("gcc is not installed: cannot build the int 0x80 program")
	}
	build := t.TempDir()
	src := filepath.Join(build, "int80.c")
	if err := os.WriteFile(src, []byte(int80), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(build, "int80")
	if out, err := exec.Command(gcc, "-static", "-nostdlib", "-O2", "-fno-stack-protector", "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	// On the host it works, or the kernel has no 32-bit entry at all
	// (ia32_emulation=0) and there is nothing to test.
	if out, err := exec.Command(bin).CombinedOutput(); err != nil || string(out) != "survived\n" {
		t.Skipf("int 0x80 does not work on this host either (%v, %q): the kernel has no 32-bit system calls", err, out)
	}
	sb := New(Config{})
	dir := workspace(t, sb)
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "int80"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	wantOutput(t, run(t, sb, dir, `./int80; echo rc=$?`, Limits{}), "Bad system call\nrc=159\n")
}

// statusFields parses /proc/PID/status.
func statusFields(t *testing.T, path string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return parseStatus(string(data))
}

func parseStatus(s string) map[string]string {
	m := map[string]string{}
	for line := range strings.Lines(s) {
		if k, v, ok := strings.Cut(line, ":"); ok {
			m[k] = strings.Join(strings.Fields(v), " ")
		}
	}
	return m
}

func procName(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return strings.TrimSpace(string(b))
}

// statFields are the fields of /proc/PID/stat after the command name:
// [0] state, [1] ppid, [2] pgrp, [3] session, [4] tty_nr, ….
func statFields(pid int) ([]string, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return nil, fmt.Errorf("malformed stat: %q", data)
	}
	return strings.Fields(string(data[i+1:])), nil
}

// TestHostileCapabilities: inside, no capability and seccomp on; seen from
// the host, every process of the command runs as the unprivileged uid, in
// a session of its own with no controlling terminal.
func TestHostileCapabilities(t *testing.T) {
	sb := New(Config{})
	dir := workspace(t, sb)
	res := run(t, sb, dir, `cat /proc/self/status`, Limits{})
	st := parseStatus(string(res.Output))
	for k, want := range map[string]string{
		"CapInh": "0000000000000000", "CapPrm": "0000000000000000", "CapEff": "0000000000000000",
		"CapBnd": "0000000000000000", "CapAmb": "0000000000000000",
		"NoNewPrivs": "1", "Seccomp": "2", "Uid": "0 0 0 0", "Gid": "0 0 0 0",
	} {
		if st[k] != want {
			t.Errorf("%s: %q inside, want %q", k, st[k], want)
		}
	}

	uid, gid := sb.cfg.UID, sb.cfg.GID
	if uid == 0 || gid == 0 {
		t.Fatalf("the sandbox maps to host uid %d gid %d", uid, gid)
	}
	out := newCapture(4096)
	p, err := sb.Start(t.Context(), Command{Dir: dir, Script: "readlink /proc/self/ns/pid; sleep 30"}, out)
	if err != nil {
		t.Fatal(err)
	}
	ns := waitNS(t, out, p)
	// Once sleep runs, the helper has become sh (or sleep itself).
	var procs []int
	for range 500 {
		procs = nsProcs(ns)
		if slices.ContainsFunc(procs, func(pid int) bool { return procName(pid) == "sleep" }) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !slices.Contains(procs, p.Pid()) {
		t.Fatalf("processes in the sandbox: %v, want the helper %d among them", procs, p.Pid())
	}
	for _, pid := range procs {
		st := statusFields(t, fmt.Sprintf("/proc/%d/status", pid))
		if want := fmt.Sprintf("%d %d %d %d", uid, uid, uid, uid); st["Uid"] != want {
			t.Errorf("%s (%d) runs as host uid %q, want %q", st["Name"], pid, st["Uid"], want)
		}
		if want := fmt.Sprintf("%d %d %d %d", gid, gid, gid, gid); st["Gid"] != want {
			t.Errorf("%s (%d) runs as host gid %q, want %q", st["Name"], pid, st["Gid"], want)
		}
		if st["CapEff"] != "0000000000000000" || st["CapPrm"] != "0000000000000000" {
			t.Errorf("%s (%d) has capabilities: %q %q", st["Name"], pid, st["CapEff"], st["CapPrm"])
		}
		f, err := statFields(pid)
		if err != nil {
			t.Fatal(err)
		}
		if sid := strconv.Itoa(p.Pid()); f[3] != sid || f[4] != "0" {
			t.Errorf("%s (%d): session %s, tty %s; want session %s (the helper's own), no tty", st["Name"], pid, f[3], f[4], sid)
		}
	}
	p.Kill()
	res, err = p.Wait()
	if err != nil || res.Signal != "SIGKILL" || res.TimedOut {
		t.Errorf("after Kill: %+v, %v; want SIGKILL", res, err)
	}
	if left := nsProcs(ns); len(left) > 0 {
		t.Errorf("processes left after Kill: %v", left)
	}
}

const ttyChildEnv = "FIRSTMATE_HOSTILE_TTY_CHILD"

// TestHostileControllingTerminal: started from a terminal, firstmate's
// commands still cannot reach it. The test re-runs itself with a
// pseudo-terminal as its controlling terminal, like an operator's shell.
func TestHostileControllingTerminal(t *testing.T) {
	if os.Getenv(ttyChildEnv) != "" {
		ttyChild(t)
		return
	}
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	defer master.Close()
	if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	slave, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer slave.Close()
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestHostileControllingTerminal$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), ttyChildEnv+"="+hostileBin(t))
	var out bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Run(); err != nil {
		t.Fatalf("the child with a terminal: %v\n%s", err, out.Bytes())
	}
	if !strings.Contains(out.String(), "--- PASS: TestHostileControllingTerminal") {
		t.Fatalf("the child did not run the test:\n%s", out.Bytes())
	}
}

func ttyChild(t *testing.T) {
	// The control: this process has a terminal to steal.
	tty, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	if err != nil {
		t.Fatalf("the child has no controlling terminal: %v", err)
	}
	tty.Close()
	sb := New(Config{})
	dir := workspace(t, sb)
	bin, err := os.ReadFile(os.Getenv(ttyChildEnv))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "hostile"), bin, 0o755); err != nil {
		t.Fatal(err)
	}
	res := run(t, sb, dir, `./hostile tty
echo typed > /dev/tty; echo rc=$?
head -c 1 /dev/tty; echo rc=$?`, Limits{Timeout: 20 * time.Second}) // a terminal reached would block the read
	wantOutput(t, res, `errno ENXIO (no such device or address)
sh: 2: cannot create /dev/tty: No such device or address
rc=2
head: cannot open '/dev/tty' for reading: No such device or address
rc=1
`)
}

// waitNS waits for the command's first line, its pid namespace as
// readlink /proc/self/ns/pid prints it ("pid:[N]"), the same on the host,
// which must be the helper's (holdNS).
func waitNS(t *testing.T, out *capture, p *Process) string {
	t.Helper()
	ns := holdNS(t, p.Pid())
	b := waitOutput(t, out, "\n")
	if line, _, _ := bytes.Cut(b, []byte("\n")); string(line) != ns {
		t.Fatalf("want the pid namespace first, %s (the helper's), got %q", ns, b)
	}
	return ns
}

// holdNS is the name of process pid's PID namespace, which it holds open
// for the rest of the test. The name is the number of the namespace's
// inode, which the kernel gives to the next namespace made once this one
// is freed: on a busy host, another sandbox's, whose processes would then
// pass for those of the command under test.
func holdNS(t *testing.T, pid int) string {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/ns/pid", pid))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("pid:[%d]", fi.Sys().(*syscall.Stat_t).Ino)
}

// waitOutput waits for the command's output to hold s, and returns it.
func waitOutput(t *testing.T, out *capture, s string) []byte {
	t.Helper()
	for range 3000 {
		if b, _, _ := out.bytes(); bytes.Contains(b, []byte(s)) {
			return b
		}
		time.Sleep(10 * time.Millisecond)
	}
	b, _, _ := out.bytes()
	t.Fatalf("the command did not print %q: %q", s, b)
	return nil
}

// nsProcs lists the host pids of the processes in pid namespace ns.
func nsProcs(ns string) []int {
	var pids []int
	for _, pid := range hostPids() {
		if link, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid)); err == nil && link == ns {
			pids = append(pids, pid)
		}
	}
	return pids
}

func hostPids() []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// uidProcs lists the host processes whose real uid is uid.
func uidProcs(uid int) []int {
	var pids []int
	for _, pid := range hostPids() {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			continue
		}
		if f := strings.Fields(parseStatus(string(data))["Uid"]); len(f) > 0 && f[0] == strconv.Itoa(uid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// The host ids tests give their sandboxes (ownID): a range that systemd
// leaves unassigned (1879048192 to 2147352575) and so no usual host uses.
const testIDBase, testIDs = 1879048192, 1 << 24

// ownID is a host uid, used as the gid too, that no process runs as: the
// one sandbox mapped to it is then the only owner of its processes. Other
// programs' nobody (65534), the sandboxes of the other test packages that
// run at the same time and those of another firstmate all run as other
// uids. Only root may map an id other than its own; elsewhere ok is false.
func ownID(t *testing.T) (id int, ok bool) {
	t.Helper()
	if os.Geteuid() != 0 {
		return 0, false
	}
	for range 100 {
		id := testIDBase + rand.IntN(testIDs)
		if len(uidProcs(id)) == 0 {
			return id, true
		}
	}
	t.Fatal("every host uid tried for the sandbox has processes")
	return 0, false
}

// isolated is a sandbox with limits l whose root maps to a host uid of its
// own (ownID) where this process may map one, the default one elsewhere.
func isolated(t *testing.T, l Limits) *Sandbox {
	t.Helper()
	cfg := Config{Limits: l}
	if id, ok := ownID(t); ok {
		cfg.UID, cfg.GID = id, id
	}
	return New(cfg)
}

// leftovers are the processes of sb's command, whose PID namespace is ns,
// still on the host: those in ns, and those of sb's host uid outside it,
// where a process that left the namespace would be (reparented to the
// host's init or not). When sb's uid is its own (isolated), every process
// of that uid is the command's; when it is shared with other programs
// (this process is not root), only those that descend from this test
// process are taken for the command's.
func leftovers(sb *Sandbox, ns string) (inNS, outside []int) {
	inNS = nsProcs(ns)
	own := sb.cfg.UID >= testIDBase && sb.cfg.UID < testIDBase+testIDs
	for _, pid := range uidProcs(sb.cfg.UID) {
		if !slices.Contains(inNS, pid) && (own || descends(pid, os.Getpid())) {
			outside = append(outside, pid)
		}
	}
	return inNS, outside
}

// descends reports whether process pid descends from process from.
func descends(pid, from int) bool {
	for p := pid; p > 1; {
		f, err := statFields(p)
		if err != nil {
			return false
		}
		p, _ = strconv.Atoi(f[1])
		if p == from {
			return true
		}
	}
	return false
}

// waitGone waits for every process of sb's command (see leftovers) to be
// gone. The kernel has reaped those of ns by the time the helper's wait
// returns (it is the namespace's init), so the wait is only a margin; it
// ends as soon as none is left. ns being this process's own namespace
// fails at once: the command had none of its own.
func waitGone(t *testing.T, sb *Sandbox, ns string) {
	t.Helper()
	if self, _ := os.Readlink("/proc/self/ns/pid"); ns == self {
		t.Fatalf("the command ran in this process's pid namespace, %s", ns)
	}
	var inNS, outside []int
	for range 400 {
		if inNS, outside = leftovers(sb, ns); len(inNS) == 0 && len(outside) == 0 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Errorf("processes of the sandbox left: %v in its namespace, %v of its uid %d outside it", inNS, outside, sb.cfg.UID)
}

// TestHostileForkBomb: the process limit holds, the timeout kills the
// whole tree, and this process stays responsive meanwhile.
func TestHostileForkBomb(t *testing.T) {
	sb := isolated(t, Limits{})
	dir := workspace(t, sb)

	stop := make(chan struct{})
	var ticks atomic.Int32
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				ticks.Add(1)
			}
		}
	})
	defer func() { close(stop); wg.Wait() }()

	const timeout = 3 * time.Second
	l := Limits{Timeout: timeout, Procs: 64}
	// Each f starts a sleep and two more f; the sleeps pile up to the
	// limit and stay until the end.
	out := newCapture(64 << 10)
	p, err := sb.Start(t.Context(), Command{Dir: dir, Limits: l,
		Script: `readlink /proc/self/ns/pid; f() { sleep 60 & f | f & }; f; sleep 60`}, out)
	if err != nil {
		t.Fatal(err)
	}
	ns := waitNS(t, out, p)
	done := make(chan struct{})
	var res Result
	var werr error
	go func() { res, werr = p.Wait(); close(done) }()

	// Meanwhile the host can still start processes, and the count in the
	// sandbox never goes far.
	most := 0
	hostRuns := 0
	for waiting := true; waiting; {
		select {
		case <-done:
			waiting = false
		case <-time.After(100 * time.Millisecond):
			most = max(most, len(nsProcs(ns)))
			if hostRuns < 3 {
				if err := exec.Command("true").Run(); err != nil {
					t.Errorf("the host could not start a process during the fork bomb: %v", err)
				}
				hostRuns++
			}
		}
	}
	output, _, _ := out.bytes()
	t.Logf("%s; at most %d processes seen in the sandbox; %d ticks", res.Status(timeout), most, ticks.Load())
	if werr != nil {
		t.Fatalf("wait: %v\n%s", werr, output)
	}
	if !res.TimedOut && !(res.ExitCode != 0 && bytes.Contains(output, []byte("Cannot fork"))) {
		t.Errorf("the fork bomb ended with %s, want a timeout or a fork error\n%s", res.Status(timeout), output)
	}
	if !bytes.Contains(output, []byte("Cannot fork")) {
		t.Errorf("the process limit never bit:\n%s", output)
	}
	if most < 2 {
		t.Errorf("the bomb never ran: at most %d processes", most)
	}
	if res.Took > timeout+30*time.Second {
		t.Errorf("it took %s to end a command with a %s timeout", res.Took, timeout)
	}
	if n := ticks.Load(); n < 5 {
		t.Errorf("this process ticked %d times during %s", n, res.Took)
	}
	waitGone(t, sb, ns)
}

// TestHostileDaemons: a process that leaves the shell's session or
// process group still dies with the command.
func TestHostileDaemons(t *testing.T) {
	sb := isolated(t, Limits{})
	dir := workspace(t, sb)
	out := newCapture(4096)
	p, err := sb.Start(t.Context(), Command{Dir: dir, Limits: Limits{Timeout: time.Minute}, Script: `readlink /proc/self/ns/pid
(setsid sh -c 'sleep 2; touch /workspace/alive' &)
nohup sh -c 'sleep 2; touch /workspace/alive2' >/dev/null 2>&1 &
exit 0`}, out)
	if err != nil {
		t.Fatal(err)
	}
	ns := waitNS(t, out, p)
	res, err := p.Wait()
	if err != nil || res.ExitCode != 0 || res.TimedOut {
		said, _, _ := out.bytes()
		t.Fatalf("%s, %v\n%s", res.Status(time.Minute), err, said)
	}
	waitGone(t, sb, ns)
	time.Sleep(4 * time.Second)
	mustNotExist(t, filepath.Join(dir, "alive"))
	mustNotExist(t, filepath.Join(dir, "alive2"))
}

// TestHostileProcessLimitPerCommand: a command's process limit counts its
// own processes, not those of the other commands of its host uid, which
// every channel's commands share: a channel holding many processes leaves
// another's commands free to fork. Where no cgroup holds the limit it is
// RLIMIT_NPROC, which Linux counts per user namespace (each command has
// one of its own) since 5.14; before, per host uid, and this fails.
func TestHostileProcessLimitPerCommand(t *testing.T) {
	t.Parallel()
	sb := isolated(t, Limits{})
	dir := workspace(t, sb)
	out := newCapture(4096)
	hog, err := sb.Start(t.Context(), Command{Dir: dir,
		Script: `readlink /proc/self/ns/pid; i=0; while [ $i -lt 48 ]; do sleep 60 & i=$((i+1)); done; echo held; wait`}, out)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { hog.Kill(); hog.Wait() }()
	ns := waitNS(t, out, hog)
	if said := waitOutput(t, out, "held\n"); bytes.Contains(said, []byte("fork")) {
		t.Fatalf("the first command could not start its 48 processes: %q", said)
	}
	if n := len(nsProcs(ns)); n < 49 {
		t.Fatalf("the first command holds %d processes, want 49", n)
	}
	// Another command of the same uid, under a limit of 16, starts 8 …
	res := run(t, sb, dir, `i=0; while [ $i -lt 8 ]; do sleep 1 & i=$((i+1)); done; wait; echo rc=$?`, Limits{Procs: 16})
	wantOutput(t, res, "rc=0\n")
	// … and no more than its limit.
	res = run(t, sb, dir, `i=0; while [ $i -lt 32 ]; do sleep 1 & i=$((i+1)); done; wait; echo all-started`, Limits{Procs: 16})
	if out := string(res.Output); !strings.Contains(out, "Cannot fork") || strings.Contains(out, "all-started") {
		t.Errorf("32 processes under a limit of 16: %q, want a fork error", out)
	}
}

// TestHostileOutputFlood: 50 MB of output is cut to the limit, head and
// tail, and counted in full; nothing blocks.
func TestHostileOutputFlood(t *testing.T) {
	t.Parallel()
	sb := New(Config{})
	dir := workspace(t, sb)
	const total, limit = 50_000_000, 64 << 10
	res := run(t, sb, dir, fmt.Sprintf("yes | head -c %d", total), Limits{Output: limit, Timeout: 5 * time.Minute})
	if res.ExitCode != 0 || res.Total != total || res.Cut != total-limit {
		t.Fatalf("%s, total %d, cut %d; want exit 0, total %d, cut %d", res.Status(5*time.Minute), res.Total, res.Cut, total, total-limit)
	}
	half := strings.Repeat("y\n", limit/4)
	want := half + fmt.Sprintf("\n[… %d bytes of output cut …]\n", total-limit) + half
	if string(res.Output) != want {
		t.Errorf("output of %d bytes is not the head, the note and the tail", len(res.Output))
	}
}

// TestHostileCPUSpin: a busy loop is killed at the timeout.
func TestHostileCPUSpin(t *testing.T) {
	t.Parallel()
	sb := New(Config{})
	dir := workspace(t, sb)
	const timeout = 2 * time.Second
	res := run(t, sb, dir, `while :; do :; done`, Limits{Timeout: timeout})
	if !res.TimedOut || res.Signal != "SIGKILL" || res.ExitCode != -1 {
		t.Errorf("got %+v, want timed out and killed", res)
	}
	if got, want := res.Status(timeout), "timed out after 2s and was killed"; got != want {
		t.Errorf("status %q, want %q", got, want)
	}
	if res.Took > timeout+30*time.Second {
		t.Errorf("took %s with a %s timeout", res.Took, timeout)
	}
}

// TestHostileFillTmp: /tmp holds TmpSize and no more.
func TestHostileFillTmp(t *testing.T) {
	t.Parallel()
	sb := New(Config{})
	dir := workspace(t, sb)
	res := run(t, sb, dir, `head -c 20000000 /dev/zero > /tmp/fill; echo rc=$?; wc -c < /tmp/fill`, Limits{TmpSize: 8 << 20})
	wantOutput(t, res, "head: error writing 'standard output': No space left on device\nrc=1\n8388608\n")
}

// probed is a sandbox as firstmate runs it: probed, so that it puts
// commands in cgroups where the host delegates a cgroup v2, and bounds
// them with rlimits where not. Its host uid is its own (isolated), so the
// probe's check of the process limit counts only its own processes.
func probed(t *testing.T, l Limits) (*Sandbox, Report) {
	t.Helper()
	sb := isolated(t, l)
	rep, err := sb.Probe(t.Context())
	if err != nil {
		t.Fatalf("probe: %v", err)
	}
	return sb, rep
}

// TestHostileMemory: a process cannot hold 700 MiB under a Memory of
// 128 MiB. Without a cgroup RLIMIT_DATA refuses the mapping, and the shell
// cannot raise it; in a cgroup memory.max gets the command killed.
func TestHostileMemory(t *testing.T) {
	t.Parallel()
	sb, rep := probed(t, Limits{Memory: 128 << 20})
	dir := workspace(t, sb)
	withHostile(t, dir)
	res := run(t, sb, dir, `./hostile alloc 64; echo rc=$?
./hostile alloc 700; echo rc=$?`, Limits{})
	if rep.Cgroup != "" {
		if out := string(res.Output); !strings.HasPrefix(out, "ok\nrc=0\n") || !strings.HasSuffix(out, "rc=137\n") {
			t.Errorf("in cgroup %s: %q, want 64 MiB to fit and 700 MiB to be killed (rc=137)", rep.Cgroup, out)
		}
		return
	}
	wantOutput(t, res, "ok\nrc=0\nerrno ENOMEM (cannot allocate memory)\nrc=1\n")
	res = run(t, sb, dir, `ulimit -d; ulimit -d unlimited; echo rc=$?`, Limits{})
	wantOutput(t, res, "131072\nsh: 1: ulimit: error setting limit (Operation not permitted)\nrc=2\n")
}

// TestHostileTmpCap: /tmp, which lives in RAM, gets at most half of
// Memory, in bytes and in inodes (one per 4 KiB).
func TestHostileTmpCap(t *testing.T) {
	t.Parallel()
	sb, rep := probed(t, Limits{Memory: 128 << 20}) // and the default TmpSize, 256 MiB
	if got := sb.Limits().TmpCap(); got != 64<<20 || rep.Tmp != got {
		t.Fatalf("TmpCap %d, Report.Tmp %d; want 64 MiB", got, rep.Tmp)
	}
	dir := workspace(t, sb)
	res := run(t, sb, dir, `head -c 100000000 /dev/zero > /tmp/fill; echo rc=$?; wc -c < /tmp/fill; stat -f -c %c /tmp`, Limits{})
	wantOutput(t, res, "head: error writing 'standard output': No space left on device\nrc=1\n67108864\n16384\n")
}

func TestTmpCap(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		l    Limits
		want int64
	}{
		{Limits{}, 256 << 20}, // the defaults: 256 MiB of a 1 GiB Memory
		{Limits{TmpSize: 8 << 20}, 8 << 20},
		{Limits{Memory: 128 << 20}, 64 << 20},
		{Limits{TmpSize: 1 << 30, Memory: 1 << 30}, 512 << 20},
		{Limits{TmpSize: 10 << 20, Memory: 64 << 20}, 10 << 20},
	} {
		if got := c.l.TmpCap(); got != c.want {
			t.Errorf("%+v: TmpCap %d, want %d", c.l, got, c.want)
		}
	}
}

// TestHostileCPUPriority: a command's processes run at nice 10 under
// SCHED_BATCH and cannot take a better nice back. The autogroup of its
// session, which is what counts against firstmate where the kernel
// schedules by session, has nice 10 too, and the command cannot change it.
// Not parallel: it raises this process's RLIMIT_NICE.
func TestHostileCPUPriority(t *testing.T) {
	// A hard RLIMIT_NICE of 0 inherited from the host must not be what
	// holds: with 40, a process may go down to nice -20.
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NICE, &old); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setrlimit(unix.RLIMIT_NICE, &unix.Rlimit{Cur: 40, Max: 40}); err == nil {
		defer unix.Setrlimit(unix.RLIMIT_NICE, &old)
	} else {
		t.Logf("RLIMIT_NICE stays %d: %v", old.Max, err)
	}
	sb := New(Config{})
	dir := workspace(t, sb)
	withHostile(t, dir)
	// Field 19 of /proc/PID/stat is the nice value, 41 the policy (3 is
	// SCHED_BATCH), here of a grandchild of the shell.
	res := run(t, sb, dir, `./hostile sched
sh -c 'cut -d" " -f19,41 /proc/self/stat'
./hostile renice 9; echo rc=$?
nice -n 5 ./hostile sched`, Limits{})
	wantOutput(t, res, `nice 10 SCHED_BATCH
ok
10 3
errno EACCES (permission denied)
rc=1
nice 15 SCHED_BATCH
ok
`)

	out := newCapture(4096)
	p, err := sb.Start(t.Context(), Command{Dir: dir, Script: `echo 0 > /proc/self/autogroup; echo rc=$?; exec sleep 30`}, out)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { p.Kill(); p.Wait() }()
	var said []byte
	for range 3000 {
		if said, _, _ = out.bytes(); bytes.Contains(said, []byte("rc=")) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	switch {
	case errors.Is(p.autogroup, os.ErrNotExist):
		t.Skip("this kernel has no autogroups")
	case errors.Is(p.autogroup, syscall.EAGAIN):
		t.Skip("the kernel rate-limits autogroup changes for this process (no CAP_SYS_ADMIN)")
	case p.autogroup != nil:
		t.Fatalf("setting the autogroup's nice: %v", p.autogroup)
	}
	ag, err := os.ReadFile(fmt.Sprintf("/proc/%d/autogroup", p.Pid()))
	if err != nil || !strings.HasSuffix(string(ag), " nice 10\n") {
		t.Errorf("the command's autogroup: %q, %v; want nice 10 (it wrote: %q)", ag, err, said)
	}
	if abi, _ := ll.LandlockGetABIVersion(); abi > 0 {
		if want := "sh: 1: cannot create /proc/self/autogroup: Permission denied\nrc=2\n"; string(said) != want {
			t.Errorf("the command changing its autogroup: %q, want %q", said, want)
		}
	}
}

// TestHostileSocketFamilies: socket and socketpair work for unix, IP and
// netlink sockets, and fail as if the kernel lacked them for any other
// family. AF_PACKET would otherwise fail with EPERM (no CAP_NET_RAW), and
// socketpair of anything but unix with EOPNOTSUPP.
func TestHostileSocketFamilies(t *testing.T) {
	t.Parallel()
	sb := New(Config{})
	dir := workspace(t, sb)
	withHostile(t, dir)
	const refused = "errno EAFNOSUPPORT (address family not supported by protocol)"
	cases := []struct{ cmd, want string }{
		{"socket unix", "ok"},
		{"socket inet", "ok"},
		{"socket inet6", "ok"},
		{"socket netlink", "ok"},
		{"socketpair unix", "ok"},
		{"socketpair inet", "errno ENOTSUP (operation not supported)"}, // the kernel's own answer: the filter let it through
		{"loopback", "ok"},
		{"socket vsock", refused},
		{"socket packet", refused},
		{"socket bluetooth", refused},
		{"socket alg", refused},
		{"socketpair vsock", refused},
		{"socketpair packet", refused},
	}
	var script, want strings.Builder
	for _, c := range cases {
		fmt.Fprintf(&script, "echo \"%[1]s: $(./hostile %[1]s)\"\n", c.cmd)
		fmt.Fprintf(&want, "%s: %s\n", c.cmd, c.want)
	}
	wantOutput(t, run(t, sb, dir, script.String(), Limits{}), want.String())
	// Where the host's kernel lacks a family, its case shows nothing.
	for _, f := range []string{"vsock", "packet", "bluetooth", "alg"} {
		if out, _ := exec.Command(hostileBin(t), "socket", f).Output(); strings.TrimSpace(string(out)) == refused {
			t.Logf("the host's kernel has no %s sockets either", f)
		}
	}
}

// TestHostileFileSize: no file grows past FileSize, and the limit cannot
// be raised.
func TestHostileFileSize(t *testing.T) {
	t.Parallel()
	sb := New(Config{})
	dir := workspace(t, sb)
	const limit = 1 << 20
	res := run(t, sb, dir, `head -c 2000000 /dev/zero > big; echo rc=$?
truncate -s 5M sparse; echo rc=$?
ulimit -f unlimited; echo rc=$?`, Limits{FileSize: limit})
	// SIGXFSZ: "File size limit exceeded", status 128+25.
	wantOutput(t, res, `File size limit exceeded
rc=153
File size limit exceeded
rc=153
sh: 3: ulimit: error setting limit (Operation not permitted)
rc=2
`)
	if fi, err := os.Stat(filepath.Join(dir, "big")); err != nil || fi.Size() != limit {
		t.Errorf("big: %v, %v; want %d bytes", fi, err, limit)
	}
	if fi, err := os.Stat(filepath.Join(dir, "sparse")); err != nil || fi.Size() != 0 {
		t.Errorf("sparse: %v, %v; want 0 bytes", fi, err)
	}
}

// TestHostileNoGrow: over quota, no file can grow, but rm works.
func TestHostileNoGrow(t *testing.T) {
	t.Parallel()
	sb := New(Config{})
	dir := workspace(t, sb)
	old := filepath.Join(dir, "old")
	if err := os.WriteFile(old, []byte("keep\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	own(t, sb, old)
	res, err := sb.Run(t.Context(), Command{Dir: dir, NoGrow: true, Script: `head -c 1 /dev/zero >> old; echo rc=$?
head -c 1 /dev/zero > new; echo rc=$?
cp old copy; echo rc=$?
cat old; wc -c < new
rm old new copy; echo rc=$?
ls -A`})
	if err != nil {
		t.Fatal(err)
	}
	wantOutput(t, res, `File size limit exceeded
rc=153
File size limit exceeded
rc=153
File size limit exceeded
rc=153
keep
0
rc=0
`)
	for _, f := range []string{"old", "new", "copy"} {
		mustNotExist(t, filepath.Join(dir, f))
	}
}

// TestHostileProbe: the probe passes here, with Landlock.
func TestHostileProbe(t *testing.T) {
	t.Parallel()
	sb := New(Config{})
	rep, err := sb.Probe(t.Context())
	if err != nil {
		t.Fatalf("probe: %v", err)
	}
	if rep.Kind != KindNamespaces {
		t.Errorf("kind %q", rep.Kind)
	}
	// What bounds memory and CPU depends on the host; the report says
	// which, and what /tmp holds.
	if rep.Tmp != sb.Limits().TmpCap() {
		t.Errorf("Report.Tmp %d, want %d", rep.Tmp, sb.Limits().TmpCap())
	}
	want := "RLIMIT_DATA"
	if rep.Cgroup != "" {
		want = "cgroup v2 " + rep.Cgroup
	}
	if !strings.Contains(rep.Memory, want) {
		t.Errorf("Report.Memory %q does not say %q", rep.Memory, want)
	}
	if !strings.Contains(rep.CPU, "nice 10, SCHED_BATCH") {
		t.Errorf("Report.CPU %q does not say nice 10, SCHED_BATCH", rep.CPU)
	}
	t.Logf("%s", rep)
	abi, _ := ll.LandlockGetABIVersion()
	if abi <= 0 {
		t.Skipf("this kernel has no Landlock (%d); the probe passed without it", abi)
	}
	if rep.Landlock != abi || rep.Landlock <= 0 {
		t.Errorf("probe reports Landlock %d, the kernel %d", rep.Landlock, abi)
	}
}

func TestReportString(t *testing.T) {
	t.Parallel()
	rep := Report{Kind: KindNamespaces, Landlock: 7, Memory: "1 GiB of private memory per process (RLIMIT_DATA; no cgroup: no cgroup v2 hierarchy at /sys/fs/cgroup)",
		CPU: "nice 10, SCHED_BATCH, session autogroup nice 10", Tmp: 256 << 20, Took: 21400 * time.Microsecond}
	want := "namespaces (user, mount, pid, net, ipc, uts, cgroup), Landlock ABI 7, seccomp, rlimits; " +
		"memory: 1 GiB of private memory per process (RLIMIT_DATA; no cgroup: no cgroup v2 hierarchy at /sys/fs/cgroup); " +
		"/tmp: 256 MiB; CPU: nice 10, SCHED_BATCH, session autogroup nice 10; probe passed in 21ms"
	if got := rep.String(); got != want {
		t.Errorf("String:\n%s\nwant:\n%s", got, want)
	}
}

// wantCapture is what a capture of max bytes must keep of all: all of it
// if it fits, else the first max/2 bytes, a note, and the last bytes.
func wantCapture(all []byte, max int) (out []byte, cut int64) {
	if len(all) <= max {
		return all, 0
	}
	head := max / 2
	out = append([]byte(nil), all[:head]...)
	out = fmt.Appendf(out, "\n[… %d bytes of output cut …]\n", len(all)-max)
	return append(out, all[len(all)-(max-head):]...), int64(len(all) - max)
}

func TestCapture(t *testing.T) {
	t.Parallel()
	data := make([]byte, 1<<20)
	for i := range data {
		data[i] = byte('a' + i*7%26)
	}
	ones := func(n int) []int { return slices.Repeat([]int{1}, n) }
	cases := []struct {
		name   string
		max    int
		writes []int
	}{
		{"nothing", 10, nil},
		{"empty writes", 10, []int{0, 0}},
		{"under the cap", 10, []int{3, 4}},
		{"exactly the cap", 10, []int{10}},
		{"the cap in pieces", 10, []int{5, 5}},
		{"one over", 10, []int{11}},
		{"one over in bytes", 10, ones(11)},
		{"across the head", 10, []int{4, 2, 7}},
		{"byte by byte", 7, ones(50)},
		{"odd cap", 7, []int{100, 1, 1, 3}},
		{"tail wraps", 10, slices.Repeat([]int{3}, 9)},
		{"write longer than the tail", 10, []int{2, 23, 1}},
		{"write as long as the tail", 10, []int{5, 5, 5, 5}},
		{"empty writes between", 10, []int{0, 5, 0, 9, 0}},
		{"cap of one", 1, []int{1, 2, 3}},
		{"cap of two", 2, []int{1, 1, 1, 5}},
		{"cap of three", 3, []int{2, 2, 2}},
		{"large", 64 << 10, []int{1000, 40000, 70000, 3, 65536, 1}},
	}
	rnd := rand.New(rand.NewPCG(1, 2)).IntN
	for i := range 40 {
		c := struct {
			name   string
			max    int
			writes []int
		}{name: fmt.Sprintf("random %d", i), max: 1 + rnd(300)}
		for range rnd(30) {
			c.writes = append(c.writes, rnd(3*c.max))
		}
		cases = append(cases, c)
	}
	for _, c := range cases {
		capt := newCapture(c.max)
		off := 0
		for _, n := range c.writes {
			if k, err := capt.Write(data[off : off+n]); k != n || err != nil {
				t.Fatalf("%s: Write(%d) = %d, %v", c.name, n, k, err)
			}
			off += n
		}
		got, total, cut := capt.bytes()
		want, wantCut := wantCapture(data[:off], c.max)
		if !bytes.Equal(got, want) || total != int64(off) || cut != wantCut {
			t.Errorf("%s (max %d, writes %v): got %q, total %d, cut %d; want %q, total %d, cut %d",
				c.name, c.max, c.writes, got, total, cut, want, off, wantCut)
		}
	}
}
