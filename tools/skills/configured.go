package skills

import (
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

	"github.com/firstmate/firstmate/tools"
)

// The operator's skills are read through an os.Root of each configured
// directory: symlinks are followed only while they stay inside it (a
// Kubernetes ConfigMap is a tree of such links), never out of it, and
// nothing that is not a regular file is opened for reading in a way that
// could block.

// loadDir reads the skills of one configured directory, in name order.
func loadDir(dir string, lim Limits) ([]Skill, []Problem) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, []Problem{{Source: Configured, Path: dir, Err: fmt.Errorf("the skills directory cannot be opened: %w", unwrapPath(err))}}
	}
	defer root.Close()
	ents, err := fs.ReadDir(root.FS(), ".")
	if err != nil {
		return nil, []Problem{{Source: Configured, Path: dir, Err: fmt.Errorf("the skills directory cannot be listed: %w", unwrapPath(err))}}
	}
	var out []Skill
	var probs []Problem
	n := 0
	for _, e := range ents {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue // .git, and a ConfigMap's ..data
		}
		folder := filepath.Join(dir, name)
		fi, err := root.Stat(name)
		if err != nil {
			probs = append(probs, Problem{Configured, folder, linkErr(err)})
			continue
		}
		if !fi.IsDir() {
			continue // a README beside the skills
		}
		if n == lim.MaxSkills {
			probs = append(probs, Problem{Configured, dir, fmt.Errorf("only the first %d skill folders are read; the rest are skipped", lim.MaxSkills)})
			break
		}
		n++
		if err := ValidName(name); err != nil {
			probs = append(probs, Problem{Configured, folder, fmt.Errorf("%w (a folder's name is its skill's name)", err)})
			continue
		}
		data, err := readRootFile(root, path.Join(name, File), lim.MaxSkillBytes)
		if err != nil {
			probs = append(probs, Problem{Configured, filepath.Join(folder, File), err})
			continue
		}
		p, err := parse(data, true, lim)
		if err != nil {
			probs = append(probs, Problem{Configured, filepath.Join(folder, File), err})
			continue
		}
		if p.name != name {
			probs = append(probs, Problem{Configured, filepath.Join(folder, File), fmt.Errorf("%w: its name %q is not its folder's name %q; make them the same", ErrInvalid, p.name, name)})
			continue
		}
		sk := Skill{Name: p.name, Description: p.description, Source: Configured, Dir: folder, body: p.body, base: dir}
		sk.Files, sk.FilesCut = listRoot(root, name, lim.MaxFiles)
		out = append(out, sk)
	}
	return out, probs
}

// listRoot lists the regular files under dir in root (SKILL.md and hidden
// entries left out), sorted, at most max of them. A symlink is listed
// when it leads to a regular file inside root; directories are entered
// only as themselves (a link to a directory is not followed), so a loop
// of links cannot make the walk endless.
func listRoot(root *os.Root, dir string, max int) (files []string, cut bool) {
	var walk func(rel string, depth int) bool
	walk = func(rel string, depth int) bool {
		ents, err := fs.ReadDir(root.FS(), path.Join(dir, rel))
		if err != nil {
			return true
		}
		for _, e := range ents {
			name := e.Name()
			p := path.Join(rel, name)
			if strings.HasPrefix(name, ".") || (rel == "" && name == File) {
				continue
			}
			switch {
			case e.IsDir():
				if depth < maxDepth && !walk(p, depth+1) {
					return false
				}
				continue
			case e.Type()&fs.ModeSymlink != 0:
				fi, err := root.Stat(path.Join(dir, p))
				if err != nil || !fi.Mode().IsRegular() {
					continue
				}
			case !e.Type().IsRegular():
				continue
			}
			if len(files) == max {
				cut = true
				return false
			}
			files = append(files, p)
		}
		return true
	}
	walk("", 0)
	slices.Sort(files)
	return files, cut
}

// readRootFile reads the regular text file at name in root, at most max
// bytes. It refuses a link out of root, a special file (opened without
// blocking, then checked), a file over max (before reading it) and a
// binary file. Errors name the file by its place in the skill, never by
// host path.
func readRootFile(root *os.Root, name string, max int64) ([]byte, error) {
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, linkErr(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, unwrapPath(err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: it is %s; only regular files can be read", tools.ErrNotRegular, tools.KindOf(fi.Mode()))
	}
	if fi.Size() > max {
		return nil, fmt.Errorf("%w: it is %s, over the %s limit", tools.ErrTooLarge, tools.FormatSize(fi.Size()), tools.FormatSize(max))
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, unwrapPath(err)
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("%w: it grew past the %s limit while being read", tools.ErrTooLarge, tools.FormatSize(max))
	}
	if tools.IsBinary(data, true) {
		return nil, fmt.Errorf("%w: it is %s, not UTF-8 text", tools.ErrBinary, tools.BinaryKind(data))
	}
	return data, nil
}

// linkErr says that a path left the directory through a symlink, or
// what else went wrong, without the host path.
func linkErr(err error) error {
	if err != nil && strings.Contains(err.Error(), "path escapes from parent") {
		return fmt.Errorf("%w: it is a symlink that leads outside the skills directory", tools.ErrPathEscapes)
	}
	return unwrapPath(err)
}

// unwrapPath drops the *PathError's operation and path, keeping the
// cause ("no such file or directory").
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
