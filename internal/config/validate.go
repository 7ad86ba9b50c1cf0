package config

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/agent/govern"
	"github.com/firstmate/firstmate/internal/redact"
	"github.com/firstmate/firstmate/store/redis/redisurl"
)

// Validate reports every invalid value, joined; nil if there is none. An
// empty model is not a problem here: commands that talk to the model also
// call [Config.RequireLLM]. [Load] calls Validate itself; call it again
// after changing a Config in code.
func (c *Config) Validate() error { return errors.Join(c.problems()...) }

func (c *Config) problems() []error {
	var v validator
	v.c = c
	v.llm()
	v.agent()
	v.store()
	v.httpAndLog()
	v.tools()
	v.shell()
	v.web()
	v.mcp()
	v.skills()
	v.admins()
	v.slack()
	v.telegram()
	v.access()
	v.limits()
	v.schedules()
	for _, s := range c.secretFields() {
		if strings.ContainsAny(string(*s.val), " \t\r\n") {
			v.add(s.key, "contains spaces or a line break; check for a stray newline when it was copied")
		}
	}
	return v.probs
}

type validator struct {
	c     *Config
	probs []error
}

func (v *validator) add(key, format string, args ...any) {
	v.probs = append(v.probs, v.c.problem(key, format, args...))
}

func (v *validator) oneOf(key, val string, allowed ...string) {
	if !slices.Contains(allowed, val) {
		v.add(key, "%q is not one of %s", val, strings.Join(allowed, ", "))
	}
}

func (v *validator) atLeast(key string, val, least int) {
	if val < least {
		v.add(key, "%d is too small; use %d or more", val, least)
	}
}

func (v *validator) llm() {
	l := &v.c.LLM
	if l.BaseURL != "" {
		if u, msg := checkHTTPURL(l.BaseURL, true); msg != "" {
			v.add("llm.base_url", "%s", msg)
		} else if u.User != nil {
			v.add("llm.base_url", "%q holds a user or password; put the key in %s instead", redact.URL(l.BaseURL), v.c.name("llm.api_key"))
		}
	}
	v.oneOf("llm.tool_protocol", string(l.ToolProtocol), string(ProtocolNative), string(ProtocolText))
	v.atLeast("llm.max_retries", l.MaxRetries, 0)
	if l.Timeout <= 0 {
		v.add("llm.timeout", "%v must be positive, such as 5m", l.Timeout)
	}
	v.within("llm.stall_timeout", l.StallTimeout, time.Second, time.Hour, "1s to 1h")
	if l.MaxResponseKB < 16 || l.MaxResponseKB > 1<<20 {
		v.add("llm.max_response_kb", "%d is out of range; use 16 to 1048576 (1 GiB)", l.MaxResponseKB)
	}
	if t := l.Temperature; t != nil && (*t < 0 || *t > 2) {
		v.add("llm.temperature", "%v is out of range; use 0 to 2, or leave it out for the server's default", *t)
	}
	v.atLeast("llm.max_tokens", l.MaxTokens, 0)
	v.atLeast("llm.max_concurrent", l.MaxConcurrent, 0)
	v.atLeast("llm.requests_per_minute", l.RequestsPerMinute, 0)
	v.atLeast("llm.tokens_per_minute", l.TokensPerMinute, 0)
	if l.ContextTokens < NoContextBudget {
		v.add("llm.context_tokens", "%d is not a budget; write a number of tokens, 0 for the model's default, or %d for none", l.ContextTokens, NoContextBudget)
	}
}

