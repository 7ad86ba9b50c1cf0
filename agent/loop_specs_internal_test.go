package agent

import (
	"context"
	"runtime"
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
