package adapters

import (
	"bufio"
	"bytes"
	"html"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	east "github.com/yuin/goldmark/extension/ast"
	ghtml "github.com/yuin/goldmark/renderer/html"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
)

// What both platforms' Markdown renderers share: the parser, the layout of
// blocks as lines ([MarkdownLayout]) and the reading of inline content
// ([WalkInlines]). Each platform says, through [BlockStyle] and
// [InlineStyle], only what it marks up and how it escapes.

// MarkdownParser parses CommonMark with GitHub's strikethrough, tables,
// task lists and bare-URL links, which is what models write.
var MarkdownParser = sync.OnceValue(func() goldmark.Markdown {
	return goldmark.New(goldmark.WithExtensions(
		extension.Strikethrough,
		extension.Table,
		extension.TaskList,
		extension.Linkify,
	))
})

// MarkdownLine is one line of rendered Markdown.
type MarkdownLine struct {
	Text string
	// Code lines are code as written: lists do not indent them and their
	// trailing blanks stay, since either would change the code.
	Code bool
}

// BlockStyle is what a platform's renderer decides about Markdown blocks.
type BlockStyle interface {
	// Paragraph renders the inline content of a paragraph, or of any other
	// block of text, with "\n" at each line break.
	Paragraph(n ast.Node) string
	// Heading renders a heading as a line of text; "" leaves it out.
	Heading(n *ast.Heading) string
	// CodeBlock renders a code block, and a table laid out as text. raw is
	// not blank and has no line break at its end; info is the first word of
	// a fenced block's info string, the language, or "".
	CodeBlock(raw, info string) []MarkdownLine
	// Quote renders a blockquote, laying its content out with l.Blocks.
	Quote(l *MarkdownLayout, n *ast.Blockquote) []MarkdownLine
	// Cell renders a table cell as one line of unescaped text: the table
	// goes to CodeBlock as a whole.
	Cell(n ast.Node) string
	// Escape escapes text, for raw HTML, which is shown as written.
	Escape(s string) string
}

// MarkdownLayout lays out a Markdown document as lines, the way both
// platforms show what they have no markup for: blocks apart by a blank line,
// lists as "• item" and "1. item" lines indented by depth, tables as
// aligned columns in a code block, rules as a line. Its Style renders the
// rest. A layout renders one document at a time.
type MarkdownLayout struct {
	Src   []byte
	Style BlockStyle
	// MaxIndent is how many levels of lists indent what they hold, so that
	// hostile nesting cannot blow up the output; 0 means no limit.
	MaxIndent int
	lists     int // lists around the block being laid out
}

// Render parses Src and lays it out as text. Trailing blanks go, but in
// code, and so do blank lines at the start and the end.
func (l *MarkdownLayout) Render() string {
	doc := MarkdownParser().Parser().Parse(text.NewReader(l.Src))
	var b strings.Builder
	for i, line := range l.Blocks(doc, true) {
		if i > 0 {
			b.WriteByte('\n')
		}
		if line.Code {
			b.WriteString(line.Text)
		} else {
			b.WriteString(strings.TrimRight(line.Text, " \t"))
		}
	}
	return strings.Trim(b.String(), "\n")
}

// Blocks lays out n's block children, with a blank line between them when
// loose is set and none otherwise.
func (l *MarkdownLayout) Blocks(n ast.Node, loose bool) []MarkdownLine {
	var out []MarkdownLine
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		lines := l.block(c)
		if len(lines) == 0 {
			continue
		}
		if len(out) > 0 && loose {
			out = append(out, MarkdownLine{})
		}
		out = append(out, lines...)
	}
	return out
}

func (l *MarkdownLayout) block(n ast.Node) []MarkdownLine {
	switch n := n.(type) {
	case *ast.Paragraph, *ast.TextBlock:
		return textLines(l.Style.Paragraph(n))
	case *ast.Heading:
		return textLines(l.Style.Heading(n))
	case *ast.ThematicBreak:
		return []MarkdownLine{{Text: "──────────"}}
	case *ast.FencedCodeBlock:
		return l.code(segmentsText(l.Src, n.Lines()), string(n.Language(l.Src)))
	case *ast.CodeBlock:
		return l.code(segmentsText(l.Src, n.Lines()), "")
	case *ast.HTMLBlock:
		// Shown as written: a model's <div> or <script> is text, never markup.
		s := segmentsText(l.Src, n.Lines())
		if n.HasClosure() {
			s += string(n.ClosureLine.Value(l.Src))
		}
		s = strings.TrimRight(s, "\n")
		if strings.TrimSpace(s) == "" {
			return nil
		}
		return textLines(l.Style.Escape(s))
	case *ast.Blockquote:
		return l.Style.Quote(l, n)
	case *ast.List:
		return l.list(n)
	case *east.Table:
		return l.table(n)
	case *ast.LinkReferenceDefinition:
		return nil
	}
	if c := n.FirstChild(); c != nil && c.Type() == ast.TypeInline {
		return textLines(l.Style.Paragraph(n))
	}
	return l.Blocks(n, true)
}

