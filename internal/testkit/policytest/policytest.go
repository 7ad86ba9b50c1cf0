// Package policytest is what the tests of the policy screens share: a real
// dispatcher over a real (bbolt) store, with a channel that has skills and
// an MCP server's tools, so that a click or a modal's submission goes the
// whole way to the stored rules and the audit log.
package policytest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/agent/govern"
	"github.com/firstmate/firstmate/store/local"
	"github.com/firstmate/firstmate/tools"
	"github.com/firstmate/firstmate/tools/skills"
)

// LongSkill is a skill name of 61 bytes: its rule, skill:LONG, does not
// fit in Telegram's 64 bytes of callback data with the rest of a button's.
const LongSkill = "the-long-release-checklist-skill-for-the-weekly-deploy-trains"

// Server is the MCP server whose tools the channel has: notes__search
// and notes__add.
const Server = "notes"

// Env is a dispatcher whose channels have the built-in tools' names, the
// skill tool, the MCP server notes' tools and the skills deploy
// (configured) and LongSkill (the channel's own, in its workspace), and
// any more given; admins are the IDs given.
type Env struct {
	D     *agent.Dispatcher
	Store *local.Store
}

// New makes an Env for chat's channel. extra names more configured skills.
func New(t testing.TB, chat agent.SessionKey, admins []string, extra ...string) *Env {
	t.Helper()
	if len(LongSkill) < 60 || skills.ValidName(LongSkill) != nil {
		t.Fatalf("the long skill name %q", LongSkill)
	}
	dir := t.TempDir()
	conf := filepath.Join(dir, "skills")
	for _, name := range append([]string{"deploy"}, extra...) {
		writeSkill(t, filepath.Join(conf, name), name)
	}
	wsDir := filepath.Join(dir, "workspaces")
	writeSkill(t, filepath.Join(tools.WorkspacePath(wsDir, chat.Channel().String()), skills.ChannelDir, LongSkill), LongSkill)
	cat := skills.Load(skills.Options{Dirs: []string{conf}, Channel: true})
	if p := cat.Problems(); len(p) > 0 {
		t.Fatalf("skills: %v", p)
	}
	var ts []tools.Tool
	powers := map[string]tools.Power{"ls": tools.PowerRead, "read": tools.PowerRead, "shell": tools.PowerExec, "start": tools.PowerExec,
		Server + "__search": tools.MCPPower(Server), Server + "__add": tools.MCPPower(Server)}
	for _, name := range []string{"ls", "read", "shell", "start", Server + "__search", Server + "__add"} {
		ts = append(ts, tools.New(name, powers[name], name+" tool", func(context.Context, *tools.Workspace, struct{}) (tools.Result, error) {
			return tools.Result{Text: "ok"}, nil
		}))
	}
	st, err := local.Open(filepath.Join(dir, "firstmate.db"), agent.Retention{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	set := tools.NewSet(append(ts, cat.Tool()))
	ws := tools.Workspaces{Dir: wsDir}
	gate := govern.New(govern.Config{Store: st, Tools: set, Skills: cat, Workspaces: ws,
		Admins: func(_ string, u agent.User) bool { return slices.Contains(admins, u.ID) }})
	d := agent.NewDispatcher(agent.DispatcherConfig{Store: st, Gate: gate, Workspaces: ws, Loop: &agent.Loop{Skills: cat}, Tools: set})
	return &Env{D: d, Store: st}
}

func writeSkill(t testing.TB, dir, name string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	md := fmt.Sprintf("---\nname: %s\ndescription: The %s skill.\n---\nDo it.\n", name, name)
	if err := os.WriteFile(filepath.Join(dir, skills.File), []byte(md), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Settings are chat's channel's stored rules.
func (e *Env) Settings(t testing.TB, chat agent.SessionKey) agent.ChannelSettings {
	t.Helper()
	s, err := e.Store.Settings(context.Background(), chat.Channel())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Audit lists the audit entries of chat's channel with action.
func (e *Env) Audit(t testing.TB, chat agent.SessionKey, action string) []govern.AuditEntry {
	t.Helper()
	all, err := e.Store.AuditLog(context.Background(), govern.AuditQuery{Channel: chat.Channel().String()})
	if err != nil {
		t.Fatal(err)
	}
	var out []govern.AuditEntry
	for _, a := range all {
		if a.Action == action {
			out = append(out, a)
		}
	}
	return out
}
