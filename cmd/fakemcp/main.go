// Command fakemcp serves firstmate's test MCP server (see internal/fakemcp)
// on stdin and stdout, or over streamable HTTP with --http:
//
//	go build -o /opt/mcp/fakemcp ./cmd/fakemcp
//	# firstmate.yaml: mcp: {servers: {fake: {command: [/opt/mcp/fakemcp], paths: [/opt/mcp]}}}
//	go run ./cmd/fakemcp --http 127.0.0.1:8090   # url: http://127.0.0.1:8090/
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/firstmate/firstmate/internal/fakemcp"
)

func main() {
	addr := flag.String("http", "", "serve streamable HTTP on this address instead of stdio")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	if *addr == "" {
		err = fakemcp.ServeStdio(ctx, fakemcp.Options{})
	} else {
		srv := &http.Server{Addr: *addr, Handler: fakemcp.Handler(fakemcp.Options{})}
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
