package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/firstmate/firstmate/adapters"
	"github.com/firstmate/firstmate/adapters/console"
	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/internal/config"
	"github.com/firstmate/firstmate/internal/redact"
	"github.com/firstmate/firstmate/store/local"
	"github.com/firstmate/firstmate/tools"
)

const chatSummary = `Chat with the agent in this terminal. It needs only an LLM endpoint: Slack and Telegram
settings are not used here (a problem in them is a warning). With input from a pipe each
line is a message, answered in turn and echoed as "> line"; the exit status is 1 if a turn failed.`

func cmdChat(ctx context.Context, c *cli, args []string, stdin io.Reader) error {
	stdout, stderr := c.stdout, c.stderr
	fs := commonFlags(c, "chat", chatSummary)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, ignored, err := c.loadForChat()
	if err != nil {
		return err
	}
	interactive := false
	if f, ok := stdin.(*os.File); ok {
		interactive = term.IsTerminal(int(f.Fd()))
	}
	// Logs go to stderr, warnings only unless a level was asked for, so
	// they do not interleave with the conversation.
	if cfg.Log.Level == "info" {
		cfg.Log.Level = "warn"
	}
	log := newLogger(cfg, stderr)
	libraryLogs(log)
	for _, p := range ignored {
		log.Warn(fmt.Sprintf("%v (chat does not use %s; serve refuses to start until this is fixed)", p, p.Platform()))
	}

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	a, err := newApp(ctx, cfg, log, "")
	if errors.Is(err, local.ErrInUse) {
		return dataDirInUse(cfg)
	}
	if err != nil {
		return err
	}
	defer a.close()
	logStart(log, c, cfg, a.store, []string{console.Key.Platform})

	mode, err := adapters.ParseMode(cfg.Agent.Progress)
	if err != nil {
		return err
	}
	con := console.New(stdout, interactive, mode)
	// Last, once the dispatcher stopped: the last turn's summary line.
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		con.Drain(dctx)
	}()
	d := a.dispatcher(map[string]agent.Platform{console.Key.Platform: con})
	var wg sync.WaitGroup
	wg.Go(func() { a.run(ctx, d) })
	// The chat starts without waiting for the sandbox probe; with sandbox:
	// namespaces its failure ends the chat.
	wg.Go(func() {
		if err := a.tools.wait(ctx); err != nil && ctx.Err() == nil {
			cancel(err)
		}
	})
	defer wg.Wait()
	defer cancel(nil)

	if interactive {
		fmt.Fprintf(stdout, "firstmate %s · model %s at %s · store %s\nworkspace: %s\n%s; Ctrl-C stops a turn, Ctrl-D or /quit exits.\n",
			versionString(), cfg.LLM.Model, redact.URL(cfg.LLM.BaseURL), describeStore(cfg, a.store),
			tools.WorkspacePath(workspaceDir(cfg), console.Key.Channel().String()), console.CommandList())
	}
	interrupts := make(chan os.Signal, 1)
	signal.Notify(interrupts, os.Interrupt)
	defer signal.Stop(interrupts)
	// The person at the terminal runs the bot: an admin here. Unnamed,
	// so that their messages are not attributed as a channel's are.
	operator := agent.User{ID: "operator"}
	err = con.Run(ctx, d, console.Options{In: stdin, Interactive: interactive, Interrupts: interrupts, Echo: !interactive, User: operator})
	// A chat shorter than the probe still fails with it.
	if perr := a.tools.wait(ctx); perr != nil {
		return perr
	}
	if err != nil {
		return err
	}
	// A script learns from the exit status that not every message was
	// answered; a person at the terminal saw it.
	if n := con.Failures(); n > 0 && !interactive {
		return fmt.Errorf("%d message(s) got no answer; see the output above", n)
	}
	return nil
}

// dataDirInUse says what to do when another firstmate holds the embedded
// store: bbolt locks its file, so two processes cannot share it.
func dataDirInUse(cfg *config.Config) error {
	dir := cfg.Store.DataDir
	return fmt.Errorf(`the data dir %s is in use: another firstmate (most likely firstmate serve) has its embedded store open, and only one process at a time can. Either
  - stop that firstmate, then start the chat again;
  - or let both use Redis: set the same REDIS_URL for serve and chat, and they share the store;
  - or give the chat a data dir of its own (a history and workspace of its own):
      FIRSTMATE_DATA_DIR=%s firstmate chat`, dir, dir+"-chat")
}
