package fakemcp

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The server speaks MCP (here over the SDK's in-memory transport): its
// tools are listed, and answer.
func TestServer(t *testing.T) {
	ctx := t.Context()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := New(Options{Crash: func() {}}).Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	var names []string
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
	}
	for _, want := range []string{"echo", "sleep", "crash", "huge", "image", "add_tool", "bad_schema", "Get.Page", "get_page"} {
		if !slices.Contains(names, want) {
			t.Errorf("no %s in %v", want, names)
		}
	}
	call := func(name string, args map[string]any) string {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return res.Content[0].(*mcp.TextContent).Text
	}
	if got := call("echo", map[string]any{"text": "hi"}); got != "hi" {
		t.Errorf("echo %q", got)
	}
	if got := call("huge", map[string]any{"bytes": 1000}); len(got) != 1000 || !strings.HasPrefix(got, "xxx") {
		t.Errorf("huge: %d bytes", len(got))
	}
}

// With ListDelay, tools/list answers that much later, or not at all if
// the request is cancelled first; calls do not wait.
func TestListDelay(t *testing.T) {
	const delay = 300 * time.Millisecond
	ctx := t.Context()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := New(Options{Crash: func() {}, ListDelay: delay}).Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	short, cancel := context.WithTimeout(ctx, delay/10)
	defer cancel()
	if _, err := cs.ListTools(short, nil); err == nil {
		t.Errorf("tools/list answered within %v of a %v delay", delay/10, delay)
	}
	began := time.Now()
	res, err := cs.ListTools(ctx, nil)
	if err != nil || len(res.Tools) == 0 {
		t.Fatalf("tools/list: %v", err)
	}
	if took := time.Since(began); took < delay {
		t.Errorf("tools/list answered after %v, before its %v delay", took, delay)
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}}); err != nil {
		t.Errorf("echo: %v", err)
	}
}
