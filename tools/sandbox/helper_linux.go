package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// The helper's inherited descriptors (exec.Cmd.ExtraFiles start at 3).
const (
	fdWorkspace = 3 // the workspace directory, bind-mounted at /workspace
	fdStatus    = 4 // setup errors; closed on exec, so EOF means the command started
)

// protocol changes whenever spec does: a firstmate-sandbox binary from
// another build refuses to run rather than misread it.
const protocol = 3

// spec is what the parent tells the helper, as JSON in argv[1].
type spec struct {
	V       int    `json:"v"`
	Script  string `json:"script"`
	Dir     string `json:"dir"`            // the workspace's host path
	BindDir bool   `json:"bind,omitempty"` // fd 3 is the directory itself, not a detached mount
	Path    string `json:"path"`
	Limits  Limits `json:"limits"`
	Probe   *probe `json:"probe,omitempty"`
	NoFSize bool   `json:"no_fsize,omitempty"` // over quota: files may not grow
	// NoCreate: over quota, nothing may be made in the workspace.
	NoCreate bool `json:"no_create,omitempty"`
	// Cgroup says the command starts in a cgroup of its own whose
	// memory.max bounds it; otherwise RLIMIT_DATA does.
	Cgroup bool `json:"cgroup,omitempty"`
	// Mounts are Command.Paths; mount i is descriptor fdMounts+i.
	Mounts []mount `json:"mounts,omitempty"`

	// The parent's side only.
	stdin      io.Reader
	stderr     io.Writer
	env        []string   // Command.Env, passed in the helper's environment
	mountFiles []*os.File // the descriptors of Mounts
}

// probe asks the helper, once confined, to try what must fail instead of
// running a command.
type probe struct {
	Canary   string `json:"canary"`   // a host file that must be unreadable
	Loopback string `json:"loopback"` // a host loopback address that must be unreachable
	Socket   string `json:"socket"`   // a host unix socket that must be unreachable
}

// MaybeHelper runs the sandbox helper and exits if this process was started
// as one; otherwise it returns at once.
func MaybeHelper() {
	if len(os.Args) < 2 || os.Args[0] != HelperName {
		return
	}
	// Every per-thread step (capabilities, no_new_privs, Landlock, seccomp)
	// must happen on the thread that calls execve.
	runtime.LockOSThread()
	status := os.NewFile(fdStatus, "status")
	fail := func(err error) {
		fmt.Fprintf(status, "%v", err)
		os.Exit(127)
	}
	var sp spec
	if err := json.Unmarshal([]byte(os.Args[1]), &sp); err != nil {
		fail(fmt.Errorf("bad spec: %w", err))
	}
	if sp.V != protocol {
		exe, _ := os.Executable()
		fail(fmt.Errorf("the helper %s is from another firstmate build (protocol %d, firstmate sent %d); install firstmate and firstmate-sandbox from one build", exe, protocol, sp.V))
	}
	// Outside the namespaces it is started in, confine would change the
	// host's mounts: a helper run by hand, or by anything but Start,
	// refuses.
	if os.Getpid() != 1 {
		fail(errors.New("the sandbox helper runs only as PID 1 of the fresh namespaces firstmate starts it in"))
	}
	if err := confine(&sp); err != nil {
		fail(err)
	}
	if sp.Probe != nil {
		os.Exit(runProbe(sp.Probe, status))
	}
	env := commandEnv([]string{"PATH=" + sp.Path, "HOME=/workspace", "LANG=C.UTF-8"}, os.Environ())
	err := unix.Exec("/bin/sh", []string{"sh", "-c", sp.Script}, env)
	fail(fmt.Errorf("exec /bin/sh: %w", err))
}

