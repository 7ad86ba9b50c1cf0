package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// DefaultMaxResult caps the text a tool call returns to the model. Tools
// cap their own output below it, where they can cut well (the shell keeps
// the head and tail of 64 KiB); this is the backstop.
const DefaultMaxResult = 72 << 10

// ErrUnknownTool is returned (wrapped) when the model calls a tool that is
// not in the set; the message lists the tools that are.
var ErrUnknownTool = errors.New("unknown tool")

// ErrUnavailable is returned (wrapped) when the model calls a tool this
// build has but this host cannot offer (the shell without a working
// sandbox); the message says why and what fixes it.
var ErrUnavailable = errors.New("unavailable")

// Set is the tools offered to the model, sorted by name so that what the
// model sees is byte-for-byte stable between calls (prompt caches depend on
// it). A Set is immutable once built and safe for concurrent use; one that
// depends on a check still running ([WithPending]) is replaced as a whole
// when the check ends, and one with tools that change at run time
// ([WithProvider]) is replaced as a whole when they change (see
// [Set.Current]).
type Set struct {
	tools     []Tool
	byName    map[string]Tool
	maxResult int
	redact    *strings.Replacer
	missing   map[string]Missing // tool name → its power, and why it is not offered
	pending   *Pending           // the check the held tools wait for
	held      map[string]bool    // tools whose calls run in pending's final set
	providers []Provider         // where tools that change at run time come from
	live      *live              // the sets made with the providers' tools; nil without providers
}

// SetOption configures a Set.
type SetOption func(*Set)

// WithMaxResult caps the text of every result at n bytes.
func WithMaxResult(n int) SetOption { return func(s *Set) { s.maxResult = n } }

// WithSecrets scrubs these values from every result before the model or a
// person sees it. Empty values are ignored.
func WithSecrets(secrets ...string) SetOption {
	return func(s *Set) {
		var pairs []string
		for _, v := range secrets {
			if len(v) >= 4 { // shorter values would mangle ordinary text
				pairs = append(pairs, v, "[redacted]")
			}
		}
		if len(pairs) > 0 {
			s.redact = strings.NewReplacer(pairs...)
		}
	}
}

// Missing is a tool that is known but not offered: its power, so that
// policy governs it like the others, and why it is not offered.
type Missing struct {
	Power  Power
	Reason string
}

// WithUnavailable names a tool, with its power, that is not offered to the
// model because this host cannot run it, and why. A call of it fails with
// that reason (not as an unknown tool), and policy may still name it.
func WithUnavailable(name string, power Power, reason string) SetOption {
	return func(s *Set) {
		if err := power.Validate(); err != nil {
			panic("tools: unavailable " + name + ": " + err.Error())
		}
		if s.missing == nil {
			s.missing = map[string]Missing{}
		}
		s.missing[name] = Missing{power, reason}
	}
}

// NewSet builds a set. Two tools with one name, or a tool without a
// power, is a programming error: a tool nobody governs is not registered.
func NewSet(tools []Tool, opts ...SetOption) *Set {
	s := &Set{byName: make(map[string]Tool, len(tools)), maxResult: DefaultMaxResult}
	for _, o := range opts {
		o(s)
	}
	for _, t := range tools {
		if _, dup := s.byName[t.Name()]; dup {
			panic("tools: duplicate tool " + t.Name())
		}
		if err := t.Power().Validate(); err != nil {
			panic("tools: tool " + t.Name() + ": " + err.Error())
		}
		s.byName[t.Name()] = t
		s.tools = append(s.tools, t)
	}
	sortTools(s.tools)
	if len(s.providers) > 0 {
		s.live = &live{base: s}
	}
	return s
}

func sortTools(ts []Tool) {
	slices.SortFunc(ts, func(a, b Tool) int { return strings.Compare(a.Name(), b.Name()) })
}

// Tools returns the tools sorted by name. The slice must not be modified.
// For a set built [WithProvider], they are the providers' tools as they
// are now; a turn uses [Set.Current] instead, which it reads once.
func (s *Set) Tools() []Tool { return s.view().tools }

