package adapters

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/firstmate/firstmate/tools"
)

func TestSafeFileName(t *testing.T) {
	for in, want := range map[string]string{
		"report.csv":       "report.csv",
		"../../etc/passwd": "passwd",
		"..":               "file",
		".bashrc":          "bashrc",
		"a\x00b\nc.txt":    "a_b_c.txt",
		`C:\Users\x.doc`:   "x.doc",
		"":                 "file",
		"/":                "file",
		// Invisible characters that reorder or hide what a person reads.
		"invoice\u202efdp.exe":                  "invoicefdp.exe",
		"\u202ainv\u202b\u202c\u202doice.pdf":   "invoice.pdf",
		"report\u2066\u2067\u2068txt.exe\u2069": "reporttxt.exe",
		"a\u200eb\u200fc\u061cd.txt":            "abcd.txt",
		"pay\u200b\u200c\u200dlist\u2060.csv":   "paylist.csv",
		"\ufeffdata\u00ad.csv":                  "data.csv",
		"\u200b.bashrc":                         "bashrc",
		"x\u2028y\u0085z":                       "x_y_z",
		"\u202e\u2066\u200d\u200f":              "file",
		"\u3164":                                "file",
		"\u202e.pdf":                            "pdf",
	} {
		if got := SafeFileName(in); got != want {
			t.Errorf("SafeFileName(%q) = %q, want %q", in, got, want)
		}
	}
	long := strings.Repeat("é", 100) + ".pdf"
	if got := SafeFileName(long); len(got) > 120 || !strings.HasSuffix(got, ".pdf") || !utf8.ValidString(got) {
		t.Errorf("SafeFileName(long) = %q (%d bytes)", got, len(got))
	}
}

func TestUploadPath(t *testing.T) {
	ws, err := tools.OpenWorkspace(t.TempDir(), "c")
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	if got := UploadPath(ws, "invoice\u202efdp.exe"); got != "uploads/invoicefdp.exe" {
		t.Errorf("UploadPath(RLO) = %q", got)
	}
	for i, want := range []string{"uploads/a.txt", "uploads/a-2.txt", "uploads/a-3.txt"} {
		got := UploadPath(ws, "../a.txt")
		if got != want {
			t.Fatalf("upload %d: %q, want %q", i, got, want)
		}
		if _, err := ws.WriteFile(got, []byte("x"), 10); err != nil {
			t.Fatal(err)
		}
	}
}

func FuzzSafeFileName(f *testing.F) {
	for _, s := range []string{"report.csv", "../../etc/passwd", "invoice\u202efdp.exe", "\u2066\u2069", ".\u200b.x", `C:\a\b.doc`, "\xff\xfe"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		got := SafeFileName(name)
		switch {
		case got == "" || len(got) > 120 || !utf8.ValidString(got):
			t.Fatalf("SafeFileName(%q) = %q", name, got)
		case strings.ContainsAny(got, "/\\") || strings.HasPrefix(got, "."):
			t.Fatalf("SafeFileName(%q) = %q is not one plain name", name, got)
		case strings.ContainsFunc(got, func(r rune) bool { return invisible(r) || unicode.IsControl(r) }):
			t.Fatalf("SafeFileName(%q) = %q keeps an invisible or control character", name, got)
		case SafeFileName(got) != got:
			t.Fatalf("SafeFileName(%q) = %q, then %q", name, got, SafeFileName(got))
		}
	})
}