// confine builds the sandbox around this process. It runs as root of a new
// user namespace (mapped to an unprivileged host uid) with full
// capabilities there, and ends with none.
func confine(sp *spec) error {
	mounted, err := buildRoot(sp.Dir, sp.BindDir, sp.Limits.TmpCap(), sp.Mounts)
	if err != nil {
		return err
	}
	if err := unix.Sethostname([]byte("sandbox")); err != nil {
		return fmt.Errorf("sethostname: %w", err)
	}
	if err := loopbackUp(); err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	if err := closeOnExecAll(); err != nil {
		return err
	}
	if err := dropCapabilities(); err != nil {
		return err
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	if err := applyLandlock(sp.NoCreate, mounted); err != nil {
		return err
	}
	if err := installSeccomp(); err != nil {
		return err
	}
	if err := lowerPriority(); err != nil {
		return err
	}
	return setRlimits(sp.Limits, sp.NoFSize, !sp.Cgroup)
}

// closeOnExecAll marks every descriptor but stdin, stdout and stderr
// close-on-exec: the helper's own (the workspace, the status pipe), and
// any that firstmate inherited without the flag from whatever started it
// (a supervisor, a shell), which exec.Cmd passes on and which could be a
// host file or socket.
func closeOnExecAll() error {
	const closeRangeCloexec = 1 << 2 // CLOSE_RANGE_CLOEXEC, Linux 5.11
	if unix.CloseRange(3, ^uint(0), closeRangeCloexec) == nil {
		return nil
	}
	ents, err := os.ReadDir("/proc/self/fd") // the fresh /proc: it shows this process
	if err != nil {
		return fmt.Errorf("list descriptors: %w", err)
	}
	for _, e := range ents {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			unix.CloseOnExec(fd)
		}
	}
	return nil
}

const newRoot = "/tmp" // any directory: it is covered by a tmpfs in this mount namespace only

// buildRoot builds the root the command sees and returns the extra mounts
// it made (the others were in view already).
func buildRoot(dir string, bindDir bool, tmpSize int64, mounts []mount) ([]mount, error) {
	if err := buildRootFS(dir, bindDir, tmpSize); err != nil {
		return nil, err
	}
	var made []mount
	for i, m := range mounts {
		ok, err := mountExtra(m, fdMounts+i, filepath.Join(newRoot, m.Path))
		if err != nil {
			return nil, err
		}
		if ok {
			made = append(made, m)
		}
	}
	return made, enterRoot()
}

// buildRootFS mounts the command's root at newRoot.
func buildRootFS(dir string, bindDir bool, tmpSize int64) error {
	// Nothing mounted here may propagate back to the host.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	wsMount := fdWorkspace
	if bindDir {
		// Without privilege in the host's namespace the parent could not
		// detach a copy of the mount; bind the path (our uid owns it), once
		// it is checked to be the directory the parent opened.
		fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open workspace: %w", err)
		}
		defer unix.Close(fd)
		var a, b unix.Stat_t
		if unix.Fstat(fd, &a) != nil || unix.Fstat(fdWorkspace, &b) != nil || a.Dev != b.Dev || a.Ino != b.Ino {
			return errors.New("the workspace directory was replaced while the sandbox started")
		}
		stage := filepath.Join("/proc/self/fd", fmt.Sprint(fd))
		tfd, err := unix.OpenTree(unix.AT_FDCWD, stage, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
		if err != nil {
			return fmt.Errorf("clone workspace mount: %w", err)
		}
		defer unix.Close(tfd)
		wsMount = tfd
	}
	if err := unix.Mount("tmpfs", newRoot, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=1m,nr_inodes=4096,mode=0755"); err != nil {
		return fmt.Errorf("mount root tmpfs: %w", err)
	}
	r := func(p string) string { return filepath.Join(newRoot, p) }
	for _, d := range []string{"usr", "etc", "workspace", "tmp", "proc", "dev"} {
		if err := os.Mkdir(r(d), 0o755); err != nil {
			return err
		}
	}
	if err := bindRO("/usr", r("usr")); err != nil {
		return err
	}
	// The top-level links of a merged /usr (bin -> usr/bin, …), or
	// read-only binds where /usr is not merged.
	for _, d := range []string{"bin", "sbin", "lib", "lib32", "lib64", "libx32"} {
		if err := mirror("/"+d, r(d)); err != nil {
			return err
		}
	}
	if err := buildEtc(r("etc")); err != nil {
		return err
	}
	// A detached copy of the workspace mount (made by the parent, or just
	// above): attaching it needs no permission on the host path.
	//
	// /proc/self/mountinfo still shows the workspace's host path, as this
	// mount's root (the fourth field): the kernel prints the path of the
	// mount's root directory inside its filesystem, fixed when the mount
	// is cloned, whether from a path or a descriptor, before or after
	// pivot_root, wherever it is moved. Only a mount of a whole filesystem
	// shows "/"; an overlay would list its layers' paths in its options
	// instead (and leaves undefined what it shows when the host changes the
	// workspace under it, as the file tools do). A data directory on a
	// filesystem of its own shows only the path inside it.
	if err := unix.MoveMount(wsMount, "", unix.AT_FDCWD, r("workspace"), unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("mount workspace: %w", err)
	}
	ws := r("workspace")
	if err := remount(r("workspace"), ws, unix.MS_NOSUID|unix.MS_NODEV); err != nil {
		return fmt.Errorf("remount workspace: %w", err)
	}
	if err := unix.Mount("tmpfs", r("tmp"), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, tmpOptions(tmpSize)); err != nil {
		return fmt.Errorf("mount /tmp: %w", err)
	}
	if err := buildDev(r("dev")); err != nil {
		return err
	}
	if err := unix.Mount("proc", r("proc"), "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount /proc: %w", err)
	}
	// No nested user namespaces: the kernel's own answer to a command
	// that tries unshare -U. The setting belongs to this namespace.
	if err := os.WriteFile(r("proc/sys/user/max_user_namespaces"), []byte("0"), 0); err != nil {
		return fmt.Errorf("user.max_user_namespaces: %w", err)
	}
	return bindRO(r("proc/sys"), r("proc/sys"))
}

