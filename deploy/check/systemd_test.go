package check

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

var unitFile = repoPath("deploy/systemd/firstmate.service")

// unitSettings reads a unit file's [Service] settings (the last of each
// name wins, as with systemd for these).
func unitSettings(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.Open(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	settings := map[string]string{}
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "["):
			section = line
		case section == "[Service]":
			k, v, _ := strings.Cut(line, "=")
			settings[k] = v
		}
	}
	return settings
}

// TestSystemdUnit: the unit's hardening is the one that leaves the
// sandbox working (see the comments in the unit for why each is or is
// not there), and it stops later than firstmate's shutdown takes.
func TestSystemdUnit(t *testing.T) {
	s := unitSettings(t)
	want := map[string]string{
		"ProtectSystem":         "strict",
		"ReadWritePaths":        "/var/lib/firstmate",
		"StateDirectory":        "firstmate",
		"ProtectHome":           "yes",
		"PrivateTmp":            "yes",
		"NoNewPrivileges":       "yes",
		"Delegate":              "yes",
		"EnvironmentFile":       "/etc/firstmate/env",
		"KillSignal":            "SIGTERM",
		"ExecStart":             "/usr/local/bin/firstmate serve",
		"CapabilityBoundingSet": "",
	}
	for k, v := range want {
		if got, ok := s[k]; !ok || got != v {
			t.Errorf("%s=%q, want %q", k, got, v)
		}
	}
	if !strings.Contains(s["RestrictAddressFamilies"], "AF_UNIX") || !strings.Contains(s["RestrictAddressFamilies"], "AF_INET") {
		t.Errorf("RestrictAddressFamilies=%q", s["RestrictAddressFamilies"])
	}
	// Each of these breaks the sandbox (measured: a fresh /proc is refused
	// under the first two, sethostname under the third).
	for _, k := range []string{"ProtectKernelTunables", "ProtectKernelLogs", "ProtectHostname", "RestrictNamespaces", "PrivateUsers", "MemoryDenyWriteExecute", "ProtectProc"} {
		if v, ok := s[k]; ok && v != "no" && v != "false" && v != "default" {
			t.Errorf("%s=%s breaks the sandbox", k, v)
		}
	}
	if v := s["ProtectControlGroups"]; v != "no" {
		t.Errorf("ProtectControlGroups=%q: the delegated cgroup must be writable", v)
	}
	stop, err := time.ParseDuration(s["TimeoutStopSec"])
	if err != nil || stop < 25*time.Second {
		t.Errorf("TimeoutStopSec=%q, want more than firstmate's 20 s shutdown", s["TimeoutStopSec"])
	}
	if env := s["Environment"]; env == "" {
		t.Error("no Environment")
	}
}

// TestSystemdAnalyzeVerify runs `systemd-analyze verify` on the unit where
// it is installed: any warning (an unknown key, a bad value) fails.
func TestSystemdAnalyzeVerify(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed")
	}
	// verify wants ExecStart's binary to exist; point it at one that does.
	unit, err := os.ReadFile(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	sh, err := exec.LookPath("true")
	if err != nil {
		t.Skip("no true(1) to stand in for firstmate")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "firstmate.service")
	body := bytes.Replace(unit, []byte("ExecStart=/usr/local/bin/firstmate "), []byte("ExecStart="+sh+" "), 1)
	if err := os.WriteFile(path, body, 0o644); err != nil {
		t.Fatal(err)
	}
	check := func(path string) (string, error) {
		cmd := exec.Command(analyze, "verify", path)
		cmd.Env = append(os.Environ(), "SYSTEMD_LOG_COLOR=0", "SYSTEMD_PAGER=")
		out, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	out, err := check(path)
	if err != nil || out != "" {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
	// The check itself works: a misspelled key is reported.
	typo := filepath.Join(dir, "typo.service")
	if err := os.WriteFile(typo, bytes.Replace(body, []byte("ProtectHome="), []byte("ProtectHomes="), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, _ := check(typo); !strings.Contains(out, "ProtectHomes") {
		t.Errorf("a misspelled key went unreported: %q", out)
	}
	t.Logf("systemd %s", strconv.Quote(version(analyze)))
}

func version(bin string) string {
	out, _ := exec.Command(bin, "--version").Output()
	first, _, _ := strings.Cut(string(out), "\n")
	return first
}
