package adapters

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func bytesLen(s string) int { return len(s) }

func TestSplit(t *testing.T) {
	code := "intro\n\n```go\nline1\nline2\nline3\n```\n\nafter"
	tests := []struct {
		name    string
		text    string
		limit   int
		measure func(string) int
		want    []string
	}{
		{"empty", "", 10, nil, nil},
		{"fits", "hello", 10, nil, []string{"hello"}},
		{"exactly", "hello", 5, nil, []string{"hello"}},
		{"no limit", "hello", 0, nil, []string{"hello"}},
		{"paragraphs", "one two\n\nthree four\n\nfive", 12, Runes,
			[]string{"one two\n\n", "three four\n\n", "five"}},
		{"paragraph beats a later line break", "aaaa aaaa\n\nbbbb\nbbbb\ncc", 20, Runes,
			[]string{"aaaa aaaa\n\n", "bbbb\nbbbb\ncc"}},
		{"lines", "line one\nline two\nline three", 20, Runes,
			[]string{"line one\nline two\n", "line three"}},
		{"spaces", "alpha beta gamma delta", 12, Runes,
			[]string{"alpha beta ", "gamma delta"}},
		{"hard", "abcdefghij", 4, Runes, []string{"abcd", "efgh", "ij"}},
		{"runes not bytes", "ééééé", 2, Runes, []string{"éé", "éé", "é"}},
		{"bytes never split a rune", "ééé", 3, bytesLen, []string{"é", "é", "é"}},
		{"utf16 counts emoji as two", "😀😀😀", 3, UTF16, []string{"😀", "😀", "😀"}},
		{"utf16 fits two", "😀😀😀", 4, UTF16, []string{"😀😀", "😀"}},
		{"one character wider than the limit", "😀a", 1, UTF16, []string{"😀", "a"}},
		{"flag stays whole", "ab🇩🇪", 3, Runes, []string{"ab", "🇩🇪"}},
		{"accent stays on its letter", "abce\u0301", 4, Runes, []string{"abc", "e\u0301"}},
		{"crlf paragraphs", "one\r\n\r\ntwo three", 9, Runes, []string{"one\r\n\r\n", "two three"}},
		{"code fence is closed and reopened", code, 30, Runes,
			[]string{"intro\n\n```go\nline1\nline2\n```", "```go\nline3\n```\n\nafter"}},
		{"cut before a fence rather than in it", "some words here\n```\na\nb\n```", 22, Runes,
			[]string{"some words here\n", "```\na\nb\n```"}},
		{"tilde fence with a longer marker", "~~~~ python\nx = 1\ny = 2\n~~~~\n", 24, Runes,
			[]string{"~~~~ python\nx = 1\n~~~~", "~~~~ python\ny = 2\n~~~~\n"}},
		{"backticks inside a tilde fence are code", "~~~\n```\n```\nz\n~~~", 13, Runes,
			[]string{"~~~\n```\n~~~", "~~~\n```\nz\n~~~"}},
		{"fence in a quote", "> ```sh\n> ls\n> pwd\n> ```", 19, Runes,
			[]string{"> ```sh\n> ls\n> ```", "> ```sh\n> pwd\n> ```"}},
		{"fence in a list", "1. run:\n   ```\n   make\n   test\n   ```", 24, Runes,
			[]string{"1. run:\n", "   ```\n   make\n   ```", "   ```\n   test\n   ```"}},
		{"unclosed fence", "```\naaaa\nbbbb\ncccc\n", 12, Runes,
			[]string{"```\naaaa\n```", "```\nbbbb\n```", "```\ncccc\n"}},
		{"long code line", "```\n0123456789\n```", 12, Runes,
			[]string{"```\n0123\n```", "```\n4567\n```", "```\n89\n```"}},
		{"opening line longer than the limit", "```" + strings.Repeat("x", 10) + "\ncode\n```", 8, Runes,
			[]string{"```xxxxx", "xxxxx\nco", "de\n```"}},
		{"invalid utf-8", "ab\xff\xfecd", 3, bytesLen, []string{"ab\xff", "\xfecd"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Split(tt.text, tt.limit, tt.measure)
			if !slices.Equal(got, tt.want) {
				t.Errorf("Split(%q, %d)\n got %q\nwant %q", tt.text, tt.limit, got, tt.want)
			}
			// Only a fence line or a character wider than the limit forces
			// a cut that breaks the rules.
			want := tt.name == "opening line longer than the limit" || tt.name == "one character wider than the limit"
			if pieces := checkSplit(t, tt.text, tt.limit, tt.measure); forced(pieces) != want {
				t.Errorf("forced = %v", !want)
			}
		})
	}
}