func (v *validator) agent() {
	a := &v.c.Agent
	v.atLeast("agent.max_steps", a.MaxSteps, 1)
	if a.TurnTimeout <= 0 {
		v.add("agent.turn_timeout", "%v must be positive, such as 10m", a.TurnTimeout)
	}
	v.atLeast("agent.max_turns", a.MaxTurns, 0)
	v.atLeast("agent.history_turns", a.HistoryTurns, 1)
	v.atLeast("agent.max_calls_per_step", a.MaxCallsPerStep, 1)
	v.atLeast("agent.step_results_kb", a.StepResultsKB, 1)
	v.atLeast("agent.turn_results_kb", a.TurnResultsKB, 1)
	if a.StepResultsKB > a.TurnResultsKB && a.TurnResultsKB >= 1 {
		v.add("agent.step_results_kb", "%d is over agent.turn_results_kb (%d): a step is part of a turn", a.StepResultsKB, a.TurnResultsKB)
	}
	v.oneOf("agent.progress", a.Progress, "full", "summary", "off")
}

func (v *validator) store() {
	s := &v.c.Store
	if s.RedisURL != "" {
		if msg := checkRedisURL(s.RedisURL.Reveal()); msg != "" {
			v.add("store.redis_url", "%s", msg)
		}
	}
	if strings.ContainsAny(s.RedisPrefix, "{} \t\n") {
		v.add("store.redis_prefix", "%q must not contain braces or spaces (braces would break the Redis Cluster hash tags); use letters, digits, '-', '_' or ':'", s.RedisPrefix)
	}
	if s.DataDir == "" {
		v.add("store.data_dir", "not set, and there is no default without HOME or XDG_DATA_HOME; set %s", v.c.name("store.data_dir"))
	}
}

func (v *validator) shell() {
	v.oneOf("sandbox", v.c.Sandbox, "auto", "namespaces", "off")
	s := &v.c.Shell
	for key, d := range map[string]time.Duration{"shell.timeout": s.Timeout, "shell.max_timeout": s.MaxTimeout, "shell.jobs.lifetime": s.Jobs.Lifetime, "shell.jobs.cpu": s.Jobs.CPU} {
		if d <= 0 {
			v.add(key, "%v must be positive, such as 1m", d)
		}
	}
	if s.MaxTimeout > 30*time.Minute {
		v.add("shell.max_timeout", "%v is over the 30m cap; use a background job (start) for longer work", s.MaxTimeout)
	}
	if s.Timeout > s.MaxTimeout && s.MaxTimeout > 0 {
		v.add("shell.timeout", "%v is over shell.max_timeout (%v)", s.Timeout, s.MaxTimeout)
	}
	v.atLeast("shell.output_kb", s.OutputKB, 1)
	v.atLeast("shell.quota_mb", s.QuotaMB, 1)
	v.atLeast("shell.tmp_mb", s.TmpMB, 1)
	v.atLeast("shell.file_mb", s.FileMB, 1)
	v.atLeast("shell.processes", s.Processes, 16)
	v.atLeast("shell.open_files", s.OpenFiles, 64)
	v.atLeast("shell.memory_mb", s.MemoryMB, 16)
	v.atLeast("shell.jobs.per_channel", s.Jobs.PerChannel, 0)
}

func (v *validator) skills() {
	seen := map[string]int{}
	for i, d := range v.c.Skills.Dirs {
		key := fmt.Sprintf("skills.dirs[%d]", i)
		switch {
		case strings.TrimSpace(d) == "":
			v.add(key, "empty path; remove it")
		case !filepath.IsAbs(d):
			v.add(key, "%q is not an absolute path; write the whole path, such as /etc/firstmate/skills", d)
		default:
			if j, ok := seen[filepath.Clean(d)]; ok {
				v.add(key, "%q is also skills.dirs[%d]; list each directory once", d, j)
			}
			seen[filepath.Clean(d)] = i
		}
	}
}

