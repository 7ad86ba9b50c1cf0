package adapters

import (
	"fmt"
	"path"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/firstmate/firstmate/tools"
)

// SafeFileName keeps the name of a file someone shared readable but inert:
// no directories (also Windows ones), no leading dots, no control
// characters, nothing invisible (a right-to-left override shows
// "invoice\u202efdp.exe" as "invoiceexe.pdf"), at most 120 bytes with the
// extension kept. Every name a platform gives a file goes through it
// before anyone sees or stores it.
func SafeFileName(name string) string {
	name = strings.Map(func(r rune) rune {
		if invisible(r) {
			return -1
		}
		return r
	}, name)
	name = path.Base(strings.ReplaceAll(name, "\\", "/"))
	if name == "/" || name == "." {
		name = ""
	}
	name = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' || r == '/' {
			return '_'
		}
		return r
	}, name)
	name = strings.TrimLeft(name, ".")
	if len(name) > 120 {
		ext := path.Ext(name)
		if len(ext) > 20 {
			ext = ""
		}
		stem := name[:len(name)-len(ext)]
		cut := 120 - len(ext)
		for cut > 0 && !utf8.RuneStart(stem[cut]) {
			cut--
		}
		name = stem[:cut] + ext
	}
	if name == "" {
		name = "file"
	}
	return name
}

// UploadPath is where a shared file is saved in the workspace:
// uploads/<name>, or uploads/<name>-2, -3… when the name is taken.
func UploadPath(ws *tools.Workspace, name string) string {
	name = SafeFileName(name)
	ext := path.Ext(name)
	stem := strings.TrimSuffix(name, ext)
	p := "uploads/" + name
	for i := 2; ; i++ {
		if _, err := ws.Lstat(p); err != nil {
			return p
		}
		p = fmt.Sprintf("uploads/%s-%d%s", stem, i, ext)
	}
}

// invisible reports whether r shows as nothing yet changes how text reads:
// the bidirectional controls and marks (U+202A to U+202E, U+2066 to
// U+2069, U+200E, U+200F, U+061C) that reorder what follows, zero-width
// characters, the soft hyphen and the other format and default-ignorable
// characters (Hangul fillers pass for a blank name).
func invisible(r rune) bool {
	return unicode.In(r, unicode.Cf, unicode.Other_Default_Ignorable_Code_Point)
}
