package local

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/firstmate/firstmate/agent"
)

func TestCheckChangesNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	path := filepath.Join(dir, "firstmate.db")
	if err := Check(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Check of a missing store: %v", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Check created the data dir: %v", err)
	}
	st, err := Open(path, agent.Retention{})
	if err != nil {
		t.Fatal(err)
	}
	if err := Check(path); !errors.Is(err, ErrInUse) {
		t.Fatalf("Check of a store in use: %v", err)
	}
	st.Close()
	before, _ := os.Stat(path)
	if err := Check(path); err != nil {
		t.Fatalf("Check: %v", err)
	}
	after, _ := os.Stat(path)
	if !after.ModTime().Equal(before.ModTime()) || after.Size() != before.Size() {
		t.Errorf("Check changed the file")
	}
	other := filepath.Join(t.TempDir(), "other.db")
	os.WriteFile(other, []byte("not bbolt"), 0o600)
	if err := Check(other); err == nil {
		t.Errorf("Check took a file that is not a store")
	}
}