func (v *validator) web() {
	f := &v.c.Web.Fetch
	for i, n := range f.AllowNetworks {
		if _, err := netip.ParsePrefix(n); err != nil {
			v.add(fmt.Sprintf("web.fetch.allow_networks[%d]", i), "%q is not a network; write it as CIDR, such as 10.1.0.0/16 or 192.168.5.7/32", n)
		}
	}
	for i, p := range f.Ports {
		if p < 1 || p > 65535 {
			v.add(fmt.Sprintf("web.fetch.ports[%d]", i), "%d is not a port (1 to 65535)", p)
		}
	}
	if f.Timeout <= 0 {
		v.add("web.fetch.timeout", "%v must be positive, such as 30s", f.Timeout)
	}
	v.atLeast("web.fetch.max_body_mb", f.MaxBodyMB, 1)
	s := &v.c.Web.Search
	v.oneOf("web.search.kind", s.Kind, "searxng")
	if s.URL != "" {
		if _, msg := checkHTTPURL(s.URL, false); msg != "" {
			v.add("web.search.url", "%s", msg)
		}
	}
}

func (v *validator) httpAndLog() {
	if msg := checkAddr(v.c.HTTP.Addr); msg != "" {
		v.add("http.addr", "%s", msg)
	}
	level := v.c.Log.Level
	if level == "warning" {
		v.add("log.level", `"warning" is spelled "warn" here`)
	} else {
		v.oneOf("log.level", level, "debug", "info", "warn", "error")
	}
	v.oneOf("log.format", v.c.Log.Format, "text", "json")
}

func (v *validator) tools() {
	t := &v.c.Tools
	v.oneOf("tools.default", string(t.Default), modes...)
	where := map[string]listEntry{} // rule -> the first entry naming it
	for _, l := range t.lists() {
		for i, name := range l.names {
			key := fmt.Sprintf("tools.%s[%d]", l.mode, i)
			rule := ruleName(name)
			switch rule {
			case "":
				v.add(key, "empty tool name; remove it")
				continue
			case agent.DefaultRule:
				v.add(key, "%q is not a tool or a group; set tools.default instead", name)
				continue
			}
			if first, ok := where[rule]; ok {
				v.add(key, "%s", alsoIn(name, first, rule))
				continue
			}
			where[rule] = listEntry{key, name}
		}
	}
}

// listEntry is an entry of a tools list: its key and how it was written.
type listEntry struct{ key, name string }

// alsoIn says that name, the rule rule, is listed twice, first at first.
func alsoIn(name string, first listEntry, rule string) string {
	if strings.EqualFold(strings.TrimSpace(first.name), strings.TrimSpace(name)) {
		return fmt.Sprintf("%q is also in %s; list each tool or group once", name, first.key)
	}
	what := "the tool " + rule
	if g, ok := agent.IsGroupRule(rule); ok {
		what = "the group " + g
	}
	return fmt.Sprintf("%q is also in %s, as %q (both name %s); list each tool or group once", name, first.key, first.name, what)
}

var modes = []string{string(agent.ToolAllow), string(agent.ToolAsk), string(agent.ToolDeny)}

type toolList struct {
	mode  agent.ToolMode
	names []string
}

func (t *Tools) lists() []toolList {
	return []toolList{{agent.ToolAllow, t.Allow}, {agent.ToolAsk, t.Ask}, {agent.ToolDeny, t.Deny}}
}

func (v *validator) admins() {
	for i, a := range v.c.Admins {
		if err := a.check(a.String()); err != nil {
			v.add(fmt.Sprintf("admins[%d]", i), "%v", err)
		}
	}
}

