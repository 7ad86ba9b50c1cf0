package web

import (
	"context"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"github.com/JohannesKaufmann/html-to-markdown/v2/converter"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/base"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/commonmark"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/strikethrough"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/table"
	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

type kind int

const (
	binaryKind kind = iota
	textKind
	htmlKind
)

// mediaType is the declared media type, or the sniffed one when the server
// declared none.
func mediaType(contentType string, head []byte) string {
	if mt, _, err := mime.ParseMediaType(contentType); err == nil {
		return mt
	}
	mt, _, _ := mime.ParseMediaType(http.DetectContentType(head))
	return mt
}

func classify(mt string) kind {
	switch {
	case mt == "text/html" || mt == "application/xhtml+xml":
		return htmlKind
	case strings.HasPrefix(mt, "text/"), strings.HasSuffix(mt, "+json"), strings.HasSuffix(mt, "+xml"):
		return textKind
	}
	switch mt {
	case "application/json", "application/xml", "application/javascript", "application/x-javascript",
		"application/x-ndjson", "application/yaml", "application/x-yaml", "application/toml", "application/x-sh":
		return textKind
	}
	return binaryKind
}

// dropped are elements with nothing to read, besides the script, style,
// noscript, iframe and form fields the converter drops itself.
var dropped = map[atom.Atom]bool{atom.Svg: true, atom.Canvas: true, atom.Template: true, atom.Object: true, atom.Embed: true}

// htmlToMarkdown converts a page to Markdown with links made absolute
// against page's URL, and returns its title.
func htmlToMarkdown(ctx context.Context, page string, pageURL *url.URL) (title, md string, err error) {
	doc, err := html.Parse(strings.NewReader(page))
	if err != nil {
		return "", "", err
	}
	prune(doc, &title)
	conv := converter.NewConverter(converter.WithPlugins(
		base.NewBasePlugin(), commonmark.NewCommonmarkPlugin(), table.NewTablePlugin(), strikethrough.NewStrikethroughPlugin()))
	out, err := conv.ConvertNode(doc, converter.WithDomain(pageURL.String()), converter.WithContext(ctx))
	return oneLine(title, 300), string(out), err
}

// prune removes what a reader of the page would not see, records the
// title, and drops inline data: images (long base64 noise). Hidden text is
// removed because it is where prompt injections hide; a hidden <body> is
// kept, as pages that reveal themselves by script do that.
func prune(n *html.Node, title *string) {
	for c := n.FirstChild; c != nil; {
		next := c.NextSibling
		if c.Type == html.ElementNode {
			switch {
			case c.DataAtom == atom.Title && *title == "" && c.FirstChild != nil:
				*title = c.FirstChild.Data
			case dropped[c.DataAtom] || c.DataAtom != atom.Body && hidden(c) || c.DataAtom == atom.Img && strings.HasPrefix(strings.TrimSpace(attr(c, "src")), "data:"):
				n.RemoveChild(c)
				c = next
				continue
			}
		}
		prune(c, title)
		c = next
	}
}

func hidden(n *html.Node) bool {
	if _, ok := attrOK(n, "hidden"); ok || attr(n, "aria-hidden") == "true" {
		return true
	}
	style := strings.ToLower(strings.Join(strings.Fields(attr(n, "style")), ""))
	return strings.Contains(style, "display:none") || strings.Contains(style, "visibility:hidden")
}

func attr(n *html.Node, key string) string {
	v, _ := attrOK(n, key)
	return v
}

func attrOK(n *html.Node, key string) (string, bool) {
	for _, a := range n.Attr {
		if a.Namespace == "" && a.Key == key {
			return a.Val, true
		}
	}
	return "", false
}
