package telegram

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/firstmate/firstmate/adapters"
	"github.com/yuin/goldmark/ast"
)

// RenderHTML converts Markdown to the HTML of the Bot API's parse_mode
// HTML: **bold** → <b>, *italic* → <i>, ~~strike~~ → <s>, `code` → <code>,
// fenced code → <pre><code class="language-go"> (plain <pre> without a
// language), links → <a href> for http, https, mailto and tg URLs only,
// headings → a bold line, a top-level quote → <blockquote>. What Telegram
// has no markup for becomes text: lists as "• item" and "1. item" lines,
// tables as a <pre> block, images as a link named by their alt text, rules
// as a line. Raw HTML in the Markdown is shown as written, escaped: only
// the renderer makes tags.
//
// The output is always markup Telegram accepts: only its tags, balanced,
// nested only where Telegram allows (nothing inside code, code never inside
// bold or a link, quotes not nested), &, < and > escaped, valid UTF-8. Any
// input renders; none panics.
func RenderHTML(md string) string { return renderTelegram(md, false) }

// PlainText renders Markdown as readable text without any markup or
// Markdown markers, for when Telegram rejects the HTML after all: the same
// layout as [RenderHTML], with links as "label (URL)". It is sent without
// parse_mode, so nothing in it is escaped.
func PlainText(md string) string { return renderTelegram(md, true) }

func renderTelegram(md string, plain bool) string {
	r := &htmlRenderer{src: []byte(normalizeMarkdown(md)), plain: plain}
	l := &adapters.MarkdownLayout{Src: r.src, Style: r, MaxIndent: mdMaxIndent}
	// The newlines trimmed at the ends are outside every element: a closing
	// tag always follows an element's last text.
	return l.Render()
}

// normalizeMarkdown makes the input what Telegram will show: valid UTF-8,
// plain \n line ends, no control characters but tabs (U+FFFD instead, as
// CommonMark does for NUL), and none of U+2028 to U+202E (line separators,
// bidirectional overrides), which Telegram deletes. What we measure is then
// what Telegram counts, and a part cannot turn out empty on its side.
func normalizeMarkdown(md string) string {
	md = strings.ToValidUTF8(md, "\ufffd")
	md = strings.ReplaceAll(md, "\r\n", "\n")
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\r':
			return '\n'
		case r == '\n' || r == '\t':
			return r
		case r < 0x20 || r == 0x7f:
			return '\ufffd'
		case r >= 0x2028 && r <= 0x202e:
			return -1
		}
		return r
	}, md)
}

// htmlRenderer is the Telegram side of [adapters.MarkdownLayout] and
// [adapters.WalkInlines].
type htmlRenderer struct {
	src   []byte
	plain bool // PlainText: no tags, no escaping, links show their URL
	// Active inline styles, by adapters.Emphasis: a style is not nested in
	// itself (Telegram merges or rejects bold inside bold).
	styles [len(htmlTags)]int
	inLink int // inside a link's label: no links, no code
	inCell int // inside a table cell: one line of plain text
	bars   int // quotes drawn with a bar around the block being rendered
}

var htmlTags = [...]string{adapters.Bold: "b", adapters.Italic: "i", adapters.Strike: "s"}

// mdMaxIndent is how many levels of lists indent what they hold, and of
// quotes draw a bar: past it, hostile nesting cannot blow up the output.
const mdMaxIndent = 8

func (r *htmlRenderer) Paragraph(n ast.Node) string { return r.inlines(n, "") }

// Heading is a bold line: Telegram has no headings.
func (r *htmlRenderer) Heading(n *ast.Heading) string {
	r.styles[adapters.Bold]++ // **bold** in a heading is not nested in its <b>
	s := r.inlines(n, htmlTags[adapters.Bold])
	r.styles[adapters.Bold]--
	return s
}

// mdCodeLanguage is the language of a fenced code block for Telegram's
// highlighter, which takes letters, digits, _, + and -: "c#" becomes
// "csharp", as Telegram names it, and an info string with anything else in
// its first word ("{.python}", "\"><script>") gives no language at all.
func mdCodeLanguage(info string) string {
	lang := strings.ReplaceAll(info, "#", "sharp")
	if lang == "" || len(lang) > 32 {
		return ""
	}
	for _, c := range lang {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '+' || c == '-') {
			return ""
		}
	}
	return lang
}