func (v *validator) slack() {
	s := &v.c.Slack
	if bot := s.BotToken.Reveal(); bot != "" && !strings.HasPrefix(bot, "xoxb-") {
		switch {
		case strings.HasPrefix(bot, "xapp-"):
			v.add("slack.bot_token", "this is an app-level token (xapp-); it belongs in %s, and the bot token starts with xoxb-", v.c.name("slack.app_token"))
		case strings.HasPrefix(bot, "xoxp-"):
			v.add("slack.bot_token", `this is a user token (xoxp-); use the "Bot User OAuth Token" (xoxb-) from the app's OAuth & Permissions page`)
		default:
			v.add("slack.bot_token", `does not start with xoxb-; use the "Bot User OAuth Token" from the app's OAuth & Permissions page`)
		}
	}
	if app := s.AppToken.Reveal(); app != "" && !strings.HasPrefix(app, "xapp-") {
		if strings.HasPrefix(app, "xoxb-") {
			v.add("slack.app_token", "this is a bot token (xoxb-); it belongs in %s, and the app-level token starts with xapp-", v.c.name("slack.bot_token"))
		} else {
			v.add("slack.app_token", `does not start with xapp-; create an app-level token with the connections:write scope under the app's Basic Information`)
		}
	}
	switch {
	case s.BotToken == "" && s.AppToken != "":
		v.add("slack.bot_token", "not set, but %s is; Slack needs the bot token (xoxb-) too: set %s", v.c.name("slack.app_token"), v.c.name("slack.bot_token"))
	case s.BotToken == "" && s.SigningSecret != "":
		v.add("slack.bot_token", "not set, but %s is; Slack needs the bot token (xoxb-) too: set %s", v.c.name("slack.signing_secret"), v.c.name("slack.bot_token"))
	case s.BotToken != "" && s.AppToken == "" && s.SigningSecret == "":
		v.add("slack.bot_token", "set, but Slack events have no way in: set %s for Socket Mode, or %s for the HTTP Events API",
			v.c.name("slack.app_token"), v.c.name("slack.signing_secret"))
	}
	if s.APIURL == "" {
		v.add("slack.api_url", "empty; leave the key out for %s", DefaultSlackAPI)
	} else if _, msg := checkHTTPURL(s.APIURL, false); msg != "" {
		v.add("slack.api_url", "%s", msg)
	}
}

var telegramToken = regexp.MustCompile(`^[0-9]+:[A-Za-z0-9_-]+$`)

func (v *validator) telegram() {
	t := &v.c.Telegram
	if tok := t.BotToken.Reveal(); tok != "" && !telegramToken.MatchString(tok) {
		v.add("telegram.bot_token", `is not a bot token; @BotFather gives one like "123456789:AAE…"`)
	}
	if t.APIURL == "" {
		v.add("telegram.api_url", "empty; leave the key out for %s", DefaultTelegramAPI)
	} else if _, msg := checkHTTPURL(t.APIURL, false); msg != "" {
		v.add("telegram.api_url", "%s", msg)
	}
	if t.WebhookURL != "" {
		if u, msg := checkHTTPURL(t.WebhookURL, false); msg != "" {
			v.add("telegram.webhook_url", "%s", msg)
		} else if u.Scheme != "https" {
			v.add("telegram.webhook_url", "Telegram delivers webhooks only over https; use an https:// URL, or unset it to poll")
		}
		if sec := t.WebhookSecret.Reveal(); !webhookSecret.MatchString(sec) {
			v.add("telegram.webhook_secret", "a webhook needs a secret of 1-256 characters A-Z, a-z, 0-9, _ and -; set TELEGRAM_WEBHOOK_SECRET (e.g. from `openssl rand -hex 32`)")
		}
	}
}

var webhookSecret = regexp.MustCompile(`^[A-Za-z0-9_-]{1,256}$`)

// checkHTTPURL returns the parsed URL, or a message saying what is wrong
// and how to write it. suggestV1 adds /v1 to the suggestion for a value
// without a scheme (an OpenAI-compatible base URL).
func checkHTTPURL(s string, suggestV1 bool) (*url.URL, string) {
	if !strings.Contains(s, "://") {
		fix := "http://" + strings.TrimRight(s, "/")
		if suggestV1 && !strings.HasSuffix(fix, "/v1") {
			fix += "/v1"
		}
		return nil, fmt.Sprintf("%q has no scheme; use %s", redact.URL(s), redact.URL(fix))
	}
	u, err := url.Parse(s)
	if err != nil {
		// url's error quotes the whole URL, which may hold a password.
		return nil, "is not a valid URL; write it like https://host/path"
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Sprintf("%q: the scheme must be http or https", redact.URL(s))
	}
	if u.Host == "" {
		return nil, fmt.Sprintf("%q has no host; write it like https://host/path", redact.URL(s))
	}
	return u, ""
}

