//go:build linux

package check

import (
	"bytes"
	"encoding/json"
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/moby/profiles/seccomp"
	"github.com/opencontainers/runtime-spec/specs-go"
)

var update = flag.Bool("update", false, "rewrite deploy/docker/seccomp.json from Docker's default profile")

// seccompFile is the profile for `docker run --security-opt seccomp=…` and
// compose's security_opt; Kubernetes nodes take the same file as a
// Localhost profile.
var seccompFile = repoPath("deploy/docker/seccomp.json")

// sandboxSyscalls are the calls firstmate's sandbox makes that Docker's
// default profile refuses a container without CAP_SYS_ADMIN
// (tools/sandbox/run_linux.go starts the helper, helper_linux.go builds
// its root). Nothing else is added: unshare and setns are not among them
// (the namespaces come from clone's flags), and the helper's own filter
// refuses all of these to the command it runs.
var sandboxSyscalls = []string{
	"clone",       // with CLONE_NEWUSER|NEWNS|NEWPID|NEWNET|NEWIPC|NEWUTS|NEWCGROUP; Docker allows clone only without namespace flags
	"clone3",      // the same, with CLONE_INTO_CGROUP where a cgroup v2 subtree is delegated; Docker answers ENOSYS
	"mount",       // private propagation, the tmpfs root, read-only binds, /tmp, /dev, a fresh /proc
	"umount2",     // detaching the old root
	"pivot_root",  // into the new root (not in Docker's profile even with CAP_SYS_ADMIN)
	"open_tree",   // a detached copy of the workspace mount
	"move_mount",  // attaching it at /workspace
	"sethostname", // "sandbox", in the new UTS namespace
}

const sandboxComment = "firstmate's sandbox: clone with namespace flags, then mount, pivot_root and friends inside the new user namespace (see tools/sandbox)"

// firstmateProfile is Docker's default profile with sandboxSyscalls
// allowed. Docker's own rules for clone and clone3 when CAP_SYS_ADMIN is
// absent (clone only without namespace flags, clone3 answered ENOSYS) would
// contradict that, so they go; every other rule stays as Docker has it.
func firstmateProfile(t *testing.T) *seccomp.Seccomp {
	p := seccomp.DefaultProfile()
	var kept []*seccomp.Syscall
	var dropped []string
	for _, s := range p.Syscalls {
		if s.Excludes != nil && slices.Contains(s.Excludes.Caps, "CAP_SYS_ADMIN") {
			for _, n := range s.Names {
				if !slices.Contains(sandboxSyscalls, n) {
					t.Fatalf("Docker's profile has a new rule for %s when CAP_SYS_ADMIN is absent; decide whether it stays", n)
				}
			}
			dropped = append(dropped, strings.Join(s.Names, ",")+":"+string(s.Action))
			continue
		}
		kept = append(kept, s)
	}
	// clone for two argument orders (s390 swaps them), clone3 → ENOSYS.
	if want := []string{"clone:SCMP_ACT_ALLOW", "clone:SCMP_ACT_ALLOW", "clone3:SCMP_ACT_ERRNO"}; !slices.Equal(dropped, want) {
		t.Fatalf("Docker's rules for callers without CAP_SYS_ADMIN are %v, the profile was made for %v", dropped, want)
	}
	p.Syscalls = append(kept, &seccomp.Syscall{
		LinuxSyscall: specs.LinuxSyscall{Names: sandboxSyscalls, Action: specs.ActAllow},
		Comment:      sandboxComment,
	})
	return p
}

// TestSeccompProfile: deploy/docker/seccomp.json is Docker's default
// profile (github.com/moby/profiles/seccomp, the package dockerd builds
// its default from) plus what the sandbox needs, byte for byte. After a
// bump of that module, `go test -run TestSeccompProfile -update` rewrites
// it.
func TestSeccompProfile(t *testing.T) {
	// The same encoding as moby's own default.json generator.
	want, err := json.MarshalIndent(firstmateProfile(t), "", "\t")
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, '\n')
	if *update {
		if err := os.WriteFile(seccompFile, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(seccompFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is not Docker's default profile plus the sandbox's calls; run `go test -run TestSeccompProfile -update` in deploy/check", seccompFile)
	}
}

// dockerDefaultCaps is what Docker gives a container unless told
// otherwise; the profile's conditional rules are resolved against it.
var dockerDefaultCaps = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD", "CAP_NET_RAW", "CAP_SETGID",
	"CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE",
}

