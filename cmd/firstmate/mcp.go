package main

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/firstmate/firstmate/internal/config"
	"github.com/firstmate/firstmate/tools"
	"github.com/firstmate/firstmate/tools/mcp"
	"github.com/firstmate/firstmate/tools/sandbox"
)

// newMCP is the hub of the configured MCP servers, or nil when there is
// none. Stdio servers run in the shell's sandbox once the probe passed, in
// workspaces under the data dir's mcp/, owned like the channels'.
func newMCP(cfg *config.Config, b *toolbox, log *slog.Logger) *mcp.Hub {
	if len(cfg.MCP.Servers) == 0 {
		return nil
	}
	var allow []netip.Prefix
	for _, n := range cfg.Web.Fetch.AllowNetworks {
		if p, err := netip.ParsePrefix(n); err == nil { // Load validated them
			allow = append(allow, p)
		}
	}
	var servers []mcp.Server
	for _, name := range cfg.MCP.ServerNames() {
		s := cfg.MCP.Servers[name]
		ms := mcp.Server{Name: name, Command: s.Command, Paths: s.Paths, Workspace: mcp.Workspace(s.Workspace),
			URL: s.URL, Timeout: cfg.MCP.CallTimeout(s), Env: map[string]string{}, Headers: map[string]string{}}
		for k, v := range s.Env {
			ms.Env[k] = v.Reveal()
		}
		for k, v := range s.Headers {
			ms.Headers[k] = v.Reveal()
		}
		servers = append(servers, ms)
	}
	return mcp.New(mcp.Config{
		Servers: servers,
		Sandbox: b.mcpSandbox,
		Dir:     filepath.Join(cfg.Store.DataDir, "mcp"),
		// Read when a server starts, after startToolbox has set them.
		WorkspaceOptions: []tools.WorkspaceOption{func(w *tools.Workspace) {
			for _, o := range b.wsOpts {
				o(w)
			}
		}},
		AllowNetworks: allow,
		Secrets:       cfg.Secrets(),
		Logger:        log,
	})
}

// mcpSandbox is the sandbox stdio MCP servers run in, once the probe has
// said there is one.
func (b *toolbox) mcpSandbox(ctx context.Context) (*sandbox.Sandbox, error) {
	select {
	case <-b.probed:
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	if b.shellErr != nil {
		return nil, b.shellErr
	}
	return b.sb, nil
}

// mcpServers says whether each MCP server starts, and what tools it
// offers.
func (d *doctor) mcpServers(ctx context.Context, box *toolbox) {
	if box.mcp == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	statuses := box.mcp.Statuses(ctx)
	box.set = box.set.Current() // with the tools of the servers that started
	for _, st := range statuses {
		what := "mcp " + st.Name
		if !st.Stdio && d.skipOffline(what, st.Where) {
			continue
		}
		if !st.Started {
			d.fail(what, fmt.Sprintf("%s does not start: %v", st.Where, st.Err))
			continue
		}
		tools := strings.Join(st.Tools, ", ")
		if tools == "" {
			tools = "none"
		}
		d.ok(what, fmt.Sprintf("%s: %d tool(s): %s", st.Where, len(st.Tools), tools))
		for _, name := range slices.Sorted(maps.Keys(st.Unavailable)) {
			d.warn(what, name+" is not offered: "+st.Unavailable[name])
		}
	}
}
