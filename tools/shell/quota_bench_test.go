//go:build linux

package shell

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// legacyUsage is how the quota was measured before the running figure: a
// full walk after every command (and before it, while over quota), with a
// FileInfo per entry.
func legacyUsage(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if fi, err := d.Info(); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				n += st.Blocks * 512
			}
		}
		return nil
	})
	return n
}

// BenchmarkQuota measures what the quota costs a command in a workspace of
// 200,000 files (the file bomb), before and after the running
// figure, and what one walk costs each way (paid now only at first use and
// when a cap is crossed).
//
//	go test -run '^$' -bench BenchmarkQuota -benchtime 20x ./tools/shell/
func BenchmarkQuota(b *testing.B) {
	const dirs, per = 200, 1000
	dir := b.TempDir()
	for d := range dirs {
		sub := filepath.Join(dir, fmt.Sprint(d))
		if err := os.Mkdir(sub, 0o755); err != nil {
			b.Fatal(err)
		}
		for f := range per {
			fd, err := syscall.Open(filepath.Join(sub, fmt.Sprint(f)), syscall.O_CREAT|syscall.O_WRONLY|syscall.O_CLOEXEC, 0o644)
			if err != nil {
				b.Fatal(err)
			}
			syscall.Close(fd)
		}
	}

	b.Run("per-command/legacy", func(b *testing.B) {
		for b.Loop() {
			legacyUsage(dir) // quotaAfter: every command, over quota or not
		}
	})
	b.Run("per-command/running-figure", func(b *testing.B) {
		q := newQuota(Usage{DefaultQuota, 1 << 30}, true)
		q.admit(dir) // first use: the one walk
		w0 := q.walks.Load()
		for b.Loop() {
			q.admit(dir) // before the command
			q.admit(dir) // after it, for the note
		}
		b.ReportMetric(float64(q.walks.Load()-w0)/float64(b.N), "walks/op")
	})
	b.Run("per-command/running-figure-over-file-cap", func(b *testing.B) {
		q := newQuota(Usage{DefaultQuota, DefaultQuotaFiles}, true)
		if !q.admit(dir).frozen {
			b.Fatal("not over the file cap")
		}
		w0 := q.walks.Load()
		for b.Loop() {
			q.admit(dir)
			q.admit(dir)
		}
		b.ReportMetric(float64(q.walks.Load()-w0)/float64(b.N), "walks/op")
	})
	b.Run("walk/legacy", func(b *testing.B) {
		for b.Loop() {
			legacyUsage(dir)
		}
	})
	b.Run("walk/walkTree", func(b *testing.B) {
		for b.Loop() {
			if _, err := walkTree(dir, noStop); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("walk/walkTree-stopped-at-100k-files", func(b *testing.B) {
		for b.Loop() {
			if _, err := walkTree(dir, Usage{noStop.Bytes, DefaultQuotaFiles}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
