// Package config loads and validates firstmate's configuration.
//
// A value comes from, in rising order of precedence: the built-in defaults
// ([Default]), one YAML file (the --config flag, else FIRSTMATE_CONFIG,
// else the first of [DefaultFiles] that exists, which commands find with
// [FindFile], else none), and environment variables.
// deploy/firstmate.example.yaml documents every key; the environment
// variables are:
//
//	OPENAI_API_KEY        llm.api_key
//	OPENAI_BASE_URL       llm.base_url (http or https; normally ends in /v1)
//	FIRSTMATE_MODEL       llm.model
//	REDIS_URL             store.redis_url (redis://, redis+cluster://, redis+sentinel://, rediss… for TLS; unset: embedded store)
//	FIRSTMATE_REDIS_PREFIX store.redis_prefix (default "fm")
//	FIRSTMATE_DATA_DIR    store.data_dir
//	FIRSTMATE_HTTP_ADDR   http.addr
//	FIRSTMATE_LOG_LEVEL   log.level (debug, info, warn, error)
//	FIRSTMATE_LOG_FORMAT  log.format (text, json)
//	FIRSTMATE_ADMINS      admins, comma-separated: "slack:U0123ABCD,telegram:123456789"
//	SLACK_BOT_TOKEN       slack.bot_token (xoxb-…)
//	SLACK_APP_TOKEN       slack.app_token (xapp-…; Socket Mode)
//	SLACK_SIGNING_SECRET  slack.signing_secret (HTTP Events API)
//	SLACK_API_URL         slack.api_url
//	SLACK_ACCESS          slack.access (open, allowlist, pairing)
//	SLACK_ALLOWED_USERS   slack.allowed_users: "U0123ABCD,W0456EFGH"
//	SLACK_ALLOWED_CHANNELS slack.allowed_channels: "C0123ABCD,G0456EFGH"
//	SLACK_WORKSPACE_ADMINS slack.workspace_admins (true, false, 1, 0)
//	TELEGRAM_BOT_TOKEN    telegram.bot_token
//	TELEGRAM_API_URL      telegram.api_url
//	TELEGRAM_WEBHOOK_URL  telegram.webhook_url (receive by webhook instead of polling)
//	TELEGRAM_WEBHOOK_SECRET telegram.webhook_secret
//	TELEGRAM_ACCESS       telegram.access (open, allowlist, pairing)
//	TELEGRAM_ALLOWED_USERS telegram.allowed_users: "123456789,987654321"
//	TELEGRAM_ALLOWED_CHATS telegram.allowed_chats: "-1001234567890"
//	TELEGRAM_CHAT_ADMINS  telegram.chat_admins (true, false, 1, 0)
//	FIRSTMATE_SANDBOX     sandbox (auto, namespaces, off)
//	FIRSTMATE_SEARCH_URL  web.search.url (a SearXNG instance)
//	FIRSTMATE_CHANNEL_TOKENS_PER_DAY   budgets.channel_tokens_per_day
//	FIRSTMATE_USER_MESSAGES_PER_MINUTE budgets.user_messages_per_minute
//
// A variable for a list (FIRSTMATE_ADMINS, the allowed users, channels
// and chats) holds comma-separated entries, empty ones ignored, and
// replaces the file's list; a bad entry is a problem naming the variable
// and the entry's number.
//
// FIRSTMATE_UNSAFE_HOST_SHELL=1 is not a key: it is the operator's explicit
// consent to run shell commands on the host without a sandbox, read only
// from the environment ([UnsafeHostShell]).
//
// An environment variable that is set but empty (or only spaces) counts as
// unset, the way compose files and Kubernetes manifests often pass them.
// Values from the environment are trimmed of surrounding spaces.
//
// In the file, a secret may be written as a placeholder, "${NAME}", which is
// replaced by the environment variable NAME; an unset NAME is an error.
//
// Every problem is a [*Problem] naming the YAML key (with file and line) or
// the environment variable it came from, and saying how to fix it. [Load]
// and [Config.Validate] report all problems at once, joined.
package config

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/agent/govern"
	"go.yaml.in/yaml/v3"
)

// EnvConfig names the config file when the caller gives no path.
const EnvConfig = "FIRSTMATE_CONFIG"

// Config is firstmate's whole configuration: a plain tree of structs whose
// yaml tags are the keys of the config file.
type Config struct {
	LLM   LLM   `yaml:"llm" json:"llm"`
	Agent Agent `yaml:"agent" json:"agent"`
	Store Store `yaml:"store" json:"store"`
	HTTP  HTTP  `yaml:"http" json:"http"`
	Log   Log   `yaml:"log" json:"log"`
	Tools Tools `yaml:"tools" json:"tools"`
	// Sandbox is where shell commands run: "auto" (in a sandbox if this
	// host passes the probe; otherwise the shell is not offered),
	// "namespaces" (the same, but failing the probe stops firstmate) or
	// "off" (no shell).
	Sandbox  string   `yaml:"sandbox" json:"sandbox"`
	Shell    Shell    `yaml:"shell" json:"shell"`
	Web      Web      `yaml:"web" json:"web"`
	MCP      MCP      `yaml:"mcp" json:"mcp"`
	Skills   Skills   `yaml:"skills" json:"skills"`
	Admins   []Admin  `yaml:"admins" json:"admins"`
	Slack    Slack    `yaml:"slack" json:"slack"`
	Telegram Telegram `yaml:"telegram" json:"telegram"`
	// Budget is what a channel and a person may spend; [Config.Budgets]
	// gives it to the agent. (Not named Budgets: that is the method.)
	Budget    Budget    `yaml:"budgets" json:"budgets"`
	Approvals Approvals `yaml:"approvals" json:"approvals"`
	Pairing   Pairing   `yaml:"pairing" json:"pairing"`
	Schedules Schedules `yaml:"schedules" json:"schedules"`

	// where values came from, for messages; nil for a Config built in code.
	// A pointer so that %v prints an address, not the maps.
	meta *meta
}

