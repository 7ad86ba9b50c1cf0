package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/firstmate/firstmate/adapters/slack"
	"github.com/firstmate/firstmate/adapters/telegram"
	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/internal/config"
	"github.com/firstmate/firstmate/internal/redact"
	"github.com/firstmate/firstmate/store/local"
)

const doctorSummary = `Check the setup and say what is wrong and how to fix it: the configuration, the shell's
sandbox and the tools, the data dir and the store, the LLM endpoint (the model exists and answers
a tool call), and the Slack and Telegram tokens. It changes nothing on disk. The exit status is 1
when a check failed.`

// report prints doctor's findings, one line each, and remembers failures.
type report struct {
	w      io.Writer
	failed bool
}

func (r *report) ok(what, detail string)   { r.line("ok", what, detail) }
func (r *report) warn(what, detail string) { r.line("warn", what, detail) }
func (r *report) skip(what, detail string) { r.line("skip", what, detail) }
func (r *report) fail(what, detail string) { r.failed = true; r.line("FAIL", what, detail) }

func (r *report) line(kind, what, detail string) {
	fmt.Fprintf(r.w, "%-5s %-10s %s\n", kind, what, indent(detail))
}

func indent(s string) string {
	return strings.ReplaceAll(strings.TrimSpace(s), "\n", "\n                 ")
}

// doctor is one run of the checks.
type doctor struct {
	*report
	cfg     *config.Config
	offline bool
	// probs are the configuration's problems, each reported once: a check
	// that uses a value at fault is skipped, not failed again.
	probs []error
}

// cmdDoctor checks the setup and says what is wrong and how to fix it. It
// reports ok=false when anything failed.
func cmdDoctor(ctx context.Context, c *cli, args []string) (bool, error) {
	stdout := c.stdout
	fs := commonFlags(c, "doctor", doctorSummary)
	offline := fs.Bool("offline", false, "skip every check over the network: the model, Redis, Slack and Telegram")
	if err := parseFlags(fs, args); err != nil {
		return false, err
	}
	r := &report{w: stdout}
	cfg, err := config.Load(configFile(c.config), os.LookupEnv)
	if cfg == nil {
		r.fail("config", err.Error())
		return false, nil
	}
	c.logFormat = cfg.Log.Format
	// The report goes to stdout; what Redis's client may print goes to
	// the log, in its format.
	libraryLogs(newLogger(cfg, c.stderr))
	d := &doctor{report: r, cfg: cfg, offline: *offline, probs: unjoin(err)}
	if f := cfg.File(); f != "" {
		r.ok("config", fmt.Sprintf("file %s (%s)", f, c.configSource(cfg)))
	} else {
		r.ok("config", "no file (none of "+strings.Join(config.DefaultFiles(os.LookupEnv), ", ")+"); defaults and environment")
	}
	for _, p := range d.probs {
		r.fail("config", p.Error())
	}
	for _, w := range cfg.Warnings() {
		r.warn("config", w)
	}
	d.tools(ctx)
	d.skills()
	if c.verbose {
		fmt.Fprintf(stdout, "\neffective configuration:\n%s\n", cfg.Redacted())
	}

	d.dataDir()
	d.store(ctx)
	d.llm(ctx)
	d.platforms(ctx)
	if r.failed {
		fmt.Fprintln(stdout, "\nSomething needs fixing; see the FAIL lines above.")
	} else {
		fmt.Fprintln(stdout, "\nAll checks passed.")
	}
	return !r.failed, nil
}

// faulty returns the key of the first configuration problem at one of
// paths (YAML paths; a path also covers what is under it), or "".
func (d *doctor) faulty(paths ...string) string {
	for _, e := range d.probs {
		p, ok := e.(*config.Problem)
		if !ok {
			continue
		}
		for _, path := range paths {
			if p.Path() == path || strings.HasPrefix(p.Path(), path+".") || strings.HasPrefix(p.Path(), path+"[") {
				return p.Key
			}
		}
	}
	return ""
}

// skipFaulty reports what is skipped because of a problem at paths, and
// whether it was.
func (d *doctor) skipFaulty(what string, paths ...string) bool {
	if key := d.faulty(paths...); key != "" {
		d.skip(what, "not checked until "+key+" is fixed (see above)")
		return true
	}
	return false
}

// skipOffline reports a network check that --offline skips, and whether
// it did.
func (d *doctor) skipOffline(what, detail string) bool {
	if d.offline {
		d.skip(what, "not checked (--offline): "+detail)
	}
	return d.offline
}

