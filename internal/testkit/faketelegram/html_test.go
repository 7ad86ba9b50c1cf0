package faketelegram

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseHTML(t *testing.T) {
	ent := func(typ string, off, n int) MessageEntity { return MessageEntity{Type: typ, Offset: off, Length: n} }
	for _, c := range []struct {
		in, text string
		ents     []MessageEntity
	}{
		{"plain", "plain", nil},
		{"<b>bold</b> text", "bold text", []MessageEntity{ent("bold", 0, 4)}},
		{"<B>upper</B>", "upper", []MessageEntity{ent("bold", 0, 5)}},
		{"<strong>a</strong><em>b</em><ins>c</ins><del>d</del><s>e</s><strike>f</strike><i>g</i><u>h</u>", "abcdefgh", []MessageEntity{
			ent("bold", 0, 1), ent("italic", 1, 1), ent("underline", 2, 1), ent("strikethrough", 3, 1),
			ent("strikethrough", 4, 1), ent("strikethrough", 5, 1), ent("italic", 6, 1), ent("underline", 7, 1),
		}},
		{"<b>bold <i>both</i></b>", "bold both", []MessageEntity{ent("bold", 0, 9), ent("italic", 5, 4)}},
		{`<a href="https://example.com/?a=1&amp;b=2">link</a>`, "link", []MessageEntity{
			{Type: "text_link", Offset: 0, Length: 4, URL: "https://example.com/?a=1&b=2"},
		}},
		{`<a href='https://x.y/'>single</a>`, "single", []MessageEntity{{Type: "text_link", Length: 6, URL: "https://x.y/"}}},
		{`<a>https://x.y</a>`, "https://x.y", []MessageEntity{{Type: "text_link", Length: 11, URL: "https://x.y"}}},
		{`<pre><code class="language-go">x := 1</code></pre>`, "x := 1", []MessageEntity{{Type: "pre", Length: 6, Language: "go"}}},
		{`<pre>raw</pre> and <code>inline</code>`, "raw and inline", []MessageEntity{ent("pre", 0, 3), ent("code", 8, 6)}},
		{`<span class="tg-spoiler">s</span><tg-spoiler>t</tg-spoiler>`, "st", []MessageEntity{ent("spoiler", 0, 1), ent("spoiler", 1, 1)}},
		{`<span class=tg-spoiler>u</span>`, "u", []MessageEntity{ent("spoiler", 0, 1)}},
		{"<blockquote>q</blockquote><blockquote expandable>e</blockquote>", "qe", []MessageEntity{
			ent("blockquote", 0, 1), ent("expandable_blockquote", 1, 1),
		}},
		{`<tg-emoji emoji-id="5368324170671202286">👍</tg-emoji>`, "👍", []MessageEntity{
			{Type: "custom_emoji", Length: 2, CustomEmojiID: "5368324170671202286"},
		}},
		{`<b title="ignored">x</b>`, "x", []MessageEntity{ent("bold", 0, 1)}},
		{"a &lt; b &amp;&amp; c &gt; d &quot;e&quot; &#128512; &#x1F600;", `a < b && c > d "e" 😀 😀`, nil},
		{"AT&T &nbsp; &unknown; &#0; &#xD800; &", "AT&T &nbsp; &unknown; &#0; &#xD800; &", nil},
		{"a > b", "a > b", nil},
		{"😀<b>x</b>", "😀x", []MessageEntity{ent("bold", 2, 1)}},
		{"  <b> hi </b>  ", "hi", []MessageEntity{ent("bold", 0, 2)}},
		{"<b></b>empty entity dropped", "empty entity dropped", nil},
		{"<b>x</b >", "x", []MessageEntity{ent("bold", 0, 1)}},
	} {
		text, ents, err := parseHTML(c.in)
		if err != nil {
			t.Errorf("parseHTML(%q): %v", c.in, err)
			continue
		}
		if text != c.text || !reflect.DeepEqual(ents, c.ents) && (len(ents) > 0 || len(c.ents) > 0) {
			t.Errorf("parseHTML(%q) = %q %+v, want %q %+v", c.in, text, ents, c.text, c.ents)
		}
	}
}

func TestParseHTMLErrors(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"<x>y</x>", `Unsupported start tag "x" at byte offset 0`},
		{"<script>alert(1)</script>", `Unsupported start tag "script" at byte offset 0`},
		{"é<x>", `Unsupported start tag "x" at byte offset 2`},
		{"a < b", `Unsupported start tag "" at byte offset 2`},
		{"<br/>", `Unsupported start tag "br/" at byte offset 0`},
		{"<b>x", `Can't find end tag corresponding to start tag "b"`},
		{"<b><i>x</i>", `Can't find end tag corresponding to start tag "b"`},
		{"x</b>", "Unexpected end tag at byte offset 1"},
		{"<b><i>x</b></i>", `Unmatched end tag at byte offset 7, expected "</i>", found "</b>"`},
		{"<b", "Unclosed start tag at byte offset 0"},
		{"<b>x</b", "Unclosed end tag at byte offset 4"},
		{`<a href="x>t</a>`, `Unclosed start tag "a" at byte offset 0`},
		{`<a href=https://x.y>t</a>`, "Unexpected end of name token at byte offset 13"},
		{`<b =x>y</b>`, `Empty attribute name in the tag "b" at byte offset 0`},
		{"<span>x</span>", `Tag "span" must have class "tg-spoiler" at byte offset 0`},
		{`<span class="bold">x</span>`, `Tag "span" must have class "tg-spoiler" at byte offset 0`},
		{`<tg-emoji emoji-id="abc">x</tg-emoji>`, "Invalid custom emoji identifier specified"},
	} {
		_, _, err := parseHTML(c.in)
		if err == nil || err.Error() != c.want {
			t.Errorf("parseHTML(%q) error = %v, want %q", c.in, err, c.want)
		}
	}
}

func TestDetectEntities(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []MessageEntity
	}{
		{"hello", nil},
		{"/start", []MessageEntity{{Type: "bot_command", Length: 6}}},
		{"/status@firstmate_bot now", []MessageEntity{{Type: "bot_command", Length: 21}}},
		{"👋 hey @firstmate_bot, look", []MessageEntity{{Type: "mention", Offset: 7, Length: 14}}},
		{"mail a@b.c or @abc", nil}, // too short to be a username
		{"see https://example.com/x.", []MessageEntity{{Type: "url", Offset: 4, Length: 21}}},
		{"a/b is no command", nil},
	} {
		if got := detectEntities(c.in); !reflect.DeepEqual(got, c.want) {
			t.Errorf("detectEntities(%q) = %+v, want %+v", c.in, got, c.want)
		}
	}
}

func TestUTF16Count(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int
	}{
		{"", 0}, {"abc", 3}, {"é", 1}, {"😀", 2}, {"👍🏽", 4}, {strings.Repeat("😀", 2048), 4096},
	} {
		if got := utf16Count(c.in); got != c.want {
			t.Errorf("utf16Count(%q) = %d, want %d", c.in, got, c.want)
		}
	}
}

func FuzzParseHTML(f *testing.F) {
	for _, s := range []string{"<b>x</b>", "<a href=\"u\">l</a>", "&lt;&#128512;", "<pre><code class=\"language-go\">x</code></pre>", "<b><i>x</b>"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		text, ents, err := parseHTML(in)
		if err != nil {
			return
		}
		n := utf16Count(text)
		for _, e := range ents {
			if e.Offset < 0 || e.Length <= 0 || e.Offset+e.Length > n {
				t.Fatalf("parseHTML(%q): entity %+v outside %d code units of %q", in, e, n, text)
			}
		}
	})
}
