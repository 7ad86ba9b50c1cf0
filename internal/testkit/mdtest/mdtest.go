// Package mdtest holds what the tests of the platforms' Markdown renderers
// share: a corpus of Markdown files under testdata, each with golden files
// of the rendering beside it, and the checks every renderer must pass.
package mdtest

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files from the current output")

// Case is one Markdown file of a corpus.
type Case struct {
	Name     string // the file's name without ".md", for a subtest
	Base     string // its path without ".md": the golden files add their own extension
	Markdown string
}

// minCases guards a corpus against losing files unnoticed: each holds more.
const minCases = 15

// Corpus reads the Markdown files pattern matches ("testdata/html/*.md").
func Corpus(tb testing.TB, pattern string) []Case {
	tb.Helper()
	paths, err := filepath.Glob(pattern)
	if err != nil {
		tb.Fatal(err)
	}
	if len(paths) < minCases {
		tb.Fatalf("only %d cases match %s", len(paths), pattern)
	}
	var cases []Case
	for _, p := range paths {
		md, err := os.ReadFile(p)
		if err != nil {
			tb.Fatal(err)
		}
		base := strings.TrimSuffix(p, ".md")
		cases = append(cases, Case{Name: filepath.Base(base), Base: base, Markdown: string(md)})
	}
	return cases
}

// Golden compares got with the golden file at path, or with -update writes
// got there: go test -run Golden -update.
func Golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s:\n--- got ---\n%s\n--- want ---\n%s", path, got, want)
	}
}

// Concurrent renders the Markdown file at path from several goroutines at
// once, as replies to several chats are, and fails unless every rendering
// is the one made alone: renderers share the parser and must share nothing
// else.
func Concurrent(t *testing.T, render func(string) string, path string) {
	t.Helper()
	md, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := render(string(md))
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 20 {
				if got := render(string(md)); got != want {
					t.Error("concurrent rendering differs")
					return
				}
			}
		})
	}
	wg.Wait()
}
