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

Usage:
  firstmate chat     [--config FILE]   chat in this terminal (needs only an LLM endpoint)
  firstmate serve    [--config FILE]   run the Slack/Telegram adapters and the HTTP listener
  firstmate doctor   [--config FILE]   check the configuration, LLM endpoint, store and data dir
  firstmate admin    COMMAND ...       change tool policy, access and pairing; read the audit log
                                       (firstmate admin help lists the commands)
  firstmate version                    print the version

Configuration: a YAML file (--config or FIRSTMATE_CONFIG) and environment variables
(OPENAI_BASE_URL, OPENAI_API_KEY, FIRSTMATE_MODEL, REDIS_URL, FIRSTMATE_DATA_DIR, …).
See deploy/firstmate.example.yaml and README.md.
`

func main() {
	// Shell commands run in this same binary re-executed as the sandbox
	// helper; it takes over here before anything else runs.
	sandbox.MaybeHelper()
	os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// errUsage means the command line was wrong; the usage text was printed.
var errUsage = errors.New("usage")

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	cmd, rest := args[0], args[1:]
	var err error
	switch cmd {
	case "chat":
		err = cmdChat(ctx, rest, stdin, stdout, stderr)
	case "serve":
		err = cmdServe(ctx, rest, stdout, stderr)
	case "admin":
		err = cmdAdmin(ctx, rest, stdout, stderr)
	case "doctor":
		var ok bool
		ok, err = cmdDoctor(ctx, rest, stdout, stderr)
		if err == nil && !ok {
			return 1
		}
	case "version", "--version", "-v":
		fmt.Fprintln(stdout, "firstmate", versionString())
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "firstmate: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errUsage), errors.Is(err, flag.ErrHelp):
		return 2
	default:
		fmt.Fprintln(stderr, "firstmate:", err)
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

// commonFlags are the flags every command that loads a config takes.
func commonFlags(name string, stderr io.Writer) (*flag.FlagSet, *string) {
	fs := flag.NewFlagSet("firstmate "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg := fs.String("config", "", "YAML config file (default: $FIRSTMATE_CONFIG)")
	return fs, cfg
}
