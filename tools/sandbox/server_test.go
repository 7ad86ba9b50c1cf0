//go:build linux

package sandbox

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// A server (an MCP server on stdio) runs as a daemon: its stdin is a pipe
// firstmate writes to, its stdout apart from its stderr, it gets the
// variables it is given (and they are not on the helper's command line),
// it reads the extra paths it is given, read-only, and no wall-clock
// timeout ends it.
func TestDaemonServer(t *testing.T) {
	sb := New(Config{})
	dir := workspace(t, sb)
	// An extra path: a directory only its own mode opens to the sandbox
	// (the temp dirs above it are 0700), and a single file elsewhere.
	extra := t.TempDir()
	os.Chmod(extra, 0o755)
	if err := os.WriteFile(filepath.Join(extra, "data.txt"), []byte("from the host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	single := filepath.Join(t.TempDir(), "single.txt")
	if err := os.WriteFile(single, []byte("one file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const secret = "s3cret-token-value"
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer inW.Close()
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer outR.Close()
	var stderr bytes.Buffer
	script := `echo "token=$TOKEN home=$HOME"
cat ` + extra + `/data.txt ` + single + `
touch ` + extra + `/new 2>/dev/null || echo read-only
echo oops >&2
sleep 0.5
while read line; do echo "got $line"; done`
	p, err := sb.Start(t.Context(), Command{Dir: dir, Script: script, Stdin: inR, Stderr: &syncWriter{w: &stderr},
		Env: []string{"TOKEN=" + secret, "HOME=/workspace/home"}, Paths: []string{extra, single, "/usr/bin", extra},
		Daemon: true, Limits: Limits{Timeout: 100 * time.Millisecond}}, outW)
	inR.Close()
	outW.Close()
	if err != nil {
		t.Fatal(err)
	}
	cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p.Pid()))
	if bytes.Contains(cmdline, []byte(secret)) {
		t.Errorf("the variable's value is on the helper's command line: %q", cmdline)
	}
	lines := bufio.NewScanner(outR)
	next := func() string {
		if !lines.Scan() {
			t.Fatalf("output ended early: %v", lines.Err())
		}
		return lines.Text()
	}
	for _, want := range []string{"token=" + secret + " home=/workspace/home", "from the host", "one file", "read-only"} {
		if got := next(); got != want {
			t.Fatalf("line %q, want %q", got, want)
		}
	}
	// Past its 100 ms timeout, it still answers.
	fmt.Fprintln(inW, "hello")
	if got := next(); got != "got hello" {
		t.Fatalf("line %q, want the echo of stdin", got)
	}
	inW.Close()
	res, err := p.Wait()
	if err != nil || res.ExitCode != 0 || res.TimedOut {
		t.Fatalf("wait: %+v, %v", res, err)
	}
	if got := stderr.String(); got != "oops\n" {
		t.Errorf("stderr %q", got)
	}
	if _, err := os.Stat(filepath.Join(extra, "new")); err == nil {
		t.Error("the command wrote into a read-only path")
	}
}

// A daemon ends with its context, and Kill ends it.
func TestDaemonKill(t *testing.T) {
	sb := New(Config{})
	var out capture
	out.max = 1 << 10
	p, err := sb.Start(t.Context(), Command{Dir: workspace(t, sb), Script: "sleep 60", Daemon: true}, &out)
	if err != nil {
		t.Fatal(err)
	}
	p.Kill()
	done := make(chan struct{})
	go func() { p.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Kill did not end the daemon")
	}
}

func TestMountPath(t *testing.T) {
	for _, c := range []struct {
		in      string
		clean   string
		visible bool
		err     string
	}{
		{"/opt/mcp/notes/", "/opt/mcp/notes", false, ""},
		{"/opt/../srv/x", "/srv/x", false, ""},
		{"/usr/lib/python3", "/usr/lib/python3", true, ""},
		{"/lib/x", "/lib/x", true, ""},
		{"relative/x", "", false, "not absolute"},
		{"/", "", false, "the host's root"},
		{"/workspace/x", "", false, "/workspace is the sandbox's own"},
		{"/proc/1", "", false, "/proc is the sandbox's own"},
		{"/dev", "", false, "/dev is the sandbox's own"},
	} {
		clean, visible, err := mountPath(c.in)
		if clean != c.clean || visible != c.visible || (err == nil) != (c.err == "") || err != nil && !strings.Contains(err.Error(), c.err) {
			t.Errorf("mountPath(%q) = %q, %v, %v; want %q, %v, %q", c.in, clean, visible, err, c.clean, c.visible, c.err)
		}
	}
}

func TestCommandEnv(t *testing.T) {
	got := commandEnv([]string{"PATH=/bin", "HOME=/workspace"}, []string{"GODEBUG=x", envPrefix + "HOME=/h", envPrefix + "A=b=c"})
	if want := []string{"PATH=/bin", "HOME=/h", "A=b=c"}; !slices.Equal(got, want) {
		t.Errorf("env %q, want %q", got, want)
	}
	for _, bad := range []string{"NOEQUALS", "=x", "1A=x", "A B=x"} {
		if checkEnv([]string{bad}) == nil {
			t.Errorf("checkEnv accepted %q", bad)
		}
	}
	if err := checkEnv([]string{"A_1=", "b=x=y"}); err != nil {
		t.Error(err)
	}
}

// A missing path fails the start and names it.
func TestMissingPath(t *testing.T) {
	sb := New(Config{})
	var out capture
	out.max = 1 << 10
	_, err := sb.Start(t.Context(), Command{Dir: workspace(t, sb), Script: "true", Paths: []string{"/nonexistent/firstmate"}}, &out)
	if err == nil || !strings.Contains(err.Error(), "sandbox path /nonexistent/firstmate") {
		t.Fatalf("err = %v", err)
	}
}

type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
