package tools

import (
	"strings"
)

// MountPoint is where the sandboxed shell sees the workspace. The model
// learns paths from the shell, so file tools accept them too.
const MountPoint = "/workspace"

const (
	maxNameBytes = 255  // NAME_MAX on Linux
	maxPathBytes = 4095 // PATH_MAX minus the terminating NUL
)

// CleanPath turns a path the model gave into a workspace-relative,
// slash-separated path that is valid for io/fs ("." is the workspace
// itself). It accepts relative paths and paths under [MountPoint]; it
// refuses other absolute paths and any ".." component ([ErrPathEscapes]),
// and NUL bytes, names longer than 255 bytes and paths longer than 4095
// bytes ([ErrBadPath]). It is purely lexical: symlinks are the os.Root's
// business, so even a clean path may still be refused when it is used.
//
// "." components, repeated and trailing slashes are dropped, so CleanPath
// is idempotent.
func CleanPath(p string) (string, error) {
	if strings.IndexByte(p, 0) >= 0 {
		return "", pathErr(p, ErrBadPath, "contains a NUL byte; file names cannot contain one")
	}
	if len(p) > maxPathBytes {
		return "", pathErr(p, ErrBadPath, "is longer than 4095 bytes; use a shorter path")
	}
	rel := p
	if strings.HasPrefix(p, "/") {
		switch {
		case p == MountPoint:
			rel = ""
		case strings.HasPrefix(p, MountPoint+"/"):
			rel = p[len(MountPoint)+1:]
		default:
			return "", pathErr(p, ErrPathEscapes, "is an absolute path outside the workspace; use a path relative to the workspace (or under "+MountPoint+"/)")
		}
	}
	var parts []string
	for part := range strings.SplitSeq(rel, "/") {
		switch {
		case part == "" || part == ".":
			continue
		case part == "..":
			return "", pathErr(p, ErrPathEscapes, `contains ".."; paths must stay inside the workspace, so name the file from the workspace root`)
		case len(part) > maxNameBytes:
			return "", pathErr(p, ErrBadPath, "has a name longer than 255 bytes; use a shorter name")
		}
		parts = append(parts, part)
	}
	if len(parts) == 0 {
		return ".", nil
	}
	return strings.Join(parts, "/"), nil
}

// CleanFilePath is [CleanPath] for arguments that must name something
// inside the workspace, not the workspace itself: an empty path, ".", or
// "/workspace" is an [ErrBadPath].
func CleanFilePath(p string) (string, error) {
	rel, err := CleanPath(p)
	if err != nil {
		return "", err
	}
	if rel == "." {
		if strings.TrimSpace(p) == "" {
			return "", pathErr(p, ErrBadPath, "is empty; give the path of a file in the workspace")
		}
		return "", pathErr(p, ErrBadPath, "is the workspace itself; give the path of a file in it")
	}
	return rel, nil
}
