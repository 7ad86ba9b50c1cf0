// Package slack is firstmate's Slack adapter.
//
// markdown.go turns the model's Markdown into Slack's mrkdwn through a real
// Markdown parser (goldmark); mention.go keeps text from the model and from
// tools from pinging people.
package slack

import (
	"bufio"
	"bytes"
	"html"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/firstmate/firstmate/adapters"
	"github.com/yuin/goldmark/ast"
	east "github.com/yuin/goldmark/extension/ast"
	ghtml "github.com/yuin/goldmark/renderer/html"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
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
	src := []byte(md)
	doc := adapters.MarkdownParser().Parser().Parse(text.NewReader(src))
	r := &mrkdwnRenderer{src: src}
	lines := r.blocks(doc, "\n")
	var b strings.Builder
	for i, l := range lines {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(strings.TrimRight(l.text, " \t"))
	}
	out := strings.Trim(b.String(), "\n")
	return neutralizePlain(out)
}

// mrkdwnLine is one line of rendered output. Lines of code blocks keep their
// indentation inside lists, so code stays as written.
type mrkdwnLine struct {
	text string
	code bool
}

type mrkdwnRenderer struct {
	src []byte
	// Active inline styles: markers are not repeated inside themselves
	// (Slack does not nest *bold* in *bold*).
	bold, italic, strike int
	quote                int // blockquote depth: Slack quotes do not nest
	// labelMode renders link labels and table cells: text only, no markers.
	labelMode int
}

// blocks renders n's block children, separated by sep lines ("\n" for a
// blank line between them, "" for none).
func (r *mrkdwnRenderer) blocks(n ast.Node, sep string) []mrkdwnLine {
	var out []mrkdwnLine
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		lines := r.block(c)
		if len(lines) == 0 {
			continue
		}
		if len(out) > 0 && sep != "" {
			out = append(out, mrkdwnLine{})
		}
		out = append(out, lines...)
	}
	return out
}

func (r *mrkdwnRenderer) block(n ast.Node) []mrkdwnLine {
	switch n := n.(type) {
	case *ast.Paragraph, *ast.TextBlock:
		return mrkdwnText(r.inlines(n))
	case *ast.Heading:
		outer := r.bold
		r.bold++
		s := r.inlines(n)
		r.bold--
		if strings.TrimSpace(s) == "" {
			return nil
		}
		if outer == 0 {
			var w mrkdwnWriter
			styleLines(&w, s, "*")
			s = w.b.String()
		}
		return mrkdwnText(s)
	case *ast.ThematicBreak:
		return []mrkdwnLine{{text: "──────────"}}
	case *ast.CodeBlock, *ast.FencedCodeBlock:
		var b strings.Builder
		lines := n.Lines()
		for i := range lines.Len() {
			seg := lines.At(i)
			b.Write(seg.Value(r.src))
		}
		return mrkdwnCode(b.String())
	case *ast.HTMLBlock:
		// Shown as written: raw HTML means nothing in Slack.
		var b strings.Builder
		lines := n.Lines()
		for i := range lines.Len() {
			seg := lines.At(i)
			b.Write(seg.Value(r.src))
		}
		if n.HasClosure() {
			b.Write(n.ClosureLine.Value(r.src))
		}
		return mrkdwnText(escapeMrkdwn(strings.TrimRight(b.String(), "\n")))
	case *ast.Blockquote:
		// Paragraphs in a quote go without a blank line between them: a
		// line of a lone ">" is not a quote to Slack.
		r.quote++
		lines := r.blocks(n, "")
		r.quote--
		if r.quote > 0 {
			return lines // already inside a quote
		}
		for i := range lines {
			lines[i].text = ">" + prefixSpace(lines[i].text)
		}
		return lines
	case *ast.List:
		return r.list(n)
	case *east.Table:
		return r.table(n)
	case *ast.LinkReferenceDefinition:
		return nil
	}
	if c := n.FirstChild(); c != nil && c.Type() == ast.TypeInline {
		return mrkdwnText(r.inlines(n))
	}
	return r.blocks(n, "\n")
}

func prefixSpace(s string) string {
	if s == "" {
		return ""
	}
	return " " + s
}

var listBullets = []string{"•", "◦", "▪"}

// listIndent indents what belongs to an item below its first line.
const listIndent = "    "

