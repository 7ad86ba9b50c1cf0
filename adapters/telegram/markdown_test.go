package telegram

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/firstmate/firstmate/internal/testkit/mdtest"
)

// TestRenderHTMLGolden renders testdata/html/*.md and compares with the
// .golden (RenderHTML) and .plain (PlainText) files beside it. Refresh
// with: go test -run Golden -update.
func TestRenderHTMLGolden(t *testing.T) {
	for _, c := range mdtest.Corpus(t, "testdata/html/*.md") {
		t.Run(c.Name, func(t *testing.T) {
			got := RenderHTML(c.Markdown)
			if err := validateTelegramHTML(got); err != nil {
				t.Errorf("invalid Telegram HTML: %v\n%s", err, got)
			}
			plain := PlainText(c.Markdown)
			if !utf8.ValidString(plain) {
				t.Errorf("PlainText is not valid UTF-8: %q", plain)
			}
			for _, limit := range []int{4096, 500} {
				checkSplit(t, c.Markdown, limit)
			}
			mdtest.Golden(t, c.Base+".golden", got)
			mdtest.Golden(t, c.Base+".plain", plain)
		})
	}
}

func TestRenderHTML(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"   \n\n", ""},
		{"plain", "plain"},
		{"**b** __b__", "<b>b</b> <b>b</b>"},
		{"*i* _i_", "<i>i</i> <i>i</i>"},
		{"~~s~~", "<s>s</s>"},
		{"***both***", "<i><b>both</b></i>"},
		{"**a **b** c**", "<b>a b c</b>"},
		{"`c`", "<code>c</code>"},
		{"`a & <b>`", "<code>a &amp; &lt;b&gt;</code>"},
		{"a & b < c > d \"q\"", "a &amp; b &lt; c &gt; d \"q\""},
		{"**run `make` now**", "<b>run </b><code>make</code><b> now</b>"},
		{"**`make`**", "<code>make</code>"},
		{"```go\nx := 1\n```", "<pre><code class=\"language-go\">x := 1</code></pre>"},
		{"```\nx\n```", "<pre>x</pre>"},
		{"```c#\nx\n```", "<pre><code class=\"language-csharp\">x</code></pre>"},
		{"```\"><script>\nx\n```", "<pre>x</pre>"},
		{"```{.python}\nx\n```", "<pre>x</pre>"},
		{"```objective-c++ extra words\nx\n```", "<pre><code class=\"language-objective-c++\">x</code></pre>"},
		{"```\n```", ""},
		{"    indented", "<pre>indented</pre>"},
		{"# H", "<b>H</b>"},
		{"# **H** `c`", "<b>H </b><code>c</code>"},
		{"> q", "<blockquote>q</blockquote>"},
		{"> a\n>\n> > b", "<blockquote>a\n\n│ b</blockquote>"},
		{"- a\n- b", "• a\n• b"},
		{"3. a\n4. b", "3. a\n4. b"},
		{"- a\n  - b", "• a\n    ◦ b"},
		{"- [ ] x\n- [x] y", "• ☐ x\n• ☑ y"},
		{"[t](https://x.io/?a=1&b=2)", `<a href="https://x.io/?a=1&amp;b=2">t</a>`},
		{"[t](HTTPS://x.io)", `<a href="https://x.io">t</a>`},
		{`[t](https://x.io/"onclick="y)`, `<a href="https://x.io/%22onclick=%22y">t</a>`},
		{"[t](tg://user?id=1)", `<a href="tg://user?id=1">t</a>`},
		{"[t](mailto:a@b.c)", `<a href="mailto:a@b.c">t</a>`},
		{"[t](javascript:alert(1))", "t (javascript:alert(1))"},
		{"[t](docs/a.md)", "t (docs/a.md)"},
		{"[](https://x.io)", `<a href="https://x.io">https://x.io</a>`},
		{"[**b** `c`](https://x.io)", `<a href="https://x.io"><b>b</b> c</a>`},
		{"<https://x.io>", `<a href="https://x.io">https://x.io</a>`},
		{"www.x.io", `<a href="http://www.x.io">www.x.io</a>`},
		{"a@b.io", `<a href="mailto:a@b.io">a@b.io</a>`},
		{"![alt](https://x.io/i.png)", `<a href="https://x.io/i.png">alt</a>`},
		{"[![badge](https://x.io/b.svg)](https://x.io)", `<a href="https://x.io">badge</a>`},
		{"<script>alert(1)</script>", "&lt;script&gt;alert(1)&lt;/script&gt;"},
		{"a <b>x</b>", "a &lt;b&gt;x&lt;/b&gt;"},
		{"a<br>b", "a\nb"},
		{"a\nb", "a\nb"},
		{"a  \nb", "a\nb"},
		{"---", "──────────"},
		{"&copy; &amp; &lt;", "© &amp; &lt;"},
		{"a\\*b\\*", "a*b*"},
		{"a\x00b\x01c", "a\ufffdb\ufffdc"},
		{"bad \xff utf8", "bad \ufffd utf8"},
		{"a\r\nb", "a\nb"},
		{"|a|b|\n|-|-|\n|1|22|", "<pre>a | b\n--+---\n1 | 22</pre>"},
	}
	for _, tt := range tests {
		got := RenderHTML(tt.in)
		if got != tt.want {
			t.Errorf("RenderHTML(%q)\n got %q\nwant %q", tt.in, got, tt.want)
		}
		if err := validateTelegramHTML(got); err != nil {
			t.Errorf("RenderHTML(%q) = %q: %v", tt.in, got, err)
		}
	}
}

