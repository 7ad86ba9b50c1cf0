package shell

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"unsafe"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// statFS samples the filesystem that holds dir: one statfs, about a
// microsecond.
func statFS(dir string) (fsUse, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return fsUse{}, err
	}
	return fsFrom(&st), nil
}

func fsFrom(st *unix.Statfs_t) fsUse {
	bs := st.Frsize
	if bs <= 0 {
		bs = st.Bsize
	}
	u := fsUse{Usage: Usage{Bytes: int64(st.Blocks-st.Bfree) * bs}}
	if st.Files > 0 {
		u.Files, u.FilesKnown = int64(st.Files-st.Ffree), true
	}
	return u
}

// statFSUp samples the filesystem of dir, or of its nearest existing
// parent, and names it.
func statFSUp(dir string) (fsUse, string, error) {
	for d := dir; ; d = filepath.Dir(d) {
		var st unix.Statfs_t
		err := unix.Statfs(d, &st)
		if err == nil {
			name, ok := fsNames[int64(st.Type)]
			if !ok {
				name = fmt.Sprintf("a filesystem of type %#x", st.Type)
			}
			return fsFrom(&st), name, nil
		}
		if d == filepath.Dir(d) {
			return fsUse{}, "", err
		}
	}
}

var fsNames = map[int64]string{
	0xEF53: "ext4", 0x58465342: "xfs", 0x9123683E: "btrfs", 0x01021994: "tmpfs", 0x794C7630: "overlayfs",
	0x2FC12FC1: "zfs", 0x6969: "NFS", 0xF2F52010: "f2fs", 0x65735546: "FUSE", 0x00C36400: "CephFS",
}

// landlockABI is the kernel's Landlock ABI version, 0 without Landlock.
func landlockABI() int {
	v, err := ll.LandlockGetABIVersion()
	if err != nil {
		return 0
	}
	return v
}

// heldLevels is how deep a walk keeps one descriptor per directory open.
// Deeper (a command can nest directories as deep as the file cap allows)
// it lets a directory's descriptor go while it walks below it, and comes
// back up through "..".
const heldLevels = 32

// errMoved: a directory was moved while the walk was below it.
var errMoved = errors.New("a directory was moved while the workspace was measured")

var direntBufs = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}

// walkTree counts what the tree under dir holds, stopping as soon as the
// count is past stop in either dimension. It reads directories with
// getdents into one buffer and stats each entry with statx relative to its
// directory's descriptor, handing the kernel the name in place: nothing is
// allocated per entry but the names of subdirectories.
func walkTree(dir string, stop Usage) (Usage, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return Usage{}, err
	}
	buf := direntBufs.Get().(*[]byte)
	defer direntBufs.Put(buf)
	w := &walker{stop: stop, buf: *buf}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return Usage{}, err
	}
	w.u.Bytes = st.Blocks * 512
	err = w.dir(&fd, 0, ".")
	if fd >= 0 {
		unix.Close(fd)
	}
	return w.u, err
}

type walker struct {
	stop  Usage
	u     Usage
	buf   []byte
	links map[uint64]struct{} // files with several links, counted once
}

func (w *walker) past() bool { return w.u.over(w.stop) }

// dir counts the entries of the directory open at *fd and everything below
// them, depth first. Deeper than heldLevels it may replace *fd (closed
// while below, reopened through "..").
func (w *walker) dir(fd *int, depth int, path string) error {
	subs, err := w.entries(*fd)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if len(subs) == 0 {
		return nil
	}
	deep := depth >= heldLevels
	var self unix.Stat_t
	if deep {
		if err := unix.Fstat(*fd, &self); err != nil {
			return err
		}
	}
	for _, name := range subs {
		if w.past() {
			return nil
		}
		sub := path + "/" + name
		cfd, err := unix.Openat(*fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if gone(err) {
			continue // removed or replaced since it was listed
		}
		if err != nil {
			return fmt.Errorf("%s: %w", sub, err)
		}
		if deep {
			unix.Close(*fd)
			*fd = -1
		}
		err = w.dir(&cfd, depth+1, sub)
		if deep && err == nil {
			*fd, err = unix.Openat(cfd, "..", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			var back unix.Stat_t
			if err == nil && (unix.Fstat(*fd, &back) != nil || back.Dev != self.Dev || back.Ino != self.Ino) {
				err = errMoved
			}
		}
		if cfd >= 0 {
			unix.Close(cfd)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// gone is a race with the command: the entry was removed or replaced.
func gone(err error) bool {
	return errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP)
}

const statxMask = unix.STATX_TYPE | unix.STATX_NLINK | unix.STATX_INO | unix.STATX_BLOCKS

// entries counts the directory's entries and their blocks, and returns the
// names of its subdirectories.
func (w *walker) entries(fd int) ([]string, error) {
	var subs []string
	var sx unix.Statx_t
	for {
		n, err := unix.Getdents(fd, w.buf)
		if err != nil {
			return subs, err
		}
		if n <= 0 {
			return subs, nil
		}
		// struct linux_dirent64: ino u64, off s64, reclen u16, type u8, name (NUL-terminated, padded).
		for off := 0; off < n; {
			rec := w.buf[off:n]
			reclen := int(binary.NativeEndian.Uint16(rec[16:18]))
			off += reclen
			name := rec[19:reclen]
			if name[0] == '.' && (name[1] == 0 || name[1] == '.' && name[2] == 0) {
				continue
			}
			if err := statxAt(fd, &name[0], &sx); err != nil {
				if gone(err) {
					continue
				}
				return subs, err
			}
			w.u.Files++
			switch {
			case sx.Mode&unix.S_IFMT == unix.S_IFDIR:
				subs = append(subs, string(name[:bytes.IndexByte(name, 0)]))
			case sx.Nlink > 1:
				if _, seen := w.links[sx.Ino]; seen {
					continue
				}
				if w.links == nil {
					w.links = map[uint64]struct{}{}
				}
				w.links[sx.Ino] = struct{}{}
			}
			w.u.Bytes += int64(sx.Blocks) * 512
			if w.past() {
				return subs, nil
			}
		}
	}
}

// statxAt stats name (NUL-terminated, in place in a dirent buffer) in the
// directory dirfd, not following a link: unix.Statx would copy the name.
func statxAt(dirfd int, name *byte, sx *unix.Statx_t) error {
	_, _, e := unix.Syscall6(unix.SYS_STATX, uintptr(dirfd), uintptr(unsafe.Pointer(name)),
		unix.AT_SYMLINK_NOFOLLOW|unix.AT_STATX_DONT_SYNC, statxMask, uintptr(unsafe.Pointer(sx)), 0)
	if e != 0 {
		return e
	}
	return nil
}
