// Command firstmate runs the agent: `serve` for Slack and Telegram, `chat`
// for a terminal session, `admin` for access, policy and the audit log,
// `doctor` to check a setup, `version`.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"

	"github.com/firstmate/firstmate/tools/sandbox"
)

// version is set at build time with -ldflags "-X main.version=…"; otherwise
// the module version from the build info is used.
var version = ""

const usage = `firstmate: an AI agent with a workspace, in Slack, Telegram and the terminal.

Usage: firstmate [FLAGS] COMMAND [FLAGS]

Commands:
  chat      chat in this terminal (needs only an LLM endpoint); piped input is one message a line
  serve     run the Slack/Telegram adapters and the HTTP listener
  doctor    check the configuration, sandbox, LLM endpoint, store and data dir; --offline skips the network
  admin     change tool policy, access and pairing; read the audit log (firstmate admin help)
  version   print the version

Flags, before or after the command:
  --config FILE   the YAML config file. Without it: $FIRSTMATE_CONFIG, else the first that exists of
                  ./firstmate.yaml, $XDG_CONFIG_HOME/firstmate/config.yaml (~/.config/firstmate/config.yaml),
                  /etc/firstmate/config.yaml; with none, the defaults and the environment alone
  -v, --verbose   say more: debug logs (chat and serve); doctor also prints the effective configuration
  -h, --help      help; firstmate COMMAND -h lists the command's flags

Environment: OPENAI_BASE_URL, OPENAI_API_KEY, FIRSTMATE_MODEL, REDIS_URL, FIRSTMATE_DATA_DIR, …
(they win over the file). See deploy/firstmate.example.yaml and README.md.
`

func main() {
	// Shell commands run in this same binary re-executed as the sandbox
	// helper; it takes over here before anything else runs.
	sandbox.MaybeHelper()
	os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// errUsage means the command line was wrong; what was wrong was printed.
var errUsage = errors.New("usage")

// run runs the command line args and returns the exit status: 0, 1 when
// the command failed (or doctor found a problem), 2 for a command line
// that is wrong.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	c := &cli{stdout: stdout, stderr: stderr}
	// The flags before the command: the same as after it.
	top := flag.NewFlagSet("firstmate", flag.ContinueOnError)
	top.SetOutput(stderr)
	top.Usage = func() {}
	c.register(top)
	if len(args) > 0 && args[0] == "--version" {
		args = append([]string{"version"}, args[1:]...)
	}
	switch err := top.Parse(args); {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(stdout, usage)
		return 0
	case err != nil:
		fmt.Fprintf(stderr, "\n%s", usage)
		return 2
	}
	args = top.Args()
	if len(args) == 0 {
		if c.verbose {
			fmt.Fprintln(stderr, "firstmate: which command? (-v is --verbose; `firstmate version` prints the version)")
			fmt.Fprintln(stderr)
		}
		fmt.Fprint(stderr, usage)
		return 2
	}
	c.command, args = args[0], args[1:]
	if c.command == "help" {
		if len(args) == 0 {
			fmt.Fprint(stdout, usage)
			return 0
		}
		c.command, args = args[0], []string{"-h"}
	}
	var err error
	switch c.command {
	case "chat":
		err = cmdChat(ctx, c, args, stdin)
	case "serve":
		err = cmdServe(ctx, c, args)
	case "admin":
		err = cmdAdmin(ctx, c, args)
	case "doctor":
		var ok bool
		ok, err = cmdDoctor(ctx, c, args)
		if err == nil && !ok {
			return 1
		}
	case "version":
		fs := commonFlags(c, "version", "print the version")
		if err = parseFlags(fs, args); err == nil {
			fmt.Fprintln(stdout, "firstmate", versionString())
		}
	default:
		fmt.Fprintf(stderr, "firstmate: unknown command %q\n\n%s", c.command, usage)
		return 2
	}
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		return 2
	default:
		c.fatal(err)
		return 1
	}
}

func versionString() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		v := bi.Main.Version
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				v += " " + s.Value[:12]
			}
		}
		return v
	}
	return "(devel)"
}