// LLM is the OpenAI-compatible chat-completions endpoint.
type LLM struct {
	BaseURL string `yaml:"base_url" json:"base_url"` // ends in /v1 for most servers; trailing slashes are dropped
	APIKey  Secret `yaml:"api_key" json:"api_key"`
	Model   string `yaml:"model" json:"model"`
	// ToolProtocol is how tools reach the model: "native" tool calls, or
	// "text" ([TOOL] blocks in plain text) for models or servers without them.
	ToolProtocol ToolProtocol  `yaml:"tool_protocol" json:"tool_protocol"`
	MaxRetries   int           `yaml:"max_retries" json:"max_retries"` // retries after a failed call; 0 = none
	Timeout      time.Duration `yaml:"timeout" json:"timeout"`         // the wait for the model's output to begin
	Temperature  *float64      `yaml:"temperature" json:"temperature"` // nil: the server's default
	MaxTokens    int           `yaml:"max_tokens" json:"max_tokens"`   // per answer; 0: the server's default
	// ContextTokens is the token budget (estimated) of the messages sent
	// with each model call: older turns of the history are dropped to fit,
	// then the oldest tool results of the turn are left out of the request.
	// 0 (the default): from the model's context window ([LLM.ContextBudget]);
	// [NoContextBudget] (-1): none, only Agent.HistoryTurns bounds it.
	ContextTokens int `yaml:"context_tokens" json:"context_tokens"`
	// StallTimeout is the longest pause in a streamed answer once the
	// model's output has begun (Timeout covers the wait before it).
	StallTimeout time.Duration `yaml:"stall_timeout" json:"stall_timeout"`
	// MaxResponseKB caps one answer, in KiB: its text and all its tool
	// calls' arguments share the one cap. The stream that carries them may
	// be up to 64 times as large (JSON framing). A call that passes it fails
	// at once and is not retried.
	MaxResponseKB int `yaml:"max_response_kb" json:"max_response_kb"`
	// The endpoint's own limits, kept by every replica together (through
	// Redis; with the embedded store, by this process): requests in
	// flight, requests a minute and tokens a minute (estimated before a
	// call, corrected after). 0 is no limit. Calls wait their turn in
	// order, and a person whose call waits is told how many are ahead.
	MaxConcurrent     int `yaml:"max_concurrent" json:"max_concurrent"`
	RequestsPerMinute int `yaml:"requests_per_minute" json:"requests_per_minute"`
	TokensPerMinute   int `yaml:"tokens_per_minute" json:"tokens_per_minute"`
}

// ToolProtocol is how tool calls are exchanged with the model.
type ToolProtocol string

const (
	ProtocolNative ToolProtocol = "native" // the API's tool calls
	ProtocolText   ToolProtocol = "text"   // [TOOL] blocks in the text
)

// Agent bounds the agent loop.
type Agent struct {
	SystemPrompt string        `yaml:"system_prompt" json:"system_prompt"` // empty: the built-in prompt
	MaxSteps     int           `yaml:"max_steps" json:"max_steps"`         // model calls per turn
	TurnTimeout  time.Duration `yaml:"turn_timeout" json:"turn_timeout"`   // wall time per turn
	// MaxTurns bounds the turns in flight in this process at once; a
	// turn that waits on the model holds a goroutine and its messages,
	// nothing more. More wait, in order. 0 (the default): as many as the
	// memory limit of the replica's cgroup leaves room for, at most 4096.
	MaxTurns int `yaml:"max_turns" json:"max_turns"`
	// Workers is no longer used: turns are not run by a fixed number of
	// workers. Kept so that an older file still loads; a warning says so.
	Workers      int `yaml:"workers" json:"workers,omitempty"`
	HistoryTurns int `yaml:"history_turns" json:"history_turns"` // whole turns kept per session
	// MaxCallsPerStep is the most tool calls run for one model reply; the
	// model is told that the calls past it did not run.
	MaxCallsPerStep int `yaml:"max_calls_per_step" json:"max_calls_per_step"`
	// StepResultsKB and TurnResultsKB bound, in KiB, the tool results the
	// model reads from one step and from one turn; a result past either is
	// replaced by a short error saying why (the call did run).
	StepResultsKB int `yaml:"step_results_kb" json:"step_results_kb"`
	TurnResultsKB int `yaml:"turn_results_kb" json:"turn_results_kb"`
	// Progress is what the progress message of a turn shows in Slack and
	// Telegram: full (each tool call), summary (one line) or off.
	Progress string `yaml:"progress" json:"progress"`
}

