// Package files holds the workspace file tools the agent offers the model:
// ls, read, write, edit, mkdir, copy, move, delete, find, grep and
// send_file.
//
// Every tool works through the channel's [tools.Workspace] and its safe
// primitives (path cleaning, os.Root, refusal of non-regular and
// hard-linked files, size limits, binary detection, atomic writes), so no
// tool here opens a host path or re-implements a check. What the tools add
// is the shape of the answer: line numbers, tree views, caps with a note
// saying what was left out, and errors that tell the model what to do next.
package files

import (
	"errors"
	"fmt"
	"slices"

	"github.com/firstmate/firstmate/tools"
)

// Options caps what the tools read, write and return. A zero field takes
// its default.
type Options struct {
	MaxReadBytes   int64 // largest file read returns whole, without offset/limit (256 KiB)
	MaxFileBytes   int64 // largest file read and grep open at all (64 MiB)
	MaxWriteBytes  int64 // largest file write, edit and copy produce (16 MiB)
	MaxCopyBytes   int64 // total bytes one directory copy may write (256 MiB)
	MaxLines       int   // lines read returns when no limit is given (2000)
	MaxLineBytes   int   // lines longer than this are cut in what read and grep show (2000)
	MaxOutputBytes int   // text one call returns before it stops with a note (24 KiB; under tools.DefaultMaxResult)
	MaxEntries     int   // entries ls and find show (500)
	MaxMatches     int   // matching lines grep shows (200)
	MaxVisit       int   // entries one ls, find, grep or copy walks before it stops (100000)
	MaxSendBytes   int64 // largest file send_file attaches (50 MiB: Telegram's bot upload limit)
}

func (o Options) withDefaults() Options {
	def := func(v *int64, d int64) {
		if *v <= 0 {
			*v = d
		}
	}
	defInt := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.MaxReadBytes, 256<<10)
	def(&o.MaxFileBytes, 64<<20)
	def(&o.MaxWriteBytes, 16<<20)
	def(&o.MaxCopyBytes, 256<<20)
	defInt(&o.MaxLines, 2000)
	defInt(&o.MaxLineBytes, 2000)
	defInt(&o.MaxOutputBytes, 24<<10)
	defInt(&o.MaxEntries, 500)
	defInt(&o.MaxMatches, 200)
	defInt(&o.MaxVisit, 100000)
	def(&o.MaxSendBytes, 50<<20)
	return o
}

// All returns every file tool, configured by opts.
func All(opts Options) []tools.Tool {
	return []tools.Tool{
		Ls(opts), Read(opts), Write(opts), Edit(opts), Mkdir(opts),
		Copy(opts), Move(opts), Delete(opts), Find(opts), Grep(opts), SendFile(opts),
	}
}

// Errors of edit, for errors.Is; the message says what to change.
var (
	ErrNoMatch   = errors.New("old text not found")
	ErrAmbiguous = errors.New("old text occurs more than once")
)

// ErrBadArgs: an argument is out of range or malformed in a way the schema
// cannot express (a negative offset, an invalid regexp or glob).
var ErrBadArgs = errors.New("bad argument")

func badArgs(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBadArgs, fmt.Sprintf(format, args...))
}

// show is a workspace-relative path as the model reads it in results.
func show(rel string) string {
	if rel == "." {
		return tools.MountPoint
	}
	return rel
}

func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
