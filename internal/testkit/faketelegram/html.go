package faketelegram

//lint:file-ignore ST1005 parseHTML's errors are the Bot API's own wording ("Unexpected end tag at byte offset 5"), which the fake must reproduce.

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// parseHTML turns text in Telegram's HTML style into the plain text and
// entities Telegram keeps, as strictly as the Bot API does: only its tags
// (b, strong, i, em, u, ins, s, strike, del, span class="tg-spoiler",
// tg-spoiler, a href, code, pre, pre>code class="language-x",
// blockquote, blockquote expandable, tg-emoji emoji-id), each closed in
// order, and only its entity escapes (&lt; &gt; &amp; &quot; and numeric
// ones). Anything else after "&" is kept as it is; "<" must start a tag.
// The errors are worded as Telegram words them after "can't parse
// entities: ", with byte offsets into text.
//
// Unknown attributes are ignored, as Telegram ignores them.
func parseHTML(text string) (string, []MessageEntity, error) {
	type open struct {
		tag, arg string
		off      int // UTF-16 offset of the entity in the output
		inner    int // byte offset in text just after the start tag
	}
	var (
		out   strings.Builder
		u16   int
		stack []open
		ents  []MessageEntity
	)
	i := 0
	for i < len(text) {
		c := text[i]
		if c == '&' {
			if r, n := decodeEntity(text[i:]); n > 0 {
				out.WriteRune(r)
				u16 += utf16Len(r)
				i += n
				continue
			}
		}
		if c != '<' {
			r, n := utf8.DecodeRuneInString(text[i:])
			out.WriteString(text[i : i+n])
			u16 += utf16Len(r)
			i += n
			continue
		}
		at := i
		i++
		if i < len(text) && text[i] == '/' {
			if len(stack) == 0 {
				return "", nil, fmt.Errorf("Unexpected end tag at byte offset %d", at)
			}
			i++
			start := i
			for i < len(text) && !isHTMLSpace(text[i]) && text[i] != '>' {
				i++
			}
			name := strings.ToLower(text[start:i])
			for i < len(text) && isHTMLSpace(text[i]) {
				i++
			}
			if i >= len(text) || text[i] != '>' {
				return "", nil, fmt.Errorf("Unclosed end tag at byte offset %d", at)
			}
			i++
			top := stack[len(stack)-1]
			if name != "" && name != top.tag {
				return "", nil, fmt.Errorf("Unmatched end tag at byte offset %d, expected \"</%s>\", found \"</%s>\"", at, top.tag, name)
			}
			stack = stack[:len(stack)-1]
			if u16 == top.off {
				continue // an empty entity is dropped
			}
			if top.tag == "a" && top.arg == "" {
				// A link without href links to its own text.
				top.arg = text[top.inner:at]
			}
			e, err := closeEntity(top.tag, top.arg, top.off, u16-top.off)
			if err != nil {
				return "", nil, err
			}
			if top.tag == "pre" && len(ents) > 0 {
				// <pre><code class="language-go">…</code></pre> is one pre
				// entity with a language.
				if last := ents[len(ents)-1]; last.Type == "code" && last.Offset == e.Offset && last.Length == e.Length {
					e.Language = last.Language
					ents = ents[:len(ents)-1]
				}
			}
			ents = append(ents, e)
			continue
		}

		start := i
		for i < len(text) && !isHTMLSpace(text[i]) && text[i] != '>' {
			i++
		}
		if i >= len(text) {
			return "", nil, fmt.Errorf("Unclosed start tag at byte offset %d", at)
		}
		tag := strings.ToLower(text[start:i])
		if !allowedTag(tag) {
			return "", nil, fmt.Errorf("Unsupported start tag \"%s\" at byte offset %d", tag, at)
		}
		arg := ""
		for {
			for i < len(text) && isHTMLSpace(text[i]) {
				i++
			}
			if i >= len(text) {
				return "", nil, fmt.Errorf("Unclosed start tag \"%s\" at byte offset %d", tag, at)
			}
			if text[i] == '>' {
				i++
				break
			}
			nameStart := i
			for i < len(text) && !isHTMLSpace(text[i]) && !strings.ContainsRune("=>/\"'", rune(text[i])) {
				i++
			}
			attr := strings.ToLower(text[nameStart:i])
			if attr == "" {
				return "", nil, fmt.Errorf("Empty attribute name in the tag \"%s\" at byte offset %d", tag, at)
			}
			for i < len(text) && isHTMLSpace(text[i]) {
				i++
			}
			if i >= len(text) {
				return "", nil, fmt.Errorf("Unclosed start tag \"%s\" at byte offset %d", tag, at)
			}
			if text[i] != '=' {
				if tag == "blockquote" && attr == "expandable" {
					arg = "expandable"
				}
				continue
			}
			i++
			for i < len(text) && isHTMLSpace(text[i]) {
				i++
			}
			if i >= len(text) {
				return "", nil, fmt.Errorf("Unclosed start tag \"%s\" at byte offset %d", tag, at)
			}
			var value string
			if q := text[i]; q == '"' || q == '\'' {
				i++
				var v strings.Builder
				for i < len(text) && text[i] != q {
					if text[i] == '&' {
						if r, n := decodeEntity(text[i:]); n > 0 {
							v.WriteRune(r)
							i += n
							continue
						}
					}
					v.WriteByte(text[i])
					i++
				}
				if i >= len(text) {
					return "", nil, fmt.Errorf("Unclosed start tag \"%s\" at byte offset %d", tag, at)
				}
				i++
				value = v.String()
			} else {
				tokStart := i
				for i < len(text) && isNameTokenByte(text[i]) {
					i++
				}
				if i >= len(text) {
					return "", nil, fmt.Errorf("Unclosed start tag \"%s\" at byte offset %d", tag, at)
				}
				if !isHTMLSpace(text[i]) && text[i] != '>' {
					return "", nil, fmt.Errorf("Unexpected end of name token at byte offset %d", i)
				}
				value = strings.ToLower(text[tokStart:i])
			}
			switch {
			case tag == "a" && attr == "href":
				arg = value
			case tag == "code" && attr == "class" && strings.HasPrefix(value, "language-"):
				arg = strings.TrimPrefix(value, "language-")
			case tag == "span" && attr == "class" && value == "tg-spoiler":
				arg = "spoiler"
			case tag == "tg-emoji" && attr == "emoji-id":
				arg = value
			}
		}
		if tag == "span" && arg != "spoiler" {
			return "", nil, fmt.Errorf("Tag \"span\" must have class \"tg-spoiler\" at byte offset %d", at)
		}
		stack = append(stack, open{tag: tag, arg: arg, off: u16, inner: i})
	}
	if len(stack) > 0 {
		return "", nil, fmt.Errorf("Can't find end tag corresponding to start tag \"%s\"", stack[len(stack)-1].tag)
	}
	plain, ents := trimText(out.String(), ents)
	sortEntities(ents)
	return plain, ents, nil
}

