package files

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/firstmate/firstmate/tools"
)

// MkdirArgs are the arguments of mkdir.
type MkdirArgs struct {
	Path string `json:"path" jsonschema:"the directory to create, relative to the workspace; missing parents are created too"`
}

// Mkdir is the mkdir tool.
func Mkdir(opts Options) tools.Tool {
	return tools.New("mkdir", tools.PowerWrite, "Create a directory, and any missing parent directories. An existing directory is left as it is.",
		func(ctx context.Context, ws *tools.Workspace, a MkdirArgs) (tools.Result, error) {
			rel, err := tools.CleanFilePath(a.Path)
			if err != nil {
				return tools.Result{}, err
			}
			created, err := ws.MkdirAll(rel)
			if err != nil {
				return tools.Result{}, err
			}
			if !created {
				return tools.Result{Text: rel + "/ already exists", Summary: rel + "/ already exists"}, nil
			}
			return tools.Result{Text: "created " + rel + "/", Summary: "created directory " + rel + "/"}, nil
		})
}

// DeleteArgs are the arguments of delete.
type DeleteArgs struct {
	Path      string `json:"path" jsonschema:"the file, symlink or directory to delete, relative to the workspace"`
	Recursive bool   `json:"recursive,omitempty" jsonschema:"needed to delete a directory that is not empty, with everything in it"`
}

// Delete is the delete tool. A symlink is deleted itself, never its target.
func Delete(opts Options) tools.Tool {
	return tools.New("delete", tools.PowerWrite, "Delete a file, a symlink (the link itself, not what it points to) or a directory. "+
		"A directory that is not empty needs recursive=true. The workspace root cannot be deleted.",
		func(ctx context.Context, ws *tools.Workspace, a DeleteArgs) (tools.Result, error) {
			fi, err := ws.Remove(a.Path, a.Recursive)
			if err != nil {
				return tools.Result{}, err
			}
			rel, _ := tools.CleanPath(a.Path)
			what := rel
			switch {
			case fi.IsDir():
				what = "directory " + rel + "/"
			case fi.Mode()&fs.ModeSymlink != 0:
				what = "symlink " + rel
			}
			return tools.Result{Text: "deleted " + what, Summary: "deleted " + what}, nil
		})
}

// MoveArgs are the arguments of move.
type MoveArgs struct {
	From string `json:"from" jsonschema:"the file or directory to move or rename"`
	To   string `json:"to" jsonschema:"the new path; if it is an existing directory, the entry is moved into it"`
}

// Move is the move tool: rename, or move into a directory.
func Move(opts Options) tools.Tool {
	return tools.New("move", tools.PowerWrite, "Move or rename a file, symlink or directory inside the workspace. "+
		"If to is an existing directory, from is moved into it; an existing file at to is replaced. Missing parent directories are created.",
		func(ctx context.Context, ws *tools.Workspace, a MoveArgs) (tools.Result, error) {
			src, err := tools.CleanPath(a.From)
			if err != nil {
				return tools.Result{}, err
			}
			if src == "." {
				return tools.Result{}, ws.Rename(a.From, a.To) // refused: the root cannot move
			}
			dst, err := intoDir(ws, src, a.To)
			if err != nil {
				return tools.Result{}, err
			}
			replaced := false
			if fi, err := ws.Lstat(dst); err == nil && !fi.IsDir() {
				replaced = true
			}
			if err := ws.Rename(src, dst); err != nil {
				return tools.Result{}, err
			}
			text := fmt.Sprintf("moved %s to %s", src, dst)
			if replaced {
				text += " (the old " + dst + " was replaced)"
			}
			return tools.Result{Text: text, Summary: fmt.Sprintf("moved %s to %s", src, dst)}, nil
		})
}

// intoDir resolves a destination: an existing directory (or the workspace
// root), or a path ending in "/", means "into it", keeping src's name.
func intoDir(ws *tools.Workspace, src, to string) (string, error) {
	dst, err := tools.CleanPath(to)
	if err != nil {
		return "", err
	}
	if strings.TrimSpace(to) == "" {
		return "", &tools.FileError{Path: to, Err: tools.ErrBadPath, Msg: "is empty; give the destination path"}
	}
	if dst == src {
		return dst, nil
	}
	if fi, err := ws.Stat(dst); err == nil && fi.IsDir() {
		return path.Join(dst, path.Base(src)), nil
	}
	if strings.HasSuffix(to, "/") && dst != "." {
		// "to/" names a directory to be created, not a new name.
		return path.Join(dst, path.Base(src)), nil
	}
	return dst, nil
}

// CopyArgs are the arguments of copy.
type CopyArgs struct {
	From string `json:"from" jsonschema:"the file or directory to copy"`
	To   string `json:"to" jsonschema:"the new path; if it is an existing directory, the copy goes into it"`
}

