package adapters

import (
	"fmt"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/firstmate/firstmate/tools"
)

// SafeFileName keeps the name of a file someone shared readable but inert:
// no directories (also Windows ones), no leading dots, no control
// characters, at most 120 bytes with the extension kept.
func SafeFileName(name string) string {
	name = path.Base(strings.ReplaceAll(name, "\\", "/"))
	if name == "/" || name == "." {
		name = ""
	}
	name = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == '/' {
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