// Store is where state lives.
type Store struct {
	// RedisURL selects the Redis store: redis://host:port/db for one node,
	// redis+cluster://host1:port1,host2:port2 for a Cluster,
	// redis+sentinel://host1:port1,host2:port2/master/db for Sentinel, and
	// rediss, rediss+cluster and rediss+sentinel for TLS (see package
	// store/redis/redisurl). Empty selects the embedded store in DataDir.
	// A Secret: it may hold passwords.
	RedisURL Secret `yaml:"redis_url" json:"redis_url"`
	// RedisPrefix starts every Redis key, so several deployments (or
	// tests) can share one Redis. Default "fm".
	RedisPrefix string `yaml:"redis_prefix" json:"redis_prefix"`
	// DataDir holds the embedded store and the channels' workspaces.
	// A leading "~/" is the home directory.
	DataDir string `yaml:"data_dir" json:"data_dir"`
}

// HTTP is the server for health checks, metrics, Slack HTTP events and
// Telegram webhooks.
type HTTP struct {
	// Addr is host:port. The default, 127.0.0.1:8080, reaches only this
	// machine; in a container or behind a proxy on another host set
	// ":8080" to listen on every interface.
	Addr string `yaml:"addr" json:"addr"`
	// Pprof serves Go's profiles (net/http/pprof) under /debug/pprof/ on
	// this listener, to clients on this machine only (a loopback peer:
	// curl on the host, kubectl port-forward); off by default.
	Pprof bool `yaml:"pprof" json:"pprof"`
}

// Log configures the process log.
type Log struct {
	Level  string `yaml:"level" json:"level"`   // debug, info, warn, error
	Format string `yaml:"format" json:"format"` // text, json
}

// Tools is the default tool policy of every channel; admins override it
// per channel. An entry of a list names a tool ("shell"), a group of tools
// with the same power ("exec", or "group:exec"), or a tool whose name is
// also a group's ("tool:read"; a bare "read" is the group). The most
// specific rule wins: a tool's own, then its group's; a tool no entry
// covers gets Default. See [Config.PolicyDefaults].
type Tools struct {
	Default agent.ToolMode `yaml:"default" json:"default"`
	Allow   []string       `yaml:"allow" json:"allow"`
	Ask     []string       `yaml:"ask" json:"ask"`
	Deny    []string       `yaml:"deny" json:"deny"`
}

// Shell bounds the shell tool and background jobs.
type Shell struct {
	Timeout    time.Duration `yaml:"timeout" json:"timeout"`         // a command's default wall-clock limit
	MaxTimeout time.Duration `yaml:"max_timeout" json:"max_timeout"` // the most a call may ask for (at most 30m)
	OutputKB   int           `yaml:"output_kb" json:"output_kb"`     // output kept for the model
	QuotaMB    int           `yaml:"quota_mb" json:"quota_mb"`       // what a channel's workspace may hold
	QuotaFiles int           `yaml:"quota_files" json:"quota_files"` // how many files (entries) it may hold
	TmpMB      int           `yaml:"tmp_mb" json:"tmp_mb"`           // the size of a command's /tmp
	FileMB     int           `yaml:"file_mb" json:"file_mb"`         // the largest file a command may write
	Processes  int           `yaml:"processes" json:"processes"`     // processes and threads per command
	OpenFiles  int           `yaml:"open_files" json:"open_files"`   // open files per process
	// MemoryMB bounds a command's memory: its cgroup's memory.max where a
	// cgroup v2 subtree with the memory controller is delegated to
	// firstmate, else each process's RLIMIT_DATA. /tmp holds at most half
	// of it.
	MemoryMB int `yaml:"memory_mb" json:"memory_mb"`
	// Helper is the sandbox helper binary (firstmate-sandbox). Empty: the
	// one next to the firstmate binary if there is one, else firstmate
	// itself, re-executed.
	Helper string `yaml:"helper" json:"helper"`
	Jobs   Jobs   `yaml:"jobs" json:"jobs"`
}

// Jobs bounds background jobs.
type Jobs struct {
	PerChannel int           `yaml:"per_channel" json:"per_channel"` // running at once
	Lifetime   time.Duration `yaml:"lifetime" json:"lifetime"`       // a job is stopped after this
	// CPU is the CPU time a channel's jobs may use together in a day (on
	// every replica); past it they are stopped and no job starts.
	CPU time.Duration `yaml:"cpu" json:"cpu"`
}

// Web configures fetch and search.
type Web struct {
	Fetch  Fetch  `yaml:"fetch" json:"fetch"`
	Search Search `yaml:"search" json:"search"`
}

// Fetch bounds the fetch tool, which reaches only the public internet
// unless networks are allowed here.
type Fetch struct {
	// AllowNetworks are internal networks fetch may reach anyway (CIDR,
	// such as 10.1.0.0/16 for an intranet wiki).
	AllowNetworks []string      `yaml:"allow_networks" json:"allow_networks"`
	Ports         []int         `yaml:"ports" json:"ports"` // destination ports; empty: 80 and 443
	Timeout       time.Duration `yaml:"timeout" json:"timeout"`
	MaxBodyMB     int           `yaml:"max_body_mb" json:"max_body_mb"`
}

// Search configures the search tool; it is offered only with a URL.
type Search struct {
	Kind string `yaml:"kind" json:"kind"` // searxng
	URL  string `yaml:"url" json:"url"`   // the engine's base URL
}