func TestPlainText(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"**b** *i* ~~s~~ `c`", "b i s c"},
		{"# Title", "Title"},
		{"[t](https://x.io)", "t (https://x.io)"},
		{"[https://x.io](https://x.io)", "https://x.io"},
		{"<https://x.io>", "https://x.io"},
		{"![alt](https://x.io/i.png)", "alt (https://x.io/i.png)"},
		{"a & <b>", "a & <b>"},
		{"```go\nif a < b {}\n```", "if a < b {}"},
		{"> q\n> > r", "│ q\n│\n│ │ r"},
		{"- a\n  ```\n  code\n  ```", "• a\n    code"},
	}
	for _, tt := range tests {
		if got := PlainText(tt.in); got != tt.want {
			t.Errorf("PlainText(%q)\n got %q\nwant %q", tt.in, got, tt.want)
		}
	}
}

func TestVisibleLen(t *testing.T) {
	tests := []struct {
		html string
		text string
		len  int
	}{
		{"", "", 0},
		{"<b>bold</b>", "bold", 4},
		{"a &amp; b &lt;c&gt; &quot;", "a & b <c> \"", 11},
		{"&#65;&#x42;&#x1F600;", "AB😀", 4},
		{"&copy; &bogus; & x", "&copy; &bogus; & x", 18},
		{"&#0; &#x110000;", "&#0; &#x110000;", 15},
		{"&lt", "<", 1},
		{`<a href="https://x.io/?a=1&amp;b=2">link</a>`, "link", 4},
		{`<pre><code class="language-go">x</code></pre>`, "x", 1},
		{"😀 日本", "😀 日本", 5},
		{"👩‍👩‍👧", "👩‍👩‍👧", 8},
		{`<a href="https://x.io/?q=a>b">x</a> y`, "x y", 3},
		{"a < b", "a < b", 5},
	}
	for _, tt := range tests {
		if got := VisibleText(tt.html); got != tt.text {
			t.Errorf("VisibleText(%q) = %q, want %q", tt.html, got, tt.text)
		}
		if got := VisibleLen(tt.html); got != tt.len {
			t.Errorf("VisibleLen(%q) = %d, want %d", tt.html, got, tt.len)
		}
	}
}

func TestSplitHTML(t *testing.T) {
	tests := []struct {
		name  string
		md    string
		limit int
		want  []string
	}{
		{"empty", "", 10, nil},
		{"blank", "  \n ", 10, nil},
		{"fits", "**hello**", 5, []string{"<b>hello</b>"}},
		{"no limit", "hello world", 0, []string{"hello world"}},
		{"markup does not count", "**bold** [link](https://example.com/a/very/long/url)", 13,
			[]string{`<b>bold</b> <a href="https://example.com/a/very/long/url">link</a>`}},
		{"entities count once", "a < b & c", 9, []string{"a &lt; b &amp; c"}},
		{"paragraphs", "one two\n\nthree four\n\nfive", 12,
			[]string{"one two\n\n", "three four\n\n", "five"}},
		{"bold is closed and reopened", "**alpha beta gamma**", 11,
			[]string{"<b>alpha beta </b>", "<b>gamma</b>"}},
		{"code block is closed and reopened", "```go\nline1\nline2\nline3\n```", 12,
			[]string{`<pre><code class="language-go">line1` + "\nline2\n</code></pre>", `<pre><code class="language-go">line3</code></pre>`}},
		{"quote and link across a cut", "> see [the long docs](https://x.io) now", 14,
			[]string{`<blockquote>see <a href="https://x.io">the long </a></blockquote>`, `<blockquote><a href="https://x.io">docs</a> now</blockquote>`}},
		{"emoji count twice", "😀😀😀", 4, []string{"😀😀", "😀"}},
		{"wider than the limit", "😀a", 1, []string{"😀", "a"}},
		{"flag stays whole", "ab🇩🇪", 5, []string{"ab", "🇩🇪"}},
		{"escaped text cut", "<<<<>>>>", 4, []string{"&lt;&lt;&lt;&lt;", "&gt;&gt;&gt;&gt;"}},
		{"closing tags at the cut stay", "**ab** cd", 3, []string{"<b>ab</b> ", "cd"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := SplitHTML(tt.md, tt.limit)
			if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", tt.want) {
				t.Errorf("SplitHTML(%q, %d)\n got %q\nwant %q", tt.md, tt.limit, got, tt.want)
			}
			if tt.limit > 0 {
				checkSplit(t, tt.md, tt.limit)
			}
		})
	}
}

