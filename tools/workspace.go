package tools

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Workspace is one channel's directory under the data dir. Every file
// operation goes through its os.Root, which refuses any path (.., absolute,
// symlink) that would leave the directory.
type Workspace struct {
	root *os.Root
	dir  string
}

// OpenWorkspace opens (creating it if needed) the workspace called name
// under base. name is made safe with [DirName].
func OpenWorkspace(base, name string) (*Workspace, error) {
	dir := filepath.Join(base, DirName(name))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create workspace: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("open workspace: %w", err)
	}
	return &Workspace{root: root, dir: dir}, nil
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
		return s[:150] + "_" + shortHash(name)
	}
	return s
}

func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:8])
}
