//go:build linux

package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The delegation steps, on a directory laid out like a cgroup v2 one (the
// kernel's files are plain files here): without the controllers there is
// nothing to do; with them, firstmate moves itself to a leaf, enables the
// controllers, and each command gets memory.max, memory.swap.max and
// pids.max in a cgroup that is removed afterwards.
func TestCgroupDelegationSteps(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"cgroup.controllers": "cpu io", "cgroup.subtree_control": "", "cgroup.procs": "41\n42\n"})
	if cg, why := prepareCgroups(dir); cg != nil || !strings.Contains(why, "not delegated") {
		t.Fatalf("without memory and pids: %v %q", cg, why)
	}

	writeFiles(t, dir, map[string]string{"cgroup.controllers": "cpu io memory pids"})
	cg, why := prepareCgroups(dir)
	if cg == nil {
		t.Fatalf("prepare: %s", why)
	}
	if got := readFile(t, filepath.Join(dir, "firstmate", "cgroup.procs")); got != "42" {
		t.Errorf("the processes were not moved to the leaf (last written %q)", got)
	}
	if got := readFile(t, filepath.Join(dir, "cgroup.subtree_control")); got != "+memory +pids +cpu" {
		t.Errorf("subtree_control = %q", got)
	}
	if got := readFile(t, filepath.Join(cg.parent, "cgroup.subtree_control")); got != "+memory +pids" {
		t.Errorf("the sandboxes' subtree_control = %q", got)
	}
	// All commands together yield the CPU to firstmate (weight 100).
	if got := readFile(t, filepath.Join(cg.parent, "cpu.weight")); !cg.cpu || got != "10" {
		t.Errorf("the sandboxes' cpu.weight = %q (cpu %v, %s), want 10", got, cg.cpu, cg.noCPU)
	}

	f, remove, err := cg.create(Limits{Memory: 64 << 20, Procs: 100})
	if err != nil {
		t.Fatal(err)
	}
	cdir := f.Name()
	f.Close()
	for name, want := range map[string]string{"memory.max": "67108864", "memory.swap.max": "0", "pids.max": "100"} {
		if got := readFile(t, filepath.Join(cdir, name)); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	// A real cgroup directory is removed empty; here the files go first.
	for _, n := range []string{"memory.max", "memory.swap.max", "pids.max"} {
		os.Remove(filepath.Join(cdir, n))
	}
	remove()
	if _, err := os.Stat(cdir); !os.IsNotExist(err) {
		t.Errorf("the command's cgroup is still there: %v", err)
	}
}

// Without the cpu controller, memory and pids are enough; the CPU is
// shared by nice values alone.
func TestCgroupDelegationWithoutCPU(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"cgroup.controllers": "io memory pids", "cgroup.subtree_control": "", "cgroup.procs": ""})
	cg, why := prepareCgroups(dir)
	if cg == nil {
		t.Fatalf("prepare: %s", why)
	}
	if got := readFile(t, filepath.Join(dir, "cgroup.subtree_control")); got != "+memory +pids" {
		t.Errorf("subtree_control = %q", got)
	}
	if _, err := os.Stat(filepath.Join(cg.parent, "cpu.weight")); cg.cpu || !os.IsNotExist(err) {
		t.Errorf("cpu %v, cpu.weight: %v; want neither", cg.cpu, err)
	}
	if got := cpuReport(cg, nil); !strings.HasPrefix(got, "nice 10, SCHED_BATCH (no cpu.weight: the cpu controller is not delegated)") {
		t.Errorf("cpuReport = %q", got)
	}
}

// Where a cgroup v2 subtree is delegated for real, a command cannot take
// more memory than memory.max.
func TestCgroupMemoryLimit(t *testing.T) {
	if cg, why := findCgroups(); cg == nil {
		t.Skip("no delegated cgroup v2 on this host: " + why)
	}
	sb := New(Config{Limits: Limits{Memory: 32 << 20}})
	if _, err := sb.Probe(context.Background()); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if uid, gid := sb.Owner(); uid >= 0 {
		os.Chown(dir, uid, gid)
	}
	res, err := sb.Run(context.Background(), Command{Dir: dir, Script: "dd if=/dev/zero of=/dev/null bs=200M count=1; echo rc=$?"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(res.Output), "rc=0") {
		t.Fatalf("a command held 200 MB under a 32 MiB limit: %s", res.Output)
	}
}
