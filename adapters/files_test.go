package adapters

import (
	"strings"
	"testing"
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
