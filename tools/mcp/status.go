package mcp

import (
	"context"
	"maps"
	"slices"
	"strings"

	"github.com/firstmate/firstmate/internal/redact"
)

// Status is what doctor shows of one server.
type Status struct {
	Name string
	// Stdio reports a server run from a command (else it is a URL).
	Stdio bool
	// Where is the command (stdio) or the URL, without credentials.
	Where string
	// Started reports that the server started and listed its tools.
	Started bool
	// Err says why it did not (nil when it did, or has not tried yet).
	Err error
	// Tools are the names its tools are offered as, sorted.
	Tools []string
	// Unavailable are its tools that are not offered, and why.
	Unavailable map[string]string
}

// Statuses waits until every server has started once, or failed to, or
// ctx ends, and says how each did, sorted by name.
func (h *Hub) Statuses(ctx context.Context) []Status {
	out := make([]Status, 0, len(h.servers))
	for _, s := range h.servers {
		select {
		case <-s.tried:
		case <-ctx.Done():
		}
		st := Status{Name: s.cfg.Name, Stdio: s.cfg.Stdio(), Where: redact.URL(s.cfg.URL)}
		if s.cfg.Stdio() {
			st.Where = strings.Join(s.cfg.Command, " ")
			if s.cfg.Workspace == WorkspaceChannel {
				st.Where += " (one process per channel)"
			}
		}
		s.mu.Lock()
		st.Started, st.Err = s.listed, s.listErr
		for _, t := range s.tools {
			st.Tools = append(st.Tools, t.Name())
		}
		st.Unavailable = maps.Clone(s.unavailable)
		s.mu.Unlock()
		if st.Err != nil {
			st.Err = scrubbed{h.scrub(st.Err.Error())}
		} else if !st.Started {
			st.Err = context.Cause(ctx)
		}
		slices.Sort(st.Tools)
		out = append(out, st)
	}
	return out
}

type scrubbed struct{ msg string }

func (e scrubbed) Error() string { return e.msg }