// Skills are folders of instructions the model loads when a task calls
// for one (see package tools/skills). The policy rules skill:NAME and
// group:skills (a bare "skills" in the tools lists) allow and deny them.
type Skills struct {
	// Dirs hold the operator's skills, a folder NAME/ with a SKILL.md
	// each; absolute paths. Read at start (restart to pick up a change).
	// A channel skill of the same name is ignored: the configured one wins.
	Dirs []string `yaml:"dirs,omitempty" json:"dirs"`
	// Channel reads each channel's own skills from the skills/ folder of
	// its workspace, every turn, so people can write one in chat.
	Channel bool `yaml:"channel" json:"channel"`
}

// Enabled reports whether skills are offered at all: with neither
// directories nor channel skills (the default), there is no skill tool
// and the system prompt stays as it was.
func (s Skills) Enabled() bool { return len(s.Dirs) > 0 || s.Channel }

// Slack connects to one Slack app. It is enabled when BotToken is set,
// with Socket Mode when AppToken is set, else the HTTP Events API, which
// needs SigningSecret.
type Slack struct {
	BotToken      Secret `yaml:"bot_token" json:"bot_token"`
	AppToken      Secret `yaml:"app_token" json:"app_token"`
	SigningSecret Secret `yaml:"signing_secret" json:"signing_secret"`
	APIURL        string `yaml:"api_url" json:"api_url"` // the Web API base, with its trailing slash
	// AllowBots answers messages from other bots too (never the bot's own).
	AllowBots bool `yaml:"allow_bots" json:"allow_bots"`
	// Access is who may talk to the bot. Default open: the members of the
	// workspace that installed the app; people of another organisation
	// (in a shared channel) only when allowed.
	Access govern.AccessMode `yaml:"access" json:"access"`
	// AllowedUsers (member IDs, U… or W…) and AllowedChannels (C…, G…,
	// D…) may talk to the bot whatever Access says.
	AllowedUsers    []string `yaml:"allowed_users" json:"allowed_users"`
	AllowedChannels []string `yaml:"allowed_channels" json:"allowed_channels"`
	// WorkspaceAdmins makes the workspace's admins and owners the bot's
	// admins in Slack too.
	WorkspaceAdmins bool `yaml:"workspace_admins" json:"workspace_admins"`
}

// Telegram connects to one Telegram bot. It is enabled when BotToken is set.
type Telegram struct {
	BotToken Secret `yaml:"bot_token" json:"bot_token"`
	APIURL   string `yaml:"api_url" json:"api_url"` // the Bot API base, without /bot<token>
	// WebhookURL, when set, receives updates by webhook at this public
	// https URL (routed to /telegram/webhook) instead of long polling.
	WebhookURL    string `yaml:"webhook_url" json:"webhook_url"`
	WebhookSecret Secret `yaml:"webhook_secret" json:"webhook_secret"`
	// AllowBots answers messages from other bots; ChannelPosts answers
	// posts in channels where the bot is an administrator.
	AllowBots    bool `yaml:"allow_bots" json:"allow_bots"`
	ChannelPosts bool `yaml:"channel_posts" json:"channel_posts"`
	// Access is who may talk to the bot. Default pairing: in a private
	// chat a stranger gets a code an admin approves; a group is answered
	// once an admin allowed it. Anyone can find a bot by its username, so
	// open is rarely what is meant.
	Access govern.AccessMode `yaml:"access" json:"access"`
	// AllowedUsers (user IDs, positive) and AllowedChats (chat IDs;
	// negative for groups) may talk to the bot whatever Access says.
	AllowedUsers []string `yaml:"allowed_users" json:"allowed_users"`
	AllowedChats []string `yaml:"allowed_chats" json:"allowed_chats"`
	// ChatAdmins makes a chat's administrators the bot's admins in that
	// chat (only).
	ChatAdmins bool `yaml:"chat_admins" json:"chat_admins"`
}

// Budget bounds what is spent; zero means no limit.
type Budget struct {
	// ChannelTokensPerDay is the model tokens one channel may use in a
	// day (UTC), counted across replicas and checked before each model
	// call.
	ChannelTokensPerDay int64 `yaml:"channel_tokens_per_day" json:"channel_tokens_per_day"`
	// UserMessagesPerMinute is the messages one person may send the bot
	// in a minute; more are dropped, and the person is told. Admins are
	// not limited.
	UserMessagesPerMinute int `yaml:"user_messages_per_minute" json:"user_messages_per_minute"`
}

// Approvals configure tool calls that wait for a person.
type Approvals struct {
	// Timeout is how long a question waits for a click; no answer by then
	// is a denial. 10s to 24h.
	Timeout time.Duration `yaml:"timeout" json:"timeout"`
}

// Schedules bounds work that runs later: prompts people and the model
// schedule into a thread (once, or on a cron), and turns' waits for a
// delay or a background job.
type Schedules struct {
	// PerChannel is how many schedules and waits a channel may hold at
	// once, its threads together; 0 turns scheduling off.
	PerChannel int `yaml:"per_channel" json:"per_channel"`
	// MinInterval is the least time between two firings of a cron.
	MinInterval time.Duration `yaml:"min_interval" json:"min_interval"`
	// TimeZone (IANA, such as Europe/Paris) is the time zone of crons and
	// of times written without an offset.
	TimeZone string `yaml:"time_zone" json:"time_zone"`
	// MaxWait is the longest a turn's wait lasts (wait, wait_for_job).
	MaxWait time.Duration `yaml:"max_wait" json:"max_wait"`
}

