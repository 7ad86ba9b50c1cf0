package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/internal/config"
)

// What the model is offered while the sandbox probe runs is, byte for
// byte, what it is offered once the probe passed: the provider's prompt
// cache survives the probe.
func TestToolboxOffersTheSameToolsWhileProbing(t *testing.T) {
	env := map[string]string{"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "FIRSTMATE_MODEL": "m", "FIRSTMATE_DATA_DIR": t.TempDir()}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	cfg, err := config.Load("", lookup)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Shell.Helper = reachableHelper(t)
	box, err := startToolbox(t.Context(), cfg, lookup, slog.New(slog.DiscardHandler), jobPlace{})
	if err != nil {
		t.Fatal(err)
	}
	defer box.close()
	early := agent.ToolSpecs(box.set) // the provisional set, whenever the probe ends
	if err := box.wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	if box.shellErr != nil {
		t.Skipf("no working sandbox here: %v", box.shellErr)
	}
	if final := agent.ToolSpecs(box.set.Current()); !reflect.DeepEqual(early, final) {
		t.Fatalf("the tools offered changed when the probe passed:\n%+v\nthen\n%+v", early, final)
	}
}

// reachableHelper is the firstmate binary (this test binary is no sandbox
// helper) where the sandbox's user can execute it: not under the e2e
// build's private directory.
func reachableHelper(t *testing.T) string {
	dir, err := os.MkdirTemp("", "firstmate-helper")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	helper := filepath.Join(dir, "firstmate")
	if err := os.Link(binary, helper); err != nil {
		t.Fatal(err)
	}
	return helper
}

func TestIDMapped(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	host := write("host", "         0          0 4294967295\n")
	single := write("single", "         0       1000          1\n")
	subids := write("subids", "         0       1000          1\n         1     100000      65536\n")
	for _, c := range []struct {
		file string
		id   int
		want bool
	}{
		{host, 65534, true},
		{single, 0, true},
		{single, 65534, false},
		{subids, 65534, true},
		{subids, 65537, false},
		{filepath.Join(dir, "missing"), 65534, true}, // chown will say
	} {
		if got := idMapped(c.file, c.id); got != c.want {
			t.Errorf("idMapped(%s, %d) = %v, want %v", filepath.Base(c.file), c.id, got, c.want)
		}
	}
}
