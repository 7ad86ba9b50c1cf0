package files

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"regexp"
	"strings"

	"github.com/firstmate/firstmate/tools"
)

// GrepArgs are the arguments of grep.
type GrepArgs struct {
	Pattern    string `json:"pattern" jsonschema:"a Go (RE2) regular expression, matched against each line"`
	Path       string `json:"path,omitempty" jsonschema:"the file or directory to search, relative to the workspace; default the workspace root"`
	Glob       string `json:"glob,omitempty" jsonschema:"search only files matching this glob, as in find (e.g. *.go or docs/**/*.md)"`
	IgnoreCase bool   `json:"ignore_case,omitempty" jsonschema:"match letters regardless of case"`
}

// grepLineMax is how much of one line grep matches against; the rest of a
// longer line is not searched.
const grepLineMax = 64 << 10

// Grep is the grep tool: lines matching a regular expression.
func Grep(opts Options) tools.Tool {
	o := opts.withDefaults()
	desc := fmt.Sprintf("Search text files for lines matching a Go regular expression (RE2 syntax: no backreferences or lookaround). "+
		"Prints path:line: text for each match, at most %d matches. Searches a directory recursively, or one file; "+
		"glob narrows which files. Binary files, files over %s and symlinks are skipped.", o.MaxMatches, tools.FormatSize(o.MaxFileBytes))
	return tools.New("grep", tools.PowerRead, desc, func(ctx context.Context, ws *tools.Workspace, a GrepArgs) (tools.Result, error) {
		return o.grep(ctx, ws, a)
	})
}

type grepRun struct {
	o       Options
	re      *regexp.Regexp
	b       strings.Builder
	matches int
	files   int            // files with a match
	full    bool           // stopped at the match or output cap
	capped  bool           // stopped at the walk cap
	skipped map[string]int // reason → files
}

func (o Options) grep(ctx context.Context, ws *tools.Workspace, a GrepArgs) (tools.Result, error) {
	if a.Pattern == "" {
		return tools.Result{}, badArgs("the pattern is empty; give a regular expression")
	}
	expr := a.Pattern
	if a.IgnoreCase {
		expr = "(?i)" + expr
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return tools.Result{}, badArgs("the pattern is not a valid Go regular expression: %v", err)
	}
	var g *glob
	if a.Glob != "" {
		if g, err = compileGlob(a.Glob); err != nil {
			return tools.Result{}, err
		}
	}
	base, err := tools.CleanPath(a.Path)
	if err != nil {
		return tools.Result{}, err
	}
	fi, err := ws.Stat(base)
	if err != nil {
		return tools.Result{}, err
	}
	r := &grepRun{o: o, re: re, skipped: map[string]int{}}
	if !fi.IsDir() {
		// One file named outright: say why it cannot be searched.
		f, _, err := ws.OpenText(base, o.MaxFileBytes)
		if err != nil {
			return tools.Result{}, err
		}
		err = r.file(ctx, base, f)
		f.Close()
		if err != nil {
			return tools.Result{}, err
		}
	} else {
		visits := 0
		err = ws.Walk(ctx, base, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				r.skipped["unreadable directories"]++
				return nil
			}
			visits++
			if visits > o.MaxVisit {
				r.capped = true
				return fs.SkipAll
			}
			if d.IsDir() {
				return nil
			}
			if d.Type()&fs.ModeSymlink != 0 {
				r.skipped["symlinks"]++
				return nil
			}
			if !d.Type().IsRegular() {
				r.skipped["special files"]++
				return nil
			}
			under := p
			if base != "." {
				under = strings.TrimPrefix(p, base+"/")
			}
			if g != nil && !g.match(under) {
				return nil
			}
			f, _, err := ws.OpenText(p, o.MaxFileBytes)
			switch {
			case errors.Is(err, tools.ErrBinary):
				r.skipped["binary files"]++
				return nil
			case errors.Is(err, tools.ErrTooLarge):
				r.skipped["files over "+tools.FormatSize(o.MaxFileBytes)]++
				return nil
			case errors.Is(err, tools.ErrHardLinked):
				r.skipped["files with several hard links"]++
				return nil
			case err != nil:
				r.skipped["unreadable files"]++
				return nil
			}
			err = r.file(ctx, p, f)
			f.Close()
			if err != nil {
				return err
			}
			if r.full {
				return fs.SkipAll
			}
			return nil
		})
		if err != nil {
			return tools.Result{}, err
		}
	}
	return r.result(a.Pattern, base), nil
}

// file searches one open file, adding its matches until the cap.
func (r *grepRun) file(ctx context.Context, rel string, f io.Reader) error {
	lr := newLineReader(f, grepLineMax)
	n, found := 0, false
	for {
		line, _, err := lr.next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			r.skipped["unreadable files"]++
			return nil
		}
		n++
		if n%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		loc := r.re.FindIndex(line)
		if loc == nil {
			continue
		}
		if r.matches >= r.o.MaxMatches {
			r.full = true
			return nil
		}
		entry := fmt.Sprintf("%s:%d: %s\n", rel, n, text(window(line, loc[0], r.o.MaxLineBytes)))
		if r.b.Len()+len(entry) > r.o.MaxOutputBytes {
			r.full = true
			return nil
		}
		r.b.WriteString(entry)
		r.matches++
		if !found {
			found = true
			r.files++
		}
	}
}

// window shows at most max bytes of line, around the match at start when
// the line is long, marking what was cut with "…".
func window(line []byte, start, max int) []byte {
	if len(line) <= max {
		return line
	}
	from := 0
	if start > max/2 {
		from = start - max/4
		for from < len(line) && from > 0 && line[from]&0xC0 == 0x80 {
			from++
		}
	}
	out := cutUTF8(line[from:], max)
	var b []byte
	if from > 0 {
		b = append(b, "…"...)
	}
	b = append(b, out...)
	if from+len(out) < len(line) {
		b = append(b, "…"...)
	}
	return b
}

func (r *grepRun) result(pattern, base string) tools.Result {
	if r.full {
		fmt.Fprintf(&r.b, "[showing the first %s; there are more. Narrow the pattern, path or glob]\n", plural(r.matches, "match", "matches"))
	}
	if r.capped {
		fmt.Fprintf(&r.b, "[stopped after %d entries; there may be more matches. Search a smaller directory]\n", r.o.MaxVisit)
	}
	if len(r.skipped) > 0 {
		var parts []string
		for _, reason := range sortedKeys(r.skipped) {
			parts = append(parts, fmt.Sprintf("%d %s", r.skipped[reason], reason))
		}
		fmt.Fprintf(&r.b, "[skipped %s]\n", strings.Join(parts, ", "))
	}
	if r.matches == 0 {
		text := fmt.Sprintf("no lines under %s match %s", show(base), pattern)
		if r.b.Len() > 0 {
			text += "\n" + r.b.String()
		}
		return tools.Result{Text: strings.TrimSuffix(text, "\n"), Summary: fmt.Sprintf("no matches for %q", pattern)}
	}
	return tools.Result{
		Text:    strings.TrimSuffix(r.b.String(), "\n"),
		Summary: fmt.Sprintf("%s for %q in %s", plural(r.matches, "match", "matches"), pattern, plural(r.files, "file", "files")),
	}
}