// enterRoot makes newRoot the root, read-only, and enters /workspace.
func enterRoot() error {
	if err := os.Chdir(newRoot); err != nil {
		return err
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	// The old root is stacked under the new one; detach it so nothing of
	// the host stays reachable.
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detach old root: %w", err)
	}
	if err := os.Chdir("/"); err != nil {
		return err
	}
	if err := unix.Mount("", "/", "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		return fmt.Errorf("remount root read-only: %w", err)
	}
	return os.Chdir("/workspace")
}

// tmpOptions are the mount options of a /tmp of size bytes. Its inodes
// are capped as well: each costs about 1 KiB of kernel memory that the
// size does not count, and the kernel's default (half the RAM's pages)
// would let a command pin gigabytes in empty files. One inode per 4 KiB
// page of the size keeps that overhead near a quarter of it.
func tmpOptions(size int64) string {
	return fmt.Sprintf("size=%d,nr_inodes=%d,mode=1777", size, max(size>>12, 256))
}

// bindRO bind-mounts src at dst read-only, keeping the flags the kernel
// locks on mounts inherited from a more privileged namespace.
func bindRO(src, dst string) error {
	if err := unix.Mount(src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s: %w", src, err)
	}
	if err := remount(dst, src, unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV); err != nil {
		return fmt.Errorf("remount %s read-only: %w", src, err)
	}
	return nil
}

func remount(dst, src string, flags uintptr) error {
	var st unix.Statfs_t
	if err := unix.Statfs(src, &st); err != nil {
		return err
	}
	for _, f := range [][2]uintptr{
		{unix.ST_RDONLY, unix.MS_RDONLY}, {unix.ST_NOSUID, unix.MS_NOSUID}, {unix.ST_NODEV, unix.MS_NODEV},
		{unix.ST_NOEXEC, unix.MS_NOEXEC}, {unix.ST_NOATIME, unix.MS_NOATIME}, {unix.ST_NODIRATIME, unix.MS_NODIRATIME},
		{unix.ST_RELATIME, unix.MS_RELATIME},
	} {
		if uintptr(st.Flags)&f[0] != 0 {
			flags |= f[1]
		}
	}
	return unix.Mount("", dst, "", unix.MS_BIND|unix.MS_REMOUNT|flags, "")
}

// mirror reproduces a host top-level entry: a symlink as the same symlink,
// a directory as a read-only bind, nothing if it does not exist.
func mirror(host, dst string) error {
	fi, err := os.Lstat(host)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return err
	case fi.Mode()&os.ModeSymlink != 0:
		target, err := os.Readlink(host)
		if err != nil {
			return err
		}
		return os.Symlink(target, dst)
	case fi.IsDir():
		if err := os.Mkdir(dst, 0o755); err != nil {
			return err
		}
		return bindRO(host, dst)
	case fi.Mode().IsRegular():
		if err := os.WriteFile(dst, nil, 0o644); err != nil {
			return err
		}
		return bindRO(host, dst)
	}
	return nil
}

// etcFiles are the host /etc entries a shell and common tools need; none
// holds a secret. passwd, group and hosts are written fresh instead.
var etcFiles = []string{"alternatives", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "os-release", "ssl", "mime.types", "protocols", "services"}

