package tools

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"syscall"
)

// The kinds of refusal a workspace operation gives, for errors.Is. The
// message of the returned error (a *[FileError]) says what happened and
// what to do instead; these sentinels only classify it.
var (
	// ErrBadPath: the path is malformed (NUL byte, overlong name, empty
	// where a file is needed, the workspace root where it cannot be used).
	ErrBadPath = errors.New("bad path")
	// ErrPathEscapes: the path leads outside the workspace, lexically
	// ("..", an absolute path) or through a symlink.
	ErrPathEscapes = errors.New("path escapes the workspace")
	// ErrNotRegular: a FIFO, socket, device or symlink where a regular file
	// is needed.
	ErrNotRegular = errors.New("not a regular file")
	// ErrHardLinked: a regular file with more than one hard link; the other
	// name may be outside the workspace.
	ErrHardLinked = errors.New("file has more than one hard link")
	// ErrTooLarge: a file or content over a size limit.
	ErrTooLarge = errors.New("too large")
	// ErrBinary: a file that is not UTF-8 text.
	ErrBinary = errors.New("binary file")
	// ErrIsDir: a directory where a file is needed, or a non-empty
	// directory deleted without recursive.
	ErrIsDir = errors.New("is a directory")
)

// FileError is the error every workspace primitive returns. Path is
// workspace-relative (or the argument as given, when it could not be
// cleaned); Err is one of the Err* sentinels above or an io/fs error
// (fs.ErrNotExist, fs.ErrExist, fs.ErrPermission); Msg continues the
// sentence after the path and says what to do. No host path ever appears
// in it: the model never learns where the data dir is.
type FileError struct {
	Path string
	Err  error
	Msg  string
}

func (e *FileError) Error() string { return fmt.Sprintf("%s %s", DisplayPath(e.Path), e.Msg) }

func (e *FileError) Unwrap() error { return e.Err }

// DisplayPath is how a workspace-relative path is shown in messages:
// quoted, shortened when very long, and "." as the workspace root.
func DisplayPath(rel string) string {
	if rel == "." {
		return "the workspace root"
	}
	if len(rel) > 120 {
		cut := 100
		for cut > 0 && rel[cut]&0xC0 == 0x80 {
			cut--
		}
		return fmt.Sprintf("%q… (%d bytes)", rel[:cut], len(rel))
	}
	return fmt.Sprintf("%q", rel)
}

func pathErr(p string, kind error, msg string) error {
	return &FileError{Path: p, Err: kind, Msg: msg}
}

// isEscape reports whether err is os.Root refusing a path that leaves it
// (through a symlink, since CleanPath already refused ".." and absolute
// paths). The os package does not export that error, so its text is the
// only way to tell; this is the one place that looks at it.
func isEscape(err error) bool {
	return err != nil && strings.Contains(err.Error(), "path escapes from parent")
}

// explain turns an error from os.Root or an *os.File into a *FileError
// about rel, with the host path stripped and a hint where one helps.
func (w *Workspace) explain(rel string, err error) error {
	if err == nil {
		return nil
	}
	var fe *FileError
	if errors.As(err, &fe) {
		return err
	}
	var errno syscall.Errno
	errors.As(err, &errno)
	switch {
	case isEscape(err):
		return pathErr(rel, ErrPathEscapes, "leads outside the workspace through a symlink; only files inside the workspace can be used")
	case errors.Is(err, fs.ErrNotExist):
		return pathErr(rel, fs.ErrNotExist, "does not exist; use ls or find to see what is there")
	case errno == syscall.ENOTEMPTY: // before ErrExist, which it also matches
		return pathErr(rel, fs.ErrExist, "is a directory that is not empty")
	case errors.Is(err, fs.ErrExist):
		return pathErr(rel, fs.ErrExist, "already exists")
	case errno == syscall.ENOTDIR:
		return pathErr(rel, ErrBadPath, "goes through something that is not a directory")
	case errno == syscall.EISDIR:
		return pathErr(rel, ErrIsDir, "is a directory")
	case errno == syscall.ELOOP:
		return pathErr(rel, ErrNotRegular, "goes through too many levels of symlinks")
	case errno == syscall.ENAMETOOLONG:
		return pathErr(rel, ErrBadPath, "is too long, or resolves through symlinks to a path that is too long")
	case errno == syscall.ENOSPC || errno == syscall.EDQUOT:
		return pathErr(rel, err, "could not be written: the workspace is out of space; delete files you no longer need")
	case errno == syscall.EROFS:
		return pathErr(rel, fs.ErrPermission, "is on a read-only file system")
	case errors.Is(err, fs.ErrPermission):
		return pathErr(rel, fs.ErrPermission, "cannot be accessed: permission denied")
	case errno == syscall.EINVAL:
		return pathErr(rel, ErrBadPath, "cannot be used here (invalid argument)")
	case errno == syscall.EXDEV:
		return pathErr(rel, ErrBadPath, "is on another file system; copy it and delete the original instead")
	}
	msg := err.Error()
	if errno != 0 {
		msg = errno.Error()
	} else if w != nil {
		msg = strings.ReplaceAll(msg, w.dir, MountPoint)
	}
	return pathErr(rel, err, "failed: "+msg)
}
