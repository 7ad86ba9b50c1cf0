// Command fakellm serves a fake OpenAI-compatible API with a built-in demo
// script, so a person can run firstmate's terminal chat without a real LLM:
//
//	go run ./cmd/fakellm --addr 127.0.0.1:8089
//	OPENAI_BASE_URL=http://127.0.0.1:8089/v1 OPENAI_MODEL=fake-model firstmate chat
//
// Asked anything, the demo lists the workspace and writes hello.txt, then
// summarizes what the tools returned. It answers with native tool calls when
// tools are offered and with the [TOOL] text protocol when they are
// described in the system prompt instead.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/firstmate/firstmate/internal/testkit/fakellm"
)

func main() {
	fs := flag.NewFlagSet("fakellm", flag.ExitOnError)
	addr := fs.String("addr", "127.0.0.1:8089", "address to listen on")
	key := fs.String("api-key", "", "require this API key (Authorization: Bearer …); empty accepts any")
	models := fs.String("models", "fake-model", "comma-separated model names for GET /v1/models")
	quiet := fs.Bool("quiet", false, "do not log requests")
	_ = fs.Parse(os.Args[1:])

	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	opts := []fakellm.Option{
		fakellm.WithHandler(fakellm.Demo),
		fakellm.WithAPIKey(*key),
		fakellm.WithModels(strings.Split(*models, ",")...),
	}
	if !*quiet {
		opts = append(opts, fakellm.WithLogger(logger))
	}
	srv, err := fakellm.Listen(*addr, opts...)
	if err != nil {
		fmt.Fprintf(os.Stderr, "fakellm: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("fakellm: serving the demo script at %s (OPENAI_BASE_URL)\n", srv.URL())

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	srv.Close()
}