func (l *MarkdownLayout) code(raw, info string) []MarkdownLine {
	raw = strings.TrimRight(raw, "\n")
	if strings.TrimSpace(raw) == "" {
		return nil
	}
	return l.Style.CodeBlock(raw, info)
}

func textLines(s string) []MarkdownLine {
	if s == "" {
		return nil
	}
	var out []MarkdownLine
	for line := range strings.SplitSeq(s, "\n") {
		out = append(out, MarkdownLine{Text: line})
	}
	return out
}

func segmentsText(src []byte, segs *text.Segments) string {
	var b strings.Builder
	for i := range segs.Len() {
		seg := segs.At(i)
		b.Write(seg.Value(src))
	}
	return b.String()
}

var listBullets = []string{"•", "◦", "▪"}

// listIndent indents what belongs to an item below its first line.
const listIndent = "    "

func (l *MarkdownLayout) list(n *ast.List) []MarkdownLine {
	depth := l.lists
	l.lists++
	defer func() { l.lists-- }()
	indent := l.MaxIndent == 0 || depth < l.MaxIndent
	var out []MarkdownLine
	num := n.Start
	for item := n.FirstChild(); item != nil; item = item.NextSibling() {
		marker := listBullets[depth%len(listBullets)]
		if n.IsOrdered() {
			marker = strconv.Itoa(num) + "."
			num++
		}
		lines := l.Blocks(item, false)
		if len(lines) == 0 || lines[0].Code {
			lines = append([]MarkdownLine{{}}, lines...)
		}
		lines[0].Text = marker + " " + lines[0].Text
		for i := 1; i < len(lines); i++ {
			if indent && !lines[i].Code && lines[i].Text != "" {
				lines[i].Text = listIndent + lines[i].Text
			}
		}
		out = append(out, lines...)
	}
	return out
}

// table lays a table out as aligned text in a code block: neither platform
// has tables, and only fixed-width text keeps the columns.
func (l *MarkdownLayout) table(n *east.Table) []MarkdownLine {
	var rows [][]string
	for row := n.FirstChild(); row != nil; row = row.NextSibling() {
		var cells []string
		for cell := row.FirstChild(); cell != nil; cell = cell.NextSibling() {
			cells = append(cells, l.Style.Cell(cell))
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
	var b, line strings.Builder
	for ri, row := range rows {
		line.Reset()
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
				line.WriteString(" | ")
			}
			line.WriteString(padCell(c, width[i], align))
		}
		b.WriteString(strings.TrimRight(line.String(), " "))
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
	return l.code(b.String(), "")
}

// padCell pads a table cell to width runes as the column's alignment asks.
func padCell(s string, width int, align east.Alignment) string {
	gap := width - utf8.RuneCountInString(s)
	if gap <= 0 {
		return s
	}
	switch align {
	case east.AlignRight:
		return strings.Repeat(" ", gap) + s
	case east.AlignCenter:
		return strings.Repeat(" ", gap/2) + s + strings.Repeat(" ", gap-gap/2)
	}
	return s + strings.Repeat(" ", gap)
}

// Emphasis is a style Markdown gives inline text.
type Emphasis int

const (
	Bold   Emphasis = iota // **bold**, __bold__
	Italic                 // *italic*, _italic_
	Strike                 // ~~strike~~
)

// InlineStyle is what a platform's renderer writes for each kind of inline
// content into a writer of its own, W.
type InlineStyle[W any] interface {
	// Text writes text as it reads, Markdown's escapes and entities
	// resolved: escaping it for the platform is the renderer's.
	Text(w W, s string)
	// OneLine reports whether what is being written must stay on one line
	// (a table cell, a link's label): a line break, hard, soft or <br>, is
	// then a space.
	OneLine() bool
	// CodeSpan writes a code span's text, which is not blank and is one line.
	CodeSpan(w W, code string)
	// Emphasize writes the content of n, an emphasis or a strikethrough,
	// in style e.
	Emphasize(w W, n ast.Node, e Emphasis)
	// Link writes a link or an image (n), dest its URL-escaped destination.
	Link(w W, n ast.Node, dest string)
	// AutoLink writes an autolink, or a bare URL or e-mail address: url is
	// its target (see [AutoLinkURL]), label the text as written.
	AutoLink(w W, url, label string, email bool)
}

// WalkInlines writes n's inline children to w through s.
func WalkInlines[W any](src []byte, s InlineStyle[W], w W, n ast.Node) {
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		walkInline(src, s, w, c)
	}
}

