//go:build linux && (amd64 || arm64)

package sandbox

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// deniedSyscalls fail with EPERM: kernel attack surface a shell never
// needs (io_uring, bpf, perf, userfaultfd, keyrings), escapes from the
// mount and namespace setup, and reading other processes' memory.
var deniedSyscalls = []uintptr{
	unix.SYS_IO_URING_SETUP, unix.SYS_IO_URING_ENTER, unix.SYS_IO_URING_REGISTER,
	unix.SYS_BPF, unix.SYS_PERF_EVENT_OPEN, unix.SYS_USERFAULTFD,
	unix.SYS_KEYCTL, unix.SYS_ADD_KEY, unix.SYS_REQUEST_KEY,
	unix.SYS_MOUNT, unix.SYS_UMOUNT2, unix.SYS_PIVOT_ROOT, unix.SYS_CHROOT,
	unix.SYS_MOVE_MOUNT, unix.SYS_OPEN_TREE, unix.SYS_FSOPEN, unix.SYS_FSCONFIG,
	unix.SYS_FSMOUNT, unix.SYS_FSPICK, unix.SYS_MOUNT_SETATTR,
	unix.SYS_UNSHARE, unix.SYS_SETNS,
	unix.SYS_PTRACE, unix.SYS_PROCESS_VM_READV, unix.SYS_PROCESS_VM_WRITEV,
	unix.SYS_KEXEC_LOAD, unix.SYS_KEXEC_FILE_LOAD, unix.SYS_INIT_MODULE,
	unix.SYS_FINIT_MODULE, unix.SYS_DELETE_MODULE, unix.SYS_REBOOT,
	unix.SYS_SWAPON, unix.SYS_SWAPOFF, unix.SYS_SYSLOG, unix.SYS_ACCT,
	unix.SYS_QUOTACTL, unix.SYS_OPEN_BY_HANDLE_AT, unix.SYS_LOOKUP_DCOOKIE,
	unix.SYS_FANOTIFY_INIT, unix.SYS_VHANGUP,
}

// socketFamilies are the address families socket(2) and socketpair(2) may
// use: unix sockets, IP, and netlink, which ip(8) and glibc's getaddrinfo
// (AI_ADDRCONFIG asks NETLINK_ROUTE) need. Every other family fails with
// EAFNOSUPPORT, as if the kernel lacked it: vsock reaches the hypervisor,
// and the rest (packet, bluetooth, alg, rds, tipc, xdp, …) are kernel code
// a shell has no use for and bugs have come from.
var socketFamilies = []uint32{unix.AF_UNIX, unix.AF_INET, unix.AF_INET6, unix.AF_NETLINK}

// seccompFilter builds the BPF program. Its first rule kills the process
// on any architecture but the native one: a blocklist of native numbers
// means nothing to a 32-bit int 0x80 call, whose numbers differ. That
// rule also covers socketcall(2), through which 32-bit x86 makes socket
// calls: neither x86-64 nor arm64 has it.
func seccompFilter() []unix.SockFilter {
	const (
		ldW  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq  = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		jge  = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
		ret  = unix.BPF_RET | unix.BPF_K
		kill = unix.SECCOMP_RET_KILL_PROCESS
	)
	eperm := uint32(unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM))
	eafnosupport := uint32(unix.SECCOMP_RET_ERRNO | uint32(unix.EAFNOSUPPORT))
	prog := []unix.SockFilter{
		{Code: ldW, K: 4}, // seccomp_data.arch
		{Code: jeq, Jt: 1, Jf: 0, K: auditArch},
		{Code: ret, K: kill},
		{Code: ldW, K: 0}, // seccomp_data.nr
	}
	if x32Bit != 0 {
		// x32 shares the x86-64 arch token; its numbers carry this bit.
		prog = append(prog, unix.SockFilter{Code: jge, Jt: 0, Jf: 1, K: x32Bit}, unix.SockFilter{Code: ret, K: kill})
	}
	// socket and socketpair: the family (args[0], an int: the kernel reads
	// the low 32 bits, which are first on both little-endian targets) must
	// be one of socketFamilies. The block ends in returns, so other calls
	// jump over it with the number still loaded.
	n := len(socketFamilies)
	prog = append(prog,
		unix.SockFilter{Code: jeq, Jt: 1, Jf: 0, K: unix.SYS_SOCKET},
		unix.SockFilter{Code: jeq, Jt: 0, Jf: uint8(n + 3), K: unix.SYS_SOCKETPAIR},
		unix.SockFilter{Code: ldW, K: 16}, // seccomp_data.args[0]
	)
	for i, af := range socketFamilies {
		prog = append(prog, unix.SockFilter{Code: jeq, Jt: uint8(n - i), Jf: 0, K: af})
	}
	prog = append(prog, unix.SockFilter{Code: ret, K: eafnosupport}, unix.SockFilter{Code: ret, K: unix.SECCOMP_RET_ALLOW})
	for _, nr := range deniedSyscalls {
		prog = append(prog, unix.SockFilter{Code: jeq, Jt: 0, Jf: 1, K: uint32(nr)}, unix.SockFilter{Code: ret, K: eperm})
	}
	return append(prog, unix.SockFilter{Code: ret, K: unix.SECCOMP_RET_ALLOW})
}

// installSeccomp loads the filter on this thread (the one that will
// execve); no_new_privs must be set.
func installSeccomp() error {
	f := seccompFilter()
	prog := unix.SockFprog{Len: uint16(len(f)), Filter: &f[0]}
	if err := unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&prog)), 0, 0); err != nil {
		return fmt.Errorf("seccomp: %w", err)
	}
	return nil
}
