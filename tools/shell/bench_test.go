//go:build linux

package shell

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/firstmate/firstmate/tools"
	"github.com/firstmate/firstmate/tools/sandbox"
)

// BenchmarkShellOverhead measures what a shell tool call adds to the
// sandbox's own start: argument decoding, capture, the quota check and the
// result. Each iteration runs `true` once through the sandbox directly and
// once through the tool, and the medians are compared.
func BenchmarkShellOverhead(b *testing.B) {
	sb := sandbox.New(sandbox.Config{})
	sh := New(Config{Sandbox: sb})
	defer sh.Close()
	set := tools.NewSet(sh.Tools())
	var opts []tools.WorkspaceOption
	if uid, gid := sb.Owner(); uid >= 0 {
		opts = append(opts, tools.WithOwner(tools.Owner{UID: uid, GID: gid}))
	}
	ws, err := tools.OpenWorkspace(b.TempDir(), "C1", opts...)
	if err != nil {
		b.Fatal(err)
	}
	defer ws.Close()
	// A workspace with something in it, so the quota check walks files.
	for i := range 50 {
		ws.WriteFile(fmt.Sprintf("dir%d/file%d.txt", i%5, i), []byte("some content\n"), 100)
	}
	args, _ := json.Marshal(map[string]any{"command": "true"})
	ctx := context.Background()
	var direct, tool []time.Duration
	for b.Loop() {
		t0 := time.Now()
		if _, err := sb.Run(ctx, sandbox.Command{Dir: ws.Dir(), Script: "true"}); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, err := set.Call(ctx, ws, "shell", args); err != nil {
			b.Fatal(err)
		}
		direct, tool = append(direct, t1.Sub(t0)), append(tool, time.Since(t1))
	}
	med := func(d []time.Duration) time.Duration { slices.Sort(d); return d[len(d)/2] }
	md, mt := med(direct), med(tool)
	b.ReportMetric(float64(md.Microseconds())/1000, "sandbox-ms")
	b.ReportMetric(float64(mt.Microseconds())/1000, "tool-ms")
	b.ReportMetric(float64((mt-md).Microseconds())/1000, "overhead-ms")
}