// Location is the time zone TimeZone names; UTC if it names none (Validate
// reports that).
func (s Schedules) Location() *time.Location {
	if loc, err := time.LoadLocation(s.TimeZone); err == nil {
		return loc
	}
	return time.UTC
}

// Pairing configures the codes a stranger gets in pairing mode.
type Pairing struct {
	CodeTTL time.Duration `yaml:"code_ttl" json:"code_ttl"` // how long a code is valid; 1m to 7 days
}

// Defaults that other packages and the docs refer to.
const (
	DefaultBaseURL     = "https://api.openai.com/v1"
	DefaultHTTPAddr    = "127.0.0.1:8080"
	DefaultSlackAPI    = "https://slack.com/api/"
	DefaultTelegramAPI = "https://api.telegram.org"
)

// Default returns the built-in configuration. Store.DataDir is left empty:
// [Load] derives it from the environment when nothing sets it.
func Default() *Config {
	return &Config{
		LLM: LLM{
			BaseURL:       DefaultBaseURL,
			ToolProtocol:  ProtocolNative,
			MaxRetries:    3,
			Timeout:       5 * time.Minute,
			StallTimeout:  time.Minute,
			MaxResponseKB: 1024,
		},
		Agent: Agent{
			MaxSteps:     20,
			TurnTimeout:  10 * time.Minute,
			HistoryTurns: agent.DefaultRetention.MaxTurns,
			Progress:     "full",

			MaxCallsPerStep: agent.DefaultCallsPerStep,
			StepResultsKB:   agent.DefaultStepResultBytes >> 10,
			TurnResultsKB:   agent.DefaultTurnResultBytes >> 10,
		},
		Store:   Store{RedisPrefix: "fm"},
		HTTP:    HTTP{Addr: DefaultHTTPAddr},
		Log:     Log{Level: "info", Format: "text"},
		Tools:   Tools{Default: agent.ToolAllow},
		Sandbox: "auto",
		Shell: Shell{
			Timeout: time.Minute, MaxTimeout: 10 * time.Minute, OutputKB: 64, QuotaMB: 1024, QuotaFiles: 100_000,
			TmpMB: 256, FileMB: 1024, Processes: 256, OpenFiles: 1024, MemoryMB: 1024,
			Jobs: Jobs{PerChannel: 3, Lifetime: time.Hour, CPU: time.Hour},
		},
		Web: Web{
			Fetch:  Fetch{AllowNetworks: []string{}, Ports: []int{}, Timeout: 30 * time.Second, MaxBodyMB: 5},
			Search: Search{Kind: "searxng"},
		},
		Slack: Slack{APIURL: DefaultSlackAPI, Access: govern.AccessOpen,
			AllowedUsers: []string{}, AllowedChannels: []string{}},
		Telegram: Telegram{APIURL: DefaultTelegramAPI, Access: govern.AccessPairing,
			AllowedUsers: []string{}, AllowedChats: []string{}},
		Budget:    Budget{UserMessagesPerMinute: 20},
		Approvals: Approvals{Timeout: 5 * time.Minute},
		Pairing:   Pairing{CodeTTL: time.Hour},
		Schedules: Schedules{PerChannel: 20, MinInterval: 5 * time.Minute, TimeZone: "UTC", MaxWait: 24 * time.Hour},
	}
}

// meta records where values came from.
type meta struct {
	file     string            // the config file, if any
	fileFrom string            // EnvConfig when the path came from there
	fileMode fs.FileMode       // its permissions
	lines    map[string]int    // yaml path -> line in file
	env      map[string]string // yaml path -> environment variable that set it
	literal  []string          // secret keys written literally in the file
	expanded []string          // values "${NAME}" put into MCP settings: secrets
}

// Problem is one thing wrong with the configuration.
type Problem struct {
	// Key is the YAML path ("llm.tool_protocol", "admins[2]") or, when the
	// value came from the environment, the variable ("OPENAI_BASE_URL").
	Key  string
	File string // the config file, when the value came from it
	Line int    // the line in File, when known
	Msg  string // what is wrong and how to fix it

	// path is the YAML path even when Key names a variable; "" when the
	// problem is with no one key (a second YAML document).
	path string
}

// Path is the YAML path of the value at fault ("slack.bot_token"), also
// when an environment variable set it; "" when no one key is.
func (p *Problem) Path() string { return p.path }

// Platform is "slack" or "telegram" when the problem is in that platform's
// settings, which only serve uses (chat may go on without them), else "".
func (p *Problem) Platform() string {
	for _, name := range []string{"slack", "telegram"} {
		if p.path == name || strings.HasPrefix(p.path, name+".") {
			return name
		}
	}
	return ""
}

func (p *Problem) Error() string {
	var b strings.Builder
	if p.File != "" {
		b.WriteString(p.File)
		if p.Line > 0 {
			fmt.Fprintf(&b, ":%d", p.Line)
		}
		b.WriteString(": ")
	}
	if p.Key != "" {
		b.WriteString(p.Key)
		b.WriteString(": ")
	}
	b.WriteString(p.Msg)
	return b.String()
}

