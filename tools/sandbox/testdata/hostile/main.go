// Command hostile is run inside the sandbox by the hostile tests. Each
// subcommand tries one thing a confined command must not be able to do and
// prints how it ended on one line, so a test can assert the exact outcome:
//
//	ok                    it worked
//	errno ENAME (text)    a system call failed with this errno
//	error: text           it failed some other way
//
// The exit code is 0, 1 and 2 respectively (3 for bad usage).
package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

const usage = `usage:
  hostile connect tcp|unix ADDR   (unix @NAME is an abstract socket)
  hostile udp ADDR                send a datagram and wait for an answer
  hostile loopback                listen on 127.0.0.1 and connect to it
  hostile syscall NAME            one of the names in syscalls
  hostile clone user|mount|net|pid|ipc|uts|cgroup
  hostile tty                     open the controlling terminal, push a byte into its input
  hostile x32                     a system call through the x32 ABI
  hostile socket FAMILY           socket(2) of a family in families
  hostile socketpair FAMILY       socketpair(2) of a family in families
  hostile alloc MIB               map MIB MiB of private memory and touch every page
  hostile sched                   print this process's nice value and policy (always ok)
  hostile renice N                set this process's nice value to N`

func main() {
	if len(os.Args) < 2 {
		badUsage()
	}
	var err error
	switch args := os.Args[2:]; os.Args[1] {
	case "connect":
		if len(args) != 2 {
			badUsage()
		}
		err = connect(args[0], args[1])
	case "udp":
		if len(args) != 1 {
			badUsage()
		}
		err = udp(args[0])
	case "loopback":
		err = loopback()
	case "syscall":
		if len(args) != 1 {
			badUsage()
		}
		f, ok := syscalls[args[0]]
		if !ok {
			badUsage()
		}
		err = f()
	case "clone":
		if len(args) != 1 {
			badUsage()
		}
		err = clone(args[0])
	case "tty":
		err = tty()
	case "socket", "socketpair":
		if len(args) != 1 {
			badUsage()
		}
		err = socket(os.Args[1] == "socketpair", args[0])
	case "alloc":
		err = alloc(intArg(args))
	case "sched":
		err = sched()
	case "renice":
		err = unix.Setpriority(unix.PRIO_PROCESS, 0, intArg(args))
	case "x32":
		// The x32 ABI shares x86-64's audit arch; only bit 30 of the
		// number tells it apart. The filter must kill the process here.
		_, _, e := unix.RawSyscall(0x40000000|unix.SYS_GETPID, 0, 0, 0)
		err = errnoErr(e)
	default:
		badUsage()
	}
	os.Exit(report(err))
}

// intArg is the one argument, a number.
func intArg(args []string) int {
	if len(args) != 1 {
		badUsage()
	}
	n, err := strconv.Atoi(args[0])
	if err != nil {
		badUsage()
	}
	return n
}

func badUsage() {
	fmt.Fprintln(os.Stderr, usage)
	os.Exit(3)
}

func report(err error) int {
	var errno syscall.Errno
	switch {
	case err == nil:
		fmt.Println("ok")
		return 0
	case errors.As(err, &errno):
		fmt.Printf("errno %s (%s)\n", unix.ErrnoName(errno), errno.Error())
		return 1
	default:
		fmt.Printf("error: %v\n", err)
		return 2
	}
}

func errnoErr(e syscall.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}

func connect(network, addr string) error {
	c, err := net.DialTimeout(network, addr, 3*time.Second)
	if err != nil {
		return err
	}
	return c.Close()
}