func (r *mrkdwnRenderer) list(n *ast.List) []mrkdwnLine {
	depth := 0
	for p := n.Parent(); p != nil; p = p.Parent() {
		if _, ok := p.(*ast.List); ok {
			depth++
		}
	}
	var out []mrkdwnLine
	num := n.Start
	for item := n.FirstChild(); item != nil; item = item.NextSibling() {
		marker := listBullets[depth%len(listBullets)]
		if n.IsOrdered() {
			marker = strconv.Itoa(num) + "."
			num++
		}
		lines := r.blocks(item, "")
		if len(lines) == 0 || lines[0].code {
			lines = append([]mrkdwnLine{{}}, lines...)
		}
		lines[0].text = marker + prefixSpace(lines[0].text)
		for i := 1; i < len(lines); i++ {
			if !lines[i].code && lines[i].text != "" {
				lines[i].text = listIndent + lines[i].text
			}
		}
		out = append(out, lines...)
	}
	return out
}

func (r *mrkdwnRenderer) table(n *east.Table) []mrkdwnLine {
	var rows [][]string
	for row := n.FirstChild(); row != nil; row = row.NextSibling() {
		var cells []string
		for cell := row.FirstChild(); cell != nil; cell = cell.NextSibling() {
			r.labelMode++
			s := r.inlines(cell)
			r.labelMode--
			cells = append(cells, html.UnescapeString(s))
		}
		rows = append(rows, cells)
	}
	cols := len(n.Alignments)
	for _, row := range rows {
		cols = max(cols, len(row))
	}
	width := make([]int, cols)
	for _, row := range rows {
		for i, c := range row {
			width[i] = max(width[i], utf8.RuneCountInString(c))
		}
	}
	var b strings.Builder
	for ri, row := range rows {
		for i := range cols {
			c := ""
			if i < len(row) {
				c = row[i]
			}
			align := east.AlignLeft
			if i < len(n.Alignments) {
				align = n.Alignments[i]
			}
			if i > 0 {
				b.WriteString(" | ")
			}
			b.WriteString(adapters.PadCell(c, width[i], align))
		}
		b.WriteByte('\n')
		if ri == 0 {
			for i := range cols {
				if i > 0 {
					b.WriteString("-+-")
				}
				b.WriteString(strings.Repeat("-", width[i]))
			}
			b.WriteByte('\n')
		}
	}
	return mrkdwnCode(b.String())
}

// mrkdwnCode is a ``` block of raw text. Slack has no way to escape ``` in
// code, so a run of three is broken with a zero-width space.
func mrkdwnCode(raw string) []mrkdwnLine {
	raw = strings.TrimRight(raw, "\n")
	if strings.TrimSpace(raw) == "" {
		return nil
	}
	body := strings.ReplaceAll(escapeMrkdwn(raw), "```", "``\u200b`")
	out := []mrkdwnLine{{text: "```", code: true}}
	for l := range strings.SplitSeq(body, "\n") {
		out = append(out, mrkdwnLine{text: l, code: true})
	}
	return append(out, mrkdwnLine{text: "```", code: true})
}

func mrkdwnText(s string) []mrkdwnLine {
	if s == "" {
		return nil
	}
	var out []mrkdwnLine
	for l := range strings.SplitSeq(s, "\n") {
		out = append(out, mrkdwnLine{text: l})
	}
	return out
}

// inlines renders n's inline children.
func (r *mrkdwnRenderer) inlines(n ast.Node) string {
	var w mrkdwnWriter
	r.inlineChildren(&w, n)
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

func (r *mrkdwnRenderer) inlineChildren(w *mrkdwnWriter, n ast.Node) {
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		r.inline(w, c)
	}
}