// Load builds the configuration from the defaults, the YAML file at path
// (if path is empty, the file named by FIRSTMATE_CONFIG, if any) and the
// environment, read through env (os.LookupEnv in production), then
// validates it.
//
// It returns an error without a Config when the file cannot be read or is
// not YAML. Otherwise every problem found (unknown keys, bad values,
// placeholders, environment variables, validation) is returned at once,
// joined, together with the Config as loaded, so that a command like
// doctor can show both; callers that run the bot must stop on any error.
func Load(path string, env func(string) (string, bool)) (*Config, error) {
	if env == nil {
		env = func(string) (string, bool) { return "", false }
	}
	c := Default()
	c.meta = &meta{lines: map[string]int{}, env: map[string]string{}}
	var probs []error
	if path == "" {
		if p, ok := lookup(env, EnvConfig); ok {
			path, c.meta.fileFrom = p, EnvConfig
		}
	}
	if path != "" {
		ps, err := c.loadFile(path)
		if err != nil {
			return nil, err
		}
		probs = append(probs, ps...)
		probs = append(probs, c.expandPlaceholders(env)...)
		probs = append(probs, c.expandMCP(env)...)
	}
	probs = append(probs, c.applyEnv(env)...)
	c.normalize(env)
	probs = append(probs, c.problems()...)
	sortProblems(probs)
	return c, errors.Join(probs...)
}

// sortProblems puts the file's problems first, in line order, then the
// environment's, each group otherwise in the order found.
func sortProblems(probs []error) {
	slices.SortStableFunc(probs, func(a, b error) int {
		pa, _ := a.(*Problem)
		pb, _ := b.(*Problem)
		return cmp.Compare(problemRank(pa), problemRank(pb))
	})
}

func problemRank(p *Problem) int {
	switch {
	case p == nil || p.File == "":
		return math.MaxInt
	case p.Line == 0:
		return 0
	}
	return p.Line
}

// lookup reads an environment variable; empty or blank counts as unset.
func lookup(env func(string) (string, bool), name string) (string, bool) {
	v, ok := env(name)
	v = strings.TrimSpace(v)
	return v, ok && v != ""
}

func (c *Config) loadFile(path string) ([]error, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		if c.meta.fileFrom != "" {
			return nil, fmt.Errorf("config file from %s: %w", c.meta.fileFrom, err)
		}
		return nil, fmt.Errorf("config file: %w", err)
	}
	c.meta.file = path
	if fi, err := os.Stat(path); err == nil {
		c.meta.fileMode = fi.Mode().Perm()
	}

	// First the document as a node tree: for line numbers, and for
	// messages that name the key and list the known ones.
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	switch err := dec.Decode(&doc); {
	case errors.Is(err, io.EOF):
		return nil, nil // an empty file: the defaults
	case err != nil:
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var probs []error
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		line := extra.Line
		probs = append(probs, &Problem{File: path, Line: line,
			Msg: "more than one YAML document (a second ---); keep one"})
	}
	chk := fileCheck{file: path, lines: c.meta.lines}
	if len(doc.Content) > 0 {
		chk.walk(doc.Content[0], configType, "")
	}
	probs = append(probs, chk.probs...)

	// Then the real decode, strict about keys. It goes on past bad values,
	// so the rest of the file still counts for validation.
	dec = yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil && len(chk.probs) == 0 {
		// The walk should have found whatever the decoder did; this is
		// the decoder's own word for anything it did not.
		probs = append(probs, &Problem{File: path, Msg: err.Error()})
	}
	for _, s := range c.secretFields() {
		if *s.val != "" && !placeholder.MatchString(string(*s.val)) {
			c.meta.literal = append(c.meta.literal, s.key)
		}
	}
	return probs, nil
}

var placeholder = regexp.MustCompile(`^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$`)

// expandPlaceholders replaces secrets written as "${NAME}" by $NAME.
func (c *Config) expandPlaceholders(env func(string) (string, bool)) []error {
	var probs []error
	for _, s := range c.secretFields() {
		m := placeholder.FindStringSubmatch(string(*s.val))
		if m == nil {
			continue
		}
		v, ok := lookup(env, m[1])
		if !ok {
			*s.val = ""
			probs = append(probs, c.problem(s.key, "%s is not set in the environment; set it, or remove the key", m[0]))
			continue
		}
		*s.val = Secret(v)
	}
	return probs
}

type envVar struct {
	name string
	key  string // the yaml path it overrides
	set  func(c *Config, v string) []error
}