// CodeBlock is a <pre> block. In plain text, with no <pre> around them,
// its lines are indented and trimmed like any others.
func (r *htmlRenderer) CodeBlock(raw, info string) []adapters.MarkdownLine {
	var out []adapters.MarkdownLine
	for l := range strings.SplitSeq(raw, "\n") {
		out = append(out, adapters.MarkdownLine{Text: r.Escape(l), Code: !r.plain})
	}
	if !r.plain {
		open, close := "<pre>", "</pre>"
		if lang := mdCodeLanguage(info); lang != "" {
			open, close = `<pre><code class="language-`+lang+`">`, "</code></pre>"
		}
		out[0].Text = open + out[0].Text
		out[len(out)-1].Text += close
	}
	return out
}

// mdQuoteBar marks the lines of a quote that cannot be a <blockquote>.
const mdQuoteBar = "│ "

// Quote renders a blockquote. Telegram's quotes do not nest and cannot sit
// in a list's indentation, so only a quote at the top level is a
// <blockquote>; others, and all of them in plain text, are lines with a bar.
func (r *htmlRenderer) Quote(l *adapters.MarkdownLayout, n *ast.Blockquote) []adapters.MarkdownLine {
	_, top := n.Parent().(*ast.Document)
	bar := !top || r.plain
	if bar {
		r.bars++
		defer func() { r.bars-- }()
	}
	lines := l.Blocks(n, true)
	if len(lines) == 0 {
		return nil
	}
	if !bar {
		lines[0].Text = "<blockquote>" + lines[0].Text
		lines[len(lines)-1].Text += "</blockquote>"
		return lines
	}
	if r.bars > mdMaxIndent {
		return lines
	}
	for i := range lines {
		if lines[i].Code {
			continue
		}
		lines[i].Text = strings.TrimRight(mdQuoteBar+lines[i].Text, " ")
	}
	return lines
}

// Cell renders a table cell as plain text: the table is a <pre> block.
func (r *htmlRenderer) Cell(n ast.Node) string {
	cr := &htmlRenderer{src: r.src, plain: true, inCell: 1}
	return strings.TrimSpace(cr.inlines(n, ""))
}

func (r *htmlRenderer) Escape(s string) string {
	if r.plain {
		return s
	}
	return escapeHTMLText(s)
}

// inlines renders n's inline children, inside the element tag if one is
// given.
func (r *htmlRenderer) inlines(n ast.Node, tag string) string {
	w := &htmlWriter{plain: r.plain}
	if tag != "" {
		w.open(tag, "<"+tag+">")
	}
	adapters.WalkInlines(r.src, r, w, n)
	if tag != "" {
		w.close()
	}
	return w.b.String()
}

func (r *htmlRenderer) Text(w *htmlWriter, s string) { w.text(s) }

func (r *htmlRenderer) OneLine() bool { return r.inCell > 0 }

func (r *htmlRenderer) CodeSpan(w *htmlWriter, code string) {
	if r.inLink > 0 || r.inCell > 0 {
		w.text(code) // Telegram allows no code inside a link
		return
	}
	w.code(code)
}

// Emphasize wraps n's content in the style's tag unless that style is
// already on.
func (r *htmlRenderer) Emphasize(w *htmlWriter, n ast.Node, e adapters.Emphasis) {
	if r.styles[e] > 0 {
		adapters.WalkInlines(r.src, r, w, n)
		return
	}
	r.styles[e]++
	w.open(htmlTags[e], "<"+htmlTags[e]+">")
	adapters.WalkInlines(r.src, r, w, n)
	w.close()
	r.styles[e]--
}

func (r *htmlRenderer) AutoLink(w *htmlWriter, url, label string, _ bool) {
	if !htmlLinkable(url) || r.inLink > 0 || r.inCell > 0 || r.plain {
		w.text(label)
		return
	}
	w.open("a", htmlLinkTag(url))
	w.text(label)
	w.close()
}

// Link renders a link or an image (as a link named by its alt text). Only
// web, mail and tg: URLs become links; anything else (relative paths,
// javascript:, data:) shows as text with the destination after it.
func (r *htmlRenderer) Link(w *htmlWriter, n ast.Node, dest string) {
	if r.inLink > 0 {
		adapters.WalkInlines(r.src, r, w, n) // a badge in a link: its alt text is the label
		return
	}
	label := strings.TrimSpace(r.labelText(n))
	if !htmlLinkable(dest) || r.plain || r.inCell > 0 {
		if label == "" {
			w.text(dest)
			return
		}
		r.inLink++
		adapters.WalkInlines(r.src, r, w, n)
		r.inLink--
		if dest != "" && dest != label {
			w.text(" (" + dest + ")")
		}
		return
	}
	w.open("a", htmlLinkTag(dest))
	if label == "" {
		w.text(dest)
	} else {
		r.inLink++
		adapters.WalkInlines(r.src, r, w, n)
		r.inLink--
	}
	w.close()
}

