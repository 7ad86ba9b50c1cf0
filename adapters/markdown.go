package adapters

import (
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"
	east "github.com/yuin/goldmark/extension/ast"
)

// The pieces both platforms' Markdown renderers share.

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

// PadCell pads a table cell to width runes as the column's alignment asks.
func PadCell(s string, width int, align east.Alignment) string {
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

// HasScheme reports whether url starts with a URL scheme ("https:",
// "mailto:", "javascript:").
func HasScheme(url string) bool {
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

// IsBreakTag reports whether raw inline HTML is a line break (<br>, <br/>).
func IsBreakTag(raw string) bool {
	s := strings.ToLower(strings.Join(strings.Fields(raw), ""))
	return s == "<br>" || s == "<br/>"
}