// Copy is the copy tool: a file, or a directory with what is in it.
func Copy(opts Options) tools.Tool {
	o := opts.withDefaults()
	desc := fmt.Sprintf("Copy a file, or a directory with everything in it, inside the workspace. "+
		"If to is an existing directory, the copy goes into it; an existing file at to is replaced. "+
		"Symlinks and special files inside a copied directory are skipped. Up to %s per file, %s per call.",
		tools.FormatSize(o.MaxWriteBytes), tools.FormatSize(o.MaxCopyBytes))
	return tools.New("copy", tools.PowerWrite, desc, func(ctx context.Context, ws *tools.Workspace, a CopyArgs) (tools.Result, error) {
		return o.copy(ctx, ws, a)
	})
}

func (o Options) copy(ctx context.Context, ws *tools.Workspace, a CopyArgs) (tools.Result, error) {
	src, err := tools.CleanFilePath(a.From)
	if err != nil {
		return tools.Result{}, err
	}
	fi, err := ws.Stat(src)
	if err != nil {
		if errors.Is(err, tools.ErrPathEscapes) {
			// OpenRead says where the symlink points.
			_, _, err = ws.OpenRead(src)
		}
		return tools.Result{}, err
	}
	dst, err := intoDir(ws, src, a.To)
	if err != nil {
		return tools.Result{}, err
	}
	if dst == src {
		return tools.Result{}, &tools.FileError{Path: src, Err: tools.ErrBadPath, Msg: "would be copied onto itself; give a different destination"}
	}
	if !fi.IsDir() {
		n, err := o.copyFile(ws, src, dst)
		if err != nil {
			return tools.Result{}, err
		}
		return tools.Result{
			Text:    fmt.Sprintf("copied %s to %s (%s)", src, dst, tools.FormatSize(n)),
			Summary: fmt.Sprintf("copied %s to %s", src, dst),
		}, nil
	}
	if dst == "." || strings.HasPrefix(dst, src+"/") {
		return tools.Result{}, &tools.FileError{Path: src, Err: tools.ErrBadPath, Msg: fmt.Sprintf("cannot be copied into itself (%s)", tools.DisplayPath(dst))}
	}
	var (
		files, dirs, visited int
		total                int64
		skipped              []string
	)
	err = ws.Walk(ctx, src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			skipped = append(skipped, err.Error())
			return nil
		}
		visited++
		if visited > o.MaxVisit {
			return &tools.FileError{Path: src, Err: tools.ErrTooLarge, Msg: fmt.Sprintf("has more than %d entries; copy it in parts (or with the shell)", o.MaxVisit)}
		}
		target := dst + strings.TrimPrefix(p, src)
		switch {
		case d.IsDir():
			if _, err := ws.MkdirAll(target); err != nil {
				return err
			}
			dirs++
		case d.Type().IsRegular():
			info, err := d.Info()
			if err == nil && total+info.Size() > o.MaxCopyBytes {
				return &tools.FileError{Path: src, Err: tools.ErrTooLarge, Msg: fmt.Sprintf("is over the %s limit for one copy; copy it in parts. Stopped at %s; what was copied so far stays in %s", tools.FormatSize(o.MaxCopyBytes), p, dst)}
			}
			n, err := o.copyFile(ws, p, target)
			if err != nil {
				skipped = append(skipped, err.Error())
				return nil
			}
			total += n
			files++
		default:
			skipped = append(skipped, fmt.Sprintf("%s is %s", tools.DisplayPath(p), tools.KindOf(d.Type())))
		}
		return nil
	})
	if err != nil {
		return tools.Result{}, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "copied %s/ to %s/ (%s, %s, %s)", src, dst, plural(files, "file", "files"), plural(dirs, "directory", "directories"), tools.FormatSize(total))
	if len(skipped) > 0 {
		fmt.Fprintf(&b, "\nskipped %d:", len(skipped))
		for i, s := range skipped {
			if i == 20 {
				fmt.Fprintf(&b, "\n- … and %d more", len(skipped)-i)
				break
			}
			b.WriteString("\n- " + s)
		}
	}
	return tools.Result{Text: b.String(), Summary: fmt.Sprintf("copied %s/ to %s/ (%s)", src, dst, plural(files, "file", "files"))}, nil
}

func (o Options) copyFile(ws *tools.Workspace, src, dst string) (int64, error) {
	f, fi, err := ws.OpenRead(src)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if fi.Size() > o.MaxWriteBytes {
		return 0, &tools.FileError{Path: src, Err: tools.ErrTooLarge, Msg: fmt.Sprintf("is %s, over the %s limit for one file", tools.FormatSize(fi.Size()), tools.FormatSize(o.MaxWriteBytes))}
	}
	n, _, err := ws.WriteFrom(dst, f, o.MaxWriteBytes)
	return n, err
}