func (r *mrkdwnRenderer) inline(w *mrkdwnWriter, n ast.Node) {
	switch n := n.(type) {
	case *ast.Text:
		if n.IsRaw() {
			w.text(escapeMrkdwn(string(n.Segment.Value(r.src))))
		} else {
			w.text(escapeMrkdwn(r.plain(n.Segment.Value(r.src))))
		}
		switch {
		case n.HardLineBreak(), n.SoftLineBreak():
			if r.labelMode > 0 {
				w.text(" ")
			} else {
				w.text("\n")
			}
		}
	case *ast.String:
		if n.IsCode() || n.IsRaw() {
			w.text(escapeMrkdwn(string(n.Value)))
		} else {
			w.text(escapeMrkdwn(r.plain(n.Value)))
		}
	case *ast.CodeSpan:
		var b strings.Builder
		for c := n.FirstChild(); c != nil; c = c.NextSibling() {
			if t, ok := c.(*ast.Text); ok {
				b.Write(t.Segment.Value(r.src))
			} else if s, ok := c.(*ast.String); ok {
				b.Write(s.Value)
			}
		}
		code := strings.ReplaceAll(strings.ReplaceAll(b.String(), "\r\n", " "), "\n", " ")
		code = strings.ReplaceAll(code, "\x00", "\ufffd")
		// Slack ends a code span at the next backtick and cannot escape
		// one: such code is shown as plain text rather than cut short.
		if r.labelMode > 0 || strings.Contains(code, "`") || strings.TrimSpace(code) == "" {
			w.text(escapeMrkdwn(code))
			return
		}
		w.open("`")
		w.text(escapeMrkdwn(code))
		w.close("`")
	case *ast.Emphasis:
		if n.Level >= 2 {
			r.styled(w, n, &r.bold, "*")
		} else {
			r.styled(w, n, &r.italic, "_")
		}
	case *east.Strikethrough:
		r.styled(w, n, &r.strike, "~")
	case *ast.Link:
		r.link(w, n, string(util.URLEscape(n.Destination, true)), false)
	case *ast.Image:
		r.link(w, n, string(util.URLEscape(n.Destination, true)), true)
	case *ast.AutoLink:
		url := string(n.URL(r.src))
		label := string(n.Label(r.src))
		switch {
		case n.AutoLinkType == ast.AutoLinkEmail:
			if !plausibleEmail(label) {
				// <!subteam^S1|@team> reads as an e-mail address to
				// CommonMark; it is Slack syntax, shown as text.
				w.text(escapeMrkdwn("<" + label + ">"))
				return
			}
			if !strings.HasPrefix(strings.ToLower(url), "mailto:") {
				url = "mailto:" + url
			}
		case strings.Contains(url, "|"):
			// A model that knows it is in Slack writes <url|text>.
			url, label, _ = strings.Cut(url, "|")
		case !strings.Contains(url, "://") && !adapters.HasScheme(url):
			url = "http://" + url // linkify's www.example.com
		}
		r.emitLink(w, string(util.URLEscape([]byte(url), false)), escapeMrkdwn(label))
	case *ast.RawHTML:
		var b strings.Builder
		for i := range n.Segments.Len() {
			seg := n.Segments.At(i)
			b.Write(seg.Value(r.src))
		}
		raw := b.String()
		if adapters.IsBreakTag(raw) {
			if r.labelMode > 0 {
				w.text(" ")
			} else {
				w.text("\n")
			}
			return
		}
		w.text(escapeMrkdwn(strings.ReplaceAll(raw, "\n", " ")))
	case *east.TaskCheckBox:
		if n.IsChecked {
			w.text("☑ ")
		} else {
			w.text("☐ ")
		}
	default:
		r.inlineChildren(w, n)
	}
}

// styled wraps n's content in marker unless that style is already on (Slack
// does not nest a style in itself).
func (r *mrkdwnRenderer) styled(w *mrkdwnWriter, n ast.Node, depth *int, marker string) {
	outer := *depth
	*depth++
	inner := r.inlines(n)
	*depth--
	if outer > 0 || r.labelMode > 0 {
		w.text(inner)
		return
	}
	styleLines(w, inner, marker)
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

// link renders a link or an image. Only web and mail links become Slack
// links; anything else (relative paths, javascript:, Slack specials such as
// "!channel") is shown as text.
func (r *mrkdwnRenderer) link(w *mrkdwnWriter, n ast.Node, dest string, image bool) {
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
	if i := strings.IndexByte(url, ':'); i > 0 {
		url = strings.ToLower(url[:i]) + url[i:] // MAILTO: → mailto:
	}
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
func linkableURL(url string) bool {
	l := strings.ToLower(url)
	for _, scheme := range []string{"http://", "https://", "mailto:"} {
		if strings.HasPrefix(l, scheme) && len(l) > len(scheme) {
			return true
		}
	}
	return false
}

// linkURL makes a URL safe inside <…|…>: | and > would end it early.
func linkURL(url string) string {
	return strings.NewReplacer(
		"&", "&amp;",
		"<", "%3C",
		">", "%3E",
		"|", "%7C",
		"\n", "",
		"\r", "",
		" ", "%20",
	).Replace(url)
}

// plain resolves Markdown's backslash escapes and entities in a text
// segment, the way goldmark's HTML renderer does, to plain text.
func (r *mrkdwnRenderer) plain(v []byte) string {
	var buf bytes.Buffer
	bw := bufio.NewWriter(&buf)
	ghtml.DefaultWriter.Write(bw, v)
	bw.Flush()
	return html.UnescapeString(buf.String())
}

// escapeMrkdwn is Slack's escaping of text: only &, < and >, which Slack decodes
// again everywhere, code included.
func escapeMrkdwn(s string) string {
	if !strings.ContainsAny(s, "&<>\x00") {
		return s
	}
	return mrkdwnEscaper.Replace(s)
}

var mrkdwnEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", "\x00", "\ufffd")
