package sandbox

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// fdMounts is the helper's first descriptor of Command.Paths (after the
// workspace and the status pipe), one each.
const fdMounts = 5

// envPrefix marks, in the helper's environment, a variable meant for the
// command (Command.Env). The prefix keeps the command's variables from
// steering the helper itself (GODEBUG, LD_PRELOAD, …).
const envPrefix = "FIRSTMATE_SANDBOX_ENV_"

// daemonCPU is a daemon's RLIMIT_CPU: in effect none (292 years).
const daemonCPU = time.Duration(math.MaxInt64)

// mount is one extra read-only path of a command (Command.Paths).
type mount struct {
	Path string `json:"path"`           // where it is, on the host and in the sandbox
	File bool   `json:"file,omitempty"` // a file, not a directory
	// Bind: the descriptor is the path itself (O_PATH), not a detached
	// copy of its mount (which needs privilege in the host's namespace).
	Bind bool `json:"bind,omitempty"`
}

// inView are the top-level entries of the host every command sees
// read-only already: /usr and the links into it (or read-only binds of
// them where /usr is not merged).
var inView = []string{"usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32"}

// mountPath checks a Command.Paths entry: it returns the path cleaned,
// and whether a command sees it already.
func mountPath(p string) (clean string, visible bool, err error) {
	if !filepath.IsAbs(p) {
		return "", false, fmt.Errorf("sandbox path %q is not absolute", p)
	}
	clean = filepath.Clean(p)
	first, _, _ := strings.Cut(clean[1:], "/")
	switch {
	case first == "":
		return "", false, errors.New("sandbox path /: the host's root cannot be given to a command")
	case slices.Contains(inView, first):
		return clean, true, nil
	case first == "workspace" || first == "proc" || first == "dev":
		return "", false, fmt.Errorf("sandbox path %s: /%s is the sandbox's own", clean, first)
	}
	return clean, false, nil
}

// openPaths opens the Command.Paths a command does not see already, for
// the helper to mount, sorted so that a directory comes before what is in
// it. The caller closes the files once the helper has started.
func openPaths(paths []string) ([]mount, []*os.File, error) {
	var mounts []mount
	for _, p := range paths {
		clean, visible, err := mountPath(p)
		if err != nil {
			return nil, nil, err
		}
		if visible || slices.ContainsFunc(mounts, func(m mount) bool { return m.Path == clean }) {
			continue
		}
		mounts = append(mounts, mount{Path: clean})
	}
	slices.SortFunc(mounts, func(a, b mount) int { return strings.Compare(a.Path, b.Path) })
	files := make([]*os.File, 0, len(mounts))
	for i := range mounts {
		m := &mounts[i]
		fi, err := os.Stat(m.Path) // a link is mounted as what it points to
		if err == nil && !fi.IsDir() && !fi.Mode().IsRegular() {
			err = errors.New("neither a file nor a directory")
		}
		if err != nil {
			closeAll(files)
			return nil, nil, fmt.Errorf("sandbox path %s: %w", m.Path, err)
		}
		m.File = !fi.IsDir()
		// A detached copy of the mount, as for the workspace: the helper
		// attaches it without needing any permission on the host path.
		fd, err := unix.OpenTree(unix.AT_FDCWD, m.Path, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
		if errors.Is(err, unix.EPERM) {
			m.Bind = true
			fd, err = unix.Open(m.Path, unix.O_PATH|unix.O_CLOEXEC, 0)
		}
		if err != nil {
			closeAll(files)
			return nil, nil, fmt.Errorf("sandbox path %s: %w", m.Path, err)
		}
		files = append(files, os.NewFile(uintptr(fd), m.Path))
	}
	return mounts, files, nil
}

func closeAll(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}

// mountExtra mounts m, whose descriptor is fd, read-only at dst in the new
// root, and reports whether it did: a path that is there already is in
// view through a mount made before it (a directory it is in).
func mountExtra(m mount, fd int, dst string) (bool, error) {
	if _, err := os.Stat(dst); err == nil {
		return false, nil
	}
	var err error
	if m.File {
		if err = os.MkdirAll(filepath.Dir(dst), 0o755); err == nil {
			err = os.WriteFile(dst, nil, 0o444)
		}
	} else {
		err = os.MkdirAll(dst, 0o755)
	}
	if err != nil {
		return false, fmt.Errorf("mount point for %s: %w", m.Path, err)
	}
	src := fd
	if m.Bind {
		// Unprivileged, the parent could only open the path; a copy of
		// its mount is made here, where this process may.
		tfd, err := unix.OpenTree(unix.AT_FDCWD, fmt.Sprintf("/proc/self/fd/%d", fd), unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
		if err != nil {
			return false, fmt.Errorf("clone the mount of %s: %w", m.Path, err)
		}
		defer unix.Close(tfd)
		src = tfd
	}
	if err := unix.MoveMount(src, "", unix.AT_FDCWD, dst, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return false, fmt.Errorf("mount %s: %w", m.Path, err)
	}
	if err := remount(dst, dst, unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV); err != nil {
		return false, fmt.Errorf("remount %s read-only: %w", m.Path, err)
	}
	return true, nil
}

// checkEnv refuses a Command.Env entry that is not NAME=value.
func checkEnv(env []string) error {
	for _, e := range env {
		name, _, ok := strings.Cut(e, "=")
		if !ok || !validEnvName(name) {
			return fmt.Errorf("sandbox environment: %q is not NAME=value", e)
		}
	}
	return nil
}

func validEnvName(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for _, c := range s {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// commandEnv is a command's environment: base, and the variables in the
// helper's environment that carry envPrefix, without it (overriding
// base's of the same name).
func commandEnv(base, helperEnv []string) []string {
	env := slices.Clone(base)
	for _, e := range helperEnv {
		kv, ok := strings.CutPrefix(e, envPrefix)
		if !ok {
			continue
		}
		name, _, _ := strings.Cut(kv, "=")
		env = slices.DeleteFunc(env, func(b string) bool { return strings.HasPrefix(b, name+"=") })
		env = append(env, kv)
	}
	return env
}
