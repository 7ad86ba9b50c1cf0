package files

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/firstmate/firstmate/tools"
)

// ReadArgs are the arguments of read.
type ReadArgs struct {
	Path   string `json:"path" jsonschema:"the text file to read, relative to the workspace (or under /workspace/)"`
	Offset int    `json:"offset,omitempty" jsonschema:"first line to show, counting from 1 (default 1)"`
	Limit  int    `json:"limit,omitempty" jsonschema:"how many lines to show (default 2000)"`
}

// Read is the read tool: a text file with line numbers, whole or a line
// range.
func Read(opts Options) tools.Tool {
	o := opts.withDefaults()
	desc := fmt.Sprintf("Read a text file from the workspace. Lines come numbered as `number<TAB>text` "+
		"(the numbers are not part of the file). Without offset/limit it shows up to %d lines of a file up to %s; "+
		"for a bigger file, or to page through, give offset (first line, from 1) and limit. "+
		"Lines longer than %d bytes are cut. Binary files are refused.",
		o.MaxLines, tools.FormatSize(o.MaxReadBytes), o.MaxLineBytes)
	return tools.New("read", tools.PowerRead, desc, func(ctx context.Context, ws *tools.Workspace, a ReadArgs) (tools.Result, error) {
		return o.read(ctx, ws, a)
	})
}

func (o Options) read(ctx context.Context, ws *tools.Workspace, a ReadArgs) (tools.Result, error) {
	if a.Offset < 0 || a.Limit < 0 {
		return tools.Result{}, badArgs("offset and limit must be positive (offset counts lines from 1)")
	}
	rel, err := tools.CleanFilePath(a.Path)
	if err != nil {
		return tools.Result{}, err
	}
	f, fi, err := ws.OpenText(rel, o.MaxFileBytes)
	if err != nil {
		return tools.Result{}, err
	}
	defer f.Close()
	ranged := a.Offset > 0 || a.Limit > 0
	if !ranged && fi.Size() > o.MaxReadBytes {
		return tools.Result{}, &tools.FileError{Path: rel, Err: tools.ErrTooLarge, Msg: fmt.Sprintf(
			"is %s, over the %s limit for reading a whole file; read a line range with offset and limit (e.g. offset=1, limit=%d), or grep for what you need",
			tools.FormatSize(fi.Size()), tools.FormatSize(o.MaxReadBytes), min(o.MaxLines, 500))}
	}
	start := max(a.Offset, 1)
	limit := a.Limit
	if limit == 0 {
		limit = o.MaxLines
	}
	var b strings.Builder
	lr := newLineReader(f, o.MaxLineBytes)
	n, last, cutLines, full := 0, 0, 0, false
	for {
		line, cut, err := lr.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return tools.Result{}, &tools.FileError{Path: rel, Err: err, Msg: "could not be read: " + err.Error()}
		}
		n++
		if n%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return tools.Result{}, err
			}
		}
		if n < start || n-start >= limit || full {
			continue
		}
		entry := fmt.Sprintf("%6d\t%s\n", n, text(line))
		if cut {
			entry = entry[:len(entry)-1] + " …[line cut]\n"
		}
		if last >= start && b.Len()+len(entry) > o.MaxOutputBytes {
			full = true
			continue
		}
		b.WriteString(entry)
		last = n
		if cut {
			cutLines++
		}
	}
	total := n
	if total == 0 {
		return tools.Result{Text: fmt.Sprintf("(%s is empty)", rel), Summary: fmt.Sprintf("read %s (empty)", rel)}, nil
	}
	if start > total {
		return tools.Result{}, badArgs("offset %d is past the end of %s, which has %s", start, rel, plural(total, "line", "lines"))
	}
	switch {
	case full:
		fmt.Fprintf(&b, "[output limit reached: showing lines %d-%d of %d; continue with offset=%d]\n", start, last, total, last+1)
	case last < total:
		fmt.Fprintf(&b, "[showing lines %d-%d of %d; continue with offset=%d]\n", start, last, total, last+1)
	}
	if cutLines > 0 {
		fmt.Fprintf(&b, "[%s longer than %d bytes cut]\n", plural(cutLines, "line", "lines"), o.MaxLineBytes)
	}
	summary := fmt.Sprintf("read %s lines %d-%d", rel, start, last)
	if start > 1 || last < total {
		summary += fmt.Sprintf(" of %d", total)
	}
	return tools.Result{Text: strings.TrimSuffix(b.String(), "\n"), Summary: summary}, nil
}