// tools builds the tools as serve would, which probes the sandbox for
// real, and says what is offered and what is not, and why.
func (d *doctor) tools(ctx context.Context) {
	cfg := d.cfg
	box, err := newToolbox(ctx, cfg, os.LookupEnv, slog.New(slog.DiscardHandler))
	if err != nil {
		d.fail("sandbox", err.Error())
		return
	}
	defer box.close()
	switch {
	case box.shellErr == nil && strings.Contains(box.sandbox, "WITHOUT A SANDBOX"):
		d.warn("sandbox", box.sandbox)
	case box.shellErr == nil:
		d.ok("sandbox", box.sandbox)
	case cfg.Sandbox == "off":
		d.warn("sandbox", "off: shell, start, jobs and stop are not offered")
	default:
		d.warn("sandbox", "shell, start, jobs and stop are not offered: "+box.sandbox)
	}
	d.mcpServers(ctx, box)
	if d.skipFaulty("tools", "tools") {
		return
	}
	if err := cfg.ValidateTools(box.set); err != nil {
		for _, p := range unjoin(err) {
			d.fail("tools", p.Error())
		}
		return
	}
	d.ok("tools", strings.Join(box.set.Names(), ", "))
	for _, w := range cfg.PolicyWarnings(box.set) {
		d.warn("policy", w)
	}
	access := cfg.Access()
	var modes []string
	for _, p := range []string{"slack", "telegram"} {
		modes = append(modes, p+" "+string(access[p].Mode))
	}
	d.ok("access", strings.Join(modes, ", ")+fmt.Sprintf("; %d admin(s) configured", len(cfg.Admins)))
	if why, ok := box.set.Unavailable("search"); ok {
		d.warn("tools", "search is not offered: "+why)
	}
}

// dataDir checks that firstmate can write the data dir, or create it,
// without creating or writing anything.
func (d *doctor) dataDir() {
	if d.skipFaulty("data dir", "store.data_dir") {
		return
	}
	dir := d.cfg.Store.DataDir
	fix := "set FIRSTMATE_DATA_DIR (or store.data_dir) to a directory firstmate can write"
	fi, err := os.Stat(dir)
	switch {
	case err == nil && !fi.IsDir():
		d.fail("data dir", fmt.Sprintf("%s is not a directory; %s", dir, fix))
	case err == nil:
		if err := unix.Access(dir, unix.W_OK|unix.X_OK); err != nil {
			d.fail("data dir", fmt.Sprintf("%s is not writable: %v; fix its permissions, or %s", dir, err, fix))
			return
		}
		d.ok("data dir", dir)
	case errors.Is(err, fs.ErrNotExist):
		// The nearest directory that exists is where it will be made.
		parent := filepath.Dir(dir)
		for {
			if _, err := os.Stat(parent); err == nil || parent == filepath.Dir(parent) {
				break
			}
			parent = filepath.Dir(parent)
		}
		if fi, err := os.Stat(parent); err != nil || !fi.IsDir() {
			d.fail("data dir", fmt.Sprintf("%s cannot be created: %s is not a directory; %s", dir, parent, fix))
			return
		}
		if err := unix.Access(parent, unix.W_OK|unix.X_OK); err != nil {
			d.fail("data dir", fmt.Sprintf("%s does not exist, and it cannot be created in %s: %v; %s", dir, parent, err, fix))
			return
		}
		d.ok("data dir", dir+" (not there yet: firstmate creates it when it starts)")
	default:
		d.fail("data dir", fmt.Sprintf("%s: %v; %s", dir, err, fix))
	}
}

// store checks Redis, or reads the embedded store's file without opening
// it for writing (which would create it).
func (d *doctor) store(ctx context.Context) {
	cfg := d.cfg
	if d.skipFaulty("store", "store.redis_url", "store.redis_prefix", "store.data_dir") {
		return
	}
	if cfg.Store.RedisURL != "" {
		if d.skipOffline("store", "Redis") {
			return
		}
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		st, kind, err := openStore(ctx, cfg)
		if err != nil {
			fix := "check REDIS_URL (redis://host:6379/0)"
			if errors.Is(err, syscall.ECONNREFUSED) {
				fix = "nothing listens there: is Redis running? Is REDIS_URL right?"
			}
			d.fail("store", fmt.Sprintf("%v; %s", redact.Error(err), fix))
			return
		}
		defer st.Close()
		d.ok("store", kind)
		doctorSharedWorkspaces(d.report, workspaceDir(cfg))
		return
	}
	path := filepath.Join(cfg.Store.DataDir, "firstmate.db")
	switch err := local.Check(path); {
	case errors.Is(err, fs.ErrNotExist):
		d.ok("store", "embedded "+path+" (not there yet: firstmate creates it when it starts)")
	case errors.Is(err, local.ErrInUse):
		d.ok("store", "embedded "+path+" is open in a running firstmate")
	case err != nil:
		d.fail("store", fmt.Sprintf("%v; move the file aside, or set FIRSTMATE_DATA_DIR to another directory", err))
	default:
		d.ok("store", "embedded "+path)
	}
}

