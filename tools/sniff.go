package tools

import (
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"
)

// IsBinary reports whether head, the start of a file, is not UTF-8 text: it
// has a NUL byte or invalid UTF-8. complete says head is the whole file;
// if not, a multi-byte character cut at the end of head is not held
// against it.
func IsBinary(head []byte, complete bool) bool {
	if slices.Contains(head, 0) {
		return true
	}
	if !complete {
		head = trimPartialRune(head)
	}
	return !utf8.Valid(head)
}

// trimPartialRune drops an incomplete UTF-8 sequence at the end of b (at
// most utf8.UTFMax-1 bytes), left there by cutting a file's head.
func trimPartialRune(b []byte) []byte {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax+1; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return b[:i]
			}
			break
		}
	}
	return b
}

// BinaryKind guesses what a binary file is from its head, for messages:
// "image/png", "application/pdf", or "binary data".
func BinaryKind(head []byte) string {
	kind, _, _ := strings.Cut(http.DetectContentType(head), ";")
	if kind == "application/octet-stream" || strings.HasPrefix(kind, "text/") {
		return "binary data"
	}
	return kind
}