// udp sends one datagram. Sending to an unreachable network fails at
// once; sending to a closed local port fails on the next read, when the
// ICMP port-unreachable comes back.
func udp(addr string) error {
	c, err := net.DialTimeout("udp", addr, 3*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.Write([]byte("hostile")); err != nil {
		return err
	}
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	_, err = c.Read(make([]byte, 64))
	return err
}

// loopback is the control for connect: the sandbox's own loopback works.
func loopback() error {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer l.Close()
	done := make(chan error, 1)
	go func() {
		c, err := l.Accept()
		if err == nil {
			_, err = c.Write([]byte("x"))
			c.Close()
		}
		done <- err
	}()
	c, err := net.DialTimeout("tcp", l.Addr().String(), 3*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.Read(make([]byte, 1)); err != nil {
		return err
	}
	return <-done
}

func ptr[T any](v *T) uintptr { return uintptr(unsafe.Pointer(v)) }

// syscalls each make one call that a plain unprivileged process could
// make successfully (where the kernel allows it at all), so that EPERM
// shows the seccomp filter, not the host's settings.
var syscalls = map[string]func() error{
	"io_uring_setup": func() error {
		var params [120]byte
		fd, _, e := unix.Syscall(unix.SYS_IO_URING_SETUP, 4, ptr(&params), 0)
		return closeFD(fd, e)
	},
	"bpf": func() error {
		// BPF_MAP_CREATE of a one-entry array.
		var attr [72]byte
		*(*uint32)(unsafe.Pointer(&attr[0])) = unix.BPF_MAP_TYPE_ARRAY
		*(*uint32)(unsafe.Pointer(&attr[4])) = 4
		*(*uint32)(unsafe.Pointer(&attr[8])) = 4
		*(*uint32)(unsafe.Pointer(&attr[12])) = 1
		fd, _, e := unix.Syscall(unix.SYS_BPF, unix.BPF_MAP_CREATE, ptr(&attr), unsafe.Sizeof(attr))
		return closeFD(fd, e)
	},
	"perf_event_open": func() error {
		// A software clock on this very process: allowed at any
		// perf_event_paranoid level below 3.
		attr := unix.PerfEventAttr{Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_CPU_CLOCK,
			Size: uint32(unsafe.Sizeof(unix.PerfEventAttr{})), Bits: unix.PerfBitDisabled | unix.PerfBitExcludeKernel | unix.PerfBitExcludeHv}
		fd, err := unix.PerfEventOpen(&attr, 0, -1, -1, unix.PERF_FLAG_FD_CLOEXEC)
		if err == nil {
			unix.Close(fd)
		}
		return err
	},
	"userfaultfd": func() error {
		const userModeOnly = 1 // UFFD_USER_MODE_ONLY: needs no privilege
		fd, _, e := unix.Syscall(unix.SYS_USERFAULTFD, unix.O_CLOEXEC|userModeOnly, 0, 0)
		return closeFD(fd, e)
	},
	"keyctl": func() error {
		_, err := unix.KeyctlInt(unix.KEYCTL_GET_KEYRING_ID, unix.KEY_SPEC_SESSION_KEYRING, 1, 0, 0)
		return err
	},
	"add_key": func() error {
		_, err := unix.AddKey("user", "hostile", []byte("x"), unix.KEY_SPEC_PROCESS_KEYRING)
		return err
	},
	"ptrace": func() error {
		_, _, e := unix.RawSyscall(unix.SYS_PTRACE, unix.PTRACE_TRACEME, 0, 0)
		return errnoErr(e)
	},
	"process_vm_readv": func() error {
		var src, dst [8]byte
		local := []unix.Iovec{{Base: &dst[0], Len: 8}}
		remote := []unix.RemoteIovec{{Base: ptr(&src), Len: 8}}
		_, err := unix.ProcessVMReadv(os.Getpid(), local, remote, 0)
		return err
	},
	"unshare-user":  func() error { return unix.Unshare(unix.CLONE_NEWUSER) },
	"unshare-mount": func() error { return unix.Unshare(unix.CLONE_NEWNS) },
	"setns": func() error {
		fd, err := unix.Open("/proc/self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return unix.Setns(fd, unix.CLONE_NEWNET)
	},
	"mount":      func() error { return unix.Mount("x", "/tmp", "tmpfs", 0, "") },
	"umount":     func() error { return unix.Unmount("/workspace", unix.MNT_DETACH) },
	"pivot_root": func() error { return unix.PivotRoot("/tmp", "/tmp") },
	"chroot":     func() error { return unix.Chroot("/tmp") },
	"open_tree": func() error {
		fd, err := unix.OpenTree(unix.AT_FDCWD, "/workspace", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
		if err == nil {
			unix.Close(fd)
		}
		return err
	},
	"fsopen": func() error {
		fd, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
		if err == nil {
			unix.Close(fd)
		}
		return err
	},
	"open_by_handle_at": func() error {
		_, err := unix.OpenByHandleAt(unix.AT_FDCWD, unix.NewFileHandle(1, []byte{2, 0, 0, 0, 0, 0, 0, 0}), unix.O_RDONLY)
		return err
	},
}

func closeFD(fd uintptr, e syscall.Errno) error {
	if e != 0 {
		return e
	}
	unix.Close(int(fd))
	return nil
}

var cloneFlags = map[string]uintptr{
	"user": unix.CLONE_NEWUSER, "mount": unix.CLONE_NEWNS, "net": unix.CLONE_NEWNET, "pid": unix.CLONE_NEWPID,
	"ipc": unix.CLONE_NEWIPC, "uts": unix.CLONE_NEWUTS, "cgroup": unix.CLONE_NEWCGROUP,
}

// clone starts /bin/true in a new namespace through clone (or clone3),
// which the seccomp filter cannot inspect: what stops it is the
// namespace's own limits and the missing capabilities.
func clone(ns string) error {
	flag, ok := cloneFlags[ns]
	if !ok {
		badUsage()
	}
	cmd := exec.Command("/bin/true")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: flag}
	return cmd.Run()
}

// tty opens the controlling terminal and pushes a byte into its input
// queue (TIOCSTI), as if typed: a command that can do this can type
// commands into the shell of whoever started firstmate.
func tty() error {
	fd, err := unix.Open("/dev/tty", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	b := byte('#')
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.TIOCSTI, uintptr(unsafe.Pointer(&b)))
	return errnoErr(e)
}

// families are what socket and socketpair try, each with a type and
// protocol the family supports, so that only a filter or a missing
// privilege makes the call fail.
var families = map[string][3]int{
	"unix":      {unix.AF_UNIX, unix.SOCK_STREAM, 0},
	"inet":      {unix.AF_INET, unix.SOCK_STREAM, 0},
	"inet6":     {unix.AF_INET6, unix.SOCK_DGRAM, 0},
	"netlink":   {unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_ROUTE},
	"vsock":     {unix.AF_VSOCK, unix.SOCK_STREAM, 0},
	"packet":    {unix.AF_PACKET, unix.SOCK_DGRAM, 0},
	"bluetooth": {unix.AF_BLUETOOTH, unix.SOCK_STREAM, unix.BTPROTO_RFCOMM},
	"alg":       {unix.AF_ALG, unix.SOCK_SEQPACKET, 0},
}

func socket(pair bool, family string) error {
	f, ok := families[family]
	if !ok {
		badUsage()
	}
	if pair {
		fds, err := unix.Socketpair(f[0], f[1]|unix.SOCK_CLOEXEC, f[2])
		if err == nil {
			unix.Close(fds[0])
			unix.Close(fds[1])
		}
		return err
	}
	fd, err := unix.Socket(f[0], f[1]|unix.SOCK_CLOEXEC, f[2])
	if err == nil {
		unix.Close(fd)
	}
	return err
}

// alloc maps mib MiB of private anonymous memory, the kind malloc and
// every runtime's heap are made of, and writes to every page of it so
// that it is really held.
func alloc(mib int) error {
	b, err := unix.Mmap(-1, 0, mib<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return err
	}
	for i := 0; i < len(b); i += os.Getpagesize() {
		b[i] = 1
	}
	return unix.Munmap(b)
}

var policies = map[uint32]string{
	unix.SCHED_NORMAL: "SCHED_OTHER", unix.SCHED_FIFO: "SCHED_FIFO", unix.SCHED_RR: "SCHED_RR",
	unix.SCHED_BATCH: "SCHED_BATCH", unix.SCHED_IDLE: "SCHED_IDLE", unix.SCHED_DEADLINE: "SCHED_DEADLINE",
}

// sched prints "nice N POLICY" for this process.
func sched() error {
	a, err := unix.SchedGetAttr(0, 0)
	if err != nil {
		return err
	}
	fmt.Printf("nice %d %s\n", a.Nice, policies[a.Policy])
	return nil
}
