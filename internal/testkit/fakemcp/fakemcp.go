// Package fakemcp is an MCP server for tests, built with the official Go
// SDK, so that firstmate's MCP client is tested against the real protocol
// over both transports: stdio ([ServeStdio], which cmd/fakemcp runs, also
// inside the sandbox) and streamable HTTP ([Handler]).
//
// Its tools:
//
//	echo {text}           the text back
//	env {name}            the value of an environment variable, or "(unset)"
//	whereami {}           the working directory and the host name
//	write {name, text}    writes a file in the working directory
//	sleep {seconds}       answers after that long (or when cancelled)
//	crash {}              ends the server in the middle of the call
//	huge {bytes}          that many bytes of text
//	image {}              a small PNG and a line of text
//	resource {}           an embedded text resource, a blob and a link
//	fail {}               a result marked as an error
//	add_tool {name}       adds a tool of that name (an echo): the list changes
//	bad_schema {}         a tool whose input schema is not valid
//	readFile, Get.Page, get_page   names to sanitize (the last two collide)
//
// [Options.ListDelay] makes it slow to list its tools, as a server that
// takes a while to start is.
package fakemcp

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Options change the server.
type Options struct {
	// Crash ends the server in the middle of the crash tool's call; the
	// default exits the process with code 3.
	Crash func()
	// ListDelay delays every answer to tools/list by that long (or until
	// the request is cancelled): a server slow to start, or, made long,
	// one that never lists its tools.
	ListDelay time.Duration
}

// PNG is the image the image tool returns: one transparent pixel.
var PNG = []byte{
	0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
	0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
	0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0x00, 0x01, 0x00, 0x00,
	0x05, 0x00, 0x01, 0x0d, 0x0a, 0x2d, 0xb4, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae,
	0x42, 0x60, 0x82,
}

// BadSchema is bad_schema's input schema: an object, with a property of a
// type that does not exist.
const BadSchema = `{"type":"object","properties":{"x":{"type":"frobnicate"}}}`