// TestSplitHTMLLongAnswer: a 10,000-character answer becomes a few messages
// under Telegram's limit, cut between paragraphs or lines.
func TestSplitHTMLLongAnswer(t *testing.T) {
	md, err := os.ReadFile("testdata/html/16-long.md")
	if err != nil {
		t.Fatal(err)
	}
	if utf8.RuneCount(md) < 10000 {
		t.Fatalf("the long answer has only %d characters", utf8.RuneCount(md))
	}
	parts := SplitHTML(string(md), 4096)
	if len(parts) < 3 {
		t.Fatalf("%d parts, want at least 3", len(parts))
	}
	for i, p := range parts {
		n := VisibleLen(p)
		if n > 4096 || n < 2048 && i < len(parts)-1 {
			t.Errorf("part %d measures %d", i, n)
		}
		if v := VisibleText(p); i < len(parts)-1 && !strings.HasSuffix(v, "\n") {
			t.Errorf("part %d is not cut at a line break: …%q", i, v[len(v)-20:])
		}
	}
	checkSplit(t, string(md), 4096)
}

func TestRenderHTMLConcurrent(t *testing.T) {
	mdtest.Concurrent(t, RenderHTML, "testdata/html/15-answer.md")
}

// TestValidator makes sure the validator rejects what Telegram rejects or
// mangles, so that its passing means something.
func TestValidator(t *testing.T) {
	good := []string{
		"", "text", "<b>a</b>", "<strong><i>a</i></strong>", `<a href="https://x">a <b>b</b></a>`,
		`<pre><code class="language-go">x</code></pre>`, "<pre>x</pre>", "<blockquote>a <pre>x</pre></blockquote>",
		`<span class="tg-spoiler">s</span>`, "<tg-spoiler>s</tg-spoiler>", "&lt;&gt;&amp;&quot;&#65;&#x1F600;",
		"<blockquote expandable>q</blockquote>", "<u>u</u><ins>i</ins><s>s</s><strike>s</strike><del>d</del><em>e</em>",
	}
	bad := []string{
		"<script>x</script>", "<b>a", "a</b>", "<b><i>a</b></i>", "a < b", "a > b", "a & b", "&copy;", "&#0;",
		"&#xD800;", "&#x110000;", "&lt", "<b>a<b>b</b></b>", "<b>a<strong>b</strong></b>", "<b><code>c</code></b>",
		`<a href="https://x"><code>c</code></a>`, `<a href="https://x"><a href="https://y">y</a></a>`,
		`<a href="javascript:alert(1)">x</a>`, "<a>x</a>", `<a href='https://x'>x</a>`, "<code><b>x</b></code>",
		"<pre>a<code>x</code></pre>", `<pre><code class="language-go">x</code>y</pre>`, `<code class="language-go">x</code>`,
		"<blockquote><blockquote>q</blockquote></blockquote>", "<b><blockquote>q</blockquote></b>", "<b></b>",
		`<span>x</span>`, `<b class="x">x</b>`, "<br>", "<b", "\xff", `<pre><code class="language-a b">x</code></pre>`,
		`<a href="https://x" title="t">x</a>`,
	}
	for _, s := range good {
		if err := validateTelegramHTML(s); err != nil {
			t.Errorf("validateTelegramHTML(%q) = %v, want nil", s, err)
		}
	}
	for _, s := range bad {
		if err := validateTelegramHTML(s); err == nil {
			t.Errorf("validateTelegramHTML(%q) accepted it", s)
		}
	}
}

