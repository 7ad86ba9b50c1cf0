// Command fakemcp serves firstmate's test MCP server (see internal/testkit/fakemcp)
// on stdin and stdout, or over streamable HTTP with --http:
//
//	go build -o /opt/mcp/fakemcp ./cmd/fakemcp
//	# firstmate.yaml: mcp: {servers: {fake: {command: [/opt/mcp/fakemcp], paths: [/opt/mcp]}}}
//	go run ./cmd/fakemcp --http 127.0.0.1:8090   # url: http://127.0.0.1:8090/
//
// --list-delay 2s makes it answer tools/list that much later, as a server
// slow to start does.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/firstmate/firstmate/internal/testkit/fakemcp"
)

func main() {
	addr := flag.String("http", "", "serve streamable HTTP on this address instead of stdio")
	listDelay := flag.Duration("list-delay", 0, "answer tools/list this much later")
	flag.Parse()
	opts := fakemcp.Options{ListDelay: *listDelay}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	if *addr == "" {
		err = fakemcp.ServeStdio(ctx, opts)
	} else {
		srv := &http.Server{Addr: *addr, Handler: fakemcp.Handler(opts)}
		go func() {
			<-ctx.Done()
			srv.Close()
		}()
		fmt.Fprintln(os.Stderr, "fakemcp: serving http://"+*addr+"/")
		if err = srv.ListenAndServe(); err == http.ErrServerClosed {
			err = nil
		}
	}
	if err != nil && ctx.Err() == nil {
		fmt.Fprintln(os.Stderr, "fakemcp:", err)
		os.Exit(1)
	}
}