// closeEntity is the entity of a closed tag.
func closeEntity(tag, arg string, off, length int) (MessageEntity, error) {
	e := MessageEntity{Offset: off, Length: length}
	switch tag {
	case "b", "strong":
		e.Type = "bold"
	case "i", "em":
		e.Type = "italic"
	case "u", "ins":
		e.Type = "underline"
	case "s", "strike", "del":
		e.Type = "strikethrough"
	case "span", "tg-spoiler":
		e.Type = "spoiler"
	case "code":
		e.Type, e.Language = "code", arg
	case "pre":
		e.Type = "pre"
	case "blockquote":
		e.Type = "blockquote"
		if arg == "expandable" {
			e.Type = "expandable_blockquote"
		}
	case "a":
		e.Type, e.URL = "text_link", arg
	case "tg-emoji":
		if _, err := strconv.ParseInt(arg, 10, 64); err != nil || arg == "" {
			return e, errors.New("Invalid custom emoji identifier specified")
		}
		e.Type, e.CustomEmojiID = "custom_emoji", arg
	}
	return e, nil
}

func allowedTag(tag string) bool {
	switch tag {
	case "b", "strong", "i", "em", "u", "ins", "s", "strike", "del", "span", "tg-spoiler",
		"a", "code", "pre", "blockquote", "tg-emoji":
		return true
	}
	return false
}

func isHTMLSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

// isNameTokenByte is a byte of an unquoted attribute value.
func isNameTokenByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-'
}

// decodeEntity decodes the character entity at the start of s ("&lt;",
// "&#128512;", "&#x1F600;") and returns the character and the length of
// the entity in s, or n = 0 if s does not start with one Telegram knows.
func decodeEntity(s string) (r rune, n int) {
	end := strings.IndexByte(s, ';')
	if len(s) < 3 || s[0] != '&' || end < 0 || end > 12 {
		return 0, 0
	}
	body := s[1:end]
	switch body {
	case "lt":
		return '<', end + 1
	case "gt":
		return '>', end + 1
	case "amp":
		return '&', end + 1
	case "quot":
		return '"', end + 1
	}
	if !strings.HasPrefix(body, "#") {
		return 0, 0
	}
	digits, base := body[1:], 10
	if strings.HasPrefix(digits, "x") || strings.HasPrefix(digits, "X") {
		digits, base = digits[1:], 16
	}
	if digits == "" || strings.ContainsAny(digits, "+-") {
		return 0, 0
	}
	v, err := strconv.ParseUint(digits, base, 32)
	if err != nil || v == 0 || v > unicode.MaxRune || v >= 0xD800 && v <= 0xDFFF {
		return 0, 0
	}
	return rune(v), end + 1
}

// trimText strips leading and trailing white space from text, as Telegram
// does with a message, and moves and shortens entities to match.
func trimText(text string, ents []MessageEntity) (string, []MessageEntity) {
	trimmed := strings.TrimLeftFunc(text, unicode.IsSpace)
	lead := utf16Count(text[:len(text)-len(trimmed)])
	trimmed = strings.TrimRightFunc(trimmed, unicode.IsSpace)
	n := utf16Count(trimmed)
	out := ents[:0]
	for _, e := range ents {
		start, end := max(e.Offset-lead, 0), min(e.Offset+e.Length-lead, n)
		if end <= start {
			continue
		}
		e.Offset, e.Length = start, end-start
		out = append(out, e)
	}
	return trimmed, out
}

// sortEntities orders entities as Telegram sends them: by offset, an
// outer entity before the inner ones it contains.
func sortEntities(ents []MessageEntity) {
	slices.SortStableFunc(ents, func(a, b MessageEntity) int {
		if a.Offset != b.Offset {
			return a.Offset - b.Offset
		}
		return b.Length - a.Length
	})
}

// utf16Count is the length of s in UTF-16 code units, how Telegram
// measures text and entity offsets.
func utf16Count(s string) int {
	n := 0
	for _, r := range s {
		n += utf16Len(r)
	}
	return n
}

func utf16Len(r rune) int {
	if r >= 0x10000 && r <= unicode.MaxRune {
		return 2
	}
	return 1
}
