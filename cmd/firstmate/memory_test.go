package main

import (
	"testing"
	"testing/fstest"

	"github.com/firstmate/firstmate/internal/config"
)

// A replica in a container with 512 MiB holds what that leaves room for,
// with Go's soft limit below it; an operator's max_turns or GOMEMLIMIT
// stands; no limit, the most.
func TestMemoryPlan(t *testing.T) {
	container := fstest.MapFS{
		"proc/self/cgroup":         {Data: []byte("0::/\n")},
		"sys/fs/cgroup/memory.max": {Data: []byte("536870912\n")},
	}
	noEnv := func(string) (string, bool) { return "", false }
	withGOMEMLIMIT := func(k string) (string, bool) { return "400MiB", k == "GOMEMLIMIT" }
	for _, tc := range []struct {
		name      string
		sys       fstest.MapFS
		maxTurns  int
		env       func(string) (string, bool)
		turns     int
		soft      int64
		limitSeen int64
	}{
		{"512 MiB container", container, 0, noEnv, 1792, 483183819, 512 << 20},
		{"max_turns set", container, 300, noEnv, 300, 483183819, 512 << 20},
		{"GOMEMLIMIT set", container, 0, withGOMEMLIMIT, 1792, 0, 512 << 20},
		{"no limit", fstest.MapFS{}, 0, noEnv, 4096, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &config.Config{Agent: config.Agent{MaxTurns: tc.maxTurns}}
			turns, soft, lim := memoryPlan(cfg, tc.sys, tc.env)
			if turns != tc.turns || soft != tc.soft || lim.Bytes != tc.limitSeen {
				t.Errorf("memoryPlan = %d turns, soft %d, limit %d; want %d, %d, %d", turns, soft, lim.Bytes, tc.turns, tc.soft, tc.limitSeen)
			}
		})
	}
}
