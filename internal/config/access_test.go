package config

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/agent/govern"
	"github.com/firstmate/firstmate/tools"
	"github.com/firstmate/firstmate/tools/files"
	"github.com/firstmate/firstmate/tools/shell"
	"github.com/firstmate/firstmate/tools/web"
)

// seedTools are the built-in tools, as serve offers them with a sandbox
// and a search engine.
var seedTools = []string{"ls", "read", "write", "edit", "mkdir", "copy", "move", "delete", "find", "grep",
	"shell", "fetch", "search", "send_file", "start", "jobs", "stop"}

// toolset is the tools called names, each with the power its package
// gives it (an MCP tool SERVER__NAME is its server's), known to policy
// but not run.
func toolset(names ...string) *tools.Set {
	powers := map[string]tools.Power{}
	for _, t := range files.All(files.Options{}) {
		powers[t.Name()] = t.Power()
	}
	for _, n := range shell.Names {
		powers[n] = tools.PowerExec
	}
	powers["fetch"], powers["search"], powers["skill"] = web.Fetch(web.FetchConfig{}).Power(), tools.PowerWeb, tools.PowerSkills
	var opts []tools.SetOption
	for _, n := range names {
		p, ok := powers[n]
		if server, _, mcp := strings.Cut(n, "__"); mcp {
			p, ok = tools.MCPPower(server), true
		}
		if !ok {
			p = tools.PowerRead // a tool of the test's own
		}
		opts = append(opts, tools.WithUnavailable(n, p, "a test"))
	}
	return tools.NewSet(nil, opts...)
}

func TestAccessDefaults(t *testing.T) {
	c := mustLoad(t, "", env{}.withHome())
	want := map[string]govern.Access{
		"slack":    {Mode: govern.AccessOpen, Users: []string{}, Chats: []string{}},
		"telegram": {Mode: govern.AccessPairing, Users: []string{}, Chats: []string{}},
	}
	if got := c.Access(); !reflect.DeepEqual(got, want) {
		t.Errorf("Access() = %+v\nwant %+v", got, want)
	}
	if c.Slack.WorkspaceAdmins || c.Telegram.ChatAdmins {
		t.Error("platform admins count as the bot's admins by default")
	}
	if got, want := c.Budgets(), (govern.Budgets{ChannelTokensPerDay: 0, UserMessagesPerMinute: 20}); got != want {
		t.Errorf("Budgets() = %+v, want %+v", got, want)
	}
	if c.Approvals.Timeout != 5*time.Minute || c.Pairing.CodeTTL != time.Hour {
		t.Errorf("approvals %v, pairing %v", c.Approvals, c.Pairing)
	}
	// A Config built in code has both platforms too.
	if got := (&Config{}).Access(); len(got) != 2 {
		t.Errorf("Access() of an empty Config = %v", got)
	}
}

func TestAccessFromFile(t *testing.T) {
	c := mustLoad(t, writeConfig(t, fullFile), env{})
	want := map[string]govern.Access{
		"slack": {Mode: govern.AccessAllowlist, Users: []string{"U0123ABCD", "W0456EFGH"},
			Chats: []string{"C0123ABCD", "G0456EFGH"}},
		"telegram": {Mode: govern.AccessOpen, Users: []string{"123456789"}, Chats: []string{"-1001234567890", "42"}},
	}
	got := c.Access()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Access() = %+v\nwant %+v", got, want)
	}
	// The map is the caller's: changing it leaves the Config alone.
	got["slack"].Users[0] = "U0CHANGED"
	if c.Slack.AllowedUsers[0] != "U0123ABCD" {
		t.Error("Access() shares the Config's lists")
	}
	if got, want := c.Budgets(), (govern.Budgets{ChannelTokensPerDay: 2_000_000}); got != want {
		t.Errorf("Budgets() = %+v, want %+v", got, want)
	}
}