// sharedFS are the statfs magic numbers of filesystems that several
// machines mount: NFS (and EFS), SMB/CIFS, CephFS, Lustre, GPFS, FUSE
// (GlusterFS, JuiceFS, s3fs, …).
var sharedFS = map[int64]string{
	0x6969: "NFS", 0xFF534D42: "CIFS", 0xFE534D42: "SMB2", 0x517B: "SMB", 0x00C36400: "CephFS",
	0x0BD00BD0: "Lustre", 0x47504653: "GPFS", 0x65735546: "FUSE",
}

// doctorSharedWorkspaces warns when, with Redis (several replicas), the
// workspaces are on a filesystem only this machine sees: a conversation's
// next turn may run on another replica, which would not find its files.
func doctorSharedWorkspaces(r *report, dir string) {
	for d := dir; ; d = filepath.Dir(d) {
		var st syscall.Statfs_t
		if err := syscall.Statfs(d, &st); err == nil {
			if name, ok := sharedFS[int64(st.Type)]; ok {
				r.ok("workspaces", fmt.Sprintf("%s is on %s, which other replicas can share", dir, name))
			} else {
				r.warn("workspaces", fmt.Sprintf("%s is on a local filesystem (type %#x): with several replicas, put FIRSTMATE_DATA_DIR on shared storage (NFS, EFS, CephFS, a ReadWriteMany volume), or run one replica", dir, st.Type))
			}
			return
		}
		if d == filepath.Dir(d) {
			return
		}
	}
}

// llm checks that the endpoint answers, that it has the model, and that
// the model answers a tool call: one small request, as a turn makes them.
func (d *doctor) llm(ctx context.Context) {
	cfg := d.cfg
	if err := cfg.RequireLLM(); err != nil {
		for _, p := range unjoin(err) {
			d.fail("llm", p.Error())
		}
		return
	}
	if d.skipFaulty("llm", "llm.base_url", "llm.api_key", "llm.model", "llm.max_response_kb", "llm.stall_timeout", "llm.timeout") {
		return
	}
	// The base URL may hold a key; so may its errors (agent/openai redacts
	// them too).
	baseURL := redact.URL(cfg.LLM.BaseURL)
	if d.skipOffline("llm", fmt.Sprintf("model %s at %s", cfg.LLM.Model, baseURL)) {
		return
	}
	// One attempt each: doctor says what is wrong rather than waiting it out.
	dc := *cfg
	dc.LLM.MaxRetries = 0
	m, err := newModel(&dc, nil)
	if err != nil {
		d.fail("llm", err.Error())
		return
	}
	lctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	models, err := m.ListModels(lctx)
	cancel()
	var me *agent.ModelError
	switch {
	case errors.As(err, &me) && me.Status == 404:
		// No list of models here (some servers have none): the tool call
		// says whether the model is there.
	case err != nil:
		d.fail("llm", modelFailure(baseURL, err))
		return
	case len(models) > 0 && !slices.Contains(models, cfg.LLM.Model):
		shown := models
		if len(shown) > 10 {
			shown = append(shown[:10:10], "…")
		}
		d.fail("llm", fmt.Sprintf("%s has no model %q; it has %s. Set FIRSTMATE_MODEL (or llm.model) to one of them", baseURL, cfg.LLM.Model, strings.Join(shown, ", ")))
		return
	case len(models) > 0:
		d.ok("llm", fmt.Sprintf("%s answers and has model %s", baseURL, cfg.LLM.Model))
	}
	d.toolCall(ctx, m, baseURL)
}

// doctorTool is the one tool doctor offers the model.
var doctorTool = agent.ToolSpec{
	Name:        "report_status",
	Description: `Report that you are working. Call it with status "ok".`,
	Schema:      json.RawMessage(`{"type":"object","properties":{"status":{"type":"string","description":"always \"ok\""}},"required":["status"],"additionalProperties":false}`),
	Params:      []string{"status"},
}

