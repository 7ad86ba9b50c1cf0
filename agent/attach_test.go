package agent_test

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/tools"
)

// An attachment is uploaded at the size checked on the descriptor it is
// read from: a file that grows after the check (a background job still
// writing it) does not make the upload larger, and a file over the limit
// is refused when it is opened, not only when send_file looked at it.
func TestAttachmentReadsWhatWasChecked(t *testing.T) {
	ws, err := tools.OpenWorkspace(t.TempDir(), "C1")
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	path := filepath.Join(ws.Dir(), "report.txt")
	if err := os.WriteFile(path, []byte("ten bytes!"), 0o600); err != nil {
		t.Fatal(err)
	}
	r, size, err := agent.OpenAttachment(ws, "report.txt", 1<<20)
	if err != nil || size != 10 {
		t.Fatalf("open: %d bytes, %v", size, err)
	}
	defer r.Close()
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(strings.Repeat("x", 2<<20))
	f.Close()
	got, err := io.ReadAll(r)
	if err != nil || string(got) != "ten bytes!" {
		t.Fatalf("read %d bytes (%v); want the 10 checked", len(got), err)
	}
	// Now over the limit: refused at open.
	if _, _, err := agent.OpenAttachment(ws, "report.txt", 1<<20); err == nil || !strings.Contains(err.Error(), "over the 1 MiB") {
		t.Fatalf("open of a file over the limit: %v", err)
	}
}