// labelText is the plain text of a link's label.
func (r *htmlRenderer) labelText(n ast.Node) string {
	lr := &htmlRenderer{src: r.src, plain: true, inLink: 1, inCell: 1}
	return lr.inlines(n, "")
}

func htmlLinkTag(url string) string {
	return `<a href="` + escapeHTMLAttr(adapters.LowerScheme(url)) + `">`
}

// htmlLinkable: the schemes that may become a Telegram link. tg: links are
// Telegram's own (tg://user?id=… mentions a user).
func htmlLinkable(url string) bool { return adapters.LinkableURL(url, htmlSchemes) }

var htmlSchemes = []string{"http://", "https://", "mailto:", "tg://"}

// escapeHTMLText escapes what Telegram's HTML requires in text.
func escapeHTMLText(s string) string {
	if !strings.ContainsAny(s, "&<>") {
		return s
	}
	return htmlTextEscaper.Replace(s)
}

var htmlTextEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

func escapeHTMLAttr(s string) string { return htmlAttrEscaper.Replace(s) }

var htmlAttrEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;")

// htmlWriter writes inline HTML. Elements open lazily, when text arrives,
// so none is ever empty; inline code closes the styles around it and they
// reopen after it, because Telegram allows no code inside bold or italic.
type htmlWriter struct {
	b     strings.Builder
	plain bool
	// The open elements, outermost first. The written ones are a prefix.
	tags []htmlPendingTag
}

type htmlPendingTag struct {
	name, open string
	written    bool
}

func (w *htmlWriter) open(name, markup string) {
	if !w.plain {
		w.tags = append(w.tags, htmlPendingTag{name: name, open: markup})
	}
}

func (w *htmlWriter) close() {
	if w.plain || len(w.tags) == 0 {
		return
	}
	t := w.tags[len(w.tags)-1]
	w.tags = w.tags[:len(w.tags)-1]
	if t.written {
		w.b.WriteString("</" + t.name + ">")
	}
}

func (w *htmlWriter) text(s string) {
	if s == "" {
		return
	}
	if w.plain {
		w.b.WriteString(s)
		return
	}
	for i := range w.tags {
		if !w.tags[i].written {
			w.b.WriteString(w.tags[i].open)
			w.tags[i].written = true
		}
	}
	w.b.WriteString(escapeHTMLText(s))
}

func (w *htmlWriter) code(s string) {
	if w.plain {
		w.text(s)
		return
	}
	for i := len(w.tags) - 1; i >= 0; i-- {
		if w.tags[i].written {
			w.b.WriteString("</" + w.tags[i].name + ">")
			w.tags[i].written = false
		}
	}
	w.b.WriteString("<code>" + escapeHTMLText(s) + "</code>")
}

// VisibleText is the text Telegram shows for a message sent with
// parse_mode HTML: the tags removed and the entities it knows decoded. Sent
// without parse_mode, it is the plain-text fallback for one part of
// [SplitHTML], within the same limit.
func VisibleText(htmlText string) string {
	var b strings.Builder
	for _, t := range scanHTML(htmlText) {
		b.WriteString(t.text)
	}
	return b.String()
}

// VisibleLen counts what Telegram counts against a message's limit: the
// visible text in UTF-16 code units (an emoji outside the Basic
// Multilingual Plane is two).
func VisibleLen(htmlText string) int { return adapters.UTF16(VisibleText(htmlText)) }

// htmlToken is a tag or a run of text of Telegram HTML.
type htmlToken struct {
	raw  string // as written
	text string // text tokens: what Telegram shows
	tag  string // tags: the element's name; "" for text
	end  bool   // a closing tag
}

// scanHTML cuts Telegram HTML into tags and text, decoding entities as
// Telegram's parser does: only &lt; &gt; &amp; &quot; and numeric
// references; anything else is a literal ampersand.
func scanHTML(s string) []htmlToken {
	var out []htmlToken
	for i := 0; i < len(s); {
		if s[i] == '<' {
			if j := htmlTagEnd(s[i:]); j > 0 {
				raw := s[i : i+j+1]
				t := htmlToken{raw: raw}
				name := strings.TrimPrefix(raw[1:len(raw)-1], "/")
				t.end = len(name) < len(raw)-2
				if k := strings.IndexAny(name, " \t\n"); k >= 0 {
					name = name[:k]
				}
				t.tag = strings.ToLower(name)
				if t.tag == "" {
					t.tag = "?"
				}
				out = append(out, t)
				i += j + 1
				continue
			}
		}
		j := strings.IndexByte(s[i+1:], '<')
		if j < 0 {
			j = len(s)
		} else {
			j += i + 1
		}
		out = append(out, htmlToken{raw: s[i:j], text: decodeHTMLEntities(s[i:j])})
		i = j
	}
	return out
}

