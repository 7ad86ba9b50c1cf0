package mcp

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"
	"sync/atomic"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/firstmate/firstmate/tools"
)

// maxFile caps a file written from a result (an image, a blob); the
// transports cap a whole message at 16 MiB already.
const maxFile = 32 << 20

// fileSeq tells apart the files of results written in one millisecond.
var fileSeq atomic.Uint64

// result turns what the server answered into what the model reads: text
// as it is; images, audio and binary resources written into the
// workspace and named (the model can send one with send_file); links and
// text resources described. A result the server marks as an error is an
// error with its text.
func (s *server) result(ws *tools.Workspace, t *remoteTool, res *sdk.CallToolResult) (tools.Result, error) {
	var parts []string
	saved := 0
	save := func(kind, mime string, data []byte, what string) string {
		desc := fmt.Sprintf("%s, %s", mimeOr(mime), tools.FormatSize(int64(len(data))))
		if what != "" {
			desc = what + ": " + desc
		}
		if ws == nil {
			return fmt.Sprintf("[%s %s; not saved: this call has no workspace]", kind, desc)
		}
		name := path.Join("mcp", s.cfg.Name, fmt.Sprintf("%s-%s-%d%s", strings.ReplaceAll(t.remote, "/", "_"),
			time.Now().UTC().Format("20060102-150405.000"), fileSeq.Add(1), extension(mime)))
		if _, err := ws.WriteFile(name, data, maxFile); err != nil {
			return fmt.Sprintf("[%s %s; not saved: %v]", kind, desc, err)
		}
		saved++
		return fmt.Sprintf("[%s %s; saved in the workspace as %s (send_file can send it)]", kind, desc, name)
	}
	for _, c := range res.Content {
		switch c := c.(type) {
		case *sdk.TextContent:
			parts = append(parts, c.Text)
		case *sdk.ImageContent:
			parts = append(parts, save("image", c.MIMEType, c.Data, ""))
		case *sdk.AudioContent:
			parts = append(parts, save("audio", c.MIMEType, c.Data, ""))
		case *sdk.ResourceLink:
			desc := fmt.Sprintf("[resource link %s: %s", cmpOr(c.Name, c.Title), c.URI)
			if c.MIMEType != "" {
				desc += ", " + c.MIMEType
			}
			if c.Size != nil {
				desc += ", " + tools.FormatSize(*c.Size)
			}
			if c.Description != "" {
				desc += ": " + c.Description
			}
			parts = append(parts, desc+"]")
		case *sdk.EmbeddedResource:
			r := c.Resource
			switch {
			case r == nil:
				parts = append(parts, "[an empty resource]")
			case r.Blob != nil:
				parts = append(parts, save("resource", r.MIMEType, r.Blob, r.URI))
			default:
				parts = append(parts, fmt.Sprintf("[resource %s, %s]\n%s", r.URI, mimeOr(r.MIMEType), r.Text))
			}
		default:
			parts = append(parts, fmt.Sprintf("[content of a kind firstmate does not show: %T]", c))
		}
	}
	if len(parts) == 0 && res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			parts = append(parts, string(b))
		}
	}
	text := strings.Join(parts, "\n")
	if res.IsError {
		if strings.TrimSpace(text) == "" {
			text = "it gave no reason"
		}
		return tools.Result{Summary: "failed: " + oneLine(text)}, &ToolError{Tool: t.name, Text: text}
	}
	summary := oneLine(text)
	if summary == "" {
		summary = "no output"
	}
	if saved > 0 {
		summary = fmt.Sprintf("%s (%d file(s) saved)", summary, saved)
	}
	return tools.Result{Text: text, Summary: summary}, nil
}

// ToolError is a call the server answered as failed; Text is its answer.
type ToolError struct {
	Tool string
	Text string
}

func (e *ToolError) Error() string { return e.Tool + " failed: " + e.Text }

// IsToolError reports whether err is a failure the server reported.
func IsToolError(err error) bool {
	var te *ToolError
	return errors.As(err, &te)
}

// oneLine is the first non-blank line of s, cut to 120 bytes.
func oneLine(s string) string {
	for line := range strings.Lines(s) {
		if line = strings.TrimSpace(line); line != "" {
			if len(line) > 120 {
				cut := 120
				for cut > 0 && line[cut]&0xC0 == 0x80 {
					cut--
				}
				line = line[:cut] + "…"
			}
			return line
		}
	}
	return ""
}

func mimeOr(m string) string {
	if m == "" {
		return "unknown type"
	}
	return m
}

// extensions of the types servers send most; others are .bin.
var extensions = map[string]string{
	"image/png": ".png", "image/jpeg": ".jpg", "image/gif": ".gif", "image/webp": ".webp", "image/svg+xml": ".svg",
	"audio/wav": ".wav", "audio/x-wav": ".wav", "audio/mpeg": ".mp3", "audio/ogg": ".ogg", "audio/webm": ".webm",
	"application/pdf": ".pdf", "application/json": ".json", "application/zip": ".zip", "text/plain": ".txt",
	"text/csv": ".csv", "text/html": ".html", "text/markdown": ".md",
}

func extension(mime string) string {
	mime, _, _ = strings.Cut(strings.ToLower(mime), ";")
	if e, ok := extensions[strings.TrimSpace(mime)]; ok {
		return e
	}
	return ".bin"
}