var envVars = []envVar{
	{"OPENAI_API_KEY", "llm.api_key", func(c *Config, v string) []error { c.LLM.APIKey = Secret(v); return nil }},
	{"OPENAI_BASE_URL", "llm.base_url", func(c *Config, v string) []error { c.LLM.BaseURL = v; return nil }},
	{"FIRSTMATE_MODEL", "llm.model", func(c *Config, v string) []error { c.LLM.Model = v; return nil }},
	{"REDIS_URL", "store.redis_url", func(c *Config, v string) []error { c.Store.RedisURL = Secret(v); return nil }},
	{"FIRSTMATE_REDIS_PREFIX", "store.redis_prefix", func(c *Config, v string) []error { c.Store.RedisPrefix = v; return nil }},
	{"FIRSTMATE_DATA_DIR", "store.data_dir", func(c *Config, v string) []error { c.Store.DataDir = v; return nil }},
	{"FIRSTMATE_HTTP_ADDR", "http.addr", func(c *Config, v string) []error { c.HTTP.Addr = v; return nil }},
	{"FIRSTMATE_PPROF", "http.pprof", func(c *Config, v string) []error { return setBool(&c.HTTP.Pprof, v) }},
	{"FIRSTMATE_LOG_LEVEL", "log.level", func(c *Config, v string) []error { c.Log.Level = v; return nil }},
	{"FIRSTMATE_LOG_FORMAT", "log.format", func(c *Config, v string) []error { c.Log.Format = v; return nil }},
	{"FIRSTMATE_ADMINS", "admins", func(c *Config, v string) []error {
		admins, errs := parseAdminList(v)
		c.Admins = admins
		return errs
	}},
	{"SLACK_BOT_TOKEN", "slack.bot_token", func(c *Config, v string) []error { c.Slack.BotToken = Secret(v); return nil }},
	{"SLACK_APP_TOKEN", "slack.app_token", func(c *Config, v string) []error { c.Slack.AppToken = Secret(v); return nil }},
	{"SLACK_SIGNING_SECRET", "slack.signing_secret", func(c *Config, v string) []error { c.Slack.SigningSecret = Secret(v); return nil }},
	{"SLACK_API_URL", "slack.api_url", func(c *Config, v string) []error { c.Slack.APIURL = v; return nil }},
	{"SLACK_ACCESS", "slack.access", func(c *Config, v string) []error { c.Slack.Access = govern.AccessMode(v); return nil }},
	{"SLACK_ALLOWED_USERS", "slack.allowed_users", func(c *Config, v string) (errs []error) {
		c.Slack.AllowedUsers, errs = parseIDList(v, checkSlackUser)
		return errs
	}},
	{"SLACK_ALLOWED_CHANNELS", "slack.allowed_channels", func(c *Config, v string) (errs []error) {
		c.Slack.AllowedChannels, errs = parseIDList(v, checkSlackChannel)
		return errs
	}},
	{"SLACK_WORKSPACE_ADMINS", "slack.workspace_admins", func(c *Config, v string) []error {
		return setBool(&c.Slack.WorkspaceAdmins, v)
	}},
	{"TELEGRAM_BOT_TOKEN", "telegram.bot_token", func(c *Config, v string) []error { c.Telegram.BotToken = Secret(v); return nil }},
	{"TELEGRAM_API_URL", "telegram.api_url", func(c *Config, v string) []error { c.Telegram.APIURL = v; return nil }},
	{"TELEGRAM_WEBHOOK_URL", "telegram.webhook_url", func(c *Config, v string) []error { c.Telegram.WebhookURL = v; return nil }},
	{"TELEGRAM_WEBHOOK_SECRET", "telegram.webhook_secret", func(c *Config, v string) []error {
		c.Telegram.WebhookSecret = Secret(v)
		return nil
	}},
	{"TELEGRAM_ACCESS", "telegram.access", func(c *Config, v string) []error { c.Telegram.Access = govern.AccessMode(v); return nil }},
	{"TELEGRAM_ALLOWED_USERS", "telegram.allowed_users", func(c *Config, v string) (errs []error) {
		c.Telegram.AllowedUsers, errs = parseIDList(v, checkTelegramUser)
		return errs
	}},
	{"TELEGRAM_ALLOWED_CHATS", "telegram.allowed_chats", func(c *Config, v string) (errs []error) {
		c.Telegram.AllowedChats, errs = parseIDList(v, checkTelegramChat)
		return errs
	}},
	{"TELEGRAM_CHAT_ADMINS", "telegram.chat_admins", func(c *Config, v string) []error {
		return setBool(&c.Telegram.ChatAdmins, v)
	}},
	{"FIRSTMATE_SANDBOX", "sandbox", func(c *Config, v string) []error { c.Sandbox = v; return nil }},
	{"FIRSTMATE_SEARCH_URL", "web.search.url", func(c *Config, v string) []error { c.Web.Search.URL = v; return nil }},
	{"FIRSTMATE_CHANNEL_TOKENS_PER_DAY", "budgets.channel_tokens_per_day", func(c *Config, v string) []error {
		return setInt(&c.Budget.ChannelTokensPerDay, v)
	}},
	{"FIRSTMATE_USER_MESSAGES_PER_MINUTE", "budgets.user_messages_per_minute", func(c *Config, v string) []error {
		return setInt(&c.Budget.UserMessagesPerMinute, v)
	}},
}

// EnvVar returns the environment variable that overrides the YAML key,
// or "" if none does.
func EnvVar(key string) string {
	for _, e := range envVars {
		if e.key == key {
			return e.name
		}
	}
	return ""
}

func (c *Config) applyEnv(env func(string) (string, bool)) []error {
	var probs []error
	for _, e := range envVars {
		v, ok := lookup(env, e.name)
		if !ok {
			continue
		}
		c.meta.env[e.key] = e.name
		for _, err := range e.set(c, v) {
			probs = append(probs, &Problem{Key: e.name, Msg: err.Error(), path: e.key})
		}
	}
	return probs
}

