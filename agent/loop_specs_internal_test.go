package agent

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/firstmate/firstmate/tools"
)

func namedTool(name string) tools.Tool {
	return tools.New(name, tools.PowerRead, "A tool.", func(context.Context, *tools.Workspace, struct{}) (tools.Result, error) {
		return tools.Result{}, nil
	})
}

// Specs are kept per tool set while the set lives: the same set gives the
// same specs without describing it again, and the sets a changing MCP
// server leaves behind do not pile up.
func TestToolSpecsGoWithTheirSet(t *testing.T) {
	var l Loop
	kept := tools.NewSet([]tools.Tool{namedTool("keep")})
	first := l.toolSpecs(kept)
	if again := l.toolSpecs(kept); &again[0] != &first[0] {
		t.Error("the same set was described twice")
	}
	for i := range 200 {
		l.toolSpecs(tools.NewSet([]tools.Tool{namedTool("t" + string(rune('a'+i%26)))}))
	}
	count := func() int {
		n := 0
		l.specs.Range(func(any, any) bool { n++; return true })
		return n
	}
	deadline := time.Now().Add(10 * time.Second)
	for count() > 1 && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if n := count(); n != 1 {
		t.Fatalf("%d sets' specs kept after the sets went, want only the live one", n)
	}
	if again := l.toolSpecs(kept); &again[0] != &first[0] {
		t.Error("the live set's specs were dropped")
	}
	runtime.KeepAlive(kept)
}

// A policy that denies nothing offers the set's own specs, no copy a
// turn; one that denies some leaves them out wherever they are, and the
// shared specs stay whole.
func TestOfferedCopiesOnlyToLeaveOut(t *testing.T) {
	specs := []ToolSpec{{Name: "a"}, {Name: "b"}, {Name: "c"}, {Name: "d"}}
	names := func(s []ToolSpec) (out string) {
		for _, x := range s {
			out += x.Name
		}
		return out
	}
	if got := offered(specs, func(string) ToolMode { return ToolAllow }); &got[0] != &specs[0] || len(got) != 4 {
		t.Errorf("nothing denied: %q, a copy", names(got))
	}
	if allocs := testing.AllocsPerRun(100, func() { offered(specs, func(string) ToolMode { return ToolAsk }) }); allocs != 0 {
		t.Errorf("nothing denied: %.0f allocations", allocs)
	}
	for deny, want := range map[string]string{"a": "bcd", "b": "acd", "d": "abc", "ad": "bc", "abcd": ""} {
		got := offered(specs, func(n string) ToolMode {
			if strings.Contains(deny, n) {
				return ToolDeny
			}
			return ToolAllow
		})
		if names(got) != want {
			t.Errorf("deny %q: offered %q, want %q", deny, names(got), want)
		}
	}
	if names(specs) != "abcd" {
		t.Errorf("the shared specs became %q", names(specs))
	}
}
