package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/agent/govern"
	"go.yaml.in/yaml/v3"
)

// env is a test environment for Load.
type env map[string]string

func (e env) lookup(name string) (string, bool) {
	v, ok := e[name]
	return v, ok
}

// withHome adds HOME so that the data directory has its default.
func (e env) withHome() env {
	out := env{"HOME": "/home/mate"}
	for k, v := range e {
		out[k] = v
	}
	return out
}

func writeConfig(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "firstmate.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// problems unwraps the joined error of Load or Validate.
func problems(t *testing.T, err error) []*Problem {
	t.Helper()
	if err == nil {
		return nil
	}
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	var out []*Problem
	for _, e := range errs {
		var p *Problem
		if !errors.As(e, &p) {
			t.Fatalf("error %q is not a *Problem", e)
		}
		out = append(out, p)
	}
	return out
}

func mustLoad(t *testing.T, path string, e env) *Config {
	t.Helper()
	c, err := Load(path, e.lookup)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return c
}

func TestDefaults(t *testing.T) {
	c := mustLoad(t, "", env{}.withHome())
	want := &Config{
		LLM: LLM{
			BaseURL:       "https://api.openai.com/v1",
			ToolProtocol:  ProtocolNative,
			MaxRetries:    3,
			Timeout:       5 * time.Minute,
			StallTimeout:  time.Minute,
			MaxResponseKB: 1024,
		},
		Agent: Agent{MaxSteps: 20, TurnTimeout: 10 * time.Minute, HistoryTurns: 200, Progress: "full",
			MaxCallsPerStep: 32, StepResultsKB: 256, TurnResultsKB: 1024},
		Store:   Store{RedisPrefix: "fm", DataDir: "/home/mate/.local/share/firstmate"},
		HTTP:    HTTP{Addr: "127.0.0.1:8080"},
		Log:     Log{Level: "info", Format: "text"},
		Tools:   Tools{Default: agent.ToolAllow},
		Sandbox: "auto",
		Shell: Shell{Timeout: time.Minute, MaxTimeout: 10 * time.Minute, OutputKB: 64, QuotaMB: 1024, QuotaFiles: 100_000, TmpMB: 256,
			FileMB: 1024, Processes: 256, OpenFiles: 1024, MemoryMB: 1024, Jobs: Jobs{PerChannel: 3, Lifetime: time.Hour, CPU: time.Hour}},
		Web: Web{
			Fetch:  Fetch{AllowNetworks: []string{}, Ports: []int{}, Timeout: 30 * time.Second, MaxBodyMB: 5},
			Search: Search{Kind: "searxng"},
		},
		Slack: Slack{APIURL: "https://slack.com/api/", Access: govern.AccessOpen,
			AllowedUsers: []string{}, AllowedChannels: []string{}},
		Telegram: Telegram{APIURL: "https://api.telegram.org", Access: govern.AccessPairing,
			AllowedUsers: []string{}, AllowedChats: []string{}},
		Budget:    Budget{ChannelTokensPerDay: 0, UserMessagesPerMinute: 20},
		Approvals: Approvals{Timeout: 5 * time.Minute},
		Pairing:   Pairing{CodeTTL: time.Hour},
		Schedules: Schedules{PerChannel: 20, MinInterval: 5 * time.Minute, TimeZone: "UTC", MaxWait: 24 * time.Hour},
	}
	c.meta = nil
	if !reflect.DeepEqual(c, want) {
		t.Errorf("defaults:\n got %+v\nwant %+v", c, want)
	}
	if w := c.Warnings(); len(w) != 0 {
		t.Errorf("warnings for the defaults: %q", w)
	}
	if c.Slack.Enabled() || c.Telegram.Enabled() {
		t.Error("a platform is enabled by default")
	}
	if got := c.Retention(); got != agent.DefaultRetention {
		t.Errorf("Retention() = %+v, want %+v", got, agent.DefaultRetention)
	}
	if got := c.Log.SlogLevel(); got.String() != "INFO" {
		t.Errorf("SlogLevel() = %v", got)
	}
}

func TestDataDir(t *testing.T) {
	tests := []struct {
		name    string
		env     env
		root    bool
		file    string
		want    string
		wantErr string // the Problem's key, if any
	}{
		{name: "home", env: env{"HOME": "/home/a"}, want: "/home/a/.local/share/firstmate"},
		{name: "xdg", env: env{"HOME": "/home/a", "XDG_DATA_HOME": "/data"}, want: "/data/firstmate"},
		{name: "relative xdg is ignored", env: env{"HOME": "/home/a", "XDG_DATA_HOME": "data"}, want: "/home/a/.local/share/firstmate"},
		{name: "root without home", env: env{}, root: true, want: "/var/lib/firstmate"},
		{name: "root with home", env: env{"HOME": "/root"}, root: true, want: "/root/.local/share/firstmate"},
		{name: "no home, not root", env: env{}, wantErr: "store.data_dir"},
		{name: "empty home counts as unset", env: env{"HOME": ""}, wantErr: "store.data_dir"},
		{name: "env", env: env{"FIRSTMATE_DATA_DIR": "/srv/fm/"}, want: "/srv/fm"},
		{name: "file", env: env{}, file: "store: {data_dir: /opt/fm}", want: "/opt/fm"},
		{name: "file tilde", env: env{"HOME": "/home/a"}, file: "store: {data_dir: ~/fm}", want: "/home/a/fm"},
		{name: "env over file", env: env{"FIRSTMATE_DATA_DIR": "/env"}, file: "store: {data_dir: /file}", want: "/env"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			euid := 1000
			if tt.root {
				euid = 0
			}
			old := geteuid
			geteuid = func() int { return euid }
			t.Cleanup(func() { geteuid = old })
			path := ""
			if tt.file != "" {
				path = writeConfig(t, tt.file)
			}
			c, err := Load(path, tt.env.lookup)
			if tt.wantErr != "" {
				ps := problems(t, err)
				if len(ps) != 1 || ps[0].Key != tt.wantErr || !strings.Contains(ps[0].Msg, "FIRSTMATE_DATA_DIR") {
					t.Fatalf("want one problem with %s naming FIRSTMATE_DATA_DIR, got %v", tt.wantErr, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Store.DataDir != tt.want {
				t.Errorf("data dir = %q, want %q", c.Store.DataDir, tt.want)
			}
		})
	}
}

const fullFile = `# every key
llm:
  base_url: http://localhost:11434/v1/
  api_key: sk-file-key-0123456789
  model: qwen3:8b
  tool_protocol: text
  max_retries: 0
  timeout: 90s
  temperature: 0.2
  max_tokens: 4096
  context_tokens: 32000
  stall_timeout: 30s
  max_response_kb: 2048
agent:
  system_prompt: |
    You are a careful first mate.
  max_steps: 30
  turn_timeout: 1h30m
  max_turns: 2
  history_turns: 50
  max_calls_per_step: 8
  step_results_kb: 128
  turn_results_kb: 512
store:
  redis_url: rediss://:pw-0123456789@redis.internal:6380/2
  data_dir: /srv/firstmate
http:
  addr: ":9090"
log:
  level: DEBUG
  format: json
tools:
  default: deny
  allow: [ls, read]
  ask:
    - shell
  deny: []
admins:
  - slack:U0123ABCD
  - " Telegram:123456789 "
slack:
  bot_token: xoxb-file-bot-0123456789
  app_token: xapp-file-app-0123456789
  signing_secret: file-signing-0123456789
  api_url: http://127.0.0.1:3001/api/
  access: Allowlist
  allowed_users: [U0123ABCD, " W0456EFGH "]
  allowed_channels:
    - C0123ABCD
    - G0456EFGH
  workspace_admins: true
telegram:
  bot_token: "123456:file-telegram-0123456789"
  api_url: http://127.0.0.1:3002
  access: open
  allowed_users: [123456789]
  allowed_chats: [-1001234567890, "42"]
  chat_admins: true
budgets:
  channel_tokens_per_day: 2000000
  user_messages_per_minute: 0
approvals:
  timeout: 2m
pairing:
  code_ttl: 30m
`

func TestValidFile(t *testing.T) {
	c := mustLoad(t, writeConfig(t, fullFile), env{})
	temp := 0.2
	want := Config{
		LLM: LLM{
			BaseURL:       "http://localhost:11434/v1",
			APIKey:        "sk-file-key-0123456789",
			Model:         "qwen3:8b",
			ToolProtocol:  ProtocolText,
			MaxRetries:    0,
			Timeout:       90 * time.Second,
			Temperature:   &temp,
			MaxTokens:     4096,
			ContextTokens: 32000,
			StallTimeout:  30 * time.Second,
			MaxResponseKB: 2048,
		},
		Agent: Agent{
			SystemPrompt: "You are a careful first mate.\n",
			MaxSteps:     30,
			TurnTimeout:  90 * time.Minute,
			MaxTurns:     2,
			HistoryTurns: 50, Progress: "full",
			MaxCallsPerStep: 8, StepResultsKB: 128, TurnResultsKB: 512,
		},
		Store: Store{RedisURL: "rediss://:pw-0123456789@redis.internal:6380/2", RedisPrefix: "fm", DataDir: "/srv/firstmate"},
		HTTP:  HTTP{Addr: ":9090"},
		Log:   Log{Level: "debug", Format: "json"},
		Tools: Tools{Default: agent.ToolDeny, Allow: []string{"ls", "read"}, Ask: []string{"shell"}, Deny: []string{}},
		Admins: []Admin{
			{Platform: "slack", ID: "U0123ABCD"},
			{Platform: "telegram", ID: "123456789"},
		},
		Slack: Slack{
			BotToken:        "xoxb-file-bot-0123456789",
			AppToken:        "xapp-file-app-0123456789",
			SigningSecret:   "file-signing-0123456789",
			APIURL:          "http://127.0.0.1:3001/api/",
			Access:          govern.AccessAllowlist,
			AllowedUsers:    []string{"U0123ABCD", "W0456EFGH"},
			AllowedChannels: []string{"C0123ABCD", "G0456EFGH"},
			WorkspaceAdmins: true,
		},
		Telegram: Telegram{BotToken: "123456:file-telegram-0123456789", APIURL: "http://127.0.0.1:3002",
			Access: govern.AccessOpen, AllowedUsers: []string{"123456789"}, AllowedChats: []string{"-1001234567890", "42"}, ChatAdmins: true},
		Budget:    Budget{ChannelTokensPerDay: 2_000_000, UserMessagesPerMinute: 0},
		Approvals: Approvals{Timeout: 2 * time.Minute},
		Pairing:   Pairing{CodeTTL: 30 * time.Minute},
	}
	d := Default()
	want.Sandbox, want.Shell, want.Web, want.Schedules = d.Sandbox, d.Shell, d.Web, d.Schedules
	got := *c
	got.meta = nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("loaded:\n got %+v\nwant %+v", got, want)
	}
	if err := c.RequireLLM(); err != nil {
		t.Errorf("RequireLLM: %v", err)
	}
	if !c.Slack.Enabled() || !c.Slack.SocketMode() || !c.Telegram.Enabled() {
		t.Error("platforms not enabled")
	}
	if !c.IsAdmin("telegram", "123456789") || !c.IsAdmin("slack", "U0123ABCD") || c.IsAdmin("slack", "123456789") {
		t.Error("IsAdmin is wrong")
	}
	if got := configuredMode(c, "shell"); got != agent.ToolAsk {
		t.Errorf("Mode(shell) = %q", got)
	}
	if got := configuredMode(c, "fetch"); got != agent.ToolDeny {
		t.Errorf("Mode(fetch) = %q, want the default", got)
	}
	if got := c.Retention().MaxTurns; got != 50 {
		t.Errorf("Retention().MaxTurns = %d", got)
	}
}

func TestEmptyFileIsDefaults(t *testing.T) {
	for _, content := range []string{"", "# nothing\n", "---\n"} {
		c := mustLoad(t, writeConfig(t, content), env{}.withHome())
		d := mustLoad(t, "", env{}.withHome())
		c.meta, d.meta = nil, nil
		if !reflect.DeepEqual(c, d) {
			t.Errorf("%q: got %+v, want the defaults", content, c)
		}
	}
}

func TestExampleFile(t *testing.T) {
	c := mustLoad(t, "../../deploy/firstmate.example.yaml", env{}.withHome())
	if w := c.Warnings(); len(w) != 0 {
		t.Errorf("warnings: %q", w)
	}
	seed := []string{"ls", "read", "write", "edit", "mkdir", "copy", "move", "delete", "find", "grep",
		"shell", "fetch", "search", "send_file", "start", "jobs", "stop"}
	if err := c.ValidateTools(toolset(seed...)); err != nil {
		t.Error(err)
	}
	if w := c.PolicyWarnings(toolset(seed...)); len(w) != 0 {
		t.Errorf("policy warnings: %q", w)
	}
	// Apart from the tool lists and the model, the example shows the defaults.
	d := mustLoad(t, "", env{}.withHome())
	c.meta, d.meta = nil, nil
	c.Tools, d.Tools = Tools{}, Tools{}
	if !reflect.DeepEqual(c, d) {
		t.Errorf("example differs from the defaults:\n got %+v\nwant %+v", c, d)
	}
}

func TestConfigPathFromEnv(t *testing.T) {
	path := writeConfig(t, "llm: {model: from-file}\n")
	c := mustLoad(t, "", env{"FIRSTMATE_CONFIG": path}.withHome())
	if c.LLM.Model != "from-file" || c.File() != path {
		t.Errorf("model %q, file %q", c.LLM.Model, c.File())
	}
	if !strings.Contains(c.Redacted(), "named by FIRSTMATE_CONFIG") {
		t.Error("Redacted does not say where the file came from")
	}

	// The flag wins over the variable.
	other := writeConfig(t, "llm: {model: from-flag}\n")
	c = mustLoad(t, other, env{"FIRSTMATE_CONFIG": path}.withHome())
	if c.LLM.Model != "from-flag" {
		t.Errorf("model %q, want the flag's file", c.LLM.Model)
	}

	missing := filepath.Join(t.TempDir(), "nope.yaml")
	c, err := Load("", env{"FIRSTMATE_CONFIG": missing}.withHome().lookup)
	if c != nil || !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "FIRSTMATE_CONFIG") {
		t.Errorf("missing file: %v, %v", c, err)
	}
	c, err = Load(missing, env{}.withHome().lookup)
	if c != nil || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v, %v", c, err)
	}
}

