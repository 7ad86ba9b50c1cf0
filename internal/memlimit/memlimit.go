// Package memlimit finds the memory a replica may use, from its cgroup,
// and what follows from it: how many turns it holds at once, and the Go
// runtime's soft limit, so that a burst of people meets back-pressure and
// a harder-working garbage collector instead of the OOM killer.
package memlimit

import (
	"bufio"
	"bytes"
	"io/fs"
	"math"
	"path"
	"strconv"
	"strings"
)

// PerTurn is what a turn that waits on the model takes in resident
// memory, with a margin: the load generator measures 109-112 KB at 1,000
// and at 4,096 in flight (its goroutine's stack, the model call's
// connection and buffers, the messages, and the garbage collector's room
// over them).
const PerTurn = 128 << 10

// reserve is kept out of the turns' share for the process at rest, its
// caches and what a tool call reads.
const reserve = 64 << 20

// Limit is a memory limit and where it was found.
type Limit struct {
	Bytes  int64  // 0: none found
	Source string // the file it was read from
}

// Find reads the memory limit of this process's cgroup from sys, the
// root of a Linux machine's /proc and /sys (os.DirFS("/")): the smallest
// memory.max of its cgroup v2 and the cgroups above it, or, on cgroup v1,
// the smallest memory.limit_in_bytes of its memory cgroup and those above
// it. No cgroup, no limit ("max",
// or v1's page-rounded largest value) and unreadable files give none.
func Find(sys fs.FS) Limit {
	b, err := fs.ReadFile(sys, "proc/self/cgroup")
	if err != nil {
		return Limit{}
	}
	var v1 string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		// hierarchy-ID:controllers:path; v2 is 0 with no controllers.
		id, rest, _ := strings.Cut(sc.Text(), ":")
		ctrls, p, ok := strings.Cut(rest, ":")
		switch {
		case !ok:
		case id == "0" && ctrls == "":
			if l := smallest(sys, "sys/fs/cgroup", p, "memory.max"); l.Bytes > 0 {
				return l
			}
		case v1 == "" && hasController(ctrls, "memory"):
			v1 = p
		}
	}
	if v1 != "" {
		// Inside a container the memory hierarchy is mounted at its own
		// cgroup, where the path (the host's) is not found and the walk
		// ends at the mount's root: the container's limit.
		return smallest(sys, "sys/fs/cgroup/memory", v1, "memory.limit_in_bytes")
	}
	return Limit{}
}

// smallest walks from the cgroup at p under root up to root itself,
// keeping the smallest limit in file: each bounds everything below it.
func smallest(sys fs.FS, root, p, file string) Limit {
	var best Limit
	for dir := path.Clean("/" + p); ; dir = path.Dir(dir) {
		f := path.Join(root, dir, file)
		if n, ok := readLimit(sys, f); ok && (best.Bytes == 0 || n < best.Bytes) {
			best = Limit{Bytes: n, Source: "/" + f}
		}
		if dir == "/" {
			return best
		}
	}
}

// unlimitedV1 is about where cgroup v1 puts "no limit": the largest
// int64, rounded down to a page.
const unlimitedV1 = math.MaxInt64 &^ (1<<20 - 1)

// readLimit reads a limit file; "max", a v1 "no limit" and a bad or
// missing file are no limit.
func readLimit(sys fs.FS, name string) (int64, bool) {
	b, err := fs.ReadFile(sys, name)
	if err != nil {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || n <= 0 || n >= unlimitedV1 {
		return 0, false
	}
	return n, true
}

func hasController(list, name string) bool {
	for c := range strings.SplitSeq(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

// Turns is how many turns a replica with limit bytes holds at once: half
// of what is left after the reserve, the other half for the sandboxed
// commands (which run in its cgroup) and the rest of the process; at
// most most, at least 16.
func Turns(limit int64, most int) int {
	if limit <= 0 {
		return most
	}
	n := (limit - reserve) / 2 / PerTurn
	return int(min(max(n, 16), int64(most)))
}

// Soft is the Go runtime's soft memory limit for a cgroup limit: nine
// tenths of it, so that the collector works harder before the kernel
// kills the process.
func Soft(limit int64) int64 {
	return limit / 10 * 9
}
