package skills_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/firstmate/firstmate/tools"
	"github.com/firstmate/firstmate/tools/skills"
)

// skillMD is a SKILL.md with the name, description and body given.
func skillMD(name, desc, body string) string {
	return "---\nname: " + name + "\ndescription: " + desc + "\n---\n" + body + "\n"
}

// writeFile writes content at dir/rel, creating its parents.
func writeFile(t *testing.T, dir, rel, content string) string {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// addSkill writes dir/name/SKILL.md.
func addSkill(t *testing.T, dir, name, desc, body string) {
	t.Helper()
	writeFile(t, dir, name+"/SKILL.md", skillMD(name, desc, body))
}

// workspace opens a fresh channel workspace and returns it with its host
// directory.
func workspace(t *testing.T) (*tools.Workspace, string) {
	t.Helper()
	base := t.TempDir()
	ws, err := tools.OpenWorkspace(base, "chan")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	return ws, tools.WorkspacePath(base, "chan")
}

// outside is a directory beside the workspace holding a secret that no
// skill may show.
const secret = "TOP-SECRET-OUTSIDE"

func outside(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	addSkill(t, dir, "stolen", "A skill outside the workspace.", secret)
	writeFile(t, dir, "secret.txt", secret)
	return dir
}

func names(list []skills.Skill) []string {
	var out []string
	for _, s := range list {
		out = append(out, s.Name)
	}
	return out
}

// call runs the skill tool through a Set, as the agent does, and returns
// what the model would read.
func call(t *testing.T, c *skills.Catalog, ws *tools.Workspace, args map[string]any) (tools.Result, error) {
	t.Helper()
	raw, _ := json.Marshal(args)
	set := tools.NewSet([]tools.Tool{c.Tool()})
	return set.Call(context.Background(), ws, skills.ToolName, raw)
}

func noLeak(t *testing.T, what, text string, hostPaths ...string) {
	t.Helper()
	if strings.Contains(text, secret) {
		t.Errorf("%s shows the secret outside: %q", what, text)
	}
	for _, p := range hostPaths {
		if p != "" && strings.Contains(text, p) {
			t.Errorf("%s shows the host path %s: %q", what, p, text)
		}
	}
}
