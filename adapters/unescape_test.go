package adapters

import (
	"bufio"
	"bytes"
	"html"
	"testing"

	ghtml "github.com/yuin/goldmark/renderer/html"
)

// unescape skips goldmark's writer for text with nothing to resolve; the
// result is the same as going through it.
func TestUnescapeFastPathSameAsGoldmark(t *testing.T) {
	slow := func(v []byte) string {
		var buf bytes.Buffer
		bw := bufio.NewWriter(&buf)
		ghtml.DefaultWriter.Write(bw, v)
		bw.Flush()
		return html.UnescapeString(buf.String())
	}
	for _, s := range []string{
		"", "plain words", `a < b > c "quoted" 'single'`, "ünïcödé ⚓ 🎉", "tabs\tand\nlines",
		"*stars* _under_ `ticks` [brackets] (parens) #hash", "<script>alert(1)</script>", "a;b=c%20d",
		// these take the full path
		`\*not emphasis\*`, "&amp; &lt; &#39; &copy; &bogus;", "nul\x00byte", `back\slash`,
	} {
		if got, want := unescape([]byte(s)), slow([]byte(s)); got != want {
			t.Errorf("unescape(%q) = %q, goldmark gives %q", s, got, want)
		}
	}
}