// validateTelegramHTML is a strict reading of the Bot API's HTML rules,
// kept apart from the package's own scanner so that a bug there does not
// hide here. It accepts only the tags Telegram knows, with only their
// attributes, double-quoted; balanced and properly nested; nested only
// where the Bot API allows (nothing inside code or pre but one code in a
// pre for the language; code and pre only at the top or in a quote; no
// link in a link; no quote in anything; no style inside the same style);
// no empty element; only the entities Telegram decodes; no bare &, < or >;
// valid UTF-8.
func validateTelegramHTML(s string) error {
	if !utf8.ValidString(s) {
		return errors.New("invalid UTF-8")
	}
	type element struct {
		name, group string
		content     bool // text or a child so far
		codeDone    bool // a <pre> whose <code> has closed: only </pre> may follow
		visible     bool
	}
	var stack []element
	groups := map[string]string{
		"b": "bold", "strong": "bold", "i": "italic", "em": "italic", "u": "underline", "ins": "underline",
		"s": "strike", "strike": "strike", "del": "strike", "span": "spoiler", "tg-spoiler": "spoiler",
		"a": "a", "code": "code", "pre": "pre", "blockquote": "blockquote",
	}
	addText := func(at int) error {
		if n := len(stack); n > 0 {
			if stack[n-1].codeDone {
				return fmt.Errorf("text after the code in a pre at %d", at)
			}
			stack[n-1].content = true
		}
		for i := range stack {
			stack[i].visible = true
		}
		return nil
	}
	for i := 0; i < len(s); {
		switch s[i] {
		case '>':
			return fmt.Errorf("bare > at %d", i)
		case '&':
			n, err := telegramEntity(s[i:])
			if err != nil {
				return fmt.Errorf("at %d: %w", i, err)
			}
			if err := addText(i); err != nil {
				return err
			}
			i += n
			continue
		case '<':
		default:
			if err := addText(i); err != nil {
				return err
			}
			i++
			continue
		}
		j := strings.IndexAny(s[i+1:], "<>")
		if j < 0 || s[i+1+j] != '>' {
			return fmt.Errorf("unclosed tag at %d", i)
		}
		tag := s[i+1 : i+1+j]
		at := i
		i += j + 2
		if name, ok := strings.CutPrefix(tag, "/"); ok {
			if len(stack) == 0 || stack[len(stack)-1].name != name {
				return fmt.Errorf("unexpected </%s> at %d", name, at)
			}
			e := stack[len(stack)-1]
			if !e.visible {
				return fmt.Errorf("empty <%s> at %d", name, at)
			}
			stack = stack[:len(stack)-1]
			if n := len(stack); n > 0 && name == "code" && stack[n-1].name == "pre" {
				stack[n-1].codeDone = true
			}
			continue
		}
		name, attrs, _ := strings.Cut(tag, " ")
		group, ok := groups[name]
		if !ok {
			return fmt.Errorf("tag <%s> at %d is not one Telegram knows", name, at)
		}
		if err := checkHTMLAttrs(name, attrs); err != nil {
			return fmt.Errorf("<%s> at %d: %w", tag, at, err)
		}
		var parent *element
		if len(stack) > 0 {
			parent = &stack[len(stack)-1]
			if parent.codeDone {
				return fmt.Errorf("<%s> after the code in a pre at %d", name, at)
			}
		}
		for _, e := range stack {
			switch {
			case e.name == "code" || e.name == "pre":
				if !(name == "code" && parent.name == "pre" && !parent.content) {
					return fmt.Errorf("<%s> inside <%s> at %d", name, e.name, at)
				}
			case (name == "code" || name == "pre") && e.name != "blockquote":
				return fmt.Errorf("<%s> inside <%s> at %d", name, e.name, at)
			case name == "blockquote":
				return fmt.Errorf("<blockquote> inside <%s> at %d", e.name, at)
			case e.group == group:
				return fmt.Errorf("<%s> inside <%s> at %d", name, e.name, at)
			}
		}
		if strings.Contains(attrs, "class=") && name == "code" && (parent == nil || parent.name != "pre") {
			return fmt.Errorf("a language outside a pre at %d", at)
		}
		if parent != nil {
			parent.content = true
		}
		stack = append(stack, element{name: name, group: group})
	}
	if len(stack) > 0 {
		return fmt.Errorf("<%s> not closed", stack[len(stack)-1].name)
	}
	return nil
}