// checkRedisURL checks a REDIS_URL as the Redis store will (package
// redisurl, which never quotes the URL: it may hold a password).
func checkRedisURL(s string) string {
	if _, err := redisurl.Parse(s); err != nil {
		return err.Error()
	}
	return ""
}

func checkAddr(addr string) string {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		if _, err := strconv.Atoi(addr); err == nil {
			return fmt.Sprintf("%q is not host:port; use \":%s\" for every interface or \"127.0.0.1:%s\" for this machine only", addr, addr, addr)
		}
		return fmt.Sprintf("%q is not host:port; write it like 127.0.0.1:8080 or :8080", addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Sprintf("%q: the port must be a number from 0 to 65535", addr)
	}
	return ""
}

// RequireLLM reports what is missing to call the model; commands that talk
// to it (serve, chat) call it after Load.
func (c *Config) RequireLLM() error {
	var probs []error
	if strings.TrimSpace(c.LLM.Model) == "" {
		probs = append(probs, c.problem("llm.model",
			"no model is set; set FIRSTMATE_MODEL (or llm.model) to the model's name, and OPENAI_BASE_URL (or llm.base_url) to the server unless it is api.openai.com, e.g. http://localhost:11434/v1"))
	}
	if c.LLM.BaseURL == "" {
		probs = append(probs, c.problem("llm.base_url",
			"no server is set; set OPENAI_BASE_URL (or llm.base_url), e.g. http://localhost:11434/v1"))
	} else if u, err := url.Parse(c.LLM.BaseURL); err == nil && u.Hostname() == "api.openai.com" && c.LLM.APIKey == "" {
		probs = append(probs, c.problem("llm.api_key",
			"not set, and api.openai.com needs one; set OPENAI_API_KEY (or point OPENAI_BASE_URL at another server)"))
	}
	return errors.Join(probs...)
}

// ValidateTools checks the entries of the tools lists against ts (the
// tools this build offers, each with its power) with govern.ParseRuleName: each must name a tool
// or a group of them, and no rule may be in two lists (as Validate also
// says). A problem lists the known names.
func (c *Config) ValidateTools(ts govern.Tools) error {
	known := ts.Known()
	sorted := slices.Sorted(slices.Values(known))
	var probs []error
	where := map[string]listEntry{} // rule -> the first entry naming it
	for _, l := range c.Tools.lists() {
		for i, name := range l.names {
			key := fmt.Sprintf("tools.%s[%d]", l.mode, i)
			if strings.TrimSpace(name) == "" {
				continue // Validate says so
			}
			rule, err := govern.ParseRuleName(name, ts)
			if r := ruleName(name); err != nil && c.mcpRule(r) {
				rule, err = r, nil // an MCP server's tools are listed once it has started
			}
			if err != nil {
				probs = append(probs, c.problem(key, "%s", unknownRule(name, sorted, ts)))
				continue
			}
			if rule == agent.DefaultRule {
				continue // Validate says so
			}
			if first, ok := where[rule]; ok {
				probs = append(probs, c.problem(key, "%s", alsoIn(name, first, rule)))
				continue
			}
			where[rule] = listEntry{key, name}
		}
	}
	return errors.Join(probs...)
}