func TestAccessFromEnv(t *testing.T) {
	// The variables replace the file's lists.
	path := writeConfig(t, "slack:\n  allowed_users: [U0FILE]\ntelegram:\n  allowed_chats: [-1]\n")
	c := mustLoad(t, path, env{
		"SLACK_ACCESS":           " ALLOWLIST ",
		"SLACK_ALLOWED_USERS":    "U0123ABCD, W0456EFGH,",
		"SLACK_ALLOWED_CHANNELS": ",C0123ABCD,,D0456EFGH",
		"SLACK_WORKSPACE_ADMINS": "TRUE",
		"TELEGRAM_ACCESS":        "open",
		"TELEGRAM_ALLOWED_USERS": "7",
		"TELEGRAM_ALLOWED_CHATS": "-1001234567890, 99",
		"TELEGRAM_CHAT_ADMINS":   "1",
	}.withHome())
	want := map[string]govern.Access{
		"slack":    {Mode: govern.AccessAllowlist, Users: []string{"U0123ABCD", "W0456EFGH"}, Chats: []string{"C0123ABCD", "D0456EFGH"}},
		"telegram": {Mode: govern.AccessOpen, Users: []string{"7"}, Chats: []string{"-1001234567890", "99"}},
	}
	if got := c.Access(); !reflect.DeepEqual(got, want) {
		t.Errorf("Access() = %+v\nwant %+v", got, want)
	}
	if !c.Slack.WorkspaceAdmins || !c.Telegram.ChatAdmins {
		t.Error("SLACK_WORKSPACE_ADMINS or TELEGRAM_CHAT_ADMINS not read")
	}
	// Only empty entries: the list is emptied.
	c = mustLoad(t, path, env{"SLACK_ALLOWED_USERS": " , "}.withHome())
	if len(c.Slack.AllowedUsers) != 0 {
		t.Errorf("allowed users %q", c.Slack.AllowedUsers)
	}
	c = mustLoad(t, path, env{"SLACK_WORKSPACE_ADMINS": "false"}.withHome())
	if c.Slack.WorkspaceAdmins {
		t.Error("SLACK_WORKSPACE_ADMINS=false")
	}
}

// TestEnvListEntries: each bad entry of a list is its own problem, naming
// the variable and the entry's number; the good ones are kept.
func TestEnvListEntries(t *testing.T) {
	c, err := Load("", env{"TELEGRAM_ALLOWED_USERS": "1,@bob,,-5,2", "SLACK_ALLOWED_CHANNELS": "C0123ABCD,general"}.withHome().lookup)
	ps := problems(t, err)
	var got []string
	for _, p := range ps {
		got = append(got, p.Error())
	}
	want := []string{
		`SLACK_ALLOWED_CHANNELS: entry 2: "general" is a channel's name, which can change; use its ID`,
		`TELEGRAM_ALLOWED_USERS: entry 2: "@bob": a Telegram user ID is a number`,
		`TELEGRAM_ALLOWED_USERS: entry 4: "-5": negative IDs are chats`,
	}
	if len(got) != len(want) {
		t.Fatalf("problems %q\nwant %q", got, want)
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("problem %q\nwant %q…", got[i], want[i])
		}
	}
	if !slices.Equal(c.Telegram.AllowedUsers, []string{"1", "2"}) || !slices.Equal(c.Slack.AllowedChannels, []string{"C0123ABCD"}) {
		t.Errorf("kept %q and %q", c.Telegram.AllowedUsers, c.Slack.AllowedChannels)
	}
}

func TestAccessWarnings(t *testing.T) {
	slackOn := env{"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_APP_TOKEN": "xapp-1"}
	tests := []struct {
		name string
		env  env
		want string // a part of the one warning; "" for none
	}{
		{name: "slack open", env: slackOn},
		{name: "telegram pairing without admins", env: env{"TELEGRAM_BOT_TOKEN": "1:abc"},
			want: "telegram.access: pairing, but admins lists no telegram user, so nobody can approve a pairing code in chat; add yourself to FIRSTMATE_ADMINS (or admins)"},
		{name: "telegram pairing with an admin", env: env{"TELEGRAM_BOT_TOKEN": "1:abc", "FIRSTMATE_ADMINS": "telegram:5"}},
		{name: "an admin of the other platform", env: env{"TELEGRAM_BOT_TOKEN": "1:abc", "FIRSTMATE_ADMINS": "slack:U0123ABCD"},
			want: "FIRSTMATE_ADMINS"},
		{name: "telegram open", env: env{"TELEGRAM_BOT_TOKEN": "1:abc", "TELEGRAM_ACCESS": "open"}},
		{name: "slack allowlist of nobody", env: merge(slackOn, env{"SLACK_ACCESS": "allowlist"}),
			want: "SLACK_ACCESS: allowlist, but nobody is allowed and admins lists no slack user"},
		{name: "slack allowlist of a channel", env: merge(slackOn, env{"SLACK_ACCESS": "allowlist", "SLACK_ALLOWED_CHANNELS": "C0123ABCD"})},
		{name: "slack pairing, not enabled", env: env{"SLACK_ACCESS": "pairing"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustLoad(t, "", tt.env.withHome())
			w := c.Warnings()
			switch {
			case tt.want == "" && len(w) != 0:
				t.Errorf("warnings %q, want none", w)
			case tt.want != "" && (len(w) != 1 || !strings.Contains(w[0], tt.want)):
				t.Errorf("warnings %q, want one containing %q", w, tt.want)
			}
		})
	}
}