// Names returns the sorted tool names.
func (s *Set) Names() []string {
	s = s.view()
	names := make([]string, len(s.tools))
	for i, t := range s.tools {
		names[i] = t.Name()
	}
	return names
}

// Known returns the sorted names of the offered tools and of those that
// are unavailable here: every name a policy may use.
func (s *Set) Known() []string {
	s = s.view()
	names := s.Names()
	for n := range s.missing {
		names = append(names, n)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// Unavailable returns why the named tool is not offered, if it is not.
func (s *Set) Unavailable(name string) (string, bool) {
	r, ok := s.view().missing[name]
	return r.Reason, ok
}

// PowerOf returns the power of a known tool (offered or unavailable).
func (s *Set) PowerOf(name string) (Power, bool) {
	s = s.view()
	if t, ok := s.byName[name]; ok {
		return t.Power(), true
	}
	if u, ok := s.missing[name]; ok {
		return u.Power, true
	}
	return "", false
}

// Get returns the named tool.
func (s *Set) Get(name string) (Tool, bool) {
	t, ok := s.view().byName[name]
	return t, ok
}

// Check reports whether a call of the named tool with args could run: the
// tool exists and the arguments are well formed. The error reads like the
// one Call would give.
func (s *Set) Check(name string, args json.RawMessage) error {
	s = s.view()
	if s.held[name] {
		if final := s.pending.settled(); final != nil {
			return final.Check(name, args)
		}
	}
	t, ok := s.byName[name]
	if !ok {
		if u, ok := s.missing[name]; ok {
			return fmt.Errorf("%s is %w here: %s", name, ErrUnavailable, u.Reason)
		}
		return fmt.Errorf("%w %q; the tools are: %s", ErrUnknownTool, name, strings.Join(s.Names(), ", "))
	}
	return t.Check(args)
}

// Redact scrubs the set's secrets from s (for logs and for what threads
// show of a call's arguments).
func (s *Set) Redact(text string) string {
	if s.redact == nil {
		return text
	}
	return s.redact.Replace(text)
}

// Call runs the named tool. Whatever happens, the returned Result is fit to
// show to the model: on error its Text explains the error (unknown tool and
// the tools that exist, what was wrong with the arguments, the tool's own
// error), capped and scrubbed of secrets, and err is non-nil. A call of a
// tool that depends on a check still running waits for it, as long as ctx
// allows.
func (s *Set) Call(ctx context.Context, ws *Workspace, name string, args json.RawMessage) (Result, error) {
	s = s.view()
	t, ok := s.byName[name]
	if !ok {
		err := s.Check(name, args)
		summary := "unknown tool"
		if errors.Is(err, ErrUnavailable) {
			summary = name + " is unavailable here"
		}
		return s.finish(Result{Text: "error: " + err.Error(), Summary: summary}), err
	}
	if s.held[name] {
		final, err := s.pending.Wait(ctx)
		if err != nil {
			err = fmt.Errorf("%s was not run: the turn ended while this host was still being checked for it (%w)", name, err)
			return s.finish(Result{Text: "error: " + err.Error(), Summary: name + " was not run"}), err
		}
		return final.Call(ctx, ws, name, args)
	}
	res, err := t.Call(ctx, ws, args)
	if err != nil {
		res.Text = "error: " + err.Error()
		if res.Summary == "" {
			res.Summary = firstLine(err.Error())
		}
		var ae *ArgsError
		if errors.As(err, &ae) {
			res.Text += "\nThe arguments schema is: " + string(t.Schema())
		}
	}
	return s.finish(res), err
}

func (s *Set) finish(res Result) Result {
	res.Text = s.Redact(res.Text)
	res.Summary = s.Redact(res.Summary)
	res.Text = Cap(res.Text, s.maxResult)
	res.Summary = Cap(firstLine(res.Summary), 200)
	return res
}

// Cap cuts s to at most max bytes on a UTF-8 boundary and, when it cut,
// appends a note saying how much was left out.
func Cap(s string, max int) string {
	if max <= 0 || len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s\n[cut: %d of %d bytes not shown]", s[:cut], len(s)-cut, len(s))
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