func buildEtc(dst string) error {
	for _, f := range etcFiles {
		if err := mirror(filepath.Join("/etc", f), filepath.Join(dst, f)); err != nil {
			return fmt.Errorf("/etc/%s: %w", f, err)
		}
	}
	files := map[string]string{
		"passwd":        "root:x:0:0:sandbox:/workspace:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
		"group":         "root:x:0:\nnogroup:x:65534:\n",
		"hosts":         "127.0.0.1\tlocalhost sandbox\n::1\tlocalhost ip6-localhost\n",
		"hostname":      "sandbox\n",
		"nsswitch.conf": "passwd: files\ngroup: files\nhosts: files\n",
		"resolv.conf":   "",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dst, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// devNodes are bound from the host: a user namespace cannot mknod.
var devNodes = []string{"null", "zero", "full", "random", "urandom", "tty"}

func buildDev(dst string) error {
	if err := unix.Mount("tmpfs", dst, "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "size=64k,mode=0755"); err != nil {
		return fmt.Errorf("mount /dev: %w", err)
	}
	for _, n := range devNodes {
		p := filepath.Join(dst, n)
		if err := os.WriteFile(p, nil, 0o666); err != nil {
			return err
		}
		if err := unix.Mount("/dev/"+n, p, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind /dev/%s: %w", n, err)
		}
	}
	links := map[string]string{"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2", "shm": "/tmp"}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(dst, name)); err != nil {
			return err
		}
	}
	return nil
}

// loopbackUp brings up lo, the only interface of the new network
// namespace, so a command can talk to a server it started itself.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

