package files

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/firstmate/firstmate/tools"
)

// LsArgs are the arguments of ls.
type LsArgs struct {
	Path  string `json:"path,omitempty" jsonschema:"the directory (or file) to list, relative to the workspace; default the workspace root"`
	Depth int    `json:"depth,omitempty" jsonschema:"how many levels of directories to show, 1 to 5 (default 2)"`
}

const (
	defaultDepth = 2
	maxDepth     = 5
)

// Ls is the ls tool: a tree of a directory with sizes.
func Ls(opts Options) tools.Tool {
	o := opts.withDefaults()
	desc := fmt.Sprintf("List a directory of the workspace as an indented tree: directories end in /, files show their size, "+
		"symlinks show as name -> target (not followed). depth sets how many levels are shown (default %d, at most %d); "+
		"directories below that show how many entries they hold. At most %d entries are shown.", defaultDepth, maxDepth, o.MaxEntries)
	return tools.New("ls", tools.PowerRead, desc, func(ctx context.Context, ws *tools.Workspace, a LsArgs) (tools.Result, error) {
		return o.ls(ctx, ws, a)
	})
}

func (o Options) ls(ctx context.Context, ws *tools.Workspace, a LsArgs) (tools.Result, error) {
	if a.Depth < 0 {
		return tools.Result{}, badArgs("depth must be between 1 and %d", maxDepth)
	}
	depth := a.Depth
	if depth == 0 {
		depth = defaultDepth
	}
	clamped := depth > maxDepth
	depth = min(depth, maxDepth)
	rel, err := tools.CleanPath(a.Path)
	if err != nil {
		return tools.Result{}, err
	}
	// The path asked for is followed if it is a symlink inside the
	// workspace (one leading out is refused); symlinks under it are not.
	fi, err := ws.Stat(rel)
	if err != nil {
		return tools.Result{}, err
	}
	if !fi.IsDir() {
		line := entryLine(ws, rel, fs.FileInfoToDirEntry(fi), rel)
		return tools.Result{Text: line, Summary: "listed " + rel}, nil
	}
	var (
		b      strings.Builder
		shown  int
		hidden int
		visits int
		capped bool
	)
	fmt.Fprintf(&b, "%s/\n", strings.TrimSuffix(show(rel), "/"))
	var list func(dir string, level int) error
	list = func(dir string, level int) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		ents, err := ws.ReadDir(dir)
		if err != nil {
			if level == 0 {
				return err
			}
			if shown < o.MaxEntries {
				fmt.Fprintf(&b, "%s(cannot list: %v)\n", strings.Repeat("  ", level+1), err)
			}
			return nil
		}
		if len(ents) == 0 && shown < o.MaxEntries {
			b.WriteString(strings.Repeat("  ", level+1) + "(empty)\n")
		}
		for _, e := range ents {
			visits++
			if visits > o.MaxVisit {
				capped = true
				return nil
			}
			child := joinRel(dir, e.Name())
			if shown < o.MaxEntries && b.Len() < o.MaxOutputBytes {
				b.WriteString(strings.Repeat("  ", level+1))
				b.WriteString(entryLine(ws, child, e, e.Name()))
				if e.IsDir() && level+1 == depth {
					b.WriteString(dirCount(ws, child))
				}
				b.WriteByte('\n')
				shown++
			} else {
				hidden++
			}
			if e.IsDir() && level+1 < depth {
				if err := list(child, level+1); err != nil {
					return err
				}
				if capped {
					return nil
				}
			}
		}
		return nil
	}
	if err := list(rel, 0); err != nil {
		return tools.Result{}, err
	}
	if hidden > 0 || capped {
		more := fmt.Sprint(hidden)
		if capped {
			more = fmt.Sprintf("more than %d", hidden)
		}
		fmt.Fprintf(&b, "[%s more entries not shown; list a subdirectory, or use find]\n", more)
	}
	if clamped {
		fmt.Fprintf(&b, "[depth is at most %d; list a subdirectory to see deeper]\n", maxDepth)
	}
	return tools.Result{
		Text:    strings.TrimSuffix(b.String(), "\n"),
		Summary: fmt.Sprintf("listed %s (%s)", show(rel), plural(shown+hidden, "entry", "entries")),
	}, nil
}

