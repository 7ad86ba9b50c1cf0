package files

import (
	"io"
	"strings"
	"testing"
)

func TestGlob(t *testing.T) {
	tests := []struct {
		pattern string
		path    string
		want    bool
	}{
		{"*.go", "main.go", true},
		{"*.go", "a/b/main.go", true}, // no slash: any depth
		{"*.go", "main.gox", false},
		{"main.?o", "x/main.go", true},
		{"[a-c].txt", "b.txt", true},
		{"src/*.go", "src/main.go", true},
		{"src/*.go", "src/util/x.go", false},
		{"src/**/*.go", "src/main.go", true},
		{"src/**/*.go", "src/a/b/c/x.go", true},
		{"src/**", "src/a/b", true},
		{"src/**", "src", true},
		{"**/test/*.py", "test/a.py", true},
		{"**/test/*.py", "a/b/test/a.py", true},
		{"**/test/*.py", "a/test/b/a.py", false},
		{"**", "anything/at/all", true},
		{"a/**/**/b", "a/b", true},
		{"a/**/b/**/c", "a/x/b/y/z/c", true},
		{"a/**/b/**/c", "a/x/y/z/c", false},
		{"./docs/*.md", "docs/a.md", true},
		{"/workspace/docs/*.md", "docs/a.md", true},
	}
	for _, tt := range tests {
		g, err := compileGlob(tt.pattern)
		if err != nil {
			t.Fatalf("compileGlob(%q): %v", tt.pattern, err)
		}
		if got := g.match(tt.path); got != tt.want {
			t.Errorf("%q matches %q = %v, want %v", tt.pattern, tt.path, got, tt.want)
		}
	}
	for _, bad := range []string{"", "  ", ".", "./", "/workspace/", "[", "a/[/b", "../x", "a/../b", "/etc/*", "a\x00"} {
		if _, err := compileGlob(bad); err == nil {
			t.Errorf("compileGlob(%q) accepted", bad)
		}
	}
}

// Many "**" against a deep path stays fast (no exponential backtracking).
func TestGlobManyDoubleStars(t *testing.T) {
	g, err := compileGlob(strings.Repeat("**/a/", 30) + "b")
	if err != nil {
		t.Fatal(err)
	}
	if g.match(strings.Repeat("a/", 200) + "c") {
		t.Error("matched")
	}
}

func FuzzGlob(f *testing.F) {
	f.Add("**/*.go", "a/b/c.go")
	f.Add("[", "x")
	f.Add("a/**/b", "a/b")
	f.Fuzz(func(t *testing.T, pattern, path string) {
		g, err := compileGlob(pattern)
		if err != nil {
			return
		}
		g.match(path)
		for _, s := range g.segs {
			if s == ".." || s == "" {
				t.Fatalf("segment %q in %q", s, pattern)
			}
		}
	})
}

func TestLineReader(t *testing.T) {
	tests := []struct {
		in   string
		keep int
		want []string
		cut  []bool
	}{
		{"", 10, nil, nil},
		{"\n", 10, []string{""}, []bool{false}},
		{"a\nb", 10, []string{"a", "b"}, []bool{false, false}},
		{"a\r\nb\r\n", 10, []string{"a", "b"}, []bool{false, false}},
		{"0123456789\r\nx", 10, []string{"0123456789", "x"}, []bool{false, false}},
		{"0123456789a\nx", 10, []string{"0123456789", "x"}, []bool{true, false}},
		{"ééééé\n", 5, []string{"éé"}, []bool{true}},
		{strings.Repeat("y", 200000) + "\nz\n", 4, []string{"yyyy", "z"}, []bool{true, false}},
	}
	for _, tt := range tests {
		lr := newLineReader(strings.NewReader(tt.in), tt.keep)
		var got []string
		var cuts []bool
		for {
			line, cut, err := lr.next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, string(line))
			cuts = append(cuts, cut)
		}
		if strings.Join(got, "|") != strings.Join(tt.want, "|") || len(got) != len(tt.want) {
			t.Errorf("lines(%.20q, %d) = %q, want %q", tt.in, tt.keep, got, tt.want)
			continue
		}
		for i := range cuts {
			if cuts[i] != tt.cut[i] {
				t.Errorf("lines(%.20q, %d): cut = %v, want %v", tt.in, tt.keep, cuts, tt.cut)
			}
		}
		if countLines(tt.in) != len(tt.want) {
			t.Errorf("countLines(%.20q) = %d, want %d", tt.in, countLines(tt.in), len(tt.want))
		}
	}
}

func TestWindow(t *testing.T) {
	line := []byte(strings.Repeat("a", 100) + "X" + strings.Repeat("b", 100))
	got := string(window(line, 100, 20))
	if !strings.HasPrefix(got, "…") || !strings.HasSuffix(got, "…") || !strings.Contains(got, "X") {
		t.Errorf("window = %q", got)
	}
	if got := string(window([]byte("short"), 0, 20)); got != "short" {
		t.Errorf("window = %q", got)
	}
}
