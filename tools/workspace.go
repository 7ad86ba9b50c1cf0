package tools

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// Workspace is one channel's directory under the data dir. Every file
// operation goes through its os.Root, which refuses any path (.., absolute,
// symlink) that would leave the directory.
//
// The methods below are the only safe way in: they clean the path
// ([CleanPath]), refuse what could leave the workspace or hang the process,
// and return a *[FileError] whose message a model can act on. Tools use
// them rather than Root directly, so no tool re-implements a check.
type Workspace struct {
	root  *os.Root
	dir   string
	owner *Owner
}

// Owner is the host user and group every file and directory of a
// workspace must belong to: the sandbox's, when this process (root)
// creates files a sandboxed command must be able to change.
type Owner struct{ UID, GID int }

// WorkspaceOption configures OpenWorkspace.
type WorkspaceOption func(*Workspace)

// Workspaces is where the channels' workspaces are, one directory each
// under Dir, and how each is opened.
type Workspaces struct {
	Dir  string
	Opts []WorkspaceOption
}

// Open opens (creating it if needed) the workspace called name.
func (w Workspaces) Open(name string) (*Workspace, error) {
	return OpenWorkspace(w.Dir, name, w.Opts...)
}

// WithOwner makes what the workspace's methods create belong to o; the
// workspace directory is handed over (with what is already in it) on open.
func WithOwner(o Owner) WorkspaceOption { return func(w *Workspace) { w.owner = &o } }

// WorkspacePath is the host directory of the workspace called name.
func WorkspacePath(base, name string) string { return filepath.Join(base, DirName(name)) }

// OpenWorkspace opens (creating it if needed) the workspace called name
// under base. name is made safe with [DirName].
func OpenWorkspace(base, name string, opts ...WorkspaceOption) (*Workspace, error) {
	dir := WorkspacePath(base, name)
	// Opened first, created only when missing: most turns find it there,
	// and this runs on every turn.
	root, err := os.OpenRoot(dir)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("create workspace: %w", err)
		}
		root, err = os.OpenRoot(dir)
	}
	if err != nil {
		return nil, fmt.Errorf("open workspace: %w", err)
	}
	w := &Workspace{root: root, dir: dir}
	for _, o := range opts {
		o(w)
	}
	if err := w.handOver(); err != nil {
		root.Close()
		return nil, fmt.Errorf("workspace owner: %w", err)
	}
	return w, nil
}

// handOver gives the workspace to its owner the first time it is opened
// with one: the directory and everything in it, never following a link.
func (w *Workspace) handOver() error {
	if w.owner == nil {
		return nil
	}
	fi, err := w.root.Lstat(".")
	if err != nil {
		return err
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) == w.owner.UID && int(st.Gid) == w.owner.GID {
		return nil
	}
	return fs.WalkDir(w.root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return w.root.Lchown(p, w.owner.UID, w.owner.GID)
	})
}

// own gives a new entry to the workspace's owner, if it has one.
func (w *Workspace) own(rel string) error {
	if w.owner == nil {
		return nil
	}
	return w.root.Lchown(rel, w.owner.UID, w.owner.GID)
}

// mkdirAll creates rel and its missing parents, each owned by the owner.
func (w *Workspace) mkdirAll(rel string) error {
	if w.owner == nil {
		return w.root.MkdirAll(rel, 0o755)
	}
	parts := strings.Split(rel, "/")
	for i := range parts {
		p := strings.Join(parts[:i+1], "/")
		err := w.root.Mkdir(p, 0o755)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return err
		}
		if err := w.own(p); err != nil {
			return err
		}
	}
	return nil
}

// Root is the workspace's os.Root.
func (w *Workspace) Root() *os.Root { return w.root }

// Dir is the workspace's host path (for the sandbox to mount; never for
// file operations, which go through Root).
func (w *Workspace) Dir() string { return w.dir }

// Close releases the root.
func (w *Workspace) Close() error { return w.root.Close() }

// DirName turns a channel identifier into one safe directory name. The
// mapping is injective, so two channels never share a directory: bytes
// outside [A-Za-z0-9-] are written as _XX (hex), and '_' itself as _5F.
// A name whose escaped form is too long is cut and ends in '~' and a
// 128-bit hash of the whole name; '~' never appears in an escaped form, so
// a cut name cannot equal an uncut one.
func DirName(name string) string {
	if name == "" {
		return "_"
	}
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-':
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "_%02X", c)
		}
	}
	s := b.String()
	if len(s) > 200 { // stay well under NAME_MAX
		return s[:150] + "~" + shortHash(name)
	}
	return s
}

func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:16])
}