func TestSyntaxError(t *testing.T) {
	path := writeConfig(t, "llm:\n  model: [unclosed\n")
	c, err := Load(path, env{}.withHome().lookup)
	if c != nil || err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "line") {
		t.Errorf("got %v, %v; want an error naming the file and line", c, err)
	}
}

// problemCase is a file or an environment with one thing wrong.
type problemCase struct {
	name string
	file string // YAML, if any
	env  env
	key  string // the Problem's Key
	line int    // its Line, for problems in the file
	msg  string // a part of the message: the fix
}

func checkProblem(t *testing.T, tt problemCase) {
	t.Helper()
	path := ""
	if tt.file != "" {
		path = writeConfig(t, tt.file)
	}
	c, err := Load(path, tt.env.withHome().lookup)
	if c == nil {
		t.Fatalf("Load returned no config: %v", err)
	}
	ps := problems(t, err)
	if len(ps) != 1 {
		t.Fatalf("want 1 problem, got %d: %v", len(ps), err)
	}
	p := ps[0]
	if p.Key != tt.key || p.Line != tt.line || !strings.Contains(p.Msg, tt.msg) {
		t.Errorf("got  %s (key %q, line %d)\nwant key %q, line %d, message containing %q", p, p.Key, p.Line, tt.key, tt.line, tt.msg)
	}
	if tt.line > 0 && p.File != path {
		t.Errorf("problem names file %q, want %q", p.File, path)
	}
	if tt.line > 0 && !strings.HasPrefix(p.Error(), path+":") {
		t.Errorf("message %q does not start with the file and line", p.Error())
	}
}