// entryLine is one entry as ls and find show it: "name/", "name  1.2 KiB",
// "name -> target", "name  (a FIFO (named pipe))".
func entryLine(ws *tools.Workspace, rel string, e fs.DirEntry, name string) string {
	switch t := e.Type(); {
	case t.IsDir():
		return name + "/"
	case t&fs.ModeSymlink != 0:
		target, err := ws.Readlink(rel)
		if err != nil {
			return name + " -> ?"
		}
		line := fmt.Sprintf("%s -> %s", name, target)
		if _, err := ws.Stat(rel); errors.Is(err, tools.ErrPathEscapes) {
			line += "  (outside the workspace)"
		} else if errors.Is(err, fs.ErrNotExist) {
			line += "  (broken)"
		}
		return line
	case t.IsRegular():
		info, err := e.Info()
		if err != nil {
			return name
		}
		return name + "  " + tools.FormatSize(info.Size())
	default:
		return fmt.Sprintf("%s  (%s)", name, tools.KindOf(t))
	}
}

func dirCount(ws *tools.Workspace, rel string) string {
	ents, err := ws.ReadDir(rel)
	if err != nil {
		return ""
	}
	if len(ents) == 0 {
		return "  (empty)"
	}
	return "  (" + plural(len(ents), "entry", "entries") + ")"
}

func joinRel(dir, name string) string {
	if dir == "." {
		return name
	}
	return dir + "/" + name
}

// FindArgs are the arguments of find.
type FindArgs struct {
	Pattern string `json:"pattern" jsonschema:"a glob: * ? [abc] within a name, ** for any number of directories. Without a / it matches names at any depth (*.go); with one it matches the path under path (docs/*.md, **/test/*.py)"`
	Path    string `json:"path,omitempty" jsonschema:"the directory to search, relative to the workspace; default the workspace root"`
}

// Find is the find tool: paths matching a glob, sorted.
func Find(opts Options) tools.Tool {
	o := opts.withDefaults()
	desc := fmt.Sprintf("Find files and directories whose path matches a glob, e.g. *.go, **/*_test.go, docs/**/*.md. "+
		"Results are workspace paths in sorted order (directories end in /), at most %d. Symlinked directories are not searched.", o.MaxEntries)
	return tools.New("find", tools.PowerRead, desc, func(ctx context.Context, ws *tools.Workspace, a FindArgs) (tools.Result, error) {
		return o.find(ctx, ws, a)
	})
}

func (o Options) find(ctx context.Context, ws *tools.Workspace, a FindArgs) (tools.Result, error) {
	g, err := compileGlob(a.Pattern)
	if err != nil {
		return tools.Result{}, err
	}
	base, err := tools.CleanPath(a.Path)
	if err != nil {
		return tools.Result{}, err
	}
	if fi, err := ws.Stat(base); err != nil {
		return tools.Result{}, err
	} else if !fi.IsDir() {
		return tools.Result{}, &tools.FileError{Path: base, Err: tools.ErrBadPath, Msg: "is not a directory; path is the directory to search in"}
	}
	var (
		b       strings.Builder
		matches int
		shown   int
		visits  int
		capped  bool
	)
	err = ws.Walk(ctx, base, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == base {
			return nil
		}
		visits++
		if visits > o.MaxVisit {
			capped = true
			return fs.SkipAll
		}
		under := p
		if base != "." {
			under = strings.TrimPrefix(p, base+"/")
		}
		if !g.match(under) {
			return nil
		}
		matches++
		if shown < o.MaxEntries && b.Len() < o.MaxOutputBytes {
			b.WriteString(entryLine(ws, p, d, p))
			b.WriteByte('\n')
			shown++
		}
		return nil
	})
	if err != nil {
		return tools.Result{}, err
	}
	if matches == 0 {
		text := fmt.Sprintf("nothing under %s matches %s", show(base), a.Pattern)
		if capped {
			text += fmt.Sprintf(" in the first %d entries; search a smaller directory", o.MaxVisit)
		}
		return tools.Result{Text: text, Summary: "no matches for " + a.Pattern}, nil
	}
	if matches > shown {
		fmt.Fprintf(&b, "[showing %d of %d matches; narrow the pattern or path]\n", shown, matches)
	}
	if capped {
		fmt.Fprintf(&b, "[stopped after %d entries; there may be more matches; search a smaller directory]\n", o.MaxVisit)
	}
	return tools.Result{
		Text:    strings.TrimSuffix(b.String(), "\n"),
		Summary: fmt.Sprintf("found %s for %s", plural(matches, "match", "matches"), a.Pattern),
	}, nil
}
