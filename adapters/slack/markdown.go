// Package slack is firstmate's Slack adapter.
//
// markdown.go turns the model's Markdown into Slack's mrkdwn through a real
// Markdown parser (goldmark); mention.go keeps text from the model and from
// tools from pinging people. surface.go shows a turn (with Block Kit
// buttons for approvals and the policy screen), interact.go takes the
// clicks and modal submissions of both transports, modal.go is the tools
// modal, admin.go says who is a workspace admin.
package slack

import (
	"html"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/firstmate/firstmate/adapters"
	"github.com/yuin/goldmark/ast"
)

// RenderMrkdwn converts Markdown to Slack mrkdwn, for a message's text field
// and for section blocks: **bold** → *bold*, _italic_, ~~strike~~ → ~strike~,
// code spans and fences (without the language), links → <url|text>,
// headings → a bold line, lists → "• item" and "1. item" indented by depth,
// quotes → "> ", tables → a preformatted block, images → <url|alt>.
//
// Text is escaped (&amp; &lt; &gt;) everywhere, code included, so nothing
// the model writes becomes a Slack control sequence: the only ones in the
// output are links, built from http, https and mailto URLs alone. Mentions
// and broadcasts (<!channel>, <@U…>) show as typed, and plain @here,
// @channel, @everyone are broken up (see [Neutralize]). Any input renders;
// none panics.
func RenderMrkdwn(md string) string {
	r := &mrkdwnRenderer{src: []byte(md)}
	l := &adapters.MarkdownLayout{Src: r.src, Style: r}
	return neutralizePlain(l.Render())
}

// mrkdwnRenderer is the Slack side of [adapters.MarkdownLayout] and
// [adapters.WalkInlines].
type mrkdwnRenderer struct {
	src []byte
	// Active inline styles, by adapters.Emphasis: markers are not repeated
	// inside themselves (Slack does not nest *bold* in *bold*).
	styles [len(mrkdwnMarkers)]int
	quote  int // blockquote depth: Slack quotes do not nest
	// labelMode renders link labels and table cells: text only, no markers.
	labelMode int
}

var mrkdwnMarkers = [...]string{adapters.Bold: "*", adapters.Italic: "_", adapters.Strike: "~"}

func (r *mrkdwnRenderer) Paragraph(n ast.Node) string { return r.inlines(n) }

// Heading is a bold line: Slack has no headings.
func (r *mrkdwnRenderer) Heading(n *ast.Heading) string {
	outer := r.styles[adapters.Bold]
	r.styles[adapters.Bold]++
	s := r.inlines(n)
	r.styles[adapters.Bold]--
	if strings.TrimSpace(s) == "" {
		return ""
	}
	if outer == 0 {
		var w mrkdwnWriter
		styleLines(&w, s, mrkdwnMarkers[adapters.Bold])
		s = w.b.String()
	}
	return s
}

// CodeBlock is a ``` block, without the language, which Slack does not
// show. Slack has no way to escape ``` in code, so a run of three is broken
// with a zero-width space.
func (r *mrkdwnRenderer) CodeBlock(raw, _ string) []adapters.MarkdownLine {
	body := strings.ReplaceAll(escapeMrkdwn(raw), "```", "``\u200b`")
	out := []adapters.MarkdownLine{{Text: "```", Code: true}}
	for l := range strings.SplitSeq(body, "\n") {
		// Trailing blanks go, in code as on every line of a message.
		out = append(out, adapters.MarkdownLine{Text: strings.TrimRight(l, " \t"), Code: true})
	}
	return append(out, adapters.MarkdownLine{Text: "```", Code: true})
}

func (r *mrkdwnRenderer) Quote(l *adapters.MarkdownLayout, n *ast.Blockquote) []adapters.MarkdownLine {
	// Paragraphs in a quote go without a blank line between them: a
	// line of a lone ">" is not a quote to Slack.
	r.quote++
	lines := l.Blocks(n, false)
	r.quote--
	if r.quote > 0 {
		return lines // already inside a quote
	}
	for i := range lines {
		lines[i].Text = ">" + prefixSpace(lines[i].Text)
	}
	return lines
}

func prefixSpace(s string) string {
	if s == "" {
		return ""
	}
	return " " + s
}

func (r *mrkdwnRenderer) Cell(n ast.Node) string {
	r.labelMode++
	s := r.inlines(n)
	r.labelMode--
	return html.UnescapeString(s)
}

func (r *mrkdwnRenderer) Escape(s string) string { return escapeMrkdwn(s) }

// inlines renders n's inline children.
func (r *mrkdwnRenderer) inlines(n ast.Node) string {
	var w mrkdwnWriter
	adapters.WalkInlines(r.src, r, &w, n)
	return w.b.String()
}

// mrkdwnWriter separates a formatting marker from a letter or digit next
// to it with a zero-width space: Slack only formats *bold* that stands
// apart from the word around it.
type mrkdwnWriter struct {
	b         strings.Builder
	joinAfter int // output length right after a closing marker
}

func (w *mrkdwnWriter) text(s string) {
	if s == "" {
		return
	}
	if w.b.Len() > 0 && w.b.Len() == w.joinAfter {
		if r, _ := utf8.DecodeRuneInString(s); isWordRune(r) {
			w.b.WriteString("\u200b")
		}
	}
	w.b.WriteString(s)
}

func (w *mrkdwnWriter) open(marker string) {
	if last, _ := utf8.DecodeLastRuneInString(w.b.String()); w.b.Len() > 0 && isWordRune(last) {
		w.b.WriteString("\u200b")
	}
	w.b.WriteString(marker)
}