func TestFileProblems(t *testing.T) {
	tests := []problemCase{
		{name: "unknown top-level key", file: "llm: {}\nbogus: 1\n",
			key: "bogus", line: 2, msg: "unknown key; known top-level keys: admins, agent, approvals, budgets, http, llm, log, mcp, pairing, sandbox, schedules, shell, skills, slack, store, telegram, tools, web"},
		{name: "unknown key with a typo", file: "llm:\n  model: x\n  modle: y\n",
			key: "llm.modle", line: 3, msg: `did you mean "model"? Known keys under llm: api_key, base_url, context_tokens`},
		{name: "unknown nested key", file: "slack:\n  token: x\n",
			key: "slack.token", line: 2, msg: "known keys under slack: access, allow_bots, allowed_channels, allowed_users, api_url, app_token, bot_token, signing_secret, workspace_admins"},
		{name: "key set twice", file: "log:\n  level: info\n  level: debug\n",
			key: "log.level", line: 3, msg: "set twice (first on line 2)"},
		{name: "tool protocol", file: "llm:\n  tool_protocol: xml\n",
			key: "llm.tool_protocol", line: 2, msg: `"xml" is not one of native, text`},
		{name: "base url without scheme", file: "llm:\n  base_url: localhost:11434\n",
			key: "llm.base_url", line: 2, msg: `"localhost:11434" has no scheme; use http://localhost:11434/v1`},
		{name: "base url scheme", file: "llm:\n  base_url: ftp://host/v1\n",
			key: "llm.base_url", line: 2, msg: "the scheme must be http or https"},
		{name: "base url with password", file: "llm:\n  base_url: https://u:hunter2@host/v1\n",
			key: "llm.base_url", line: 2, msg: "put the key in OPENAI_API_KEY (or llm.api_key) instead"},
		{name: "duration without unit", file: "llm:\n  timeout: 90\n",
			key: "llm.timeout", line: 2, msg: `90 has no unit; write a duration such as "90s"`},
		{name: "not a duration", file: "agent:\n  turn_timeout: ten minutes\n",
			key: "agent.turn_timeout", line: 2, msg: `"ten minutes" is not a duration; write one such as "90s", "10m"`},
		{name: "negative duration", file: "agent:\n  turn_timeout: -1m\n",
			key: "agent.turn_timeout", line: 2, msg: "must be positive"},
		{name: "zero timeout", file: "llm:\n  timeout: 0s\n",
			key: "llm.timeout", line: 2, msg: "must be positive"},
		{name: "not a number", file: "agent:\n  max_steps: many\n",
			key: "agent.max_steps", line: 2, msg: `"many" is not a whole number`},
		{name: "max steps zero", file: "agent:\n  max_steps: 0\n",
			key: "agent.max_steps", line: 2, msg: "0 is too small; use 1 or more"},
		{name: "max turns below zero", file: "agent:\n  max_turns: -1\n",
			key: "agent.max_turns", line: 2, msg: "use 0 or more"},
		{name: "webhook over http", file: "telegram:\n  webhook_url: http://bot.example/hook\n  webhook_secret: abc\n",
			key: "telegram.webhook_url", line: 2, msg: "only over https"},
		{name: "webhook without secret", file: "telegram:\n  webhook_url: https://bot.example/hook\n",
			key: "telegram.webhook_secret", msg: "a webhook needs a secret"},
		{name: "progress", file: "agent:\n  progress: loud\n",
			key: "agent.progress", line: 2, msg: "is not one of full, summary, off"},
		{name: "history turns", file: "agent:\n  history_turns: -5\n",
			key: "agent.history_turns", line: 2, msg: "use 1 or more"},
		{name: "negative retries", file: "llm:\n  max_retries: -1\n",
			key: "llm.max_retries", line: 2, msg: "use 0 or more"},
		{name: "negative max tokens", file: "llm:\n  max_tokens: -1\n",
			key: "llm.max_tokens", line: 2, msg: "use 0 or more"},
		{name: "negative context tokens", file: "llm:\n  context_tokens: -2\n",
			key: "llm.context_tokens", line: 2, msg: "-2 is not a budget; write a number of tokens, 0 for the model's default, or -1 for none"},
		{name: "no calls a step", file: "agent:\n  max_calls_per_step: 0\n",
			key: "agent.max_calls_per_step", line: 2, msg: "0 is too small; use 1 or more"},
		{name: "no step results", file: "agent:\n  step_results_kb: 0\n",
			key: "agent.step_results_kb", line: 2, msg: "0 is too small; use 1 or more"},
		{name: "step results over the turn's", file: "agent:\n  step_results_kb: 2048\n",
			key: "agent.step_results_kb", line: 2, msg: "2048 is over agent.turn_results_kb (1024): a step is part of a turn"},
		{name: "zero stall timeout", file: "llm:\n  stall_timeout: 0s\n",
			key: "llm.stall_timeout", line: 2, msg: "is too short; use 1s to 1h"},
		{name: "tiny response limit", file: "llm:\n  max_response_kb: 1\n",
			key: "llm.max_response_kb", line: 2, msg: "1 is out of range; use 16 to 1048576"},
		{name: "temperature range", file: "llm:\n  temperature: 3\n",
			key: "llm.temperature", line: 2, msg: "use 0 to 2"},
		{name: "temperature not a number", file: "llm:\n  temperature: warm\n",
			key: "llm.temperature", line: 2, msg: `"warm" is not a number`},
		{name: "list for a string", file: "llm:\n  model: [a, b]\n",
			key: "llm.model", line: 2, msg: "expected a single value, not a list"},
		{name: "scalar for a section", file: "llm: gpt\n",
			key: "llm", line: 1, msg: `expected keys (api_key, base_url,`},
		{name: "whole file not a mapping", file: "- a\n- b\n",
			key: "", line: 1, msg: "expected keys (admins, agent,"},
		{name: "redis scheme", file: "store:\n  redis_url: http://redis:6379\n",
			key: "store.redis_url", line: 2, msg: "the scheme must be redis or rediss (TLS) for one node, redis+cluster or rediss+cluster for a Cluster, redis+sentinel or rediss+sentinel for Sentinel"},
		{name: "redis several hosts", file: "store:\n  redis_url: redis://a:6379,b:6379\n",
			key: "store.redis_url", line: 2, msg: "names 2 hosts, and redis:// is one node: use redis+cluster:// for a Cluster"},
		{name: "redis cluster option", file: "store:\n  redis_url: redis://a:6379?cluster=true\n",
			key: "store.redis_url", line: 2, msg: "the option cluster is not accepted: for a Cluster, use the scheme redis+cluster"},
		{name: "redis cluster database", file: "store:\n  redis_url: redis+cluster://a,b/2\n",
			key: "store.redis_url", line: 2, msg: "a Cluster has only database 0"},
		{name: "redis sentinel master", file: "store:\n  redis_url: rediss+sentinel://a:26379,b:26379\n",
			key: "store.redis_url", line: 2, msg: "names no master: put the name the sentinels know it by in the path"},
		{name: "redis sentinel password elsewhere", file: "store:\n  redis_url: redis+cluster://a?sentinel_password=x\n",
			key: "store.redis_url", line: 2, msg: "the option sentinel_password is not accepted: it is for redis+sentinel://"},
		{name: "redis unknown option", file: "store:\n  redis_url: redis+cluster://a?dial_timeot=3s\n",
			key: "store.redis_url", line: 2, msg: "unknown option dial_timeot"},
		{name: "redis without scheme", file: "store:\n  redis_url: localhost:6379\n",
			key: "store.redis_url", line: 2, msg: `use redis://localhost:6379`},
		{name: "redis database", file: "store:\n  redis_url: redis://localhost:6379/zero\n",
			key: "store.redis_url", line: 2, msg: "the path must be a database number"},
		{name: "http addr port only", file: "http:\n  addr: 8080\n",
			key: "http.addr", line: 2, msg: `use ":8080" for every interface or "127.0.0.1:8080"`},
		{name: "http addr port range", file: "http:\n  addr: :99999\n",
			key: "http.addr", line: 2, msg: "the port must be a number from 0 to 65535"},
		{name: "log level", file: "log:\n  level: loud\n",
			key: "log.level", line: 2, msg: `"loud" is not one of debug, info, warn, error`},
		{name: "log level warning", file: "log:\n  level: warning\n",
			key: "log.level", line: 2, msg: `spelled "warn"`},
		{name: "log format", file: "log:\n  format: xml\n",
			key: "log.format", line: 2, msg: `"xml" is not one of text, json`},
		{name: "tools default", file: "tools:\n  default: maybe\n",
			key: "tools.default", line: 2, msg: `"maybe" is not one of allow, ask, deny`},
		{name: "tool in two lists", file: "tools:\n  allow: [read, shell]\n  deny:\n    - shell\n",
			key: "tools.deny[0]", line: 4, msg: `"shell" is also in tools.allow[1]`},
		{name: "empty tool name", file: "tools:\n  allow: [read, \"\"]\n",
			key: "tools.allow[1]", line: 2, msg: "empty tool name"},
		{name: "group in two lists", file: "tools:\n  allow: [\"tool:read\", read]\n  deny: [\"group:read\"]\n",
			key: "tools.deny[0]", line: 3, msg: `"group:read" is also in tools.allow[1], as "read" (both name the group read)`},
		{name: "tool in two lists by prefix", file: "tools:\n  allow: [shell]\n  ask: [\"tool:shell\"]\n",
			key: "tools.ask[0]", line: 3, msg: `as "shell" (both name the tool shell)`},
		{name: "default in a list", file: "tools:\n  deny: [default]\n",
			key: "tools.deny[0]", line: 2, msg: "set tools.default instead"},
		{name: "tools list not a list", file: "tools:\n  allow: read\n",
			key: "tools.allow", line: 2, msg: "expected a list"},
		{name: "admin without platform", file: "admins:\n  - U0123ABCD\n",
			key: "admins[0]", line: 2, msg: `write "slack:U0123ABCD"`},
		{name: "admin telegram without platform", file: "admins: [\"123456\"]\n",
			key: "admins[0]", line: 1, msg: `write "telegram:123456"`},
		{name: "admin unknown platform", file: "admins:\n  - slack:U0123ABCD\n  - discord:42\n",
			key: "admins[1]", line: 3, msg: `platform "discord" is not one of slack, telegram`},
		{name: "admin lower-case slack", file: "admins: [slack:u0123abcd]\n",
			key: "admins[0]", line: 1, msg: `write "slack:U0123ABCD"`},
		{name: "admin telegram username", file: "admins: [\"telegram:@bob\"]\n",
			key: "admins[0]", line: 1, msg: "a Telegram user ID is a number"},
		{name: "admins not a list", file: "admins: slack:U0123ABCD\n",
			key: "admins", line: 1, msg: "expected a list"},
		{name: "slack bot token is an app token", file: "slack:\n  bot_token: xapp-1-A\n  app_token: xapp-1-B\n",
			key: "slack.bot_token", line: 2, msg: "it belongs in SLACK_APP_TOKEN (or slack.app_token)"},
		{name: "slack user token", file: "slack:\n  bot_token: xoxp-1\n  app_token: xapp-1\n",
			key: "slack.bot_token", line: 2, msg: "this is a user token"},
		{name: "slack app token", file: "slack:\n  bot_token: xoxb-1\n  app_token: abc\n",
			key: "slack.app_token", line: 3, msg: "does not start with xapp-"},
		{name: "slack without a way in", file: "slack:\n  bot_token: xoxb-1\n",
			key: "slack.bot_token", line: 2, msg: "set SLACK_APP_TOKEN (or slack.app_token) for Socket Mode, or SLACK_SIGNING_SECRET"},
		{name: "slack app token alone", file: "slack:\n  app_token: xapp-1\n",
			key: "slack.bot_token", line: 0, msg: "set SLACK_BOT_TOKEN (or slack.bot_token)"},
		{name: "sandbox mode", file: "sandbox: docker\n",
			key: "sandbox", line: 1, msg: `"docker" is not one of auto, namespaces, off`},
		{name: "shell max timeout over the cap", file: "shell:\n  max_timeout: 2h\n",
			key: "shell.max_timeout", line: 2, msg: "over the 30m cap"},
		{name: "shell timeout over its max", file: "shell:\n  timeout: 20m\n",
			key: "shell.timeout", line: 2, msg: "over shell.max_timeout"},
		{name: "shell processes", file: "shell:\n  processes: 2\n",
			key: "shell.processes", line: 2, msg: "too small; use 16 or more"},
		{name: "fetch network", file: "web:\n  fetch:\n    allow_networks: [intranet]\n",
			key: "web.fetch.allow_networks[0]", line: 3, msg: "write it as CIDR"},
		{name: "fetch port", file: "web:\n  fetch:\n    ports: [0]\n",
			key: "web.fetch.ports[0]", line: 3, msg: "0 is not a port"},
		{name: "search url", file: "web:\n  search:\n    url: searx.local\n",
			key: "web.search.url", line: 3, msg: "has no scheme"},
		{name: "search kind", file: "web:\n  search:\n    kind: google\n    url: http://x\n",
			key: "web.search.kind", line: 3, msg: `"google" is not one of searxng`},
		{name: "slack api url", file: "slack:\n  api_url: slack.example/api/\n",
			key: "slack.api_url", line: 2, msg: "has no scheme; use http://slack.example/api"},
		{name: "slack api url empty", file: "slack:\n  api_url: \"\"\n",
			key: "slack.api_url", line: 2, msg: "leave the key out for https://slack.com/api/"},
		{name: "telegram token", file: "telegram:\n  bot_token: not-a-token\n",
			key: "telegram.bot_token", line: 2, msg: "@BotFather"},
		{name: "telegram api url", file: "telegram:\n  api_url: ws://x\n",
			key: "telegram.api_url", line: 2, msg: "the scheme must be http or https"},
		{name: "secret with a newline", file: "llm:\n  api_key: \"sk-abc\\n\"\n",
			key: "llm.api_key", line: 2, msg: "stray newline"},
		{name: "two documents", file: "llm: {}\n---\nlog: {}\n",
			key: "", line: 2, msg: "more than one YAML document"},
		{name: "placeholder unset", file: "llm:\n  api_key: ${MY_KEY}\n",
			key: "llm.api_key", line: 2, msg: "${MY_KEY} is not set in the environment"},
		{name: "slack access", file: "slack:\n  access: closed\n",
			key: "slack.access", line: 2, msg: `"closed" is not one of open, allowlist, pairing`},
		{name: "telegram access", file: "telegram:\n  access: [open]\n",
			key: "telegram.access", line: 2, msg: "expected a single value, not a list"},
		{name: "slack allowed user lower case", file: "slack:\n  allowed_users:\n    - U0123ABCD\n    - w0456efgh\n",
			key: "slack.allowed_users[1]", line: 4, msg: `Slack member IDs are upper case; write "W0456EFGH"`},
		{name: "slack allowed user is a channel", file: "slack:\n  allowed_users: [C0123ABCD]\n",
			key: "slack.allowed_users[0]", line: 2, msg: "is a channel's ID, not a person's"},
		{name: "slack allowed channel by name", file: "slack:\n  allowed_channels: [\"#general\"]\n",
			key: "slack.allowed_channels[0]", line: 2, msg: "is a channel's name, which can change; use its ID"},
		{name: "slack allowed channel is a person", file: "slack:\n  allowed_channels: [U0123ABCD]\n",
			key: "slack.allowed_channels[0]", line: 2, msg: "is a person's member ID"},
		{name: "slack allowed channels not a list", file: "slack:\n  allowed_channels: C0123ABCD\n",
			key: "slack.allowed_channels", line: 2, msg: "expected a list"},
		{name: "slack workspace admins", file: "slack:\n  workspace_admins: maybe\n",
			key: "slack.workspace_admins", line: 2, msg: `"maybe" is not true or false`},
		{name: "telegram allowed user negative", file: "telegram:\n  allowed_users: [1, -1001234567890]\n",
			key: "telegram.allowed_users[1]", line: 2, msg: "negative IDs are chats, not people; put it in allowed_chats"},
		{name: "telegram allowed user name", file: "telegram:\n  allowed_users:\n    - \"@bob\"\n",
			key: "telegram.allowed_users[0]", line: 3, msg: "a Telegram user ID is a number"},
		{name: "telegram allowed chat name", file: "telegram:\n  allowed_chats: [\"@crew\"]\n",
			key: "telegram.allowed_chats[0]", line: 2, msg: "is a username; use the chat's numeric ID"},
		{name: "telegram allowed chat zero", file: "telegram:\n  allowed_chats: [0]\n",
			key: "telegram.allowed_chats[0]", line: 2, msg: "a Telegram chat ID is a number"},
		{name: "telegram chat admins", file: "telegram:\n  chat_admins: 1.5\n",
			key: "telegram.chat_admins", line: 2, msg: `"1.5" is not true or false`},
		{name: "negative token budget", file: "budgets:\n  channel_tokens_per_day: -1\n",
			key: "budgets.channel_tokens_per_day", line: 2, msg: "use 0 (no limit) or more"},
		{name: "message budget not a number", file: "budgets:\n  user_messages_per_minute: lots\n",
			key: "budgets.user_messages_per_minute", line: 2, msg: `"lots" is not a whole number`},
		{name: "negative message budget", file: "budgets:\n  user_messages_per_minute: -2\n",
			key: "budgets.user_messages_per_minute", line: 2, msg: "-2 is too small"},
		{name: "unknown budget", file: "budgets:\n  tokens_per_day: 5\n",
			key: "budgets.tokens_per_day", line: 2, msg: "known keys under budgets: channel_tokens_per_day, user_messages_per_minute"},
		{name: "approval timeout too short", file: "approvals:\n  timeout: 5s\n",
			key: "approvals.timeout", line: 2, msg: "5s is too short; use 10s to 24h"},
		{name: "approval timeout too long", file: "approvals:\n  timeout: 48h\n",
			key: "approvals.timeout", line: 2, msg: "48h is too long; use 10s to 24h"},
		{name: "approval timeout without unit", file: "approvals:\n  timeout: 300\n",
			key: "approvals.timeout", line: 2, msg: "300 has no unit"},
		{name: "approvals typo", file: "approvals:\n  timeuot: 1m\n",
			key: "approvals.timeuot", line: 2, msg: `did you mean "timeout"?`},
		{name: "pairing code ttl too short", file: "pairing:\n  code_ttl: 30s\n",
			key: "pairing.code_ttl", line: 2, msg: "30s is too short; use 1m to 168h (7 days)"},
		{name: "pairing code ttl too long", file: "pairing:\n  code_ttl: 200h\n",
			key: "pairing.code_ttl", line: 2, msg: "200h is too long"},
		{name: "pairing unknown key", file: "pairing:\n  ttl: 1h\n",
			key: "pairing.ttl", line: 2, msg: "known keys under pairing: code_ttl"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkProblem(t, tt) })
	}
}