// normalize forgives what has one obvious meaning and fills the data
// directory's default.
func (c *Config) normalize(env func(string) (string, bool)) {
	if u := strings.TrimRight(c.LLM.BaseURL, "/"); u != "" {
		c.LLM.BaseURL = u
	}
	c.Log.Level = strings.ToLower(c.Log.Level)
	c.Sandbox = strings.ToLower(c.Sandbox)
	c.Log.Format = strings.ToLower(c.Log.Format)
	c.Slack.Access = govern.AccessMode(strings.ToLower(string(c.Slack.Access)))
	c.Telegram.Access = govern.AccessMode(strings.ToLower(string(c.Telegram.Access)))
	trimAll(c.Slack.AllowedUsers)
	trimAll(c.Slack.AllowedChannels)
	trimAll(c.Telegram.AllowedUsers)
	trimAll(c.Telegram.AllowedChats)
	home, _ := lookup(env, "HOME")
	if d := c.Store.DataDir; home != "" && (d == "~" || strings.HasPrefix(d, "~/")) {
		c.Store.DataDir = filepath.Join(home, d[1:])
	}
	if c.Store.DataDir == "" {
		c.Store.DataDir = defaultDataDir(env)
	}
	if c.Store.DataDir != "" {
		c.Store.DataDir = filepath.Clean(c.Store.DataDir)
	}
}

// EnvUnsafeHostShell, set to 1, lets shell commands run on the host
// without a sandbox when sandbox is off or unavailable.
const EnvUnsafeHostShell = "FIRSTMATE_UNSAFE_HOST_SHELL"

// UnsafeHostShell reports whether the operator set FIRSTMATE_UNSAFE_HOST_SHELL=1.
func UnsafeHostShell(env func(string) (string, bool)) bool {
	v, ok := lookup(env, EnvUnsafeHostShell)
	return ok && v == "1"
}

// geteuid is a variable for tests.
var geteuid = os.Geteuid

// defaultDataDir follows the XDG base directory spec, with a system
// directory for a root service that has no home (a systemd unit, a bare
// container). It returns "" when there is no sensible default.
func defaultDataDir(env func(string) (string, bool)) string {
	if x, ok := lookup(env, "XDG_DATA_HOME"); ok && filepath.IsAbs(x) {
		return filepath.Join(x, "firstmate")
	}
	if h, ok := lookup(env, "HOME"); ok {
		return filepath.Join(h, ".local", "share", "firstmate")
	}
	if geteuid() == 0 {
		return "/var/lib/firstmate"
	}
	return ""
}

// problem makes a Problem for the value at the YAML path key, named by
// the environment variable that set it, or by the key with the file and
// line it came from.
func (c *Config) problem(key, format string, args ...any) *Problem {
	p := &Problem{Key: key, Msg: fmt.Sprintf(format, args...), path: key}
	if c.meta == nil {
		return p
	}
	if name, ok := c.meta.env[key]; ok {
		p.Key = name
		return p
	}
	// admins[2] came from FIRSTMATE_ADMINS if admins did.
	if base, _, ok := strings.Cut(key, "["); ok {
		if name, ok := c.meta.env[base]; ok {
			p.Key = name
			return p
		}
	}
	if line, ok := c.meta.lines[key]; ok {
		p.File, p.Line = c.meta.file, line
	}
	return p
}

// name is how messages refer to a key: the environment variable that set
// it, or else the key with its variable as the other way to set it.
func (c *Config) name(key string) string {
	if c.meta != nil {
		if name, ok := c.meta.env[key]; ok {
			return name
		}
	}
	if e := EnvVar(key); e != "" {
		return e + " (or " + key + ")"
	}
	return key
}

type secretField struct {
	key string
	val *Secret
}

// secretFields lists every Secret in the tree. A test checks it against
// the struct, so a new Secret field cannot be forgotten here.
func (c *Config) secretFields() []secretField {
	return []secretField{
		{"llm.api_key", &c.LLM.APIKey},
		{"store.redis_url", &c.Store.RedisURL},
		{"slack.bot_token", &c.Slack.BotToken},
		{"slack.app_token", &c.Slack.AppToken},
		{"slack.signing_secret", &c.Slack.SigningSecret},
		{"telegram.bot_token", &c.Telegram.BotToken},
		{"telegram.webhook_secret", &c.Telegram.WebhookSecret},
	}
}

// SlogLevel returns the level for slog; Info for anything unknown
// (Validate reports those).
func (l Log) SlogLevel() slog.Level {
	switch strings.ToLower(l.Level) {
	case "debug":
		return slog.LevelDebug
	case "warn", "warning":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	}
	return slog.LevelInfo
}

// Retention is what a store keeps, per this configuration.
func (c *Config) Retention() agent.Retention {
	return agent.Retention{MaxTurns: c.Agent.HistoryTurns}.WithDefaults()
}

// Limits are the bounds of one turn, per this configuration.
func (c *Config) Limits() agent.Limits {
	return agent.Limits{
		CallsPerStep:    c.Agent.MaxCallsPerStep,
		StepResultBytes: c.Agent.StepResultsKB << 10,
		TurnResultBytes: c.Agent.TurnResultsKB << 10,
		ContextTokens:   c.LLM.ContextBudget(),
	}
}

// IsAdmin reports whether the user is listed in admins.
func (c *Config) IsAdmin(platform, userID string) bool {
	for _, a := range c.Admins {
		if a.Platform == platform && a.ID == userID {
			return true
		}
	}
	return false
}

// Enabled reports whether Slack is configured.
func (s Slack) Enabled() bool { return s.BotToken != "" }

// SocketMode reports whether Slack events arrive over Socket Mode rather
// than HTTP.
func (s Slack) SocketMode() bool { return s.AppToken != "" }

// Enabled reports whether Telegram is configured.
func (t Telegram) Enabled() bool { return t.BotToken != "" }

// File returns the config file that was loaded, or "".
func (c *Config) File() string {
	if c.meta == nil {
		return ""
	}
	return c.meta.file
}