// htmlTagEnd is the index of the > that ends the tag at the start of s,
// skipping quoted attribute values as Telegram does, or -1.
func htmlTagEnd(s string) int {
	var quote byte
	for i := 1; i < len(s); i++ {
		switch c := s[i]; {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '>':
			return i
		}
	}
	return -1
}

func decodeHTMLEntities(s string) string {
	if !strings.Contains(s, "&") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		if s[i] == '&' {
			if r, n := decodeHTMLEntity(s[i:]); n > 0 {
				b.WriteRune(r)
				i += n
				continue
			}
		}
		b.WriteByte(s[i])
		i++
	}
	return b.String()
}

// decodeHTMLEntity decodes the entity at the start of s the way Telegram does
// (the semicolon is optional), returning its length, or 0 if Telegram would
// read the ampersand as itself.
func decodeHTMLEntity(s string) (rune, int) {
	end := 1
	var r rune
	if strings.HasPrefix(s, "&#") {
		end = 2
		base := 10
		if len(s) > 2 && s[2] == 'x' {
			end, base = 3, 16
		}
		for end < len(s) && end < 10 {
			d := strings.IndexByte("0123456789abcdef", asciiLowerByte(s[end]))
			if d < 0 || d >= base {
				break
			}
			r = r*rune(base) + rune(d)
			end++
		}
		if r == 0 || r >= 0x10ffff || end >= 10 {
			return 0, 0
		}
	} else {
		for end < len(s) && (s[end] >= 'a' && s[end] <= 'z' || s[end] >= 'A' && s[end] <= 'Z') {
			end++
		}
		switch s[1:end] {
		case "lt":
			r = '<'
		case "gt":
			r = '>'
		case "amp":
			r = '&'
		case "quot":
			r = '"'
		default:
			return 0, 0
		}
	}
	if end < len(s) && s[end] == ';' {
		end++
	}
	return r, end
}

