package files

import (
	"context"
	"fmt"
	"strings"

	"github.com/firstmate/firstmate/tools"
)

// WriteArgs are the arguments of write.
type WriteArgs struct {
	Path    string `json:"path" jsonschema:"the file to create or replace, relative to the workspace; missing parent directories are created"`
	Content string `json:"content" jsonschema:"the complete new content of the file"`
}

// Write is the write tool: create or replace a whole file, atomically.
func Write(opts Options) tools.Tool {
	o := opts.withDefaults()
	desc := fmt.Sprintf("Create a file, or replace one completely, with the given content (up to %s). "+
		"Missing parent directories are created. To change part of an existing file, use edit instead.",
		tools.FormatSize(o.MaxWriteBytes))
	return tools.New("write", tools.PowerWrite, desc, func(ctx context.Context, ws *tools.Workspace, a WriteArgs) (tools.Result, error) {
		rel, err := tools.CleanFilePath(a.Path)
		if err != nil {
			return tools.Result{}, err
		}
		if int64(len(a.Content)) > o.MaxWriteBytes {
			return tools.Result{}, &tools.FileError{Path: rel, Err: tools.ErrTooLarge, Msg: fmt.Sprintf(
				"was not written: the content is %s, over the %s limit for one file; split it into smaller files",
				tools.FormatSize(int64(len(a.Content))), tools.FormatSize(o.MaxWriteBytes))}
		}
		created, err := ws.WriteFile(rel, []byte(a.Content), o.MaxWriteBytes)
		if err != nil {
			return tools.Result{}, err
		}
		verb := "replaced"
		if created {
			verb = "created"
		}
		size := tools.FormatSize(int64(len(a.Content)))
		return tools.Result{
			Text:    fmt.Sprintf("%s %s (%s, %s)", verb, rel, size, plural(countLines(a.Content), "line", "lines")),
			Summary: fmt.Sprintf("wrote %s to %s", size, rel),
		}, nil
	})
}

// EditArgs are the arguments of edit.
type EditArgs struct {
	Path string `json:"path" jsonschema:"the text file to change, relative to the workspace"`
	Old  string `json:"old" jsonschema:"the exact text to replace, with its whitespace and indentation, without the line numbers read shows; it must occur exactly once unless all is true"`
	New  string `json:"new" jsonschema:"the text to put in its place (empty to delete it)"`
	All  bool   `json:"all,omitempty" jsonschema:"replace every occurrence of old, not just a single one"`
}

// Edit is the edit tool: replace an exact piece of text in a file.
func Edit(opts Options) tools.Tool {
	o := opts.withDefaults()
	desc := "Replace an exact piece of text in a file. old must match the file exactly (whitespace included) " +
		"and occur once; include a few surrounding lines to make it unique, or set all=true to replace every occurrence. " +
		"Read the file first. The file is rewritten atomically; if old is not found, nothing changes."
	return tools.New("edit", tools.PowerWrite, desc, func(ctx context.Context, ws *tools.Workspace, a EditArgs) (tools.Result, error) {
		return o.edit(ws, a)
	})
}

func (o Options) edit(ws *tools.Workspace, a EditArgs) (tools.Result, error) {
	rel, err := tools.CleanFilePath(a.Path)
	if err != nil {
		return tools.Result{}, err
	}
	if a.Old == "" {
		return tools.Result{}, badArgs("old is empty; give the text to replace (to create or overwrite a whole file, use write)")
	}
	if a.Old == a.New {
		return tools.Result{}, badArgs("old and new are the same, so there is nothing to change")
	}
	content, _, err := ws.ReadText(rel, o.MaxWriteBytes)
	if err != nil {
		return tools.Result{}, err
	}
	old, repl := a.Old, a.New
	count := strings.Count(content, old)
	if count == 0 && strings.Contains(content, "\r\n") && !strings.Contains(old, "\r") {
		// The model writes "\n"; the file has Windows line endings. Match
		// and replace in the file's own convention.
		crlfOld := strings.ReplaceAll(old, "\n", "\r\n")
		if c := strings.Count(content, crlfOld); c > 0 {
			old, repl, count = crlfOld, strings.ReplaceAll(repl, "\n", "\r\n"), c
		}
	}
	if count == 0 {
		return tools.Result{}, &tools.FileError{Path: rel, Err: ErrNoMatch, Msg: notFound(content, old)}
	}
	if count > 1 && !a.All {
		return tools.Result{}, &tools.FileError{Path: rel, Err: ErrAmbiguous, Msg: fmt.Sprintf(
			"contains old %d times (at lines %s); add surrounding lines to old so it matches exactly once, or set all=true to replace every occurrence. The file is unchanged.",
			count, occurrenceLines(content, old, 10))}
	}
	n := 1
	if a.All {
		n = -1
	}
	first := strings.Index(content, old)
	updated := strings.Replace(content, old, repl, n)
	if int64(len(updated)) > o.MaxWriteBytes {
		return tools.Result{}, &tools.FileError{Path: rel, Err: tools.ErrTooLarge, Msg: fmt.Sprintf(
			"was not changed: the result would be %s, over the %s limit", tools.FormatSize(int64(len(updated))), tools.FormatSize(o.MaxWriteBytes))}
	}
	if _, err := ws.WriteFile(rel, []byte(updated), o.MaxWriteBytes); err != nil {
		return tools.Result{}, err
	}
	if !a.All {
		count = 1
	}
	reps := plural(count, "occurrence", "occurrences")
	total := countLines(updated)
	if total == 0 {
		return tools.Result{
			Text:    fmt.Sprintf("edited %s: replaced %s; the file is now empty", rel, reps),
			Summary: fmt.Sprintf("edited %s (%s)", rel, plural(count, "replacement", "replacements")),
		}, nil
	}
	// Show the changed region of the first replacement with two lines of
	// context, so the model can check it without another read.
	at := strings.Count(updated[:first], "\n") // 0-based line where it starts
	lines := strings.Split(updated, "\n")
	lo := max(at-2, 0)
	hi := min(at+strings.Count(repl, "\n")+3, total, lo+40)
	var b strings.Builder
	fmt.Fprintf(&b, "edited %s: replaced %s. Lines %d-%d now read:\n", rel, reps, lo+1, hi)
	for i := lo; i < hi; i++ {
		line := []byte(strings.TrimSuffix(lines[i], "\r"))
		if len(line) > o.MaxLineBytes {
			line = append(cutUTF8(line, o.MaxLineBytes), " …[line cut]"...)
		}
		fmt.Fprintf(&b, "%6d\t%s\n", i+1, text(line))
	}
	return tools.Result{
		Text:    strings.TrimSuffix(b.String(), "\n"),
		Summary: fmt.Sprintf("edited %s (%s)", rel, plural(count, "replacement", "replacements")),
	}, nil
}

// occurrenceLines lists the line numbers where old starts, up to max.
func occurrenceLines(content, old string, max int) string {
	var nums []string
	off := 0
	for len(nums) < max {
		i := strings.Index(content[off:], old)
		if i < 0 {
			break
		}
		nums = append(nums, fmt.Sprint(strings.Count(content[:off+i], "\n")+1))
		off += i + len(old)
	}
	s := strings.Join(nums, ", ")
	if strings.Count(content, old) > len(nums) {
		s += ", …"
	}
	return s
}