// toolCall asks the model to call doctorTool, as a turn would: through the
// configured tool protocol, streamed.
func (d *doctor) toolCall(ctx context.Context, m agent.Model, baseURL string) {
	cfg := d.cfg
	// A local server may load the model first; a minute or two is usual.
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	resp, err := m.Complete(ctx, &agent.Request{
		System:   "You are being checked. Answer only by calling the report_status tool with status \"ok\". Write no text.",
		Messages: []agent.Message{{Role: agent.RoleUser, Content: "Call report_status now."}},
		Tools:    []agent.ToolSpec{doctorTool},
	})
	protocol := "native tool calls"
	if cfg.LLM.ToolProtocol == config.ProtocolText {
		protocol = "the [TOOL] text protocol"
	}
	switch {
	case err != nil:
		d.fail("llm", modelFailure(baseURL, err))
	case slices.ContainsFunc(resp.Message.ToolCalls, func(c agent.ToolCall) bool { return c.Name == doctorTool.Name }):
		d.ok("llm", fmt.Sprintf("model %s answers a tool call (%s)", cfg.LLM.Model, protocol))
	case cfg.LLM.ToolProtocol == config.ProtocolText:
		d.warn("llm", fmt.Sprintf("model %s answered, but did not call the tool it was offered (%s); the agent needs tool calls: try a model made for tool use", cfg.LLM.Model, protocol))
	default:
		d.warn("llm", fmt.Sprintf("model %s answered, but did not call the tool it was offered (%s); the agent needs tool calls: try llm.tool_protocol: text, or a model made for tool use", cfg.LLM.Model, protocol))
	}
}

// modelFailure says why a model call failed and, for the usual causes,
// what to do.
func modelFailure(baseURL string, err error) string {
	msg := fmt.Sprintf("%s: %v", baseURL, redact.Error(err))
	var dnsErr *net.DNSError
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return msg + "\nNothing listens there. Is the model server running? Is OPENAI_BASE_URL (or llm.base_url) right? " +
			"For Ollama it is http://localhost:11434/v1, for LM Studio http://localhost:1234/v1."
	case errors.As(err, &dnsErr):
		return msg + "\nThat host name is not known here; check OPENAI_BASE_URL (or llm.base_url)."
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return msg + "\nNo answer in time: is the server up and reachable from here (a firewall, a proxy)?"
	}
	return msg
}

// doctorSlack checks the bot token with auth.test.
func (d *doctor) slack(ctx context.Context) {
	cfg := d.cfg
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	sl, err := slack.New(ctx, slack.Config{BotToken: cfg.Slack.BotToken.Reveal(), AppToken: cfg.Slack.AppToken.Reveal(),
		SigningSecret: cfg.Slack.SigningSecret.Reveal(), APIURL: cfg.Slack.APIURL})
	if err != nil {
		d.fail("slack", redact.Error(err).Error())
		return
	}
	how := "Socket Mode"
	if cfg.Slack.AppToken == "" {
		how = "HTTP events at " + cfg.HTTP.Addr + "/slack/events"
	}
	d.ok("slack", fmt.Sprintf("bot %s in team %s; %s", sl.BotUserID(), sl.TeamID(), how))
}

// doctorTelegram checks the bot token with getMe.
func (d *doctor) telegram(ctx context.Context) {
	cfg := d.cfg
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	tg, err := telegram.New(ctx, telegramConfig(cfg, 0, slog.New(slog.DiscardHandler)))
	if err != nil {
		d.fail("telegram", redact.Error(err).Error())
		return
	}
	how := "long polling"
	if cfg.Telegram.WebhookURL != "" {
		how = "webhook at " + redact.URL(cfg.Telegram.WebhookURL)
	}
	d.ok("telegram", fmt.Sprintf("bot @%s; %s", tg.Username(), how))
}

func (d *doctor) platforms(ctx context.Context) {
	cfg := d.cfg
	if !cfg.Slack.Enabled() && !cfg.Telegram.Enabled() {
		d.warn("platforms", "no Slack or Telegram token set; `firstmate chat` works, `firstmate serve` has nothing to serve")
		return
	}
	if cfg.Telegram.Enabled() && !d.skipFaulty("telegram", "telegram.bot_token", "telegram.api_url", "telegram.webhook_url", "telegram.webhook_secret") &&
		!d.skipOffline("telegram", "the bot token") {
		d.telegram(ctx)
	}
	if cfg.Slack.Enabled() && !d.skipFaulty("slack", "slack.bot_token", "slack.app_token", "slack.signing_secret", "slack.api_url") &&
		!d.skipOffline("slack", "the bot token") {
		d.slack(ctx)
	}
}