func asciiLowerByte(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// SplitHTML renders Markdown as [RenderHTML] does and cuts the result into
// messages whose visible text (what Telegram counts: see [VisibleLen])
// measures at most limit, 4096 for sendMessage. A limit of zero or less
// means no limit; an answer with nothing to show gives no parts.
//
// The whole is rendered once and its visible text is cut, so the parts
// read together as the whole does: a cut inside an element closes it at the
// end of its part and opens it again at the start of the next (a code
// block continues as the same <pre><code class="language-go">). Cuts fall
// at the best boundary in the latter half of what fits: a blank line, a
// line break outside code, a line break in code, a space, then any
// character boundary that does not split what reads as one character (an
// emoji sequence, a flag, a letter and its accent), and only then anywhere
// between two code points. Whitespace at a cut stays at the end of the
// earlier part, where Telegram trims it; a part that would show only
// whitespace is left out. A single character wider than the limit (an
// emoji at a limit of 1) is a part of its own.
func SplitHTML(md string, limit int) []string {
	whole := RenderHTML(md)
	toks := scanHTML(whole)
	var vb strings.Builder
	for _, t := range toks {
		vb.WriteString(t.text)
	}
	vis := vb.String()
	if strings.TrimSpace(vis) == "" {
		return nil
	}
	if limit <= 0 || adapters.UTF16(vis) <= limit {
		return []string{whole}
	}
	// Which bytes of the visible text are code in a <pre>.
	inPre := make([]bool, len(vis))
	depth, p := 0, 0
	for _, t := range toks {
		switch {
		case t.tag == "pre" && !t.end:
			depth++
		case t.tag == "pre" && t.end:
			depth--
		case t.tag == "":
			for i := range len(t.text) {
				inPre[p+i] = depth > 0
			}
			p += len(t.text)
		}
	}
	var cuts []int
	for pos := 0; pos < len(vis); {
		end := htmlSplitCut(vis, inPre, pos, limit)
		cuts = append(cuts, end)
		pos = end
	}
	return htmlSplitTokens(toks, vis, cuts)
}

// Cut classes, best first.
const (
	htmlCutParagraph = iota // after a blank line outside code
	htmlCutLine             // after a line break outside code
	htmlCutCodeLine         // after a line break in code
	htmlCutSpace            // after a space
	htmlCutAny              // between two characters
	htmlCutCluster          // inside what reads as one character
	htmlCutClasses
)

// htmlSplitCut is where the part that starts at pos ends.
func htmlSplitCut(vis string, inPre []bool, pos, limit int) int {
	end, units := pos, 0
	for end < len(vis) {
		r, w := utf8.DecodeRuneInString(vis[end:])
		u := 1
		if r >= 0x10000 {
			u = 2
		}
		if units+u > limit {
			break
		}
		units += u
		end += w
	}
	if end == len(vis) {
		return end
	}
	if end == pos {
		_, w := utf8.DecodeRuneInString(vis[pos:])
		return pos + w // wider than the limit on its own
	}
	var best [htmlCutClasses]int // the latest cut of each class; 0 for none
	for x := end; x > pos; {
		c := htmlCutClass(vis, inPre, x)
		if best[c] == 0 {
			best[c] = x
		}
		_, w := utf8.DecodeLastRuneInString(vis[:x])
		x -= w
	}
	// The best break in the latter half of what fits, so parts are not
	// tiny; failing that, the best cut anywhere.
	half := pos + (end-pos)/2
	for c := range htmlCutAny {
		if best[c] >= half && best[c] > pos {
			return best[c]
		}
	}
	for _, x := range best {
		if x > pos {
			return x
		}
	}
	return end
}

func htmlCutClass(vis string, inPre []bool, x int) int {
	prev, _ := utf8.DecodeLastRuneInString(vis[:x])
	next, _ := utf8.DecodeRuneInString(vis[x:])
	if prev == '\u200d' || next == '\u200d' || isClusterExtender(next) || isRegionalIndicator(prev) && isRegionalIndicator(next) {
		return htmlCutCluster
	}
	code := inPre[x-1]
	switch {
	case prev == '\n' && !code && x >= 2 && vis[x-2] == '\n':
		return htmlCutParagraph
	case prev == '\n' && !code:
		return htmlCutLine
	case prev == '\n':
		return htmlCutCodeLine
	case prev == ' ' || prev == '\t':
		return htmlCutSpace
	}
	return htmlCutAny
}

// isClusterExtender: runes that join the one before into one visible
// character.
func isClusterExtender(r rune) bool {
	return unicode.In(r, unicode.Mn, unicode.Me) ||
		r >= 0xfe00 && r <= 0xfe0f || // variation selectors
		r >= 0x1f3fb && r <= 0x1f3ff || // skin tones
		r >= 0xe0020 && r <= 0xe007f // tag characters (flags)
}

// isRegionalIndicator: flags are pairs of regional indicators.
func isRegionalIndicator(r rune) bool { return r >= 0x1f1e6 && r <= 0x1f1ff }

// htmlSplitTokens writes the parts that end at cuts (offsets into the visible
// text vis, the last one len(vis)). Closing tags right at a cut end the
// earlier part; opening tags right at a cut start the next one.
func htmlSplitTokens(toks []htmlToken, vis string, cuts []int) []string {
	var parts []string
	var stack []htmlToken
	i, off, p, start := 0, 0, 0, 0 // token, bytes of its text written, visible offset, part start
	for _, cut := range cuts {
		var b strings.Builder
		for _, t := range stack {
			b.WriteString(t.raw)
		}
	tokens:
		for ; i < len(toks); i++ {
			t := toks[i]
			switch {
			case t.tag == "":
				rest := t.text[off:]
				if p+len(rest) > cut {
					n := cut - p
					b.WriteString(escapeHTMLText(rest[:n]))
					off += n
					p = cut
					break tokens
				}
				if off == 0 {
					b.WriteString(t.raw)
				} else {
					b.WriteString(escapeHTMLText(rest))
				}
				p += len(rest)
				off = 0
			case t.end:
				b.WriteString(t.raw)
				if len(stack) > 0 {
					stack = stack[:len(stack)-1]
				}
			default:
				if p >= cut {
					break tokens
				}
				b.WriteString(t.raw)
				stack = append(stack, t)
			}
		}
		for j := len(stack) - 1; j >= 0; j-- {
			b.WriteString("</" + stack[j].tag + ">")
		}
		if strings.TrimSpace(vis[start:cut]) != "" {
			parts = append(parts, b.String())
		}
		start = cut
	}
	return parts
}