// unknownRule says that name is neither a tool in known nor a group, and
// what is.
func unknownRule(name string, known []string, ts govern.Tools) string {
	s := strings.ToLower(strings.TrimSpace(name))
	groups := agent.Groups()
	for _, t := range known {
		if g := govern.GroupOf(ts, t); g != "" && !slices.Contains(groups, g) {
			groups = append(groups, g)
		}
	}
	what, prefix, candidates := "tool or group", "", slices.Concat(known, groups)
	if g, ok := agent.IsGroupRule(s); ok {
		what, prefix, s, candidates = "group", "group:", g, groups
	} else if t, ok := strings.CutPrefix(s, toolPrefix); ok {
		what, prefix, s, candidates = "tool", toolPrefix, t, known
	}
	msg := fmt.Sprintf("unknown %s %q", what, s)
	if m := closest(s, candidates); m != "" {
		msg += fmt.Sprintf("; did you mean %q?", prefix+m)
	} else {
		msg += "."
	}
	return msg + " Known tools: " + strings.Join(known, ", ") + "; groups: " + strings.Join(groups, ", ")
}

// Warnings lists settings that work but are probably not what was meant.
func (c *Config) Warnings() []string {
	var w []string
	add := func(key, format string, args ...any) {
		w = append(w, c.problem(key, format, args...).Error())
	}
	if u, msg := checkHTTPURL(c.LLM.BaseURL, true); c.LLM.BaseURL != "" && msg == "" {
		if !strings.HasSuffix(u.Path, "/v1") {
			fix := *u
			fix.Path, fix.RawPath = strings.TrimRight(u.Path, "/")+"/v1", ""
			add("llm.base_url", "%q does not end in /v1; most OpenAI-compatible servers serve under it (%s)", redact.URL(c.LLM.BaseURL), redact.URL(fix.String()))
		}
		if u.Scheme == "http" && c.LLM.APIKey != "" && !isLoopback(u.Hostname()) {
			add("llm.base_url", "plain http to %s: the API key crosses the network unencrypted; use https", u.Host)
		}
	}
	if u, err := redisurl.Parse(c.Store.RedisURL.Reveal()); err == nil && !u.TLS && u.HasPassword() {
		var remote []string
		for _, a := range u.Addrs {
			if host, _, err := net.SplitHostPort(a); err != nil || !isLoopback(host) {
				remote = append(remote, a)
			}
		}
		if len(remote) > 0 {
			add("store.redis_url", "%s:// to %s sends the password unencrypted; use %s://", u.Scheme, strings.Join(remote, ", "), strings.Replace(u.Scheme, "redis", "rediss", 1))
		}
	}
	c.accessWarnings(add)
	if c.Agent.Workers != 0 {
		add("agent.workers", "is no longer used: a turn that waits on the model holds no worker; agent.max_turns (default %d) bounds the turns in flight, and llm.max_concurrent the model's requests", agent.DefaultMaxTurns)
	}
	if m := c.meta; m != nil && m.file != "" && len(m.literal) > 0 && m.fileMode&0o077 != 0 {
		w = append(w, fmt.Sprintf("%s: holds secrets (%s) and other users can read it (mode %04o); chmod 600 it, or set them in the environment",
			m.file, strings.Join(m.literal, ", "), uint32(m.fileMode)))
	}
	return w
}

func isLoopback(host string) bool {
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// schedules checks the bounds of schedules and waits.
func (v *validator) schedules() {
	s := &v.c.Schedules
	if s.PerChannel < 0 || s.PerChannel > 1000 {
		v.add("schedules.per_channel", "%d is out of range; use 0 (no scheduling) to 1000", s.PerChannel)
	}
	v.within("schedules.min_interval", s.MinInterval, time.Minute, 24*time.Hour, "1m to 24h")
	v.within("schedules.max_wait", s.MaxWait, time.Minute, 7*24*time.Hour, "1m to 168h (7 days)")
	if _, err := time.LoadLocation(s.TimeZone); err != nil || s.TimeZone == "" || s.TimeZone == "Local" {
		v.add("schedules.time_zone", "%q is not a time zone; use an IANA name such as UTC, Europe/Paris or America/New_York", s.TimeZone)
	}
}
