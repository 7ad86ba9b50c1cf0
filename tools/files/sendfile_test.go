package files_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/firstmate/firstmate/tools"
	"github.com/firstmate/firstmate/tools/files"
)

func TestSendFile(t *testing.T) {
	ws, err := tools.OpenWorkspace(t.TempDir(), "C1")
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	set := tools.NewSet(files.All(files.Options{MaxSendBytes: 1000}))
	if _, err := ws.WriteFile("out/report.csv", []byte("a,b\n1,2\n"), 1<<20); err != nil {
		t.Fatal(err)
	}
	if _, err := ws.WriteFile("big.bin", make([]byte, 1001), 1<<20); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(ws.Dir(), "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := set.Call(t.Context(), ws, "send_file", []byte(`{"path":"/workspace/out/report.csv"}`))
	if err != nil || len(res.Files) != 1 || res.Files[0] != "out/report.csv" || !strings.Contains(res.Summary, "report.csv") {
		t.Fatalf("send_file: %+v %v", res, err)
	}
	for path, want := range map[string]error{
		"big.bin":     tools.ErrTooLarge,
		"fifo":        tools.ErrNotRegular,
		"missing.txt": os.ErrNotExist,
		"out":         tools.ErrIsDir,
	} {
		res, err := set.Call(t.Context(), ws, "send_file", []byte(`{"path":"`+path+`"}`))
		if !errors.Is(err, want) || len(res.Files) != 0 {
			t.Errorf("send_file %s: %v (files %v), want %v", path, err, res.Files, want)
		}
	}
}
