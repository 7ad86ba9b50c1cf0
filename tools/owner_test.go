package tools

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func ownerOf(t *testing.T, p string) (int, int) {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return int(st.Uid), int(st.Gid)
}

// A workspace with an owner hands over what it already holds (never what a
// link points to) and gives the owner everything its methods create.
func TestWorkspaceOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("changing owners needs root")
	}
	base := t.TempDir()
	outside := filepath.Join(t.TempDir(), "outside")
	if err := os.WriteFile(outside, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	ws, err := OpenWorkspace(base, "C1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ws.WriteFile("old/file.txt", []byte("old"), 100); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(ws.Dir(), "link")); err != nil {
		t.Fatal(err)
	}
	ws.Close()

	o := Owner{UID: 65534, GID: 65534}
	ws, err = OpenWorkspace(base, "C1", WithOwner(o))
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	if _, err := ws.WriteFile("a/b/new.txt", []byte("new"), 100); err != nil {
		t.Fatal(err)
	}
	if _, err := ws.MkdirAll("d/e"); err != nil {
		t.Fatal(err)
	}
	if _, err := ws.WriteFile("old/file.txt", []byte("rewritten"), 100); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{".", "old", "old/file.txt", "link", "a", "a/b", "a/b/new.txt", "d", "d/e"} {
		if uid, gid := ownerOf(t, filepath.Join(ws.Dir(), p)); uid != o.UID || gid != o.GID {
			t.Errorf("%s is owned by %d:%d, want %d:%d", p, uid, gid, o.UID, o.GID)
		}
	}
	if uid, _ := ownerOf(t, outside); uid != 0 {
		t.Errorf("the file a link points to outside was handed over too (uid %d)", uid)
	}
}
