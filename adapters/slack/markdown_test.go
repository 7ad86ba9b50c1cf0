package slack

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/firstmate/firstmate/internal/testkit/mdtest"
)

func TestRenderMrkdwn(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"plain", "plain"},
		{"**b**", "*b*"},
		{"__b__", "*b*"},
		{"*i*", "_i_"},
		{"~~s~~", "~s~"},
		{"`c`", "`c`"},
		{"a & b < c > d", "a &amp; b &lt; c &gt; d"},
		{"`a & <b>`", "`a &amp; &lt;b&gt;`"},
		{"[t](https://x.io/?a=1&b=2)", "<https://x.io/?a=1&amp;b=2|t>"},
		{"[t](https://x.io/a|b>c)", "<https://x.io/a%7Cb%3Ec|t>"},
		{"[a > b](https://x.io)", "<https://x.io|a &gt; b>"},
		{"<https://x.io>", "<https://x.io>"},
		{"[t](!channel)", "t (!channel)"},
		{"[t](@U123)", "t (@U123)"},
		{"[t](javascript:alert(1))", "t (javascript:alert(1))"},
		{"![alt](https://x.io/i.png)", "<https://x.io/i.png|alt>"},
		{"# H", "*H*"},
		{"# **H**", "*H*"},
		{"- a\n- b", "• a\n• b"},
		{"3. a\n4. b", "3. a\n4. b"},
		{"- a\n  - b", "• a\n    ◦ b"},
		{"> q", "> q"},
		{"```go\nx := 1\n```", "```\nx := 1\n```"},
		{"```\n```\n", ""},
		{"foo**bar**baz", "foo\u200b*bar*\u200bbaz"},
		{"**a\nb**", "*a*\n*b*"},
		{"<!channel> @here", "&lt;!channel&gt; @\u200bhere"},
		{"<@U1>", "&lt;@U1&gt;"},
		{"a\\*b\\*", "a*b*"},
		{"&copy; &amp;", "© &amp;"},
		{"a<br>b", "a\nb"},
		{"|a|b|\n|-|-|\n|1|22|", "```\na | b\n--+---\n1 | 22\n```"},
		{"|a|\n|-|\n| |", "```\na\n-\n```"}, // a blank last row shows nothing
	}
	for _, tt := range tests {
		if got := RenderMrkdwn(tt.in); got != tt.want {
			t.Errorf("RenderMrkdwn(%q)\n got %q\nwant %q", tt.in, got, tt.want)
		}
	}
}

// TestRenderMrkdwnGolden renders testdata/mrkdwn/*.md and compares with
// the .golden file beside it. Refresh with: go test -run Golden -update.
func TestRenderMrkdwnGolden(t *testing.T) {
	for _, c := range mdtest.Corpus(t, "testdata/mrkdwn/*.md") {
		t.Run(c.Name, func(t *testing.T) {
			got := RenderMrkdwn(c.Markdown)
			checkMrkdwn(t, c.Markdown, got)
			mdtest.Golden(t, c.Base+".golden", got)
		})
	}
}

func TestRenderMrkdwnConcurrent(t *testing.T) {
	mdtest.Concurrent(t, RenderMrkdwn, "testdata/mrkdwn/16-answer.md")
}

// checkMrkdwn checks what every rendering must be: no Slack control
// sequence but links to web and mail addresses, no broadcast left whole,
// valid UTF-8 for valid input, and stable under Neutralize.
func checkMrkdwn(t *testing.T, md, out string) {
	t.Helper()
	if utf8.ValidString(md) && !utf8.ValidString(out) {
		t.Errorf("invalid UTF-8 out of valid input: %q", out)
	}
	for i := 0; i < len(out); i++ {
		if out[i] == '>' || out[i] != '<' {
			continue
		}
		rest := out[i+1:]
		if !strings.HasPrefix(rest, "http://") && !strings.HasPrefix(rest, "https://") && !strings.HasPrefix(rest, "mailto:") {
			t.Errorf("control sequence that is not a link at %d: %q", i, clip(rest))
			continue
		}
		end := strings.IndexByte(rest, '>')
		if end < 0 {
			t.Errorf("link not closed: %q", clip(rest))
			continue
		}
		if tok := rest[:end]; strings.ContainsAny(tok, "<\n") {
			t.Errorf("link with < or a line break: %q", tok)
		}
		i += end
	}
	if got := Neutralize(out, nil); got != out {
		t.Errorf("Neutralize changed the rendering:\n%q\n%q", out, got)
	}
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

func FuzzRenderMrkdwn(f *testing.F) {
	for _, c := range mdtest.Corpus(f, "testdata/mrkdwn/*.md") {
		f.Add(c.Markdown)
	}
	for _, s := range []string{
		"<!channel>", "[x](<!here>)", "<@U1>", "**a**b", "```\n", "> ```\n> a", "|a|\n|-|\n|<@U1>|",
		"[![a](https://x)](https://y)", "*`a`*", "<https://a|<!here>>", "&lt;!channel&gt;", "\x00**\x00**",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, md string) {
		checkMrkdwn(t, md, RenderMrkdwn(md))
	})
}
