package memlimit

import (
	"testing"
	"testing/fstest"
)

const mib = 1 << 20

func TestFind(t *testing.T) {
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	for _, tc := range []struct {
		name   string
		sys    fstest.MapFS
		bytes  int64
		source string
	}{
		{name: "a container on cgroup v2", sys: fstest.MapFS{
			"proc/self/cgroup":          file("0::/\n"),
			"sys/fs/cgroup/memory.max":  file("536870912\n"),
			"sys/fs/cgroup/memory.high": file("max\n"),
		}, bytes: 512 * mib, source: "/sys/fs/cgroup/memory.max"},
		{name: "a service with no limit of its own, in a slice with one", sys: fstest.MapFS{
			"proc/self/cgroup": file("0::/system.slice/firstmate.service\n"),
			"sys/fs/cgroup/system.slice/firstmate.service/memory.max": file("max\n"),
			"sys/fs/cgroup/system.slice/memory.max":                   file("1073741824\n"),
		}, bytes: 1024 * mib, source: "/sys/fs/cgroup/system.slice/memory.max"},
		{name: "the smallest of a cgroup and those above it", sys: fstest.MapFS{
			"proc/self/cgroup": file("0::/system.slice/firstmate.service\n"),
			"sys/fs/cgroup/system.slice/firstmate.service/memory.max": file("268435456\n"),
			"sys/fs/cgroup/system.slice/memory.max":                   file("1073741824\n"),
		}, bytes: 256 * mib, source: "/sys/fs/cgroup/system.slice/firstmate.service/memory.max"},
		{name: "cgroup v2 without a limit", sys: fstest.MapFS{
			"proc/self/cgroup":         file("0::/\n"),
			"sys/fs/cgroup/memory.max": file("max\n"),
		}},
		{name: "a container on cgroup v1", sys: fstest.MapFS{
			"proc/self/cgroup":                           file("5:cpu,cpuacct:/docker/abc\n4:memory:/docker/abc\n1:name=systemd:/docker/abc\n"),
			"sys/fs/cgroup/memory/memory.limit_in_bytes": file("268435456\n"),
		}, bytes: 256 * mib, source: "/sys/fs/cgroup/memory/memory.limit_in_bytes"},
		{name: "a host on cgroup v1, at the cgroup's path", sys: fstest.MapFS{
			"proc/self/cgroup": file("4:memory:/system.slice/firstmate.service\n"),
			"sys/fs/cgroup/memory/system.slice/firstmate.service/memory.limit_in_bytes": file("134217728\n"),
		}, bytes: 128 * mib, source: "/sys/fs/cgroup/memory/system.slice/firstmate.service/memory.limit_in_bytes"},
		{name: "cgroup v1, a parent's limit", sys: fstest.MapFS{
			"proc/self/cgroup": file("4:memory:/process_api/abc\n"),
			"sys/fs/cgroup/memory/process_api/abc/memory.limit_in_bytes": file("9223372036854771712\n"),
			"sys/fs/cgroup/memory/process_api/memory.limit_in_bytes":     file("805306368\n"),
			"sys/fs/cgroup/memory/memory.limit_in_bytes":                 file("9223372036854771712\n"),
		}, bytes: 768 * mib, source: "/sys/fs/cgroup/memory/process_api/memory.limit_in_bytes"},
		{name: "cgroup v1 without a limit (the largest value, page-rounded)", sys: fstest.MapFS{
			"proc/self/cgroup":                           file("4:memory:/\n"),
			"sys/fs/cgroup/memory/memory.limit_in_bytes": file("9223372036854771712\n"),
		}},
		{name: "hybrid: the v1 memory controller when v2 has no limit", sys: fstest.MapFS{
			"proc/self/cgroup": file("0::/user.slice\n4:memory:/user.slice\n"),
			"sys/fs/cgroup/memory/user.slice/memory.limit_in_bytes": file("2147483648\n"),
		}, bytes: 2048 * mib, source: "/sys/fs/cgroup/memory/user.slice/memory.limit_in_bytes"},
		{name: "no cgroup file", sys: fstest.MapFS{}},
		{name: "nonsense", sys: fstest.MapFS{
			"proc/self/cgroup":         file("what\n0::/\n"),
			"sys/fs/cgroup/memory.max": file("lots\n"),
		}},
		{name: "a path that climbs out", sys: fstest.MapFS{
			"proc/self/cgroup":         file("0::/../../etc\n"),
			"sys/fs/cgroup/memory.max": file("1048576000\n"),
		}, bytes: 1048576000, source: "/sys/fs/cgroup/memory.max"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Find(tc.sys)
			if got.Bytes != tc.bytes || got.Source != tc.source {
				t.Errorf("Find = %+v, want %d from %q", got, tc.bytes, tc.source)
			}
		})
	}
}

func TestTurns(t *testing.T) {
	for _, tc := range []struct {
		limit int64
		want  int
	}{
		{0, 4096},               // no limit: the most
		{512 * mib, 1792},       // (512 - 64) MiB / 2 / 128 KiB
		{1024 * mib, 3840},      // (1024 - 64) MiB / 2 / 128 KiB
		{64 * 1024 * mib, 4096}, // a large machine: the most
		{64 * mib, 16},          // no room left: a few still
		{32 * mib, 16},          // less than the reserve
		{int64(1) << 62, 4096},  // absurd
		{128 * mib, 256},        // (128 - 64) MiB / 2 / 128 KiB
	} {
		if got := Turns(tc.limit, 4096); got != tc.want {
			t.Errorf("Turns(%d MiB) = %d, want %d", tc.limit/mib, got, tc.want)
		}
	}
	// What each turn is given, as many as that, stays within the limit.
	for _, limit := range []int64{256 * mib, 512 * mib, 1024 * mib} {
		if n := Turns(limit, 1<<20); int64(n)*PerTurn+reserve > limit {
			t.Errorf("Turns(%d MiB) = %d: %d MiB with the reserve", limit/mib, n, (int64(n)*PerTurn+reserve)/mib)
		}
	}
	if got := Soft(1000 * mib); got != 900*mib {
		t.Errorf("Soft(1000 MiB) = %d MiB, want 900", got/mib)
	}
}
