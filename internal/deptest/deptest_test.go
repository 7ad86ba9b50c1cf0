package deptest

import (
	"os/exec"
	"strings"
	"testing"
)

const mod = "github.com/firstmate/firstmate/"

var (
	sdks = []string{"github.com/slack-go/slack", "github.com/go-telegram-bot-api/", "github.com/sashabaranov/go-openai"}
	dbs  = []string{"github.com/redis/go-redis", "go.etcd.io/bbolt", mod + "store"}
)

// rules: what the packages a pattern lists must never depend on, and why.
var rules = []struct {
	pattern string
	forbid  []string
	why     string
}{
	{"./agent", join(sdks, dbs, mod+"adapters", mod+"cmd", mod+"agent/"),
		"the core knows what a turn is, no platform, model SDK, store, or who governs it"},
	{"./agent/govern", join(sdks, dbs, mod+"adapters", mod+"cmd", mod+"agent/schedules", mod+"agent/openai"),
		"the gate knows no platform and no database: its store is an interface"},
	{"./agent/schedules", join(sdks, dbs, mod+"adapters", mod+"cmd", mod+"agent/openai"),
		"schedules know no platform and no database"},
	{"./agent/openai", join(sdks[:2], dbs, mod+"adapters", mod+"cmd", mod+"agent/govern", mod+"agent/schedules"),
		"the model client knows go-openai and the core, nothing of chats or stores"},
	{"./tools/...", join(sdks, dbs, mod+"agent", mod+"adapters", mod+"cmd"),
		"tools know no agent, chat platform or store"},
	{"./adapters", join(sdks, dbs, mod+"adapters/", mod+"cmd", mod+"agent/govern", mod+"agent/schedules"),
		"the renderer serves every platform: it knows the core and nothing else"},
	{"./adapters/slack", join(sdks[1:], dbs, mod+"adapters/telegram", mod+"adapters/console", mod+"cmd", mod+"agent/govern"),
		"one platform each, and the core"},
	{"./adapters/telegram", join([]string{sdks[0], sdks[2]}, dbs, mod+"adapters/slack", mod+"adapters/console", mod+"cmd", mod+"agent/govern"),
		"one platform each, and the core"},
	{"./adapters/console", join(sdks, dbs, mod+"adapters/slack", mod+"adapters/telegram", mod+"cmd", mod+"agent/govern"),
		"one platform each, and the core"},
	{"./store/...", join(sdks, mod+"adapters", mod+"cmd"),
		"stores know the roles they play, no platform"},
	{"./...", []string{mod + "internal/testkit"},
		"production code never depends on the test kits"},
}

// exempt may depend on the test kits: test tools built for the tests.
var exempt = []string{mod + "cmd/fakellm", mod + "cmd/fakemcp", mod + "cmd/firstmate-load", mod + "internal/testkit"}

func join(lists ...any) []string {
	var out []string
	for _, l := range lists {
		switch l := l.(type) {
		case string:
			out = append(out, l)
		case []string:
			out = append(out, l...)
		}
	}
	return out
}

// TestDependencyRule checks every rule against `go list -deps` of its
// packages (their code, not their tests'), and that no adapter's tests
// import a store themselves.
func TestDependencyRule(t *testing.T) {
	for _, r := range rules {
		out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Deps " "}}`, "../../"+strings.TrimPrefix(r.pattern, "./")).CombinedOutput()
		if err != nil {
			t.Fatalf("go list %s: %v\n%s", r.pattern, err, out)
		}
		pkgs := strings.Split(strings.TrimSpace(string(out)), "\n")
		if len(pkgs) == 0 || len(strings.Fields(pkgs[0])) < 5 {
			t.Fatalf("go list %s listed %q; the check would prove nothing", r.pattern, pkgs)
		}
		for _, line := range pkgs {
			fields := strings.Fields(line)
			pkg := fields[0]
			if isExempt(pkg, r.forbid) {
				continue
			}
			for _, dep := range fields[1:] {
				for _, bad := range r.forbid {
					if strings.HasPrefix(dep, bad) && !strings.HasPrefix(pkg, strings.TrimSuffix(bad, "/")+"/") && dep != pkg {
						t.Errorf("%s depends on %s: %s", pkg, dep, r.why)
					}
				}
			}
		}
	}
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .TestImports " "}} {{join .XTestImports " "}}`, "../../adapters/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list adapters tests: %v\n%s", err, out)
	}
	for line := range strings.Lines(string(out)) {
		fields := strings.Fields(line)
		for _, imp := range fields[1:] {
			for _, bad := range dbs {
				if strings.HasPrefix(imp, bad) {
					t.Errorf("the tests of %s import %s: an adapter's tests drive a dispatcher through internal/testkit, not a store of their own", fields[0], imp)
				}
			}
		}
	}
}

func isExempt(pkg string, forbid []string) bool {
	for _, f := range forbid {
		if f == mod+"internal/testkit" {
			for _, e := range exempt {
				if pkg == e || strings.HasPrefix(pkg, e+"/") {
					return true
				}
			}
		}
	}
	return false
}

// TestRulesBite: a rule that cannot fail protects nothing. Each forbidden
// prefix of the core's rule names a package that exists, and the check
// finds a known dependency where there is one.
func TestRulesBite(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "../../cmd/firstmate").CombinedOutput()
	if err != nil {
		t.Fatal(err)
	}
	deps := string(out)
	for _, want := range []string{"github.com/slack-go/slack", "go.etcd.io/bbolt", mod + "store/redis", mod + "agent/govern", mod + "adapters/telegram"} {
		if !strings.Contains(deps, want) {
			t.Errorf("cmd/firstmate does not depend on %s: the rules would watch a name that is not there", want)
		}
	}
}
