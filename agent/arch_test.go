package agent_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDependencyRule keeps the core free of platforms and databases: agent
// and tools (and everything of this module they import) must not depend on
// a chat SDK, an LLM SDK, Redis or bbolt. See ARCHITECTURE.md.
func TestDependencyRule(t *testing.T) {
	forbidden := []string{
		"github.com/slack-go/slack",
		"github.com/go-telegram-bot-api/",
		"github.com/redis/go-redis",
		"go.etcd.io/bbolt",
		"github.com/sashabaranov/go-openai",
		"github.com/firstmate/firstmate/adapters",
		"github.com/firstmate/firstmate/store",
		"github.com/firstmate/firstmate/cmd",
	}
	for _, pkg := range []string{"github.com/firstmate/firstmate/agent", "github.com/firstmate/firstmate/tools/..."} {
		out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
		}
		deps := strings.Fields(string(out))
		if len(deps) < 10 {
			t.Fatalf("go list -deps %s listed only %d packages; the check would prove nothing", pkg, len(deps))
		}
		for _, dep := range deps {
			for _, bad := range forbidden {
				if strings.HasPrefix(dep, bad) {
					t.Errorf("%s depends on %s", pkg, dep)
				}
			}
		}
	}
	// tools must not know the agent either.
	out, err := exec.Command("go", "list", "-deps", "github.com/firstmate/firstmate/tools/...").CombinedOutput()
	if err != nil {
		t.Fatal(err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if dep == "github.com/firstmate/firstmate/agent" || strings.HasPrefix(dep, "github.com/firstmate/firstmate/agent/") {
			t.Errorf("tools depends on %s", dep)
		}
	}
}