func TestEnvProblems(t *testing.T) {
	tests := []problemCase{
		{name: "base url without scheme", env: env{"OPENAI_BASE_URL": "localhost:11434"},
			key: "OPENAI_BASE_URL", msg: `"localhost:11434" has no scheme; use http://localhost:11434/v1`},
		{name: "base url keeps its /v1", env: env{"OPENAI_BASE_URL": "host:8000/v1"},
			key: "OPENAI_BASE_URL", msg: "use http://host:8000/v1"},
		{name: "redis", env: env{"REDIS_URL": "mysql://db"},
			key: "REDIS_URL", msg: "the scheme must be redis"},
		{name: "addr", env: env{"FIRSTMATE_HTTP_ADDR": "localhost"},
			key: "FIRSTMATE_HTTP_ADDR", msg: "is not host:port"},
		{name: "level", env: env{"FIRSTMATE_LOG_LEVEL": "verbose"},
			key: "FIRSTMATE_LOG_LEVEL", msg: "is not one of debug, info, warn, error"},
		{name: "format", env: env{"FIRSTMATE_LOG_FORMAT": "logfmt"},
			key: "FIRSTMATE_LOG_FORMAT", msg: "is not one of text, json"},
		{name: "admins", env: env{"FIRSTMATE_ADMINS": "slack:U0123ABCD,bob"},
			key: "FIRSTMATE_ADMINS", msg: `entry 2: "bob" is not platform:user-id`},
		{name: "slack bot token", env: env{"SLACK_BOT_TOKEN": "xapp-1", "SLACK_APP_TOKEN": "xapp-2"},
			key: "SLACK_BOT_TOKEN", msg: "it belongs in SLACK_APP_TOKEN,"},
		{name: "slack app token", env: env{"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_APP_TOKEN": "xoxb-2"},
			key: "SLACK_APP_TOKEN", msg: "it belongs in SLACK_BOT_TOKEN,"},
		{name: "slack signing secret alone", env: env{"SLACK_SIGNING_SECRET": "abc"},
			key: "slack.bot_token", msg: "not set, but SLACK_SIGNING_SECRET is"},
		{name: "slack api url", env: env{"SLACK_API_URL": "ftp://x/"},
			key: "SLACK_API_URL", msg: "the scheme must be http or https"},
		{name: "telegram token", env: env{"TELEGRAM_BOT_TOKEN": "abc"},
			key: "TELEGRAM_BOT_TOKEN", msg: "@BotFather"},
		{name: "telegram api url", env: env{"TELEGRAM_API_URL": "api.telegram.org"},
			key: "TELEGRAM_API_URL", msg: "use http://api.telegram.org"},
		{name: "env names the key the file set too", file: "llm:\n  base_url: http://ok/v1\n", env: env{"OPENAI_BASE_URL": "nope"},
			key: "OPENAI_BASE_URL", msg: "has no scheme"},
		{name: "slack access", env: env{"SLACK_ACCESS": "closed"},
			key: "SLACK_ACCESS", msg: `"closed" is not one of open, allowlist, pairing`},
		{name: "telegram access", env: env{"TELEGRAM_ACCESS": "everyone"},
			key: "TELEGRAM_ACCESS", msg: `"everyone" is not one of open, allowlist, pairing`},
		{name: "slack allowed users", env: env{"SLACK_ALLOWED_USERS": "U0123ABCD,,u0456efgh"},
			key: "SLACK_ALLOWED_USERS", msg: `entry 3: "u0456efgh": Slack member IDs are upper case; write "U0456EFGH"`},
		{name: "slack allowed channels", env: env{"SLACK_ALLOWED_CHANNELS": "#general"},
			key: "SLACK_ALLOWED_CHANNELS", msg: `entry 1: "#general" is a channel's name`},
		{name: "telegram allowed users", env: env{"TELEGRAM_ALLOWED_USERS": "42, -100123"},
			key: "TELEGRAM_ALLOWED_USERS", msg: `entry 2: "-100123": negative IDs are chats`},
		{name: "telegram allowed chats", env: env{"TELEGRAM_ALLOWED_CHATS": "-100123,@crew,"},
			key: "TELEGRAM_ALLOWED_CHATS", msg: `entry 2: "@crew" is a username`},
		{name: "workspace admins", env: env{"SLACK_WORKSPACE_ADMINS": "yes"},
			key: "SLACK_WORKSPACE_ADMINS", msg: `"yes" is not true or false (or 1 or 0)`},
		{name: "chat admins", env: env{"TELEGRAM_CHAT_ADMINS": "2"},
			key: "TELEGRAM_CHAT_ADMINS", msg: `"2" is not true or false`},
		{name: "token budget not a number", env: env{"FIRSTMATE_CHANNEL_TOKENS_PER_DAY": "1e6"},
			key: "FIRSTMATE_CHANNEL_TOKENS_PER_DAY", msg: `"1e6" is not a whole number`},
		{name: "token budget negative", env: env{"FIRSTMATE_CHANNEL_TOKENS_PER_DAY": "-5"},
			key: "FIRSTMATE_CHANNEL_TOKENS_PER_DAY", msg: "-5 is too small; use 0 (no limit) or more"},
		{name: "message budget negative", env: env{"FIRSTMATE_USER_MESSAGES_PER_MINUTE": "-1"},
			key: "FIRSTMATE_USER_MESSAGES_PER_MINUTE", msg: "use 0 (no limit) or more"},
		{name: "message budget too big", env: env{"FIRSTMATE_USER_MESSAGES_PER_MINUTE": "99999999999999999999"},
			key: "FIRSTMATE_USER_MESSAGES_PER_MINUTE", msg: "is not a whole number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkProblem(t, tt) })
	}
}

func TestAllProblemsAtOnce(t *testing.T) {
	path := writeConfig(t, `llm:
  tool_protocol: xml
  timeout: 90
  modle: x
agent:
  max_turns: -1
log:
  level: loud
admins: [bob]
`)
	_, err := Load(path, env{"FIRSTMATE_HTTP_ADDR": "nope"}.withHome().lookup)
	ps := problems(t, err)
	var got []string
	for _, p := range ps {
		got = append(got, p.Key)
	}
	// The file's problems in line order, then the environment's.
	want := []string{"llm.tool_protocol", "llm.timeout", "llm.modle", "agent.max_turns", "log.level", "admins[0]", "FIRSTMATE_HTTP_ADDR"}
	if !slices.Equal(got, want) {
		t.Errorf("problems %q\nwant %q\nerror:\n%v", got, want, err)
	}
}

func TestEnvOverFile(t *testing.T) {
	path := writeConfig(t, fullFile)
	e := env{
		"OPENAI_API_KEY":         "sk-env-key-0123456789",
		"OPENAI_BASE_URL":        "https://llm.example/v1",
		"FIRSTMATE_MODEL":        "env-model",
		"REDIS_URL":              "redis://localhost:6379/0",
		"FIRSTMATE_REDIS_PREFIX": "envprefix",
		"FIRSTMATE_DATA_DIR":     "/env/data",
		"FIRSTMATE_HTTP_ADDR":    "0.0.0.0:80",
		"FIRSTMATE_PPROF":        "true",
		"FIRSTMATE_LOG_LEVEL":    "Warn",
		"FIRSTMATE_LOG_FORMAT":   "text",
		"FIRSTMATE_ADMINS":       " slack:W0ENVADMIN , telegram:42,",
		"SLACK_BOT_TOKEN":        "xoxb-env-bot-0123456789",
		"SLACK_APP_TOKEN":        "xapp-env-app-0123456789",
		"SLACK_SIGNING_SECRET":   "env-signing-0123456789",
		"SLACK_API_URL":          "https://slack.example/api/",
		"TELEGRAM_BOT_TOKEN":     "99:env-telegram-0123456789",
		"TELEGRAM_API_URL":       "https://tg.example",
		"FIRSTMATE_SANDBOX":      "Namespaces",
		"FIRSTMATE_SEARCH_URL":   "http://searxng.internal:8080",
		"SLACK_ACCESS":           "Pairing",
		"SLACK_ALLOWED_USERS":    "U0ENV1,,W0ENV2 ",
		"SLACK_ALLOWED_CHANNELS": "C0ENV1",
		"SLACK_WORKSPACE_ADMINS": "0",
		"TELEGRAM_ACCESS":        "allowlist",
		"TELEGRAM_ALLOWED_USERS": "7, 8",
		"TELEGRAM_ALLOWED_CHATS": "-100777",
		"TELEGRAM_CHAT_ADMINS":   "FALSE",

		"FIRSTMATE_CHANNEL_TOKENS_PER_DAY":   "500000",
		"FIRSTMATE_USER_MESSAGES_PER_MINUTE": "5",
	}
	c := mustLoad(t, path, e)
	checks := []struct {
		name, got, want string
	}{
		{"OPENAI_API_KEY", c.LLM.APIKey.Reveal(), e["OPENAI_API_KEY"]},
		{"OPENAI_BASE_URL", c.LLM.BaseURL, e["OPENAI_BASE_URL"]},
		{"FIRSTMATE_MODEL", c.LLM.Model, "env-model"},
		{"REDIS_URL", c.Store.RedisURL.Reveal(), e["REDIS_URL"]},
		{"FIRSTMATE_REDIS_PREFIX", c.Store.RedisPrefix, "envprefix"},
		{"FIRSTMATE_DATA_DIR", c.Store.DataDir, "/env/data"},
		{"FIRSTMATE_HTTP_ADDR", c.HTTP.Addr, "0.0.0.0:80"},
		{"FIRSTMATE_PPROF", strconv.FormatBool(c.HTTP.Pprof), "true"},
		{"FIRSTMATE_LOG_LEVEL", c.Log.Level, "warn"},
		{"FIRSTMATE_LOG_FORMAT", c.Log.Format, "text"},
		{"FIRSTMATE_ADMINS", strings.Trim(strings.Join(strings.Fields(strings.Trim(fmtAdmins(c.Admins), "[]")), ","), ","), "slack:W0ENVADMIN,telegram:42"},
		{"SLACK_BOT_TOKEN", c.Slack.BotToken.Reveal(), e["SLACK_BOT_TOKEN"]},
		{"SLACK_APP_TOKEN", c.Slack.AppToken.Reveal(), e["SLACK_APP_TOKEN"]},
		{"SLACK_SIGNING_SECRET", c.Slack.SigningSecret.Reveal(), e["SLACK_SIGNING_SECRET"]},
		{"SLACK_API_URL", c.Slack.APIURL, e["SLACK_API_URL"]},
		{"TELEGRAM_BOT_TOKEN", c.Telegram.BotToken.Reveal(), e["TELEGRAM_BOT_TOKEN"]},
		{"TELEGRAM_API_URL", c.Telegram.APIURL, e["TELEGRAM_API_URL"]},
		{"TELEGRAM_WEBHOOK_URL", c.Telegram.WebhookURL, e["TELEGRAM_WEBHOOK_URL"]},
		{"TELEGRAM_WEBHOOK_SECRET", c.Telegram.WebhookSecret.Reveal(), e["TELEGRAM_WEBHOOK_SECRET"]},
		{"FIRSTMATE_SANDBOX", c.Sandbox, "namespaces"},
		{"FIRSTMATE_SEARCH_URL", c.Web.Search.URL, e["FIRSTMATE_SEARCH_URL"]},
		{"SLACK_ACCESS", string(c.Slack.Access), "pairing"},
		{"SLACK_ALLOWED_USERS", strings.Join(c.Slack.AllowedUsers, ","), "U0ENV1,W0ENV2"},
		{"SLACK_ALLOWED_CHANNELS", strings.Join(c.Slack.AllowedChannels, ","), "C0ENV1"},
		{"SLACK_WORKSPACE_ADMINS", strconv.FormatBool(c.Slack.WorkspaceAdmins), "false"},
		{"TELEGRAM_ACCESS", string(c.Telegram.Access), "allowlist"},
		{"TELEGRAM_ALLOWED_USERS", strings.Join(c.Telegram.AllowedUsers, ","), "7,8"},
		{"TELEGRAM_ALLOWED_CHATS", strings.Join(c.Telegram.AllowedChats, ","), "-100777"},
		{"TELEGRAM_CHAT_ADMINS", strconv.FormatBool(c.Telegram.ChatAdmins), "false"},
		{"FIRSTMATE_CHANNEL_TOKENS_PER_DAY", strconv.FormatInt(c.Budget.ChannelTokensPerDay, 10), "500000"},
		{"FIRSTMATE_USER_MESSAGES_PER_MINUTE", strconv.Itoa(c.Budget.UserMessagesPerMinute), "5"},
	}
	if len(checks) != len(envVars) {
		t.Fatalf("%d checks for %d environment variables", len(checks), len(envVars))
	}
	for _, ck := range checks {
		if ck.got != ck.want {
			t.Errorf("%s: got %q, want %q", ck.name, ck.got, ck.want)
		}
	}
	// What the environment did not set stays as the file said.
	if c.LLM.ToolProtocol != ProtocolText || c.Agent.MaxSteps != 30 {
		t.Errorf("file values lost: %+v", c)
	}
	if c.Log.SlogLevel().String() != "WARN" {
		t.Errorf("SlogLevel() = %v", c.Log.SlogLevel())
	}
}

func fmtAdmins(as []Admin) string {
	var s []string
	for _, a := range as {
		s = append(s, a.String())
	}
	return strings.Join(s, " ")
}

func TestEmptyEnvIsUnset(t *testing.T) {
	path := writeConfig(t, "llm:\n  model: from-file\n")
	c := mustLoad(t, path, env{"FIRSTMATE_MODEL": "  ", "OPENAI_BASE_URL": ""}.withHome())
	if c.LLM.Model != "from-file" || c.LLM.BaseURL != DefaultBaseURL {
		t.Errorf("empty variables overrode: %+v", c.LLM)
	}
}

func TestPlaceholders(t *testing.T) {
	path := writeConfig(t, "llm:\n  api_key: ${MY_LLM_KEY}\nslack:\n  bot_token: \"${BOT}\"\n  app_token: xapp-${NOT_A_PLACEHOLDER}\n")
	c := mustLoad(t, path, env{"MY_LLM_KEY": "sk-from-env", "BOT": "xoxb-from-env"}.withHome())
	if c.LLM.APIKey != "sk-from-env" || c.Slack.BotToken != "xoxb-from-env" {
		t.Errorf("placeholders not expanded: %q %q", c.LLM.APIKey.Reveal(), c.Slack.BotToken.Reveal())
	}
	if c.Slack.AppToken != "xapp-${NOT_A_PLACEHOLDER}" {
		t.Errorf("a partial placeholder was expanded: %q", c.Slack.AppToken.Reveal())
	}
	// The standard variable still wins over the file's placeholder.
	c = mustLoad(t, path, env{"MY_LLM_KEY": "sk-from-env", "BOT": "xoxb-1", "OPENAI_API_KEY": "sk-standard"}.withHome())
	if c.LLM.APIKey != "sk-standard" {
		t.Errorf("api key %q, want OPENAI_API_KEY's", c.LLM.APIKey.Reveal())
	}
	// Placeholders are for secrets only.
	path = writeConfig(t, "llm:\n  model: ${MODEL}\n")
	c = mustLoad(t, path, env{"MODEL": "m"}.withHome())
	if c.LLM.Model != "${MODEL}" {
		t.Errorf("model %q", c.LLM.Model)
	}
}

func TestAnchorsAndMerge(t *testing.T) {
	path := writeConfig(t, `log: &l
  level: debug
  format: json
slack:
  <<: {api_url: "http://127.0.0.1:1/api/"}
  bot_token: *missing
`)
	_, err := Load(path, env{}.withHome().lookup)
	if err == nil { // an unknown alias is a YAML error
		t.Fatal("want an error for an unknown alias")
	}

	path = writeConfig(t, `log: &l
  level: debug
  format: json
slack:
  <<: {api_url: "http://127.0.0.1:1/api/"}
telegram:
  api_url: &u http://127.0.0.1:2
`)
	c := mustLoad(t, path, env{"TELEGRAM_API_URL": ""}.withHome())
	if c.Log.Level != "debug" || c.Slack.APIURL != "http://127.0.0.1:1/api/" {
		t.Errorf("anchors and merges: %+v %+v", c.Log, c.Slack)
	}
	checkProblem(t, problemCase{file: "slack:\n  <<: {api_url: \"http://x/\", bogus: 1}\n",
		key: "slack.bogus", line: 2, msg: "unknown key"})
}

func TestParseAdmin(t *testing.T) {
	tests := []struct {
		in   string
		want Admin
		err  string
	}{
		{in: "slack:U0123ABCD", want: Admin{"slack", "U0123ABCD"}},
		{in: "slack:W0123ABCD", want: Admin{"slack", "W0123ABCD"}},
		{in: " Slack : U0123ABCD ", want: Admin{"slack", "U0123ABCD"}},
		{in: "telegram:123456789", want: Admin{"telegram", "123456789"}},
		{in: "TELEGRAM:7", want: Admin{"telegram", "7"}},
		{in: "", err: "empty entry"},
		{in: "U0123ABCD", err: `write "slack:U0123ABCD"`},
		{in: "123456789", err: `write "telegram:123456789"`},
		{in: "bob", err: "is not platform:user-id"},
		{in: "slack:", err: "a Slack member ID looks like U0123ABCD"},
		{in: "slack:u0123abcd", err: `write "slack:U0123ABCD"`},
		{in: "slack:C0123ABCD", err: "a Slack member ID"},
		{in: "slack:wendy", err: "a Slack member ID looks like U0123ABCD"},
		{in: "telegram:-100123", err: "negative IDs are chats"},
		{in: "telegram:0", err: "a Telegram user ID is a number"},
		{in: "telegram:+5", err: "a Telegram user ID is a number"},
		{in: "telegram:99999999999999999999", err: "a Telegram user ID is a number"},
		{in: "telegram:@bob", err: "a Telegram user ID is a number"},
		{in: "console:me", err: `platform "console" is not one of slack, telegram`},
	}
	for _, tt := range tests {
		got, err := ParseAdmin(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("ParseAdmin(%q) error %v, want one containing %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseAdmin(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
		if back, err := ParseAdmin(got.String()); err != nil || back != got {
			t.Errorf("%q does not round-trip: %v, %v", got.String(), back, err)
		}
	}
}

func TestAdminsFromEnv(t *testing.T) {
	tests := []struct {
		in   string
		want []Admin
	}{
		{"slack:U0123ABCD", []Admin{{"slack", "U0123ABCD"}}},
		{"slack:U0123ABCD,telegram:456", []Admin{{"slack", "U0123ABCD"}, {"telegram", "456"}}},
		{" slack:U0123ABCD , , telegram:456 ,", []Admin{{"slack", "U0123ABCD"}, {"telegram", "456"}}},
	}
	for _, tt := range tests {
		// The variable replaces the file's list.
		path := writeConfig(t, "admins: [telegram:1]\n")
		c := mustLoad(t, path, env{"FIRSTMATE_ADMINS": tt.in}.withHome())
		if !reflect.DeepEqual(c.Admins, tt.want) {
			t.Errorf("FIRSTMATE_ADMINS=%q: got %v, want %v", tt.in, c.Admins, tt.want)
		}
	}
}

func TestValidateInCode(t *testing.T) {
	c := Default()
	c.Store.DataDir = "/tmp/fm"
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults with a data dir: %v", err)
	}
	c.LLM.ToolProtocol = "xml"
	c.Admins = []Admin{{Platform: "slack", ID: "nope"}}
	ps := problems(t, c.Validate())
	if len(ps) != 2 || ps[0].Key != "llm.tool_protocol" || ps[1].Key != "admins[0]" || ps[0].File != "" {
		t.Errorf("got %v", c.Validate())
	}
}

func TestRequireLLM(t *testing.T) {
	tests := []struct {
		name string
		env  env
		keys []string
		msg  string
	}{
		{name: "ok", env: env{"FIRSTMATE_MODEL": "m", "OPENAI_BASE_URL": "http://localhost:11434/v1"}},
		{name: "ok with openai and a key", env: env{"FIRSTMATE_MODEL": "m", "OPENAI_API_KEY": "sk-1"}},
		{name: "no model", env: env{"OPENAI_BASE_URL": "http://localhost:11434/v1"},
			keys: []string{"llm.model"}, msg: "set FIRSTMATE_MODEL (or llm.model)"},
		{name: "openai without a key", env: env{"FIRSTMATE_MODEL": "m"},
			keys: []string{"llm.api_key"}, msg: "set OPENAI_API_KEY"},
		{name: "nothing", env: env{},
			keys: []string{"llm.model", "llm.api_key"}, msg: "OPENAI_BASE_URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustLoad(t, "", tt.env.withHome())
			err := c.RequireLLM()
			ps := problems(t, err)
			var keys []string
			for _, p := range ps {
				keys = append(keys, p.Key)
			}
			if !slices.Equal(keys, tt.keys) || (tt.msg != "" && !strings.Contains(err.Error(), tt.msg)) {
				t.Errorf("RequireLLM: %v; want keys %q and %q", err, tt.keys, tt.msg)
			}
		})
	}
	path := writeConfig(t, "llm:\n  base_url: \"\"\n  model: m\n")
	c := mustLoad(t, path, env{}.withHome())
	ps := problems(t, c.RequireLLM())
	if len(ps) != 1 || ps[0].Key != "llm.base_url" || ps[0].Line != 2 || !strings.Contains(ps[0].Msg, "set OPENAI_BASE_URL") {
		t.Errorf("empty base url: %v", c.RequireLLM())
	}
}

func TestValidateTools(t *testing.T) {
	path := writeConfig(t, "tools:\n  allow: [read, shel]\n  deny:\n    - zzz\n    - group:exe\n    - tool:exec\n    - mcp:gitlab\n")
	c := mustLoad(t, path, env{}.withHome())
	known := toolset("shell", "read", "fetch", "start", "github__issues")
	ps := problems(t, c.ValidateTools(known))
	want := []struct {
		key  string
		line int
		msg  string
	}{
		{"tools.allow[1]", 2, `unknown tool or group "shel"; did you mean "shell"? Known tools: fetch, github__issues, read, shell, start; groups: read, write, exec, web, send, later, skills, mcp:github`},
		{"tools.deny[0]", 4, `unknown tool or group "zzz". Known tools:`},
		{"tools.deny[1]", 5, `unknown group "exe"; did you mean "group:exec"?`},
		{"tools.deny[2]", 6, `unknown tool "exec". Known tools:`},
		{"tools.deny[3]", 7, `unknown tool or group "mcp:gitlab"`},
	}
	if len(ps) != len(want) {
		t.Fatalf("got %v", c.ValidateTools(known))
	}
	for i, w := range want {
		if p := ps[i]; p.Key != w.key || p.Line != w.line || !strings.Contains(p.Msg, w.msg) {
			t.Errorf("got %s\nwant %s:%d %s", p, w.key, w.line, w.msg)
		}
	}
	// With those tools, only the group and the tool that still do not
	// exist are wrong.
	ps = problems(t, c.ValidateTools(toolset("read", "shel", "zzz", "gitlab__x")))
	if len(ps) != 2 || ps[0].Key != "tools.deny[1]" || ps[1].Key != "tools.deny[2]" {
		t.Errorf("got %v", ps)
	}

	// Groups, tool: and group: spellings, and an MCP server's group.
	path = writeConfig(t, "tools:\n  allow: [read, \"tool:read\", Web]\n  ask: [exec]\n  deny: [delete, \"mcp:github\", \"group:send\"]\n")
	c = mustLoad(t, path, env{}.withHome())
	if err := c.ValidateTools(toolset(append(known.Known(), "delete", "send_file")...)); err != nil {
		t.Errorf("valid lists: %v", err)
	}

	// One rule in two lists, however it is written: Load says so, and
	// ValidateTools too.
	path = writeConfig(t, "tools:\n  allow: [exec]\n  deny:\n    - group:EXEC\n")
	c, err := Load(path, env{}.withHome().lookup)
	const msg = `"group:EXEC" is also in tools.allow[0], as "exec" (both name the group exec)`
	if ps := problems(t, err); len(ps) != 1 || ps[0].Key != "tools.deny[0]" || ps[0].Line != 4 || !strings.Contains(ps[0].Msg, msg) {
		t.Errorf("Load: %v", err)
	}
	if ps := problems(t, c.ValidateTools(known)); len(ps) != 1 || ps[0].Key != "tools.deny[0]" || ps[0].Line != 4 || !strings.Contains(ps[0].Msg, msg) {
		t.Errorf("ValidateTools: %v", c.ValidateTools(known))
	}
}

func TestWarnings(t *testing.T) {
	tests := []struct {
		name string
		file string
		mode os.FileMode
		env  env
		want []string // parts of each warning, in order
	}{
		{name: "none", env: env{"OPENAI_BASE_URL": "http://localhost:11434/v1", "OPENAI_API_KEY": "k"}},
		{name: "no /v1", env: env{"OPENAI_BASE_URL": "http://localhost:11434"},
			want: []string{`OPENAI_BASE_URL: "http://localhost:11434" does not end in /v1; most OpenAI-compatible servers serve under it (http://localhost:11434/v1)`}},
		{name: "key over plain http", env: env{"OPENAI_BASE_URL": "http://gpu-box:8000/v1", "OPENAI_API_KEY": "k"},
			want: []string{"plain http to gpu-box:8000"}},
		{name: "redis password in clear", env: env{"REDIS_URL": "redis://:pw@redis.internal:6379"},
			want: []string{"REDIS_URL: redis:// to redis.internal:6379 sends the password unencrypted; use rediss://"}},
		{name: "redis on loopback", env: env{"REDIS_URL": "redis://:pw@127.0.0.1:6379"}},
		{name: "cluster password in clear", env: env{"REDIS_URL": "redis+cluster://:pw@127.0.0.1:7000,redis-b:7001,redis-c"},
			want: []string{"REDIS_URL: redis+cluster:// to redis-b:7001, redis-c:6379 sends the password unencrypted; use rediss+cluster://"}},
		{name: "sentinel password in clear", env: env{"REDIS_URL": "redis+sentinel://s1/m?sentinel_password=pw"},
			want: []string{"REDIS_URL: redis+sentinel:// to s1:26379 sends the password unencrypted; use rediss+sentinel://"}},
		{name: "cluster over TLS", env: env{"REDIS_URL": "rediss+cluster://:pw@redis-a,redis-b"}},
		{name: "cluster on loopback", env: env{"REDIS_URL": "redis+cluster://:pw@127.0.0.1:7000,[::1]:7001,localhost:7002"}},
		{name: "secrets in a readable file", file: "llm:\n  api_key: sk-1\n", mode: 0o644,
			want: []string{"holds secrets (llm.api_key) and other users can read it (mode 0644); chmod 600 it"}},
		{name: "secrets in a private file", file: "llm:\n  api_key: sk-1\n", mode: 0o600},
		{name: "placeholders in a readable file", file: "llm:\n  api_key: ${K}\n", mode: 0o644, env: env{"K": "sk-1"}},
		{name: "workers of an older file", file: "agent:\n  workers: 8\n", mode: 0o600,
			want: []string{"agent.workers: is no longer used: a turn that waits on the model holds no worker; agent.max_turns (default 4096) bounds the turns in flight"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := ""
			if tt.file != "" {
				path = writeConfig(t, tt.file)
				if err := os.Chmod(path, tt.mode); err != nil {
					t.Fatal(err)
				}
			}
			c := mustLoad(t, path, tt.env.withHome())
			got := c.Warnings()
			if len(got) != len(tt.want) {
				t.Fatalf("warnings %q, want %d", got, len(tt.want))
			}
			for i := range got {
				if !strings.Contains(got[i], tt.want[i]) {
					t.Errorf("warning %q does not contain %q", got[i], tt.want[i])
				}
			}
		})
	}
}

// TestRedisURLForms checks that every form of REDIS_URL the Redis store
// takes loads, and what doctor shows of it.
func TestRedisURLForms(t *testing.T) {
	for _, tc := range []struct{ url, shown string }{
		{"redis://localhost", "redis://localhost"},
		{"rediss://u:pw-1@redis.internal:6380/2?dial_timeout=3s", "rediss://u:xxxxx@redis.internal:6380/2?dial_timeout=3s"},
		{"redis+cluster://:pw-1@10.0.0.1:7000,10.0.0.2:7000/", "redis+cluster://:xxxxx@10.0.0.1:7000,10.0.0.2:7000/"},
		{"rediss+cluster://u:pw-1@[fd00::1]:7000,redis-b?tls_server_name=redis.internal", "rediss+cluster://u:xxxxx@[fd00::1]:7000,redis-b?tls_server_name=redis.internal"},
		{"redis+sentinel://s1:26379,s2:26379/mymaster", "redis+sentinel://s1:26379,s2:26379/mymaster"},
		{"rediss+sentinel://:pw-1@s1,s2/mymaster/3?sentinel_password=pw-2", "rediss+sentinel://:xxxxx@s1,s2/mymaster/3?sentinel_password=xxxxx"},
	} {
		t.Run(tc.url, func(t *testing.T) {
			c := mustLoad(t, "", env{"REDIS_URL": tc.url}.withHome())
			out := c.Redacted()
			if want := "redis_url: " + tc.shown + " # from REDIS_URL"; !strings.Contains(out, want) {
				t.Errorf("Redacted() lacks %q:\n%s", want, out)
			}
			if strings.Contains(out, "pw-") {
				t.Errorf("Redacted() shows a password:\n%s", out)
			}
		})
	}
}

func TestRedacted(t *testing.T) {
	path := writeConfig(t, "llm:\n  model: m\n")
	c := mustLoad(t, path, env{
		"REDIS_URL":       "redis://:hunter2-pw@redis.internal:6379/0",
		"OPENAI_API_KEY":  "sk-redacted-test",
		"OPENAI_BASE_URL": "https://llm.example/v1",
	}.withHome())
	out := c.Redacted()
	for _, want := range []string{
		"file " + path,
		"base_url: https://llm.example/v1 # from OPENAI_BASE_URL",
		"api_key: '[redacted]' # from OPENAI_API_KEY",
		"redis_url: redis://:xxxxx@redis.internal:6379/0 # from REDIS_URL",
		"model: m\n",
		"bot_token: \"\"",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("Redacted() lacks %q:\n%s", want, out)
		}
	}
	for _, s := range c.Secrets() {
		if strings.Contains(out, s) {
			t.Errorf("Redacted() shows secret %q", s)
		}
	}

	// Without secrets, what doctor prints is a config file that loads
	// to the same configuration.
	c = mustLoad(t, writeConfig(t, fullFile), env{})
	c.LLM.APIKey, c.Store.RedisURL, c.Slack = "", "", Default().Slack
	c.Telegram.BotToken = ""
	back := mustLoad(t, writeConfig(t, c.Redacted()), env{})
	c.meta, back.meta = nil, nil
	if !reflect.DeepEqual(c, back) {
		t.Errorf("Redacted() does not load back:\n got %+v\nwant %+v", back, c)
	}
}

