package adapters_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDependencyRule keeps the shared helpers free of platforms and stores:
// they serve every adapter, so they may know the agent and nothing else of
// this module. See ARCHITECTURE.md.
func TestDependencyRule(t *testing.T) {
	const pkg = "github.com/firstmate/firstmate/adapters"
	out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps listed only %d packages; the check would prove nothing", len(deps))
	}
	forbidden := []string{
		"github.com/slack-go/slack",
		"github.com/go-telegram-bot-api/",
		"github.com/redis/go-redis",
		"go.etcd.io/bbolt",
		"github.com/sashabaranov/go-openai",
		"github.com/firstmate/firstmate/adapters/",
		"github.com/firstmate/firstmate/store",
		"github.com/firstmate/firstmate/cmd",
	}
	for _, dep := range deps {
		for _, bad := range forbidden {
			if strings.HasPrefix(dep, bad) {
				t.Errorf("%s depends on %s", pkg, dep)
			}
		}
	}
}