func TestSplitLong(t *testing.T) {
	// A long answer with prose, lists and code, split at Telegram's limit.
	var b strings.Builder
	for i := range 60 {
		b.WriteString("Paragraph with some words, ünïcödé and emoji 😀 to count.\n\n")
		if i%7 == 0 {
			b.WriteString("```go\n")
			for range 30 {
				b.WriteString("fmt.Println(\"a line of code\")\n")
			}
			b.WriteString("```\n\n")
		}
		if i%5 == 0 {
			b.WriteString("- item one\n- item two\n  - nested\n\n")
		}
	}
	text := b.String()
	parts := Split(text, 4096, UTF16)
	if len(parts) < 3 {
		t.Fatalf("%d parts", len(parts))
	}
	for i, p := range parts[:len(parts)-1] {
		if n := UTF16(p); n < 2048 {
			t.Errorf("part %d is only %d units: cuts should fall in the latter half", i, n)
		}
	}
	if forced(checkSplit(t, text, 4096, UTF16)) {
		t.Error("forced cut in ordinary text")
	}
}

// checkSplit verifies Split's promises for one input.
func checkSplit(t *testing.T, text string, limit int, measure func(string) int) []piece {
	t.Helper()
	if measure == nil {
		measure = Runes
	}
	pieces := splitPieces(text, limit, measure)
	if text == "" {
		if pieces != nil {
			t.Fatalf("empty text gave %d parts", len(pieces))
		}
		return pieces
	}
	var joined strings.Builder
	for _, p := range pieces {
		joined.WriteString(p.body)
	}
	if joined.String() != text {
		t.Fatalf("parts joined differ from the input:\n%q\n%q", joined.String(), text)
	}
	if limit <= 0 {
		return pieces
	}
	boundaries := map[int]bool{len(text): true}
	for i := range text {
		boundaries[i] = true
	}
	fs := scanFences(text)
	// Fence lines are carried over whenever they can fit.
	ample := true
	for _, f := range fs {
		if measure(f.open+"\n")+measure("\n"+f.close)+measure("\U0010ffff") > limit {
			ample = false
		}
	}
	pos := 0
	for i, p := range pieces {
		if p.body == "" {
			t.Fatalf("part %d is empty", i)
		}
		s := p.String()
		if n := measure(s); n > limit {
			if r, w := utf8.DecodeRuneInString(p.body); w != len(p.body) || p.open != "" || p.close != "" {
				t.Errorf("part %d measures %d > %d: %q", i, n, limit, s)
			} else if measure(string(r)) <= limit && measure(p.body) <= limit {
				t.Errorf("part %d is one character %q and still too long", i, p.body)
			}
		}
		pos += len(p.body)
		if !boundaries[pos] {
			t.Errorf("part %d ends inside a UTF-8 sequence at %d", i, pos)
		}
		if i == len(pieces)-1 {
			if p.close != "" {
				t.Errorf("last part has a closing fence added")
			}
			break
		}
		next := pieces[i+1]
		f := fs.at(pos)
		if ample && !p.forced && (i == 0 || !pieces[i-1].forced) {
			if next.forced {
				continue // its reopening fence was dropped
			}
			if (p.close != "") != (next.open != "") {
				t.Errorf("part %d closes %q but part %d opens %q", i, p.close, i+1, next.open)
			}
			if f != nil && (p.close == "" || next.open != f.open+"\n") {
				t.Errorf("cut %d inside the fence %q: closed with %q, reopened with %q", i, f.open, p.close, next.open)
			}
			if f == nil && p.close != "" {
				t.Errorf("cut %d outside a fence closed one: %q", i, p.close)
			}
			if open := scanFences(s); len(open) > 0 && open[len(open)-1].contentEnd == len(s) {
				t.Errorf("part %d ends inside a code block: %q", i, s)
			}
		}
	}
	return pieces
}

func forced(pieces []piece) bool {
	return slices.ContainsFunc(pieces, func(p piece) bool { return p.forced })
}

// rendered is a measure that is not monotone: like a platform counting
// rendered text, it does not count Markdown's emphasis markers.
func rendered(s string) int {
	return Runes(strings.NewReplacer("**", "", "*", "", "_", "", "`", "").Replace(s))
}

func FuzzSplit(f *testing.F) {
	seeds := []string{
		"",
		"hello world",
		"one two\n\nthree four\n\nfive",
		"intro\n\n```go\nline1\nline2\nline3\n```\n\nafter",
		"> ```sh\n> ls\n> ```",
		"~~~~ python\nx\n~~~~\n```\n",
		"😀🇩🇪e\u0301 ab\xff\xfe",
		"**bold** _it_ `code` ```\nx\n```",
		"```````````````````````````````\n\n",
		"\r\n\r\n```\r\nx\r\n```\r\n",
	}
	for i, s := range seeds {
		f.Add(s, 1+i*7, uint8(i))
	}
	f.Fuzz(func(t *testing.T, text string, limit int, kind uint8) {
		if limit < 0 {
			limit = -limit
		}
		limit = 1 + limit%400
		measure := []func(string) int{Runes, UTF16, bytesLen, rendered}[kind%4]
		checkSplit(t, text, limit, measure)
	})
}