func checkHTMLAttrs(name, attrs string) error {
	type attr struct{ key, value string }
	var list []attr
	for rest := attrs; rest != ""; {
		if name == "blockquote" && rest == "expandable" {
			list = append(list, attr{key: "expandable"})
			break
		}
		key, after, ok := strings.Cut(rest, `="`)
		if !ok || key == "" || strings.ContainsAny(key, ` "'<&`) {
			return fmt.Errorf("malformed attributes %q", attrs)
		}
		value, next, ok := strings.Cut(after, `"`)
		if !ok {
			return fmt.Errorf("unterminated attribute %q", attrs)
		}
		for i := 0; i < len(value); i++ {
			switch value[i] {
			case '<', '>':
				return fmt.Errorf("bare %c in an attribute", value[i])
			case '&':
				if _, err := telegramEntity(value[i:]); err != nil {
					return err
				}
			}
		}
		list = append(list, attr{key, value})
		if next != "" && !strings.HasPrefix(next, " ") {
			return fmt.Errorf("malformed attributes %q", attrs)
		}
		rest = strings.TrimPrefix(next, " ")
	}
	switch name {
	case "a":
		if len(list) != 1 || list[0].key != "href" {
			return fmt.Errorf("a link needs exactly an href, got %q", attrs)
		}
		href := VisibleText(list[0].value)
		ok := false
		for _, scheme := range []string{"http://", "https://", "mailto:", "tg://"} {
			ok = ok || strings.HasPrefix(href, scheme) && len(href) > len(scheme)
		}
		if !ok || strings.ContainsAny(href, " \n") {
			return fmt.Errorf("href %q", href)
		}
	case "code":
		if len(list) == 0 {
			return nil
		}
		lang, ok := strings.CutPrefix(list[0].value, "language-")
		if len(list) != 1 || list[0].key != "class" || !ok || lang == "" ||
			strings.TrimFunc(lang, func(r rune) bool {
				return r < utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' || r == '+' || r == '-')
			}) != "" {
			return fmt.Errorf("code attributes %q", attrs)
		}
	case "span":
		if len(list) != 1 || list[0] != (attr{"class", "tg-spoiler"}) {
			return fmt.Errorf("span attributes %q", attrs)
		}
	case "blockquote":
		if len(list) > 1 || len(list) == 1 && list[0].key != "expandable" {
			return fmt.Errorf("blockquote attributes %q", attrs)
		}
	default:
		if len(list) > 0 {
			return fmt.Errorf("no attributes allowed, got %q", attrs)
		}
	}
	return nil
}

// telegramEntity is the length of the entity at the start of s, with its
// semicolon, if Telegram decodes it to a valid character.
func telegramEntity(s string) (int, error) {
	for _, named := range []string{"&lt;", "&gt;", "&amp;", "&quot;"} {
		if strings.HasPrefix(s, named) {
			return len(named), nil
		}
	}
	end := strings.IndexByte(s, ';')
	if !strings.HasPrefix(s, "&#") || end < 3 || end >= 10 {
		return 0, fmt.Errorf("bare & or unknown entity %q", clipHTML(s))
	}
	digits, base := s[2:end], 10
	if d, ok := strings.CutPrefix(digits, "x"); ok {
		digits, base = d, 16
	}
	var v int
	for _, c := range digits {
		d := strings.IndexRune("0123456789abcdef", unicode.ToLower(c))
		if d < 0 || d >= base {
			return 0, fmt.Errorf("bad numeric entity %q", clipHTML(s))
		}
		v = v*base + d
	}
	if digits == "" || v == 0 || v >= 0x10ffff || v >= 0xd800 && v <= 0xdfff {
		return 0, fmt.Errorf("numeric entity out of range %q", clipHTML(s))
	}
	return end + 1, nil
}

func clipHTML(s string) string {
	if len(s) > 20 {
		return s[:20] + "…"
	}
	return s
}

