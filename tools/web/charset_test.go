package web

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestDecode(t *testing.T) {
	cases := []struct {
		name        string
		body        string
		contentType string
		html        bool
		want        string
	}{
		{"utf-8", "caf\xc3\xa9", "text/plain; charset=utf-8", false, "café"},
		{"undeclared utf-8", "caf\xc3\xa9", "text/plain", false, "café"},
		{"utf-8 cut mid-rune", "caf\xc3", "text/plain", false, "caf\uFFFD"},
		{"undeclared latin-1", "caf\xe9", "text/plain", false, "café"},
		{"latin-1", "caf\xe9 \x80", "text/html; charset=ISO-8859-1", true, "café €"},
		{"quoted label", "caf\xe9", `text/plain; charset="latin1"`, false, "café"},
		{"windows-1252", "\x93q\x94 \x85 \x99", "text/plain; charset=windows-1252", false, "“q” … ™"},
		{"latin-9", "\xa4\xa6\xa8\xb4\xb8\xbc\xbd\xbe\xe9", "text/plain; charset=ISO-8859-15", false, "€ŠšŽžŒœŸé"},
		{"meta charset", `<meta charset="iso-8859-1"><p>caf` + "\xe9", "text/html", true, `<meta charset="iso-8859-1"><p>café`},
		{"meta http-equiv", `<meta http-equiv="Content-Type" content="text/html; charset=windows-1252">` + "\x93", "text/html", true,
			`<meta http-equiv="Content-Type" content="text/html; charset=windows-1252">“`},
		{"header beats meta", `<meta charset="iso-8859-1">` + "caf\xc3\xa9", "text/html; charset=utf-8", true, `<meta charset="iso-8859-1">café`},
		{"meta in plain text ignored", `<meta charset="iso-8859-1">` + "caf\xc3\xa9", "text/plain", false, `<meta charset="iso-8859-1">café`},
		{"meta utf-16 is utf-8", `<meta charset="utf-16">é` + "\xc3\xa9", "text/html", true, `<meta charset="utf-16">éé`},
		{"utf-8 BOM", "\xef\xbb\xbfcaf\xc3\xa9", "text/plain; charset=latin1", false, "café"},
		{"utf-16le BOM", "\xff\xfec\x00a\x00f\x00\xe9\x00", "text/plain", false, "café"},
		{"utf-16be BOM", "\xfe\xff\x00c\x00a\x00f\x00\xe9", "text/plain", false, "café"},
		{"utf-16be declared", "\x00h\x00i", "application/json; charset=utf-16be", false, "hi"},
		{"shift_jis", "\x82\xa0", "text/plain; charset=shift_jis", false, "あ"},
		{"ascii label", "caf\xe9", "text/plain; charset=us-ascii", false, "café"},
	}
	for _, c := range cases {
		if got := decode([]byte(c.body), c.contentType, c.html, !strings.Contains(c.name, "cut")); got != c.want {
			t.Errorf("%s: decode = %q, want %q", c.name, got, c.want)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte("caf\xe9"), "text/plain")
	f.Add([]byte("\xff\xfeh\x00"), "text/html")
	f.Add([]byte(`<meta charset="latin1">`), "text/html")
	f.Fuzz(func(t *testing.T, body []byte, contentType string) {
		for _, html := range []bool{false, true} {
			for _, complete := range []bool{false, true} {
				if got := decode(body, contentType, html, complete); !utf8.ValidString(got) {
					t.Fatalf("decode gave invalid UTF-8: %q", got)
				}
			}
		}
	})
}
