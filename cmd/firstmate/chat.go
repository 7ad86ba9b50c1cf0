package main

import (
	"context"
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
	"github.com/firstmate/firstmate/tools"
)

func cmdChat(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs, cfgPath := commonFlags("chat", stderr)
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	cfg, err := loadConfig(*cfgPath)
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

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	a, err := newApp(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer a.close()

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
	wg.Go(func() { d.Run(ctx) })
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
		fmt.Fprintf(stdout, "firstmate %s · model %s at %s\nworkspace: %s\n%s; Ctrl-C stops a turn, Ctrl-D or /quit exits.\n",
			versionString(), cfg.LLM.Model, cfg.LLM.BaseURL, tools.WorkspacePath(workspaceDir(cfg), console.Key.Channel().String()), console.CommandList())
	}
	interrupts := make(chan os.Signal, 1)
	signal.Notify(interrupts, os.Interrupt)
	defer signal.Stop(interrupts)
	err = con.Run(ctx, d, console.Options{In: stdin, Interactive: interactive, Interrupts: interrupts})
	// A chat shorter than the probe still fails with it.
	if perr := a.tools.wait(ctx); perr != nil {
		return perr
	}
	return err
}