// SniffLen is how much of a file binary detection looks at.
const SniffLen = 8 << 10

// Lstat describes the entry at p without following a final symlink.
func (w *Workspace) Lstat(p string) (fs.FileInfo, error) {
	rel, err := CleanPath(p)
	if err != nil {
		return nil, err
	}
	fi, err := w.root.Lstat(rel)
	return fi, w.explain(rel, err)
}

// Stat describes the entry at p, following symlinks that stay inside the
// workspace; a symlink that leads out is an [ErrPathEscapes].
func (w *Workspace) Stat(p string) (fs.FileInfo, error) {
	rel, err := CleanPath(p)
	if err != nil {
		return nil, err
	}
	fi, err := w.root.Stat(rel)
	return fi, w.explain(rel, err)
}

// Readlink returns the target of the symlink at p, as written in the link
// (it may name a place outside the workspace; nothing follows it).
func (w *Workspace) Readlink(p string) (string, error) {
	rel, err := CleanPath(p)
	if err != nil {
		return "", err
	}
	target, err := w.root.Readlink(rel)
	return target, w.explain(rel, err)
}

// OpenRead opens the regular file at p for reading and returns it with its
// (fstat) info; the caller closes it. Before anything is opened it refuses,
// by lstat through the root, every non-regular file (a FIFO would hang a
// plain open or read), symlinks that leave the workspace, and files with
// more than one hard link (the other link may be outside, so reading it
// would leak that file). The open itself is O_NOFOLLOW|O_NONBLOCK, and the
// opened file is checked again (same inode, still regular, one link), so a
// swap between the check and the open is caught.
func (w *Workspace) OpenRead(p string) (*os.File, fs.FileInfo, error) {
	rel, err := CleanFilePath(p)
	if err != nil {
		return nil, nil, err
	}
	want, err := w.checkRegular(rel, "read")
	if err != nil {
		return nil, nil, err
	}
	// os.Root adds O_NOFOLLOW itself and resolves a final symlink only
	// inside the root; O_NONBLOCK makes a FIFO swapped in after the check
	// open at once instead of waiting for a writer.
	f, err := w.root.OpenFile(rel, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, w.explain(rel, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, w.explain(rel, err)
	}
	if !os.SameFile(want, fi) {
		f.Close()
		return nil, nil, pathErr(rel, ErrNotRegular, "changed while it was being opened; try again")
	}
	if err := checkInfo(rel, fi, "read"); err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// checkRegular looks at rel without opening it: it must be a regular file
// (or a symlink inside the workspace to one) with a single link. verb says
// what was refused ("read", "written") for the message.
func (w *Workspace) checkRegular(rel, verb string) (fs.FileInfo, error) {
	fi, err := w.root.Lstat(rel)
	if err != nil {
		return nil, w.explain(rel, err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		target, _ := w.root.Readlink(rel)
		fi, err = w.root.Stat(rel)
		if err != nil {
			if isEscape(err) {
				return nil, pathErr(rel, ErrPathEscapes, fmt.Sprintf("is a symlink to %q, outside the workspace; only files inside the workspace can be %s", target, verb))
			}
			if errors.Is(err, fs.ErrNotExist) {
				return nil, pathErr(rel, fs.ErrNotExist, fmt.Sprintf("is a broken symlink (to %q)", target))
			}
			return nil, w.explain(rel, err)
		}
	}
	return fi, checkInfo(rel, fi, verb)
}

// checkInfo refuses anything but a regular file with one link.
func checkInfo(rel string, fi fs.FileInfo, verb string) error {
	if fi.IsDir() {
		return pathErr(rel, ErrIsDir, "is a directory; use ls to list it")
	}
	if !fi.Mode().IsRegular() {
		return pathErr(rel, ErrNotRegular, fmt.Sprintf("is %s; only regular files can be %s", KindOf(fi.Mode()), verb))
	}
	if n := nlink(fi); n > 1 {
		// The other link may be outside the workspace: reading it would leak
		// that file, writing it in place would change it.
		hint := ""
		if verb == "written" {
			hint = "; delete it first, then write a new file"
		}
		return pathErr(rel, ErrHardLinked, fmt.Sprintf("has %d hard links, and a file that is also linked from elsewhere (possibly outside the workspace) cannot be %s%s", n, verb, hint))
	}
	return nil
}

func nlink(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 1
}

// KindOf names a file type for messages: "a directory", "a FIFO", ….
func KindOf(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "a regular file"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeSymlink != 0:
		return "a symlink"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO (named pipe)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	default:
		return "a special file"
	}
}

// OpenText is [Workspace.OpenRead] for text: it also refuses a file larger
// than max bytes ([ErrTooLarge], before reading anything, so a huge sparse
// file costs nothing) and one whose first [SniffLen] bytes are not UTF-8
// text ([ErrBinary]). The file is returned positioned at its start.
func (w *Workspace) OpenText(p string, max int64) (*os.File, fs.FileInfo, error) {
	f, fi, err := w.OpenRead(p)
	if err != nil {
		return nil, nil, err
	}
	rel, _ := CleanPath(p)
	if fi.Size() > max {
		f.Close()
		return nil, nil, pathErr(rel, ErrTooLarge, fmt.Sprintf("is %s, over the %s limit; work with part of it (grep for what you need, or head/tail/split in the shell if it is available)", FormatSize(fi.Size()), FormatSize(max)))
	}
	head := make([]byte, min(int64(SniffLen), fi.Size()))
	n, err := f.ReadAt(head, 0)
	if err != nil && err != io.EOF {
		f.Close()
		return nil, nil, w.explain(rel, err)
	}
	head = head[:n]
	if IsBinary(head, int64(n) >= fi.Size()) {
		f.Close()
		return nil, nil, pathErr(rel, ErrBinary, fmt.Sprintf("is a binary file (%s, %s); only text files can be read. Inspect it with the shell (file, xxd | head) if it is available", BinaryKind(head), FormatSize(fi.Size())))
	}
	return f, fi, nil
}

// ReadText reads the whole text file at p, refusing what [Workspace.OpenText]
// refuses.
func (w *Workspace) ReadText(p string, max int64) (string, fs.FileInfo, error) {
	f, fi, err := w.OpenText(p, max)
	if err != nil {
		return "", nil, err
	}
	defer f.Close()
	rel, _ := CleanPath(p)
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return "", nil, w.explain(rel, err)
	}
	if int64(len(data)) > max { // it grew after the fstat
		return "", nil, pathErr(rel, ErrTooLarge, fmt.Sprintf("grew past the %s limit while being read", FormatSize(max)))
	}
	return string(data), fi, nil
}

// WriteFile replaces (or creates) the file at p with data; see
// [Workspace.WriteFrom].
func (w *Workspace) WriteFile(p string, data []byte, max int64) (created bool, err error) {
	_, created, err = w.WriteFrom(p, bytes.NewReader(data), max)
	return created, err
}

// WriteFrom replaces (or creates) the regular file at p with what r yields,
// at most max bytes, atomically: the bytes go to a temporary file in the
// same directory, which is then renamed over p, so a reader never sees half
// a file and a failed write leaves p as it was. Parent directories are
// created. It refuses to write over a directory, a non-regular file, a
// symlink (write its target instead) or a file with more than one hard
// link; an existing file keeps its permissions. It reports the bytes
// written and whether p is new.
func (w *Workspace) WriteFrom(p string, r io.Reader, max int64) (n int64, created bool, err error) {
	rel, err := CleanFilePath(p)
	if err != nil {
		return 0, false, err
	}
	perm := fs.FileMode(0o644)
	fi, err := w.root.Lstat(rel)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		created = true
	case err != nil:
		return 0, false, w.explain(rel, err)
	case fi.Mode()&fs.ModeSymlink != 0:
		target, _ := w.root.Readlink(rel)
		if _, err := w.root.Stat(rel); isEscape(err) {
			return 0, false, pathErr(rel, ErrPathEscapes, fmt.Sprintf("is a symlink to %q, outside the workspace; only files inside the workspace can be written", target))
		}
		return 0, false, pathErr(rel, ErrNotRegular, fmt.Sprintf("is a symlink (to %q); write to the file it points to instead, or delete the link first", target))
	default:
		if err := checkInfo(rel, fi, "written"); err != nil {
			return 0, false, err
		}
		perm = fi.Mode().Perm()
	}
	dir := path.Dir(rel)
	if dir != "." {
		if err := w.mkdirAll(dir); err != nil {
			return 0, false, w.explain(dir, err)
		}
	}
	var rnd [8]byte
	rand.Read(rnd[:])
	tmp := path.Join(dir, ".firstmate-tmp-"+hex.EncodeToString(rnd[:]))
	// O_EXCL: os.Root never follows a symlink for an exclusive create.
	f, err := w.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return 0, false, w.explain(dir, err)
	}
	done := false
	defer func() {
		if !done {
			f.Close()
			w.root.Remove(tmp)
		}
	}()
	n, err = io.Copy(f, io.LimitReader(r, max+1))
	if err != nil {
		return 0, false, w.explain(rel, err)
	}
	if n > max {
		return 0, false, pathErr(rel, ErrTooLarge, fmt.Sprintf("was not written: the content is over the %s limit for one file; split it into smaller files", FormatSize(max)))
	}
	if err := f.Chmod(perm); err != nil {
		return 0, false, w.explain(rel, err)
	}
	if w.owner != nil {
		if err := f.Chown(w.owner.UID, w.owner.GID); err != nil {
			return 0, false, w.explain(rel, err)
		}
	}
	// No fsync: atomicity against concurrent readers is what matters here,
	// not durability across a power cut, and fsync would cost every write.
	if err := f.Close(); err != nil {
		return 0, false, w.explain(rel, err)
	}
	// rename replaces the directory entry; it never writes through whatever
	// was at rel (even if a hard link or symlink was swapped in meanwhile).
	if err := w.root.Rename(tmp, rel); err != nil {
		return 0, false, w.explain(rel, err)
	}
	done = true
	return n, created, nil
}