type (
	textArgs struct {
		Text string `json:"text"`
	}
	nameArgs struct {
		Name string `json:"name"`
	}
	writeArgs struct {
		Name string `json:"name"`
		Text string `json:"text"`
	}
	sleepArgs struct {
		Seconds float64 `json:"seconds"`
	}
	hugeArgs struct {
		Bytes int `json:"bytes"`
	}
	noArgs struct{}
)

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// New returns the server.
func New(opts Options) *mcp.Server {
	if opts.Crash == nil {
		opts.Crash = func() { os.Exit(3) }
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "fakemcp", Version: "1"}, nil)
	if opts.ListDelay > 0 {
		s.AddReceivingMiddleware(delayList(opts.ListDelay))
	}
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echo the text back."},
		func(_ context.Context, _ *mcp.CallToolRequest, a textArgs) (*mcp.CallToolResult, any, error) {
			return text(a.Text), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "env", Description: "The value of an environment variable."},
		func(_ context.Context, _ *mcp.CallToolRequest, a nameArgs) (*mcp.CallToolResult, any, error) {
			v, ok := os.LookupEnv(a.Name)
			if !ok {
				v = "(unset)"
			}
			return text(v), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "whereami", Description: "The working directory and the host name."},
		func(context.Context, *mcp.CallToolRequest, noArgs) (*mcp.CallToolResult, any, error) {
			wd, _ := os.Getwd()
			host, _ := os.Hostname()
			return text("dir=" + wd + " host=" + host), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "write", Description: "Write a file in the working directory."},
		func(_ context.Context, _ *mcp.CallToolRequest, a writeArgs) (*mcp.CallToolResult, any, error) {
			if err := os.WriteFile(a.Name, []byte(a.Text), 0o644); err != nil {
				return nil, nil, err
			}
			return text("wrote " + a.Name), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "sleep", Description: "Answer after a while."},
		func(ctx context.Context, _ *mcp.CallToolRequest, a sleepArgs) (*mcp.CallToolResult, any, error) {
			select {
			case <-time.After(time.Duration(a.Seconds * float64(time.Second))):
				return text(fmt.Sprintf("slept %gs", a.Seconds)), nil, nil
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
		})
	mcp.AddTool(s, &mcp.Tool{Name: "crash", Description: "End the server in the middle of the call."},
		func(context.Context, *mcp.CallToolRequest, noArgs) (*mcp.CallToolResult, any, error) {
			fmt.Fprintln(os.Stderr, "fakemcp: crashing as asked")
			opts.Crash()
			return text("still here"), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "huge", Description: "Return that many bytes of text."},
		func(_ context.Context, _ *mcp.CallToolRequest, a hugeArgs) (*mcp.CallToolResult, any, error) {
			line := strings.Repeat("x", 99) + "\n"
			out := strings.Repeat(line, a.Bytes/len(line)+1)[:a.Bytes]
			return text(out), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "image", Description: "A small picture."},
		func(context.Context, *mcp.CallToolRequest, noArgs) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{
				&mcp.TextContent{Text: "a pixel:"},
				&mcp.ImageContent{Data: PNG, MIMEType: "image/png"},
			}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "resource", Description: "Resources of each kind."},
		func(context.Context, *mcp.CallToolRequest, noArgs) (*mcp.CallToolResult, any, error) {
			size := int64(1234)
			return &mcp.CallToolResult{Content: []mcp.Content{
				&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "file:///notes/a.md", MIMEType: "text/markdown", Text: "# A note"}},
				&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "file:///notes/b.bin", MIMEType: "application/octet-stream", Blob: []byte{0, 1, 2, 3}}},
				&mcp.ResourceLink{URI: "https://example.com/c.pdf", Name: "c.pdf", MIMEType: "application/pdf", Size: &size},
			}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "Fail."},
		func(context.Context, *mcp.CallToolRequest, noArgs) (*mcp.CallToolResult, any, error) {
			res := text("the thing failed: no such note")
			res.IsError = true
			return res, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "add_tool", Description: "Add a tool; the tool list changes."},
		func(_ context.Context, _ *mcp.CallToolRequest, a nameArgs) (*mcp.CallToolResult, any, error) {
			mcp.AddTool(s, &mcp.Tool{Name: a.Name, Description: "An added tool: echo."},
				func(_ context.Context, _ *mcp.CallToolRequest, a textArgs) (*mcp.CallToolResult, any, error) {
					return text(a.Text), nil, nil
				})
			return text("added " + a.Name), nil, nil
		})
	s.AddTool(&mcp.Tool{Name: "bad_schema", Description: "Its schema is not valid.", InputSchema: json.RawMessage(BadSchema)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return text("ran"), nil })
	for _, name := range []string{"readFile", "Get.Page", "get_page"} {
		mcp.AddTool(s, &mcp.Tool{Name: name, Description: "Named " + name + "."},
			func(context.Context, *mcp.CallToolRequest, noArgs) (*mcp.CallToolResult, any, error) {
				return text(name), nil, nil
			})
	}
	return s
}

// delayList delays the answers to tools/list by d.
func delayList(d time.Duration) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/list" {
				t := time.NewTimer(d)
				defer t.Stop()
				select {
				case <-t.C:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			return next(ctx, method, req)
		}
	}
}

// ServeStdio serves a new server on stdin and stdout until stdin ends or
// ctx does.
func ServeStdio(ctx context.Context, opts Options) error {
	return New(opts).Run(ctx, &mcp.StdioTransport{})
}

// Handler serves one server over streamable HTTP. (A test that keeps
// the process sets Options.Crash to drop the connections instead, as
// httptest.Server.CloseClientConnections does.)
func Handler(opts Options) http.Handler {
	s := New(opts)
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
}
