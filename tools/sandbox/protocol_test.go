//go:build linux

package sandbox

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// runHelperHere starts the helper without namespaces, as a person or a
// stray process could, and returns its status message.
func runHelperHere(t *testing.T, spec string) string {
	t.Helper()
	sr, sw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer sr.Close()
	devnull, _ := os.Open(os.DevNull)
	defer devnull.Close()
	cmd := exec.Command("/proc/self/exe")
	cmd.Args = []string{HelperName, spec}
	cmd.ExtraFiles = []*os.File{devnull, sw}
	err = cmd.Run()
	sw.Close()
	msg, _ := io.ReadAll(sr)
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 127 {
		t.Fatalf("helper: %v", err)
	}
	return string(msg)
}

// A helper from another build refuses a spec it may misread, before it
// touches anything, and says how to fix it.
func TestHelperRefusesAnotherProtocol(t *testing.T) {
	if msg := runHelperHere(t, `{"v":0,"script":"true"}`); !strings.Contains(msg, fmt.Sprintf("from another firstmate build (protocol %d, firstmate sent 0)", protocol)) {
		t.Fatalf("status = %q", msg)
	}
}

// Started outside fresh namespaces, the helper changes nothing (as root it
// could otherwise remount the host's / and cover its /tmp).
func TestHelperRefusesToRunOutsideItsNamespaces(t *testing.T) {
	before, _ := os.ReadFile("/proc/self/mountinfo")
	msg := runHelperHere(t, fmt.Sprintf(`{"v":%d,"script":"true","dir":%q}`, protocol, t.TempDir()))
	if !strings.Contains(msg, "runs only as PID 1 of the fresh namespaces") {
		t.Fatalf("status = %q", msg)
	}
	if after, _ := os.ReadFile("/proc/self/mountinfo"); string(after) != string(before) {
		t.Fatalf("the host's mounts changed:\n%s", after)
	}
}