// Create creates (or empties) the regular file at p for writing, with its
// missing parents, and returns it open; the caller closes it. It refuses
// a symlink, a non-regular file and a file with more than one hard link at
// p, like WriteFrom. It is for output that grows over time (a job's log);
// everything else writes atomically with WriteFrom.
func (w *Workspace) Create(p string) (*os.File, error) {
	rel, err := CleanFilePath(p)
	if err != nil {
		return nil, err
	}
	if dir := path.Dir(rel); dir != "." {
		if err := w.mkdirAll(dir); err != nil {
			return nil, w.explain(dir, err)
		}
	}
	// O_NONBLOCK: a FIFO planted at p fails at once instead of waiting.
	f, err := w.root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0o644)
	if err != nil {
		return nil, w.explain(rel, err)
	}
	fi, err := f.Stat()
	if err == nil {
		err = checkInfo(rel, fi, "written")
	}
	if err == nil {
		err = f.Truncate(0)
	}
	if err == nil {
		err = w.own(rel)
	}
	if err != nil {
		f.Close()
		return nil, w.explain(rel, err)
	}
	return f, nil
}

// MkdirAll creates the directory p and any missing parents. created is
// false if it already existed.
func (w *Workspace) MkdirAll(p string) (created bool, err error) {
	rel, err := CleanFilePath(p)
	if err != nil {
		return false, err
	}
	fi, err := w.root.Stat(rel)
	switch {
	case err == nil && fi.IsDir():
		return false, nil
	case err == nil:
		return false, pathErr(rel, fs.ErrExist, fmt.Sprintf("already exists and is %s, not a directory", KindOf(fi.Mode())))
	case !errors.Is(err, fs.ErrNotExist):
		return false, w.explain(rel, err)
	}
	if err := w.mkdirAll(rel); err != nil {
		return false, w.explain(rel, err)
	}
	return true, nil
}