func merge(a, b env) env {
	out := env{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

func TestPolicyDefaults(t *testing.T) {
	path := writeConfig(t, `tools:
  default: ask
  allow: [read, "tool:read", " Group:Web "]
  ask: []
  deny: [exec, "tool:write", delete, "mcp:github", github__admin]
`)
	c := mustLoad(t, path, env{}.withHome())
	want := govern.Defaults{Default: agent.ToolAsk, Rules: map[string]agent.ToolMode{
		"group:read":       agent.ToolAllow,
		"read":             agent.ToolAllow,
		"group:web":        agent.ToolAllow,
		"group:exec":       agent.ToolDeny,
		"write":            agent.ToolDeny,
		"delete":           agent.ToolDeny,
		"group:mcp:github": agent.ToolDeny,
		"github__admin":    agent.ToolDeny,
	}}
	if got := c.PolicyDefaults(); !reflect.DeepEqual(got, want) {
		t.Errorf("PolicyDefaults() = %+v\nwant %+v", got, want)
	}
	for tool, mode := range map[string]agent.ToolMode{
		"grep": agent.ToolAllow, "read": agent.ToolAllow, "fetch": agent.ToolAllow,
		"start": agent.ToolDeny, "shell": agent.ToolDeny, "write": agent.ToolDeny, "github__issues": agent.ToolDeny,
		"edit": agent.ToolAsk, "send_file": agent.ToolAsk, "other__tool": agent.ToolAsk,
	} {
		if got := configuredMode(c, tool); got != mode {
			t.Errorf("Mode(%s) = %s, want %s", tool, got, mode)
		}
	}
	if got := Default().PolicyDefaults(); got.Default != agent.ToolAllow || len(got.Rules) != 0 {
		t.Errorf("default PolicyDefaults() = %+v", got)
	}
}

// TestRuleNameAgrees keeps ruleName, which needs no list of tools, in step
// with govern.ParseRuleName for every name that is valid.
func TestRuleNameAgrees(t *testing.T) {
	known := append(slices.Clone(seedTools), "github__issues")
	names := []string{"default", "*", "mcp:github", "group:mcp:github", "github__issues", " EXEC ", "Tool:Read", "tool:shell"}
	for _, tool := range known {
		names = append(names, tool, "tool:"+tool)
	}
	for _, g := range agent.Groups() {
		names = append(names, g, "group:"+g)
	}
	for _, n := range names {
		want, err := govern.ParseRuleName(n, toolset(known...))
		if err != nil {
			t.Errorf("ParseRuleName(%q): %v", n, err)
			continue
		}
		if got := ruleName(n); got != want {
			t.Errorf("ruleName(%q) = %q, ParseRuleName says %q", n, got, want)
		}
	}
}

func TestPolicyWarnings(t *testing.T) {
	tests := []struct {
		name string
		file string
		want []string // each warning, after the file's name
	}{
		{name: "shell denied, start allowed", file: "tools:\n  deny: [shell]\n", want: []string{
			":2: tools.deny[0]: shell is deny, but jobs is allow (both exec): set the group instead, exec=deny",
			":2: tools.deny[0]: shell is deny, but start is allow (both exec)",
			":2: tools.deny[0]: shell is deny, but stop is allow (both exec)",
		}},
		{name: "the group denied", file: "tools:\n  deny: [exec]\n"},
		{name: "the group and a tool", file: "tools:\n  ask: [exec]\n  deny: [shell]\n", want: []string{
			":3: tools.deny[0]: shell is deny, but jobs is ask (both exec)",
			":3: tools.deny[0]: shell is deny, but start is ask (both exec)",
			":3: tools.deny[0]: shell is deny, but stop is ask (both exec)",
		}},
		{name: "one tool allowed in a denied group", file: "tools:\n  allow: [\"tool:read\"]\n  deny: [read]\n", want: []string{
			":3: tools.deny[0]: read (group) is deny, but jobs is allow, and commands read the workspace too: set exec=deny as well",
		}},
		{name: "deny by default, one tool allowed", file: "tools:\n  default: deny\n  allow: [shell]\n"},
		{name: "ask by default, a tool denied", file: "tools:\n  default: ask\n  deny: [\"tool:read\"]\n", want: []string{
			":3: tools.deny[0]: read is deny, but find is ask (both read)",
			":3: tools.deny[0]: read is deny, but grep is ask (both read)",
			":3: tools.deny[0]: read is deny, but ls is ask (both read)",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeConfig(t, tt.file)
			c := mustLoad(t, path, env{}.withHome())
			got := c.PolicyWarnings(toolset(seedTools...))
			if len(got) != len(tt.want) {
				t.Fatalf("warnings %q, want %d", got, len(tt.want))
			}
			for i := range got {
				if !strings.HasPrefix(got[i], path+tt.want[i]) {
					t.Errorf("warning %q\nwant %q…", got[i], path+tt.want[i])
				}
			}
		})
	}

	// A Config built in code names the key alone.
	c := Default()
	c.Tools.Deny = []string{"fetch"}
	if got := c.PolicyWarnings(toolset(seedTools...)); !slices.Equal(got, []string{"tools.deny[0]: fetch is deny, but search is allow (both web): set the group instead, web=deny"}) {
		t.Errorf("warnings %q", got)
	}
	if got := c.PolicyWarnings(toolset("fetch")); len(got) != 0 {
		t.Errorf("warnings without search: %q", got)
	}
}

func TestIDChecks(t *testing.T) {
	tests := []struct {
		check func(string) error
		id    string
		err   string // a part of the error; "" for none
	}{
		{checkSlackUser, "U0123ABCD", ""},
		{checkSlackUser, "W0123ABCD", ""},
		{checkSlackUser, "u0123abcd", `write "U0123ABCD"`},
		{checkSlackUser, "wendy", "a Slack member ID looks like U0123ABCD"},
		{checkSlackUser, "C0123ABCD", "is a channel's ID"},
		{checkSlackUser, "@wendy", "a Slack member ID looks like U0123ABCD"},
		{checkSlackChannel, "C0123ABCD", ""},
		{checkSlackChannel, "G0123ABCD", ""},
		{checkSlackChannel, "D0123ABCD", ""},
		{checkSlackChannel, "c0123abcd", `write "C0123ABCD"`},
		{checkSlackChannel, "general", "is a channel's name"},
		{checkSlackChannel, "#ops-2", "is a channel's name"},
		{checkSlackChannel, "U0123ABCD", "is a person's member ID"},
		{checkSlackChannel, "X0123ABCD", "a Slack channel ID looks like C0123ABCD"},
		{checkTelegramUser, "123456789", ""},
		{checkTelegramUser, "-100123", "negative IDs are chats"},
		{checkTelegramUser, "0", "a Telegram user ID is a number"},
		{checkTelegramUser, "007", "a Telegram user ID is a number"},
		{checkTelegramUser, "@bob", "a Telegram user ID is a number"},
		{checkTelegramChat, "-1001234567890", ""},
		{checkTelegramChat, "-42", ""},
		{checkTelegramChat, "123456789", ""},
		{checkTelegramChat, "0", "a Telegram chat ID is a number"},
		{checkTelegramChat, "+5", "a Telegram chat ID is a number"},
		{checkTelegramChat, "-0100", "a Telegram chat ID is a number"},
		{checkTelegramChat, "99999999999999999999", "a Telegram chat ID is a number"},
		{checkTelegramChat, "@crew", "is a username"},
	}
	for _, tt := range tests {
		err := tt.check(tt.id)
		switch {
		case tt.err == "" && err != nil:
			t.Errorf("%q: %v", tt.id, err)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("%q: error %v, want one containing %q", tt.id, err, tt.err)
		}
	}
}

// configuredMode is a tool's mode in a channel with no rules of its own.
func configuredMode(c *Config, tool string) agent.ToolMode {
	return govern.NewPolicy(agent.SessionKey{Platform: "x", Chat: "y"}, c.PolicyDefaults(), agent.ChannelSettings{}, toolset(append(slices.Clone(seedTools), tool)...)).Mode(tool)
}