func walkInline[W any](src []byte, s InlineStyle[W], w W, n ast.Node) {
	switch n := n.(type) {
	case *ast.Text:
		if n.IsRaw() {
			s.Text(w, string(n.Segment.Value(src)))
		} else {
			s.Text(w, unescape(n.Segment.Value(src)))
		}
		if n.HardLineBreak() || n.SoftLineBreak() {
			lineBreak(s, w)
		}
	case *ast.String:
		if n.IsCode() || n.IsRaw() {
			s.Text(w, string(n.Value))
		} else {
			s.Text(w, unescape(n.Value))
		}
	case *ast.CodeSpan:
		var b strings.Builder
		for c := n.FirstChild(); c != nil; c = c.NextSibling() {
			switch c := c.(type) {
			case *ast.Text:
				b.Write(c.Segment.Value(src))
			case *ast.String:
				b.Write(c.Value)
			}
		}
		code := strings.ReplaceAll(strings.ReplaceAll(b.String(), "\r\n", " "), "\n", " ")
		if strings.TrimSpace(code) == "" {
			s.Text(w, code)
		} else {
			s.CodeSpan(w, code)
		}
	case *ast.Emphasis:
		if n.Level >= 2 {
			s.Emphasize(w, n, Bold)
		} else {
			s.Emphasize(w, n, Italic)
		}
	case *east.Strikethrough:
		s.Emphasize(w, n, Strike)
	case *ast.Link:
		s.Link(w, n, string(util.URLEscape(n.Destination, true)))
	case *ast.Image:
		s.Link(w, n, string(util.URLEscape(n.Destination, true)))
	case *ast.AutoLink:
		email := n.AutoLinkType == ast.AutoLinkEmail
		s.AutoLink(w, AutoLinkURL(string(n.URL(src)), email), string(n.Label(src)), email)
	case *ast.RawHTML:
		raw := segmentsText(src, n.Segments)
		if isBreakTag(raw) {
			lineBreak(s, w)
		} else {
			s.Text(w, strings.ReplaceAll(raw, "\n", " "))
		}
	case *east.TaskCheckBox:
		if n.IsChecked {
			s.Text(w, "☑ ")
		} else {
			s.Text(w, "☐ ")
		}
	default:
		WalkInlines(src, s, w, n)
	}
}

func lineBreak[W any](s InlineStyle[W], w W) {
	if s.OneLine() {
		s.Text(w, " ")
	} else {
		s.Text(w, "\n")
	}
}

// unescape resolves Markdown's backslash escapes and entities in a text
// segment, the way goldmark's HTML renderer does, to plain text.
func unescape(v []byte) string {
	if !bytes.ContainsAny(v, "\\&\x00") {
		return string(v) // nothing to resolve: most text
	}
	var buf bytes.Buffer
	bw := bufio.NewWriter(&buf)
	ghtml.DefaultWriter.Write(bw, v)
	bw.Flush()
	return html.UnescapeString(buf.String())
}

// isBreakTag reports whether raw inline HTML is a line break (<br>, <br/>).
func isBreakTag(raw string) bool {
	s := strings.ToLower(strings.Join(strings.Fields(raw), ""))
	return s == "<br>" || s == "<br/>"
}

// AutoLinkURL is the target of an autolink to url: URL-escaped, with
// mailto: before an e-mail address and http:// before linkify's
// www.example.com.
func AutoLinkURL(url string, email bool) string {
	switch {
	case email && !strings.HasPrefix(strings.ToLower(url), "mailto:"):
		url = "mailto:" + url
	case !email && !strings.Contains(url, "://") && !hasScheme(url):
		url = "http://" + url
	}
	return string(util.URLEscape([]byte(url), false))
}

// hasScheme reports whether url starts with a URL scheme ("https:",
// "mailto:", "javascript:").
func hasScheme(url string) bool {
	i := strings.IndexByte(url, ':')
	if i <= 0 {
		return false
	}
	for _, c := range url[:i] {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// LinkableURL reports whether url starts with one of schemes ("https://"),
// in any case, and goes on after it: the links a platform makes.
func LinkableURL(url string, schemes []string) bool {
	l := strings.ToLower(url)
	for _, scheme := range schemes {
		if strings.HasPrefix(l, scheme) && len(l) > len(scheme) {
			return true
		}
	}
	return false
}

// LowerScheme writes url's scheme in lower case (MAILTO:a@b.c →
// mailto:a@b.c), the case the platforms' link syntax expects.
func LowerScheme(url string) string {
	if i := strings.IndexByte(url, ':'); i > 0 {
		return strings.ToLower(url[:i]) + url[i:]
	}
	return url
}
