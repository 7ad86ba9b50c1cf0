//go:build linux

package sandbox

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// benchHelper builds pkg (a main package that calls MaybeHelper) without
// the race detector, as it ships.
func benchHelper(b *testing.B, pkg string) string {
	b.Helper()
	dir := b.TempDir()
	os.Chmod(filepath.Dir(dir), 0o755) // the helper runs as the sandbox uid, which must reach it
	os.Chmod(dir, 0o755)
	exe := filepath.Join(dir, filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-o", exe, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("build %s: %v\n%s", pkg, err, out)
	}
	return exe
}

// BenchmarkStart measures `sh -c true` through the sandbox, with the
// helper being the firstmate binary re-executed or the small dedicated
// one. It reports the median and p95 of the runs.
func BenchmarkStart(b *testing.B) {
	for _, h := range []struct{ name, pkg string }{
		{"reexec-firstmate", "github.com/firstmate/firstmate/cmd/firstmate"},
		{"dedicated-helper", "github.com/firstmate/firstmate/cmd/firstmate-sandbox"},
	} {
		b.Run(h.name, func(b *testing.B) {
			sb := New(Config{Exe: benchHelper(b, h.pkg)})
			dir := b.TempDir()
			if uid, gid := sb.Owner(); uid >= 0 {
				os.Chown(dir, uid, gid)
			}
			var took []time.Duration
			b.ResetTimer()
			for b.Loop() {
				t0 := time.Now()
				res, err := sb.Run(context.Background(), Command{Dir: dir, Script: "true"})
				took = append(took, time.Since(t0))
				if err != nil || res.ExitCode != 0 {
					b.Fatalf("run: %v %+v %s", err, res, res.Output)
				}
			}
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(took[len(took)*95/100].Microseconds())/1000, "p95-ms")
		})
	}
}
