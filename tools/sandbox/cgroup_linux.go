package sandbox

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// cgroupRoot is where the cgroup v2 hierarchy is mounted.
const cgroupRoot = "/sys/fs/cgroup"

// cgroups gives each command a cgroup of its own, with memory.max and
// pids.max, inside a cgroup v2 subtree delegated to firstmate (systemd's
// Delegate=yes, or a container's own cgroup namespace). Only a cgroup
// bounds a command's memory as a whole (its processes together, /tmp and
// shared memory included); where there is none, RLIMIT_DATA bounds each
// process's private memory (see setRlimits).
type cgroups struct {
	parent string // commands' cgroups are created here
	// cpu says that parent has cpu.weight sandboxWeight: all commands
	// together yield the CPU to firstmate. Where the cpu controller is not
	// delegated, nice values do what they can.
	cpu   bool
	noCPU string // why cpu is false
	n     atomic.Uint64
}

// sandboxWeight is the cpu.weight of all commands together, against
// firstmate's default of 100: when both want the CPU, firstmate gets
// about 90% of it; when firstmate idles, commands get all of it. A
// weight, not a cpu.max quota, so that an idle host is not left idle;
// RLIMIT_CPU and the timeout bound how much CPU time a command takes.
const sandboxWeight = 10

// findCgroups looks for a delegated cgroup v2 subtree with the memory and
// pids controllers and prepares it; it says why there is none otherwise.
// Preparing may move this process into a leaf cgroup of its own ("the no
// internal processes rule": a cgroup that hands controllers to children
// holds no process itself).
func findCgroups() (*cgroups, string) {
	var st unix.Statfs_t
	if err := unix.Statfs(cgroupRoot, &st); err != nil || st.Type != unix.CGROUP2_SUPER_MAGIC {
		return nil, "no cgroup v2 hierarchy at " + cgroupRoot
	}
	own, err := ownCgroup()
	if err != nil {
		return nil, err.Error()
	}
	return prepareCgroups(filepath.Join(cgroupRoot, own))
}

// ownCgroup is this process's cgroup v2 path, from /proc/self/cgroup.
func ownCgroup() (string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if p, ok := strings.CutPrefix(sc.Text(), "0::"); ok {
			return p, nil
		}
	}
	return "", errors.New("this process is in no cgroup v2")
}

var needed = []string{"memory", "pids"}

// prepareCgroups makes dir/firstmate-sandboxes the parent of commands'
// cgroups, with memory and pids enabled for them, and a low cpu.weight
// where the cpu controller is delegated too.
func prepareCgroups(dir string) (*cgroups, string) {
	controllers := readWords(filepath.Join(dir, "cgroup.controllers"))
	if !hasAll(controllers, needed) {
		return nil, fmt.Sprintf("the memory and pids controllers are not delegated to firstmate's cgroup (%s)", dir)
	}
	cg := &cgroups{cpu: slices.Contains(controllers, "cpu"), noCPU: "the cpu controller is not delegated"}
	want := needed
	if cg.cpu {
		want = append(slices.Clip(needed), "cpu")
	}
	if !hasAll(readWords(filepath.Join(dir, "cgroup.subtree_control")), want) {
		// This process (and any other) must leave dir before dir may
		// enable controllers for its children.
		self := filepath.Join(dir, "firstmate")
		if err := os.Mkdir(self, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, fmt.Sprintf("cannot create a cgroup in %s: %v", dir, err)
		}
		procs := readWords(filepath.Join(dir, "cgroup.procs"))
		for _, pid := range procs {
			if err := os.WriteFile(filepath.Join(self, "cgroup.procs"), []byte(pid), 0); err != nil {
				return nil, fmt.Sprintf("cannot move process %s into %s: %v", pid, self, err)
			}
		}
		// cpu is refused (EINVAL) while a realtime process sits in the
		// subtree; memory and pids are still worth having.
		if cg.cpu {
			if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+memory +pids +cpu"), 0); err != nil {
				cg.cpu, cg.noCPU = false, fmt.Sprintf("cannot enable cpu in %s: %v", dir, err)
			}
		}
		if !cg.cpu {
			if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+memory +pids"), 0); err != nil {
				return nil, fmt.Sprintf("cannot enable memory and pids in %s: %v", dir, err)
			}
		}
	}
	parent := filepath.Join(dir, "firstmate-sandboxes")
	if err := os.Mkdir(parent, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Sprintf("cannot create %s: %v", parent, err)
	}
	if err := os.WriteFile(filepath.Join(parent, "cgroup.subtree_control"), []byte("+memory +pids"), 0); err != nil {
		return nil, fmt.Sprintf("cannot enable memory and pids in %s: %v", parent, err)
	}
	if cg.cpu {
		if err := os.WriteFile(filepath.Join(parent, "cpu.weight"), []byte(strconv.Itoa(sandboxWeight)), 0); err != nil {
			cg.cpu, cg.noCPU = false, fmt.Sprintf("cannot set cpu.weight in %s: %v", parent, err)
		}
	}
	cg.parent = parent
	return cg, ""
}

// create makes the cgroup for one command and returns it open (for
// CLONE_INTO_CGROUP) with a function that removes it once the command
// has ended.
func (c *cgroups) create(l Limits) (*os.File, func(), error) {
	// The process ID keeps apart the commands of several firstmate
	// processes sharing one delegated cgroup (replicas in one unit, tests).
	dir := filepath.Join(c.parent, "c"+strconv.Itoa(os.Getpid())+"-"+strconv.FormatUint(c.n.Add(1), 10))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, nil, err
	}
	remove := func() {
		// The last process may take a moment to leave after the kill.
		for i := 0; i < 50; i++ {
			if err := os.Remove(dir); err == nil || errors.Is(err, os.ErrNotExist) {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	settings := [][2]string{{"memory.max", strconv.FormatInt(l.Memory, 10)}, {"memory.swap.max", "0"}, {"pids.max", strconv.Itoa(l.Procs)}}
	for _, s := range settings {
		if err := os.WriteFile(filepath.Join(dir, s[0]), []byte(s[1]), 0); err != nil && !(s[0] == "memory.swap.max" && errors.Is(err, os.ErrNotExist)) {
			remove()
			return nil, nil, fmt.Errorf("%s: %w", s[0], err)
		}
	}
	f, err := os.OpenFile(dir, os.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		remove()
		return nil, nil, err
	}
	return f, remove, nil
}

func readWords(p string) []string {
	b, _ := os.ReadFile(p)
	return strings.Fields(string(b))
}

func hasAll(have, want []string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}
