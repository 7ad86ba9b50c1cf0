package tools

import (
	"math/rand/v2"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var safeDirName = regexp.MustCompile(`^[A-Za-z0-9_~-]{1,200}$`)

func TestDirNameInjective(t *testing.T) {
	names := []string{"", "_", "a", "A", "a_5F", "a_", "..", ".", "/", "a/b", "a:b", "a%3Ab",
		"slack:T1:C1:", "slack:T1:C1:1700.1", "telegram::-100123:", "x~y"}
	// Names around the cut, including ones whose cut form ends in a
	// partial escape or looks like an escape followed by hex.
	for n := 140; n < 220; n += 3 {
		names = append(names, strings.Repeat("a", n), strings.Repeat("_", n/3), strings.Repeat("a", n)+"_89cf9f7d882a9a7d")
	}
	r := rand.New(rand.NewPCG(7, 9))
	for range 2000 {
		b := make([]byte, r.IntN(260))
		for i := range b {
			const alphabet = "ab_:~%/.\x00\xff"
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		names = append(names, string(b))
	}
	seen := map[string]string{}
	for _, n := range names {
		d := DirName(n)
		if !safeDirName.MatchString(d) {
			t.Fatalf("DirName(%q) = %q is not a safe directory name", n, d)
		}
		if prev, ok := seen[d]; ok && prev != n {
			t.Fatalf("DirName(%q) = DirName(%q) = %q", n, prev, d)
		}
		seen[d] = n
	}
}

// The shell names a job's space from the workspace it runs in, and a tool
// with no workspace (firstmate admin) from the channel's name: both must
// find the same space.
func TestJobSpaceIsTheWorkspaceDirectory(t *testing.T) {
	base := t.TempDir()
	for _, name := range []string{"slack:T1:C1:", "telegram::-100123:", "console:::", strings.Repeat("x:", 120)} {
		ws, err := OpenWorkspace(base, name)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := JobSpace(name), filepath.Base(ws.Dir()); got != want {
			t.Errorf("JobSpace(%q) = %q; its workspace directory is %q", name, got, want)
		}
		ws.Close()
	}
}