// Remove deletes the entry at p and returns what it was. A symlink is
// removed itself, never what it points to. A directory needs recursive
// unless it is empty; its contents are removed without following any
// symlink in them. The workspace root cannot be removed.
func (w *Workspace) Remove(p string, recursive bool) (fs.FileInfo, error) {
	rel, err := CleanPath(p)
	if err != nil {
		return nil, err
	}
	if rel == "." {
		return nil, rootErr(p, "deleted", "delete")
	}
	fi, err := w.root.Lstat(rel)
	if err != nil {
		return nil, w.explain(rel, err)
	}
	if fi.IsDir() && recursive {
		err = w.root.RemoveAll(rel)
	} else {
		err = w.root.Remove(rel)
	}
	if err != nil {
		var errno syscall.Errno
		if fi.IsDir() && errors.As(err, &errno) && (errno == syscall.ENOTEMPTY || errno == syscall.EEXIST) {
			n := 0
			if ents, err := w.ReadDir(rel); err == nil {
				n = len(ents)
			}
			return nil, pathErr(rel, ErrIsDir, fmt.Sprintf("is a directory with %d entries; set recursive=true to delete it and everything in it", n))
		}
		return nil, w.explain(rel, err)
	}
	return fi, nil
}

// rootErr refuses to act on the workspace root, however p spelled it.
func rootErr(p, done, do string) error {
	msg := fmt.Sprintf("cannot be %s; %s the entries inside it instead", done, do)
	if strings.TrimSpace(p) != "" && p != "." {
		msg = "is the workspace root, which " + msg
	} else {
		p = "."
	}
	return pathErr(p, ErrBadPath, msg)
}