// dropCapabilities leaves the command with no capability in any set, and
// locks the securebits so that executing a program as uid 0 of the
// namespace grants none back.
func dropCapabilities() error {
	for c := 0; c <= unix.CAP_LAST_CAP; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("drop capability %d: %w", c, err)
		}
	}
	const bits = 1<<0 | 1<<1 | 1<<2 | 1<<3 | 1<<4 | 1<<5 | 1<<6 | 1<<7 // NOROOT, NO_SETUID_FIXUP, KEEP_CAPS(off), NO_CAP_AMBIENT_RAISE and their locks
	const keepCaps = 1 << 4
	if err := unix.Prctl(unix.PR_SET_SECUREBITS, uintptr(bits&^keepCaps), 0, 0, 0); err != nil {
		return fmt.Errorf("securebits: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	return nil
}

// applyLandlock is the second layer: even if the mount layer let
// something of the host through, only these paths can be touched.
func applyLandlock(noCreate bool, mounts []mount) error {
	abi, _ := ll.LandlockGetABIVersion()
	cfg := landlock.V7
	// Landlock's TCP rules are per port: handling them with no rule would
	// forbid every bind and connect, even to a server the command started
	// on its own loopback. The network namespace is the network boundary.
	cfg.HandledAccessNet = 0
	if abi < 7 {
		cfg = cfg.BestEffort()
	}
	if abi < 1 {
		return nil // no Landlock in this kernel: the namespaces hold alone (Probe reports it)
	}
	dev := make([]string, len(devNodes))
	for i, n := range devNodes {
		dev[i] = "/dev/" + n
	}
	rules := []landlock.Rule{
		// Listing any directory is harmless: everything in view was put
		// there on purpose. Reading and executing is per directory.
		landlock.PathAccess(landlock.AccessFSSet(ll.AccessFSReadDir), "/"),
		landlock.RODirs("/usr", "/etc", "/proc", "/dev"),
		landlock.RWFiles(dev...),
		workspaceRule(noCreate),
		landlock.RWDirs("/tmp"),
	}
	for _, m := range mounts {
		if m.File {
			rules = append(rules, landlock.ROFiles(m.Path))
		} else {
			rules = append(rules, landlock.RODirs(m.Path))
		}
	}
	fd, flags, err := cfg.NewRulesetFD(rules...)
	if err != nil {
		return fmt.Errorf("landlock: %w", err)
	}
	if fd < 0 {
		return nil
	}
	defer unix.Close(fd)
	if err := ll.LandlockRestrictSelf(fd, flags); err != nil {
		return fmt.Errorf("landlock: %w", err)
	}
	return nil
}

// workspaceRule grants the workspace read and write, or, over its quota,
// everything but making files, directories, links, FIFOs, sockets and
// devices: it can be read, truncated and cleaned up, not filled.
func workspaceRule(noCreate bool) landlock.Rule {
	if !noCreate {
		return landlock.RWDirs("/workspace")
	}
	return landlock.PathAccess(ll.AccessFSExecute|ll.AccessFSReadFile|ll.AccessFSReadDir|ll.AccessFSWriteFile|
		ll.AccessFSRemoveDir|ll.AccessFSRemoveFile|ll.AccessFSTruncate, "/workspace")
}

// commandNice is the nice value of every command: below firstmate, which
// runs at 0, so that a busy command slows the bot's answers little.
const commandNice = 10

// lowerPriority makes this thread (the one that will execve) and so every
// process of the command run at nice 10 under SCHED_BATCH. Batch tasks
// do not preempt others when they wake, which keeps firstmate's own
// wake-ups prompt; SCHED_IDLE was not chosen because it gives a command
// almost nothing on a host that is busy with anything else, so a build
// could starve to its timeout. RLIMIT_NICE 0 (setRlimits) keeps the
// command from raising its priority back; it may still leave SCHED_BATCH
// for SCHED_OTHER, which no limit guards, but not its nice value.
func lowerPriority() error {
	attr := unix.SchedAttr{Policy: unix.SCHED_BATCH, Nice: commandNice}
	if err := unix.SchedSetAttr(0, &attr, 0); err != nil {
		return fmt.Errorf("sched_setattr SCHED_BATCH, nice %d: %w", commandNice, err)
	}
	return nil
}

// setRlimits sets the limits last: the helper's own setup needs none of
// them. With data set, Limits.Memory is each process's RLIMIT_DATA. That
// counts what a process makes private and writable (heap, brk, anonymous
// and private file mappings, thread stacks) on Linux 4.7 and later, and
// not the address space reserved without access, which Go, the JVM and
// V8 reserve in gigabytes: RLIMIT_AS at the same value breaks them.
func setRlimits(l Limits, noFSize, data bool) error {
	fsize := uint64(l.FileSize)
	if noFSize {
		fsize = 0
	}
	cpu := uint64(l.CPU / time.Second)
	type rlimit struct {
		res int
		val uint64
	}
	limits := []rlimit{
		{unix.RLIMIT_CORE, 0},
		{unix.RLIMIT_NOFILE, uint64(l.OpenFiles)},
		{unix.RLIMIT_FSIZE, fsize},
		{unix.RLIMIT_CPU, cpu},
		{unix.RLIMIT_NPROC, uint64(l.Procs)},
		{unix.RLIMIT_NICE, 0}, // no nice below the one lowerPriority set
	}
	if data {
		limits = append(limits, rlimit{unix.RLIMIT_DATA, uint64(l.Memory)})
	}
	for _, r := range limits {
		if err := unix.Setrlimit(r.res, &unix.Rlimit{Cur: r.val, Max: r.val}); err != nil {
			return fmt.Errorf("rlimit %d: %w", r.res, err)
		}
	}
	return nil
}

// runProbe tries, from inside the sandbox, what must fail; it prints one
// line per breach to status and exits non-zero if there was any.
func runProbe(p *probe, status *os.File) int {
	var breaches []string
	if _, err := os.ReadFile(p.Canary); err == nil {
		breaches = append(breaches, "a host file outside the workspace was readable")
	}
	if p.Loopback != "" {
		if c, err := net.DialTimeout("tcp", p.Loopback, time.Second); err == nil {
			c.Close()
			breaches = append(breaches, "a host loopback port was reachable")
		}
	}
	if p.Socket != "" {
		if c, err := net.DialTimeout("unix", p.Socket, time.Second); err == nil {
			c.Close()
			breaches = append(breaches, "a host unix socket was reachable")
		}
	}
	if uid := os.Getuid(); uid != 0 {
		breaches = append(breaches, fmt.Sprintf("runs as uid %d, not the namespace's root", uid))
	}
	var caps [2]unix.CapUserData
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	if err := unix.Capget(&hdr, &caps[0]); err != nil || caps[0].Effective|caps[1].Effective|caps[0].Permitted|caps[1].Permitted != 0 {
		breaches = append(breaches, "capabilities were left")
	}
	if len(breaches) > 0 {
		fmt.Fprint(status, "probe: "+strings.Join(breaches, "; "))
		return 1
	}
	return 0
}
