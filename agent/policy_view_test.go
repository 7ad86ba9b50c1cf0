package agent_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/tools"
	"github.com/firstmate/firstmate/tools/skills"
)

// rowsOf lists a view's groups and their rows as "group: row=mode/layer".
func rowsOf(v agent.PolicyView) map[string][]string {
	out := map[string][]string{}
	for _, g := range v.Groups {
		out[g.Name] = nil
		for _, t := range g.Tools {
			out[g.Name] = append(out[g.Name], t.Name+"="+string(t.Reason.Mode)+"/"+t.Reason.Layer)
		}
	}
	return out
}

// The dispatcher's view lists the configured skills and the channel's own,
// read from its workspace, and does not create a workspace to look.
func TestDispatcherPolicyListsChannelSkills(t *testing.T) {
	conf, base := t.TempDir(), t.TempDir()
	write := func(dir, name string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		md := "---\nname: " + name + "\ndescription: " + name + ".\n---\nDo it.\n"
		if err := os.WriteFile(filepath.Join(dir, name, skills.File), []byte(md), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(conf, "deploy")
	withSkills := agent.SessionKey{Platform: "test", Chat: "C1"}
	write(filepath.Join(tools.WorkspacePath(base, withSkills.String()), skills.ChannelDir), "notes")
	cat := skills.Load(skills.Options{Dirs: []string{conf}, Channel: true})
	d, _ := build(t, openStore(t), hcfg{WorkspaceDir: base, Loop: &agent.Loop{Skills: cat}, Skills: cat,
		Tools: tools.NewSet([]tools.Tool{cat.Tool()})}, &platform{})
	v, err := d.Policy(t.Context(), agent.SessionKey{Platform: "test", Chat: "C1", Thread: "9"}, agent.User{ID: "U1"})
	if err != nil {
		t.Fatal(err)
	}
	if got := rowsOf(v)["skills"]; !slices.Equal(got, []string{"skill=allow/config", "skill:deploy=allow/config", "skill:notes=allow/config"}) {
		t.Errorf("skills in C1: %q", got)
	}
	other := agent.SessionKey{Platform: "test", Chat: "C2"}
	if v, _ = d.Policy(t.Context(), other, agent.User{ID: "U1"}); !slices.Equal(rowsOf(v)["skills"], []string{"skill=allow/config", "skill:deploy=allow/config"}) {
		t.Errorf("skills in C2: %q", rowsOf(v)["skills"])
	}
	if _, err := os.Stat(tools.WorkspacePath(base, other.String())); !os.IsNotExist(err) {
		t.Errorf("the view made C2's workspace: %v", err)
	}
}

// The tools command lists a group's first rows and counts the rest: a
// channel with many skills still gets one message.
func TestToolsCommandWithManySkills(t *testing.T) {
	conf := t.TempDir()
	for i := range 40 {
		name := fmt.Sprintf("skill-%02d", i)
		if err := os.MkdirAll(filepath.Join(conf, name), 0o755); err != nil {
			t.Fatal(err)
		}
		md := "---\nname: " + name + "\ndescription: " + name + ".\n---\nDo it.\n"
		if err := os.WriteFile(filepath.Join(conf, name, skills.File), []byte(md), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cat := skills.Load(skills.Options{Dirs: []string{conf}})
	m := &funcModel{f: func(context.Context, *agent.Request) (*agent.Response, error) { return answerWith("x"), nil }}
	h := startHarness(t, openStore(t), hcfg{Tools: tools.NewSet([]tools.Tool{cat.Tool()}), Loop: &agent.Loop{Model: m, Skills: cat}, Skills: cat})
	ch := agent.SessionKey{Platform: "test", Chat: "C7"}
	h.submit(t, agent.Inbound{Key: ch, MessageID: "m1", User: agent.User{ID: "U1"}, Text: "tools", Addressed: true})
	var notes []string
	waitFor(t, func() bool { _, _, notes = h.p.final(ch); return len(notes) > 0 })
	if r := notes[0]; !strings.Contains(r, "• skills: skill=allow skill:skill-00=allow") || !strings.Contains(r, "skill:skill-23=allow and 16 more") || strings.Contains(r, "skill-24") {
		t.Errorf("tools: %q", r)
	}
}