// Rename moves the entry at from to exactly to (not into it, if to is a
// directory), creating to's parent directories. A symlink is moved itself.
// An existing file at to is replaced; a directory at to is not. Neither
// path may be the workspace root, and a directory cannot move into itself.
func (w *Workspace) Rename(from, to string) error {
	src, err := CleanPath(from)
	if err != nil {
		return err
	}
	if src == "." {
		return rootErr(from, "moved", "move")
	}
	dst, err := CleanFilePath(to)
	if err != nil {
		return err
	}
	if dst == src {
		return pathErr(src, ErrBadPath, "would be moved onto itself")
	}
	if strings.HasPrefix(dst, src+"/") {
		return pathErr(src, ErrBadPath, fmt.Sprintf("cannot be moved into itself (%s)", DisplayPath(dst)))
	}
	sfi, err := w.root.Lstat(src)
	if err != nil {
		return w.explain(src, err)
	}
	if dfi, err := w.root.Lstat(dst); err == nil {
		if dfi.IsDir() {
			return pathErr(dst, fs.ErrExist, "already exists and is a directory; move into it by naming the full new path")
		}
		if sfi.IsDir() {
			return pathErr(dst, fs.ErrExist, "already exists and is not a directory; a directory cannot replace it")
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return w.explain(dst, err)
	}
	if dir := path.Dir(dst); dir != "." {
		if err := w.mkdirAll(dir); err != nil {
			return w.explain(dir, err)
		}
	}
	if err := w.root.Rename(src, dst); err != nil {
		return w.explain(src, err)
	}
	return nil
}

// ReadDir lists the directory at p, sorted by name. Entries describe
// themselves (a symlink is a symlink), and nothing is opened but the
// directory, with O_DIRECTORY|O_NONBLOCK so a FIFO swapped in cannot hang it.
func (w *Workspace) ReadDir(p string) ([]fs.DirEntry, error) {
	rel, err := CleanPath(p)
	if err != nil {
		return nil, err
	}
	f, err := w.root.OpenFile(rel, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NONBLOCK, 0)
	if err != nil {
		var errno syscall.Errno
		if errors.As(err, &errno) && errno == syscall.ENOTDIR {
			return nil, pathErr(rel, ErrBadPath, "is not a directory")
		}
		return nil, w.explain(rel, err)
	}
	defer f.Close()
	ents, err := f.ReadDir(-1)
	if err != nil {
		return nil, w.explain(rel, err)
	}
	slices.SortFunc(ents, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return ents, nil
}

// maxWalkDepth bounds recursion even if directories are swapped for
// symlinks to their ancestors while a walk runs.
const maxWalkDepth = 256

// Walk calls fn for p and everything under it, depth first in name order,
// like fs.WalkDir (fs.SkipDir and fs.SkipAll work the same; paths are
// workspace-relative). p itself may be a symlink inside the workspace;
// below it, symlinks are reported but never followed, so a walk cannot
// leave the workspace or loop. It stops when ctx is done.
func (w *Workspace) Walk(ctx context.Context, p string, fn fs.WalkDirFunc) error {
	rel, err := CleanPath(p)
	if err != nil {
		return err
	}
	fi, err := w.root.Stat(rel)
	if err != nil {
		return w.explain(rel, err)
	}
	err = w.walk(ctx, rel, fs.FileInfoToDirEntry(fi), 0, fn)
	if errors.Is(err, fs.SkipDir) || errors.Is(err, fs.SkipAll) {
		return nil
	}
	return err
}

func (w *Workspace) walk(ctx context.Context, rel string, d fs.DirEntry, depth int, fn fs.WalkDirFunc) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := fn(rel, d, nil); err != nil || !d.IsDir() {
		if errors.Is(err, fs.SkipDir) && d.IsDir() {
			return nil
		}
		return err
	}
	if depth >= maxWalkDepth {
		return nil
	}
	ents, err := w.ReadDir(rel)
	if err != nil {
		if err := fn(rel, d, err); err != nil {
			if errors.Is(err, fs.SkipDir) {
				return nil
			}
			return err
		}
		return nil
	}
	for _, e := range ents {
		child := e.Name()
		if rel != "." {
			child = rel + "/" + child
		}
		if err := w.walk(ctx, child, e, depth+1, fn); err != nil {
			if errors.Is(err, fs.SkipDir) {
				return nil // fn skipped the rest of this directory from a file
			}
			return err
		}
	}
	return nil
}

// FormatSize writes n bytes in binary units: "120 B", "1.5 KiB", "100 GiB".
func FormatSize(n int64) string {
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	units := []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	v := float64(n) / 1024
	i := 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	s := fmt.Sprintf("%.1f", v)
	s = strings.TrimSuffix(s, ".0")
	return s + " " + units[i]
}
