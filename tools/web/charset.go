package web

import (
	"strings"
	"unicode/utf8"

	"golang.org/x/net/html/charset"
	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/unicode"
)

// decode turns the body into UTF-8 text the way browsers choose its
// charset (the WHATWG rules, by golang.org/x/net/html/charset): a BOM wins,
// then the declared charset, then, in HTML only, a <meta> charset; failing
// those, UTF-8 if the body is valid UTF-8, else Windows-1252. A body cut
// in the middle of a character gets a replacement character there.
func decode(body []byte, contentType string, isHTML, complete bool) string {
	enc, _, certain := charset.DetermineEncoding(body, contentType)
	if !isHTML && !certain { // a <meta> tag means nothing outside HTML
		enc = guess(body, complete)
	}
	out, err := enc.NewDecoder().Bytes(body)
	if err != nil {
		out = body
	}
	return strings.TrimPrefix(strings.ToValidUTF8(string(out), "\uFFFD"), "\uFEFF")
}

// guess is UTF-8 when the start of b is valid UTF-8 (a character cut at the
// end of the sample, or of a body that was cut, does not count against it),
// else Windows-1252.
func guess(b []byte, complete bool) encoding.Encoding {
	if len(b) > 4096 {
		b, complete = b[:4096], false
	}
	for i := len(b) - 1; !complete && i >= 0 && i > len(b)-4; i-- {
		if b[i] < utf8.RuneSelf {
			break
		}
		if utf8.RuneStart(b[i]) {
			b = b[:i]
			break
		}
	}
	if utf8.Valid(b) {
		return unicode.UTF8
	}
	return charmap.Windows1252
}