// TestSecretFieldsComplete keeps secretFields in step with the struct: every
// Secret in the tree must be listed, or Secrets() and the placeholders
// would miss it.
func TestSecretFieldsComplete(t *testing.T) {
	c := Default()
	listed := map[*Secret]bool{}
	for _, s := range c.secretFields() {
		listed[s.val] = true
	}
	var found int
	var walk func(v reflect.Value, path string)
	walk = func(v reflect.Value, path string) {
		switch {
		case v.Type() == reflect.TypeFor[Secret]():
			found++
			if !listed[v.Addr().Interface().(*Secret)] {
				t.Errorf("%s is a Secret missing from secretFields", path)
			}
		case v.Kind() == reflect.Struct:
			for i := range v.NumField() {
				if v.Type().Field(i).IsExported() {
					walk(v.Field(i), path+"."+v.Type().Field(i).Name)
				}
			}
		}
	}
	walk(reflect.ValueOf(c).Elem(), "Config")
	if found != len(listed) {
		t.Errorf("found %d Secret fields, secretFields lists %d", found, len(listed))
	}
}

func TestEnvVarNames(t *testing.T) {
	want := []string{"OPENAI_API_KEY", "OPENAI_BASE_URL", "FIRSTMATE_MODEL", "REDIS_URL", "FIRSTMATE_REDIS_PREFIX", "FIRSTMATE_DATA_DIR",
		"FIRSTMATE_HTTP_ADDR", "FIRSTMATE_PPROF", "FIRSTMATE_LOG_LEVEL", "FIRSTMATE_LOG_FORMAT", "FIRSTMATE_ADMINS",
		"SLACK_BOT_TOKEN", "SLACK_APP_TOKEN", "SLACK_SIGNING_SECRET", "SLACK_API_URL",
		"SLACK_ACCESS", "SLACK_ALLOWED_USERS", "SLACK_ALLOWED_CHANNELS", "SLACK_WORKSPACE_ADMINS",
		"TELEGRAM_BOT_TOKEN", "TELEGRAM_API_URL", "TELEGRAM_WEBHOOK_URL", "TELEGRAM_WEBHOOK_SECRET",
		"TELEGRAM_ACCESS", "TELEGRAM_ALLOWED_USERS", "TELEGRAM_ALLOWED_CHATS", "TELEGRAM_CHAT_ADMINS",
		"FIRSTMATE_SANDBOX", "FIRSTMATE_SEARCH_URL", "FIRSTMATE_CHANNEL_TOKENS_PER_DAY", "FIRSTMATE_USER_MESSAGES_PER_MINUTE"}
	var got []string
	for _, e := range envVars {
		got = append(got, e.name)
		// Each variable overrides a real key.
		if lookupKeyNode(mustEncode(t), e.key) == nil {
			t.Errorf("%s overrides %s, which is not a key", e.name, e.key)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("variables %q\nwant %q", got, want)
	}
	if EnvVar("llm.model") != "FIRSTMATE_MODEL" || EnvVar("agent.workers") != "" {
		t.Error("EnvVar is wrong")
	}
}

func mustEncode(t *testing.T) *yaml.Node {
	t.Helper()
	var n yaml.Node
	if err := n.Encode(Default()); err != nil {
		t.Fatal(err)
	}
	return &n
}