// resolved loads a profile the way dockerd does for a container with
// Docker's default capabilities on this machine's architecture.
func resolved(t *testing.T, body []byte) *specs.LinuxSeccomp {
	t.Helper()
	spec := &specs.Spec{Process: &specs.Process{Capabilities: &specs.LinuxCapabilities{Bounding: dockerDefaultCaps}}}
	sc, err := seccomp.LoadProfile(string(body), spec)
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// verdicts maps each syscall to the actions of its rules without argument
// conditions, and notes those with conditions.
func verdicts(sc *specs.LinuxSeccomp) map[string][]string {
	v := map[string][]string{}
	for _, r := range sc.Syscalls {
		a := string(r.Action)
		if len(r.Args) > 0 {
			a += "(if args)"
		}
		for _, n := range r.Names {
			v[n] = append(v[n], a)
		}
	}
	return v
}

// TestSeccompProfileAllowsTheSandboxOnly resolves the shipped profile as
// dockerd would and compares it with Docker's default: the sandbox's calls
// are allowed unconditionally and nothing else changed.
func TestSeccompProfileAllowsTheSandboxOnly(t *testing.T) {
	body, err := os.ReadFile(seccompFile)
	if err != nil {
		t.Fatal(err)
	}
	ours := verdicts(resolved(t, body))
	def, _ := json.Marshal(seccomp.DefaultProfile())
	docker := verdicts(resolved(t, def))
	for _, n := range sandboxSyscalls {
		if got := ours[n]; !slices.Equal(got, []string{string(specs.ActAllow)}) {
			t.Errorf("%s: rules %v, want one unconditional allow", n, got)
		}
		if slices.Equal(docker[n], []string{string(specs.ActAllow)}) {
			t.Errorf("%s is allowed by Docker's default already; it needs no place in sandboxSyscalls", n)
		}
	}
	for n, v := range docker {
		if !slices.Contains(sandboxSyscalls, n) && !slices.Equal(ours[n], v) {
			t.Errorf("%s: %v in the profile, %v in Docker's default", n, ours[n], v)
		}
	}
	for n := range ours {
		if _, ok := docker[n]; !ok && !slices.Contains(sandboxSyscalls, n) {
			t.Errorf("%s is in the profile but not in Docker's default", n)
		}
	}
	for _, n := range []string{"unshare", "setns", "keyctl", "bpf", "fsopen", "mount_setattr"} {
		if slices.Contains(ours[n], string(specs.ActAllow)) {
			t.Errorf("%s is allowed; the sandbox does not need it", n)
		}
	}
	var sc seccomp.Seccomp
	if err := json.Unmarshal(body, &sc); err != nil || sc.DefaultAction != specs.ActErrno {
		t.Errorf("default action %q (%v), want Docker's SCMP_ACT_ERRNO", sc.DefaultAction, err)
	}
}

// helperCalls maps the golang.org/x/sys/unix functions that need more than
// Docker's default profile allows to the syscalls they make.
var helperCalls = map[string][]string{
	"Mount": {"mount"}, "Unmount": {"umount2"}, "PivotRoot": {"pivot_root"}, "OpenTree": {"open_tree"},
	"MoveMount": {"move_mount"}, "Sethostname": {"sethostname"}, "Setdomainname": {"setdomainname"},
	"Unshare": {"unshare"}, "Setns": {"setns"}, "Chroot": {"chroot"}, "Fsopen": {"fsopen"}, "Fsmount": {"fsmount"},
	"Fsconfig": {"fsconfig"}, "Fspick": {"fspick"}, "MountSetattr": {"mount_setattr"},
	"Syscall": nil, "RawSyscall": nil, // a raw call would hide what it makes: the test refuses it
}

// TestSeccompCoversTheSandboxSource reads the sandbox's source (not its
// tests) for calls that Docker's profile refuses, so a new one in the
// helper cannot ship without the profile allowing it.
func TestSeccompCoversTheSandboxSource(t *testing.T) {
	files, err := filepath.Glob(repoPath("tools/sandbox/*_linux.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no sandbox source: %v", err)
	}
	needed := map[string]bool{}
	fset := token.NewFileSet()
	for _, f := range files {
		af, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(af, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if sel.Sel.Name == "UseCgroupFD" { // clone3 with CLONE_INTO_CGROUP
				needed["clone3"] = true
			}
			pkg, ok := sel.X.(*ast.Ident)
			if !ok || (pkg.Name != "unix" && pkg.Name != "syscall") {
				return true
			}
			calls, known := helperCalls[sel.Sel.Name]
			switch {
			case known && calls == nil:
				t.Errorf("%s: %s.%s makes a syscall this test cannot name; list it in sandboxSyscalls and here", fset.Position(sel.Pos()), pkg.Name, sel.Sel.Name)
			case known:
				for _, c := range calls {
					needed[c] = true
				}
			case strings.HasPrefix(sel.Sel.Name, "CLONE_NEW"): // exec.Cmd's Cloneflags: clone
				needed["clone"] = true
			}
			return true
		})
	}
	if len(needed) == 0 {
		t.Fatal("found none of the sandbox's calls: has the source moved?")
	}
	for c := range needed {
		if !slices.Contains(sandboxSyscalls, c) {
			t.Errorf("the sandbox calls %s, which the profile does not allow", c)
		}
	}
	for _, c := range sandboxSyscalls {
		if !needed[c] {
			t.Errorf("the profile allows %s, which the sandbox no longer calls", c)
		}
	}
}
