package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/firstmate/firstmate/internal/config"
	"github.com/firstmate/firstmate/internal/redact"
)

// cli is what the command line says beyond a command's own arguments: the
// flags every command takes, before its name or after it, and where its
// output goes.
type cli struct {
	command string // "chat", "serve", …
	// config is --config: the config file; "" for the default (see
	// configFile).
	config string
	// verbose is -v or --verbose, with one meaning everywhere: say more.
	// The log level becomes debug; doctor also prints the effective
	// configuration.
	verbose bool

	stdout, stderr io.Writer
	// logFormat is the configuration's log format once a command read it,
	// so that the error a command ends with is logged as its other lines
	// were (one JSON object with log.format json).
	logFormat string
}

// register adds the common flags to fs, their defaults what they are now:
// so a flag after the command wins over the same flag before it.
func (c *cli) register(fs *flag.FlagSet) {
	fs.StringVar(&c.config, "config", c.config,
		"the YAML config `FILE`; without it $FIRSTMATE_CONFIG, else the first that exists of ./firstmate.yaml,\n"+
			"$XDG_CONFIG_HOME/firstmate/config.yaml (~/.config/firstmate/config.yaml), /etc/firstmate/config.yaml")
	fs.BoolVar(&c.verbose, "v", c.verbose, "verbose: debug logs; doctor also prints the effective configuration")
	fs.BoolVar(&c.verbose, "verbose", c.verbose, "the same as -v")
}

// commonFlags returns the flag set of the command name, with the common
// flags; the command adds its own. summary is the line its help starts with.
func commonFlags(c *cli, name, summary string) *flag.FlagSet {
	fs := flag.NewFlagSet("firstmate "+name, flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	// What -h prints, on stdout: called by parseFlags, not by the flag
	// package, which would also call it for a wrong flag.
	fs.Usage = func() {
		fmt.Fprintf(c.stdout, "Usage: firstmate %s [FLAGS]\n\n%s\n\nFlags (-h, --help: this help):\n", name, summary)
		fs.SetOutput(c.stdout)
		fs.PrintDefaults()
		fs.SetOutput(c.stderr)
	}
	c.register(fs)
	return fs
}

// parseFlags parses a command's flags, wherever they are among args; the
// command takes no other arguments. With -h or --help it prints the
// command's help and returns flag.ErrHelp (exit 0); a wrong command line
// is errUsage (exit 2), said on stderr.
func parseFlags(fs *flag.FlagSet, args []string) error {
	help := fs.Usage
	fs.Usage = func() {}
	pos, err := parseInterspersed(fs, args)
	fs.Usage = help
	switch {
	case errors.Is(err, flag.ErrHelp):
		help()
		return flag.ErrHelp
	case err != nil:
		// The flag package said what was wrong.
	case len(pos) > 0:
		fmt.Fprintf(fs.Output(), "unexpected argument %q\n", pos[0])
	default:
		return nil
	}
	fmt.Fprintf(fs.Output(), "Run '%s -h' for its flags.\n", fs.Name())
	return errUsage
}

// configFile is the config file to load: the one named on the command line;
// else "" when FIRSTMATE_CONFIG is set (config.Load reads it, and says so in
// its messages); else the first of config.DefaultFiles that exists, or ""
// for none.
func configFile(flagValue string) string {
	if flagValue != "" {
		return flagValue
	}
	if v, ok := os.LookupEnv(config.EnvConfig); ok && strings.TrimSpace(v) != "" {
		return ""
	}
	return config.FindFile(os.LookupEnv)
}

// configSource says where the config file came from, for doctor and the
// start-up line.
func (c *cli) configSource(cfg *config.Config) string {
	switch {
	case cfg.File() == "":
		return "none"
	case c.config != "":
		return "--config"
	case strings.TrimSpace(os.Getenv(config.EnvConfig)) != "":
		return config.EnvConfig
	}
	return "default location"
}

// load reads the configuration the command line names (or the default
// file) and the environment; any problem is an error.
func (c *cli) load() (*config.Config, error) {
	cfg, _, err := c.loadExcept(false)
	return cfg, err
}

// loadForChat is load for chat, which does not use Slack or Telegram: a
// problem in their settings is returned for a warning, not an error.
func (c *cli) loadForChat() (*config.Config, []*config.Problem, error) {
	return c.loadExcept(true)
}

func (c *cli) loadExcept(platforms bool) (*config.Config, []*config.Problem, error) {
	path := configFile(c.config)
	cfg, err := config.Load(path, os.LookupEnv)
	if cfg == nil {
		if path != "" && c.config == "" {
			// Found, not named: say how to name another.
			err = fmt.Errorf("%w\n(found in the default locations; name another with --config FILE or FIRSTMATE_CONFIG)", err)
		}
		return nil, nil, fmt.Errorf("configuration:\n%w", err)
	}
	c.logFormat = cfg.Log.Format
	if c.verbose {
		cfg.Log.Level = "debug"
	}
	var ignored []*config.Problem
	if platforms && err != nil {
		var rest []error
		for _, e := range unjoin(err) {
			if p, ok := e.(*config.Problem); ok && p.Platform() != "" {
				ignored = append(ignored, p)
				continue
			}
			rest = append(rest, e)
		}
		err = errors.Join(rest...)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("configuration:\n%w", err)
	}
	return cfg, ignored, nil
}

// unjoin lists the errors errors.Join joined (config.Load's problems).
func unjoin(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// fatal reports the error a command ended with: as a log line in the
// configured format (with log.format json, a JSON object like every other
// line), or as plain text.
func (c *cli) fatal(err error) {
	format := c.logFormat
	if format == "" {
		// The configuration was not read; the environment may still say.
		format = strings.ToLower(strings.TrimSpace(os.Getenv("FIRSTMATE_LOG_FORMAT")))
	}
	if format == "json" {
		slog.New(slog.NewJSONHandler(c.stderr, nil)).Error("firstmate failed", "command", c.command, "err", err.Error())
		return
	}
	fmt.Fprintln(c.stderr, "firstmate:", err)
}

// logStart logs the start-up line: what runs, with which model, on which
// store, for which platforms.
func logStart(log *slog.Logger, c *cli, cfg *config.Config, st store, platforms []string) {
	file := cfg.File()
	if file == "" {
		file = "none (defaults and environment)"
	}
	log.Info("firstmate starting", "version", versionString(), "command", c.command,
		"model", cfg.LLM.Model, "llm", redact.URL(cfg.LLM.BaseURL), "store", describeStore(cfg, st),
		"platforms", strings.Join(platforms, ","), "config", file)
}

// describeStore names the store: Redis as store/redis describes it (never
// with a password), or the embedded store's file.
func describeStore(cfg *config.Config, st store) string {
	if d, ok := st.(interface{ Describe() string }); ok {
		return d.Describe()
	}
	return "embedded " + filepath.Join(cfg.Store.DataDir, "firstmate.db")
}

// servePlatforms names the platforms serve connects to, and how.
func servePlatforms(cfg *config.Config) []string {
	var out []string
	if cfg.Slack.Enabled() {
		if cfg.Slack.SocketMode() {
			out = append(out, "slack (socket mode)")
		} else {
			out = append(out, "slack (http events)")
		}
	}
	if cfg.Telegram.Enabled() {
		if cfg.Telegram.WebhookURL != "" {
			out = append(out, "telegram (webhook)")
		} else {
			out = append(out, "telegram (long polling)")
		}
	}
	return out
}