// checkSplit checks SplitHTML(md, limit) against RenderHTML(md): every part
// valid and within the limit (unless it is one character wider than the
// limit), no blank part, and the parts' visible texts, read in order, are
// the whole's visible text but for whitespace at the cuts.
func checkSplit(t *testing.T, md string, limit int) {
	t.Helper()
	whole := RenderHTML(md)
	parts := SplitHTML(md, limit)
	all := VisibleText(whole)
	if strings.TrimSpace(all) == "" {
		if len(parts) != 0 {
			t.Errorf("limit %d: %d parts of a blank answer", limit, len(parts))
		}
		return
	}
	if VisibleLen(whole) <= limit && (len(parts) != 1 || parts[0] != whole) {
		t.Errorf("limit %d: the whole fits, but it was split: %q", limit, parts)
	}
	rest := all
	for i, p := range parts {
		if err := validateTelegramHTML(p); err != nil {
			t.Errorf("limit %d, part %d: %v\n%q", limit, i, err, p)
		}
		v := VisibleText(p)
		if n := VisibleLen(p); n > limit && utf8.RuneCountInString(v) > 1 {
			t.Errorf("limit %d, part %d measures %d: %q", limit, i, n, p)
		}
		trimmed := strings.TrimSpace(v)
		if trimmed == "" {
			t.Errorf("limit %d, part %d is blank: %q", limit, i, p)
		}
		rest = strings.TrimLeftFunc(rest, unicode.IsSpace)
		if !strings.HasPrefix(rest, trimmed) {
			t.Errorf("limit %d, part %d does not continue the text:\npart %q\nrest %q", limit, i, clipHTML(trimmed), clipHTML(rest))
			return
		}
		rest = rest[len(trimmed):]
	}
	if strings.TrimSpace(rest) != "" {
		t.Errorf("limit %d: text lost after the last part: %q", limit, clipHTML(rest))
	}
}

// TestRenderHTMLRandom checks the rendering and the split of Markdown
// strung together from the pieces that make trouble, quickly and the same
// every run; the fuzz targets go further.
func TestRenderHTMLRandom(t *testing.T) {
	pieces := []string{"**", "*", "_", "__", "~~", "`", "```", "```go\n", "~~~", "\n", "\n\n", "> ", ">", "- ", "1. ",
		"  ", "    ", "[", "]", "(", ")", "](https://x.io/a)", "](javascript:x)", "<", ">", "&", "&amp;", "&#x1F600;",
		"<b>", "</b>", "<br>", "<script>", "![", "|", "|-|", "\\", "😀", "👩‍👩‍👧", "🇩🇪", "e\u0301", "日本", "word", " ",
		"#", "# ", "---", "[ ] ", "[x] ", "www.x.io", "a@b.io", "<https://y.io>", "\t", "\x00", "\xff", "\r\n", "\u202e",
		"tg://user?id=1", "\"", "'"}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 1500 {
		var b strings.Builder
		for range rng.IntN(80) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		md := b.String()
		if out := RenderHTML(md); validateTelegramHTML(out) != nil {
			t.Fatalf("RenderHTML(%q) = %q: %v", md, out, validateTelegramHTML(out))
		}
		for _, limit := range []int{2, 17, 100} {
			if checkSplit(t, md, limit); t.Failed() {
				t.Fatalf("SplitHTML(%q, %d)", md, limit)
			}
		}
	}
}

func htmlFuzzSeeds(f *testing.F) {
	for _, c := range mdtest.Corpus(f, "testdata/html/*.md") {
		if len(c.Markdown) < 4000 {
			f.Add(c.Markdown)
		}
	}
	for _, s := range []string{
		"**a `b` c**", "[`x`](https://y)", "> > a\n> ```go\n> x\n> ```", "- > ```\n  > a\n  > ```",
		"<script>alert(1)</script>", "[x](javascript:alert(1))", "&#xD800; &#0; &bogus;", "```\n", "***a**b*",
		"|a|\n|-|\n|`b`|", "![a](<https://x\" onclick=\"y>)", "😀\u200d😀🇩🇪e\u0301", "\x00\xff\r\n",
		"# `c`\n\n## **b**", "[![a](https://x)](https://y)", "a\\\nb<br>c", "~~~ \"><b>\nx\n~~~",
	} {
		f.Add(s)
	}
}

func FuzzRenderHTML(f *testing.F) {
	htmlFuzzSeeds(f)
	f.Fuzz(func(t *testing.T, md string) {
		out := RenderHTML(md)
		if err := validateTelegramHTML(out); err != nil {
			t.Errorf("invalid Telegram HTML: %v\n%q", err, out)
		}
		if plain := PlainText(md); !utf8.ValidString(plain) {
			t.Errorf("PlainText is not valid UTF-8: %q", plain)
		}
	})
}

func FuzzSplitHTML(f *testing.F) {
	htmlFuzzSeeds(f)
	f.Fuzz(func(t *testing.T, md string) {
		for _, limit := range []int{2, 3, 7, 40, 300, 4096} {
			checkSplit(t, md, limit)
		}
	})
}
