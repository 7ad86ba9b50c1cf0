//go:build linux

package shell

import (
	"os"
	"strconv"
	"strings"
	"time"
)

// userHZ is the unit of the times in /proc/<pid>/stat: fixed at 100 by
// the kernel's ABI, whatever the kernel's own tick.
const userHZ = 100

// treeCPU is the CPU time (user and system) a process and everything below
// it have used: its own and that of its children it has reaped, from its
// stat, plus, recursively, that of its live children (from the task
// children lists). A process that ends between the reads is missed until
// its parent reaps it, so the figure can lag by what that process used.
func treeCPU(pid int) time.Duration {
	var ticks int64
	seen := map[int]bool{}
	var walk func(pid int, depth int)
	walk = func(pid int, depth int) {
		if seen[pid] || depth > 64 {
			return
		}
		seen[pid] = true
		ticks += statCPU(pid)
		tasks, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
		if err != nil {
			return
		}
		for _, t := range tasks {
			b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + t.Name() + "/children")
			if err != nil {
				continue
			}
			for _, f := range strings.Fields(string(b)) {
				if c, err := strconv.Atoi(f); err == nil {
					walk(c, depth+1)
				}
			}
		}
	}
	walk(pid, 0)
	return time.Duration(ticks) * time.Second / userHZ
}

// statCPU reads utime, stime, cutime and cstime (fields 14 to 17) of pid's
// stat, in ticks; 0 if it is gone.
func statCPU(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name (field 2) is in parentheses and may hold anything:
	// the fields are counted from the last ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:])) // f[0] is field 3
	if len(f) < 15 {
		return 0
	}
	var n int64
	for _, s := range f[11:15] {
		v, _ := strconv.ParseInt(s, 10, 64)
		n += v
	}
	return n
}
