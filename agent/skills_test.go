package agent_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/agent/govern"
	"github.com/firstmate/firstmate/tools"
	"github.com/firstmate/firstmate/tools/skills"
)

const fixedPrompt = "You are a test assistant."

// skillsEnv is a catalog with configured skills deploy and secret, and a
// channel workspace holding the channel's own skill notes.
type skillsEnv struct {
	cat *skills.Catalog
	set *tools.Set
	ws  *tools.Workspace
}

func newSkillsEnv(t *testing.T) *skillsEnv {
	t.Helper()
	conf := t.TempDir()
	write := func(dir, rel, content string) {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(conf, "deploy/SKILL.md", "---\nname: deploy\ndescription: Deploy the web app.\n---\nBODY-DEPLOY: run make deploy.\n")
	write(conf, "deploy/run.sh", "make deploy\n")
	write(conf, "secret/SKILL.md", "---\nname: secret\ndescription: Handle the secret project.\n---\nBODY-SECRET\n")
	base := t.TempDir()
	ws, err := tools.OpenWorkspace(base, "C1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	write(tools.WorkspacePath(base, "C1"), "skills/notes/SKILL.md", "---\nname: notes\ndescription: Take meeting notes.\n---\nBODY-NOTES\n")
	cat := skills.Load(skills.Options{Dirs: []string{conf}, Channel: true})
	return &skillsEnv{cat: cat, set: tools.NewSet(append(testTools(t).Tools(), cat.Tool())), ws: ws}
}

// policyGate is a turn's gate with a channel policy and nothing else.
type policyGate struct {
	fakeGate
	p   *govern.Policy
	set *tools.Set
}

func (g *policyGate) Mode(name string) agent.ToolMode { return g.p.Mode(name) }
func (g *policyGate) CallMode(c agent.ToolCall) (agent.ToolMode, string) {
	return g.p.CallMode(g.set, c)
}

// policy builds a channel policy from rules as people write them.
func policy(t *testing.T, known *tools.Set, rules ...string) agent.TurnGate {
	t.Helper()
	d := govern.Defaults{Rules: map[string]agent.ToolMode{}}
	for _, r := range rules {
		name, mode, _ := strings.Cut(r, "=")
		rule, err := govern.ParseRuleName(name, known)
		if err != nil {
			t.Fatal(err)
		}
		m, err := agent.ParseMode(mode)
		if err != nil {
			t.Fatal(err)
		}
		if rule == agent.DefaultRule {
			d.Default = m
		} else {
			d.Rules[rule] = m
		}
	}
	return &policyGate{p: govern.NewPolicy(agent.SessionKey{Platform: "test", Chat: "C1"}, d, agent.ChannelSettings{}, known), set: known}
}

// turn runs one turn whose model loads each of load (in one step),
// then answers; it returns the system prompt and tools the model was
// offered, and the tool results it read.
func (e *skillsEnv) turn(t *testing.T, gate agent.TurnGate, load ...string) (system string, offered []string, results []agent.Message) {
	t.Helper()
	system, offered, out := e.run(t, gate, nil, load...)
	for _, m := range out.Messages {
		if m.Role == agent.RoleTool {
			results = append(results, m)
		}
	}
	return system, offered, results
}

// run is turn with the turn's outcome, resuming approvals; a load of
// "NAME/FILE" reads one of the skill's files.
func (e *skillsEnv) run(t *testing.T, gate agent.TurnGate, resume []agent.Approval, load ...string) (system string, offered []string, out *agent.Outcome) {
	t.Helper()
	var cs []agent.ToolCall
	for i, name := range load {
		args := `{"name":"` + name + `"}`
		if skill, file, ok := strings.Cut(name, "/"); ok {
			args = `{"name":"` + skill + `","file":"` + file + `"}`
		}
		cs = append(cs, call("c"+string(rune('0'+i)), "skill", args))
	}
	replies := []func(*agent.Request) (*agent.Response, error){func(req *agent.Request) (*agent.Response, error) {
		system, offered = req.System, offeredNames(req)
		if len(cs) == 0 {
			return text("done")(req)
		}
		return calls(cs...)(req)
	}}
	if len(cs) > 0 {
		replies = append(replies, text("done"))
	}
	l := &agent.Loop{Model: &scriptModel{replies: replies}, System: fixedPrompt, Skills: e.cat}
	turn := &agent.Turn{Input: userMsg("go"), Resume: resume, Tools: e.set, Workspace: e.ws, Gate: gate}
	if len(resume) > 0 {
		turn.Input = agent.Message{}
	}
	out, err := l.Run(t.Context(), turn)
	if err != nil {
		t.Fatal(err)
	}
	return system, offered, out
}

// The model sees each skill's name and description at the end of the
// system prompt, never its instructions; the skill tool returns them.
func TestSkillsLoadedOnDemand(t *testing.T) {
	e := newSkillsEnv(t)
	system, offered, results := e.turn(t, nil, "deploy", "Notes")
	if !strings.HasPrefix(system, fixedPrompt+"\n\n# Skills\n") {
		t.Errorf("the fixed prompt must come first, then the skills:\n%s", system)
	}
	for _, want := range []string{"- deploy: Deploy the web app.", "- notes: Take meeting notes.", "- secret: Handle the secret project."} {
		if !strings.Contains(system, want) {
			t.Errorf("system prompt lacks %q:\n%s", want, system)
		}
	}
	if strings.Contains(system, "BODY-") {
		t.Errorf("a skill's instructions are in the system prompt:\n%s", system)
	}
	if !slices.Contains(offered, "skill") {
		t.Errorf("offered %q", offered)
	}
	if len(results) != 2 || !strings.Contains(results[0].Content, "BODY-DEPLOY") || !strings.Contains(results[0].Content, "- run.sh") ||
		!strings.Contains(results[1].Content, "BODY-NOTES") || !strings.Contains(results[1].Content, "skills/notes/") {
		t.Errorf("results = %+v", results)
	}
	// The same skills give the same prompt, turn after turn.
	if again, _, _ := e.turn(t, nil); again != system {
		t.Errorf("the prompt changed between turns:\n%s\n---\n%s", system, again)
	}
}

// A denied skill is not listed and cannot be loaded; the others can.
func TestDeniedSkillIsNotListedAndRefused(t *testing.T) {
	e := newSkillsEnv(t)
	mode := policy(t, e.set, "skill:secret=deny")
	system, _, results := e.turn(t, mode, "secret", "SECRET", "deploy")
	if strings.Contains(system, "secret") || !strings.Contains(system, "- deploy:") {
		t.Errorf("system prompt:\n%s", system)
	}
	for _, r := range results[:2] {
		if !strings.Contains(r.Content, "the skill secret is not allowed in this channel") || strings.Contains(r.Content, "BODY-SECRET") {
			t.Errorf("loading a denied skill gave %q", r.Content)
		}
	}
	if !strings.Contains(results[2].Content, "BODY-DEPLOY") {
		t.Errorf("deploy gave %q", results[2].Content)
	}
}

// skills=deny with one skill allowed is an allow-list; denying the skill
// tool turns skills off, whatever the skill rules say; default=deny
// covers skills too.
func TestSkillPolicyRules(t *testing.T) {
	e := newSkillsEnv(t)
	known := e.set
	cases := []struct {
		rules  []string
		listed []string // nil: no section, and no skill tool
	}{
		{nil, []string{"deploy", "notes", "secret"}},
		{[]string{"skills=deny", "skill:notes=allow"}, []string{"notes"}},
		{[]string{"group:skills=deny"}, []string{}},
		{[]string{"skill=deny", "skill:deploy=allow"}, nil},
		{[]string{"default=deny", "skill=allow"}, []string{}},
		{[]string{"default=deny", "skill=allow", "skill:deploy=ask"}, []string{"deploy"}},
		{[]string{"exec=deny", "read=deny"}, []string{"deploy", "notes", "secret"}}, // skills are not a tool group
	}
	for _, c := range cases {
		system, offered, _ := e.turn(t, policy(t, known, c.rules...))
		var got []string
		for line := range strings.Lines(system) {
			if name, _, ok := strings.Cut(strings.TrimPrefix(line, "- "), ":"); ok && strings.HasPrefix(line, "- ") {
				got = append(got, name)
			}
		}
		if c.listed == nil {
			if system != fixedPrompt || slices.Contains(offered, "skill") {
				t.Errorf("%q: system %q, offered %q", c.rules, system, offered)
			}
			continue
		}
		if len(c.listed) == 0 && system != fixedPrompt {
			t.Errorf("%q: no skill allowed, but the prompt is %q", c.rules, system)
		}
		if !slices.Equal(got, c.listed) && len(c.listed) > 0 {
			t.Errorf("%q: listed %q, want %q", c.rules, got, c.listed)
		}
	}
}

// A skill in ask mode waits for a person: the turn ends with the call
// pending, and the approval names the skill's rule, so "always allow" can
// allow that skill alone. Approved, it runs in the next turn, then the
// rest of its step; a second call of it asks again.
func TestSkillAskNeedsApproval(t *testing.T) {
	e := newSkillsEnv(t)
	gate := policy(t, e.set, "skill:deploy=ask")
	_, _, out := e.run(t, gate, nil, "deploy", "notes", "deploy")
	if out.Pending == nil || out.Pending.Rule != "skill:deploy" || len(out.Pending.Calls) != 3 {
		t.Fatalf("pending %+v", out.Pending)
	}
	approved := agent.Approval{ID: "ap1", Tool: "skill:deploy", State: agent.ApprovalApproved, DecidedBy: agent.User{ID: "U9"}, Calls: out.Pending.Calls}
	_, _, out = e.run(t, gate, []agent.Approval{approved})
	var results []string
	for _, m := range out.Messages {
		if m.Role == agent.RoleTool {
			results = append(results, m.Content)
		}
	}
	if len(results) != 3 || !strings.Contains(results[0], "BODY-DEPLOY") || !strings.Contains(results[1], "BODY-NOTES") || !strings.Contains(results[2], "needs a person's approval") {
		t.Errorf("results = %q", results)
	}
	if out.Pending == nil || out.Pending.Rule != "skill:deploy" || len(out.Pending.Calls) != 1 {
		t.Errorf("the second load of deploy: pending %+v", out.Pending)
	}
}

// skill:NAME governs a skill's instructions; its other files are files
// like any other and need read: a file copied into a skill's folder does
// not come out where read is denied.
func TestSkillFilesNeedRead(t *testing.T) {
	e := newSkillsEnv(t)
	if _, err := e.ws.WriteFile("secret.txt", []byte("THE-SECRET"), 1<<20); err != nil {
		t.Fatal(err)
	}
	if _, err := e.ws.WriteFile("skills/notes/secret.txt", []byte("THE-SECRET"), 1<<20); err != nil {
		t.Fatal(err)
	}
	_, _, results := e.turn(t, policy(t, e.set, "read=deny"), "notes", "notes/secret.txt", "deploy/run.sh")
	if len(results) != 3 || !strings.Contains(results[0].Content, "BODY-NOTES") {
		t.Fatalf("results %+v", results)
	}
	for _, r := range results[1:] {
		if strings.Contains(r.Content, "THE-SECRET") || strings.Contains(r.Content, "make deploy") || !strings.Contains(r.Content, "read (group) is not allowed") {
			t.Errorf("a skill's file where read is denied: %q", r.Content)
		}
	}
	// With read allowed, the same calls read them.
	_, _, results = e.turn(t, nil, "notes/secret.txt", "deploy/run.sh")
	if !strings.Contains(results[0].Content, "THE-SECRET") || !strings.Contains(results[1].Content, "make deploy") {
		t.Errorf("results %+v", results)
	}
}

// In chat: tools sets skill rules and shows them; why explains a skill.
func TestSkillCommands(t *testing.T) {
	e := newSkillsEnv(t)
	m := &funcModel{f: func(context.Context, *agent.Request) (*agent.Response, error) { return answerWith("x"), nil }}
	h := startHarness(t, openStore(t), hcfg{Tools: e.set, Loop: &agent.Loop{Model: m, Skills: e.cat},
		Admins: func(_, id string) bool { return id == "U9" }})
	ch := agent.SessionKey{Platform: "test", Chat: "C7"}
	n := 0
	send := func(user, text string) string {
		t.Helper()
		n++
		_, _, before := h.p.final(ch)
		h.submit(t, agent.Inbound{Key: ch, MessageID: "m" + string(rune('0'+n)), User: agent.User{ID: user}, Text: text, Addressed: true})
		var notes []string
		waitFor(t, func() bool { _, _, notes = h.p.final(ch); return len(notes) > len(before) })
		return notes[len(notes)-1]
	}
	if r := send("U9", "tools skills=deny skill:Deploy=allow"); !strings.Contains(r, "Saved.") || !strings.Contains(r, "all skills=deny (set here by test:U9") || !strings.Contains(r, "deploy=allow (set here") {
		t.Fatalf("tools: %q", r)
	}
	if r := send("U1", "why skill:deploy"); !strings.Contains(r, "The skill deploy may be used here: the rule skill:deploy=allow, set here by test:U9") {
		t.Errorf("why skill:deploy: %q", r)
	}
	if r := send("U1", "why skill:notes"); !strings.Contains(r, "The skill notes may not be used here: the rule skills (group)=deny") {
		t.Errorf("why skill:notes: %q", r)
	}
	send("U9", "tools skill=deny")
	if r := send("U1", "why skill:deploy"); !strings.Contains(r, "But the skill tool, which loads skills, is not allowed here") {
		t.Errorf("why skill:deploy with the tool denied: %q", r)
	}
	if r := send("U1", "tools"); !strings.Contains(r, "Skills: all skills=deny") {
		t.Errorf("tools: %q", r)
	}
}