func (w *mrkdwnWriter) close(marker string) {
	w.b.WriteString(marker)
	w.joinAfter = w.b.Len()
}

func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

func (r *mrkdwnRenderer) Text(w *mrkdwnWriter, s string) { w.text(escapeMrkdwn(s)) }

// OneLine: a link's label is one line in Slack, as is a table cell.
func (r *mrkdwnRenderer) OneLine() bool { return r.labelMode > 0 }

func (r *mrkdwnRenderer) CodeSpan(w *mrkdwnWriter, code string) {
	// Slack ends a code span at the next backtick and cannot escape
	// one: such code is shown as plain text rather than cut short.
	if r.labelMode > 0 || strings.Contains(code, "`") {
		w.text(escapeMrkdwn(code))
		return
	}
	w.open("`")
	w.text(escapeMrkdwn(code))
	w.close("`")
}

// Emphasize wraps n's content in the style's marker unless that style is
// already on (Slack does not nest a style in itself).
func (r *mrkdwnRenderer) Emphasize(w *mrkdwnWriter, n ast.Node, e adapters.Emphasis) {
	outer := r.styles[e]
	r.styles[e]++
	inner := r.inlines(n)
	r.styles[e]--
	if outer > 0 || r.labelMode > 0 {
		w.text(inner)
		return
	}
	styleLines(w, inner, mrkdwnMarkers[e])
}

func (r *mrkdwnRenderer) AutoLink(w *mrkdwnWriter, url, label string, email bool) {
	switch {
	case email && !plausibleEmail(label):
		// <!subteam^S1|@team> reads as an e-mail address to CommonMark;
		// it is Slack syntax, shown as text.
		w.text(escapeMrkdwn("<" + label + ">"))
		return
	case !email && strings.Contains(label, "|"):
		// A model that knows it is in Slack writes <url|text>.
		url, label, _ = strings.Cut(label, "|")
		url = adapters.AutoLinkURL(url, false)
	}
	r.emitLink(w, url, escapeMrkdwn(label))
}

// styleLines wraps each line's text in marker, leaving blank lines and the
// spaces around the text outside: Slack formats neither across a line
// break nor text that starts or ends with a space.
func styleLines(w *mrkdwnWriter, inner, marker string) {
	for i, line := range strings.Split(inner, "\n") {
		if i > 0 {
			w.text("\n")
		}
		trimmed := strings.TrimSpace(line)
		if trimmed == "" {
			w.text(line)
			continue
		}
		lead := line[:strings.Index(line, trimmed)]
		w.text(lead)
		w.open(marker)
		w.text(trimmed)
		w.close(marker)
		w.text(line[len(lead)+len(trimmed):])
	}
}

// Link renders a link or an image. Only web and mail links become Slack
// links; anything else (relative paths, javascript:, Slack specials such as
// "!channel") is shown as text.
func (r *mrkdwnRenderer) Link(w *mrkdwnWriter, n ast.Node, dest string) {
	_, image := n.(*ast.Image)
	r.labelMode++
	label := strings.TrimSpace(r.inlines(n))
	r.labelMode--
	if image && r.labelMode > 0 && label != "" {
		w.text(label) // a badge in a link: its alt text is the label
		return
	}
	if !linkableURL(dest) {
		switch {
		case label == "" && dest == "":
		case label == "":
			w.text(escapeMrkdwn(dest))
		case dest == "" || escapeMrkdwn(dest) == label:
			w.text(label)
		default:
			w.text(label + " (" + escapeMrkdwn(dest) + ")")
		}
		return
	}
	r.emitLink(w, dest, label)
}

// emitLink writes <url|label>; label is already escaped. In a link's label
// or a table cell, where Slack makes no links, it writes "label (url)".
func (r *mrkdwnRenderer) emitLink(w *mrkdwnWriter, url, label string) {
	if !linkableURL(url) {
		w.text(label)
		return
	}
	if r.labelMode > 0 {
		switch {
		case label == "" || label == escapeMrkdwn(url):
			w.text(escapeMrkdwn(url))
		default:
			w.text(label + " (" + escapeMrkdwn(url) + ")")
		}
		return
	}
	url = adapters.LowerScheme(url)
	u := linkURL(url)
	if label == "" || label == escapeMrkdwn(url) {
		w.text("<" + u + ">")
		return
	}
	w.text("<" + u + "|" + label + ">")
}

// plausibleEmail: a local part of the characters addresses use.
func plausibleEmail(addr string) bool {
	local, domain, ok := strings.Cut(strings.TrimPrefix(strings.ToLower(addr), "mailto:"), "@")
	if !ok || local == "" || domain == "" {
		return false
	}
	for _, c := range local {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.ContainsRune(".-_+%", c)) {
			return false
		}
	}
	return true
}

// linkableURL: the schemes Slack makes links of, and nothing that could be
// read as a mention or a broadcast.
func linkableURL(url string) bool { return adapters.LinkableURL(url, mrkdwnSchemes) }

var mrkdwnSchemes = []string{"http://", "https://", "mailto:"}

// linkURL makes a URL safe inside <…|…>: | and > would end it early.
func linkURL(url string) string { return linkEscaper.Replace(url) }

var linkEscaper = strings.NewReplacer(
	"&", "&amp;",
	"<", "%3C",
	">", "%3E",
	"|", "%7C",
	"\n", "",
	"\r", "",
	" ", "%20",
)

// escapeMrkdwn is Slack's escaping of text: only &, < and >, which Slack decodes
// again everywhere, code included.
func escapeMrkdwn(s string) string {
	if !strings.ContainsAny(s, "&<>\x00") {
		return s
	}
	return mrkdwnEscaper.Replace(s)
}

var mrkdwnEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", "\x00", "\ufffd")
