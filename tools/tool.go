package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// Tool is one thing the agent can do. Use [New] to build one from a typed
// function; the schema is derived from the arguments struct.
type Tool interface {
	Name() string
	// Power is what the tool can do, the policy group it is governed by.
	Power() Power
	Description() string
	// Schema is the JSON Schema of the arguments object.
	Schema() json.RawMessage
	// Params lists the argument names in declared order.
	Params() []string
	// Check decodes args strictly without running the tool; a malformed
	// argument object gives an *ArgsError. (Approval is asked only for
	// calls that could run.)
	Check(args json.RawMessage) error
	// Call decodes args (a JSON object) strictly and runs the tool in ws.
	// A malformed argument object gives an *ArgsError.
	Call(ctx context.Context, ws *Workspace, args json.RawMessage) (Result, error)
}

// Result is what a tool call produced.
type Result struct {
	Text    string   // what the model reads; the Set caps it
	Summary string   // one line for the progress display
	Files   []string // workspace-relative files to attach to the answer
}

// ParseErrorKey marks the arguments of a call the model client could not
// read: {"_parse_error": "what was wrong", "_raw": "what the model wrote"}.
// No tool has such a field, so the call fails with that message instead of
// running with half-read arguments.
const ParseErrorKey = "_parse_error"

// ArgsError says what was wrong with a tool call's arguments.
type ArgsError struct {
	Tool string
	Err  error
}

func (e *ArgsError) Error() string {
	return fmt.Sprintf("invalid arguments for %s: %v", e.Tool, e.Err)
}

func (e *ArgsError) Unwrap() error { return e.Err }

type typed[A any] struct {
	name, desc string
	power      Power
	schema     json.RawMessage
	params     []string
	resolved   *jsonschema.Resolved
	fn         func(context.Context, *Workspace, A) (Result, error)
}

// New builds a tool with its power from a function of a struct type A.
// A's JSON field names are the argument names; fields without omitempty
// are required; a `jsonschema:"…"` tag is the argument's description.
// Unknown fields are rejected. New panics if A cannot be described by a
// schema or the power is not one: that is a programming error found by
// any test that lists the tools.
func New[A any](name string, power Power, description string, fn func(ctx context.Context, ws *Workspace, args A) (Result, error)) Tool {
	if err := power.Validate(); err != nil {
		panic(fmt.Sprintf("tools.New(%s): %v", name, err))
	}
	s, err := jsonschema.For[A](nil)
	if err != nil {
		panic(fmt.Sprintf("tools.New(%s): %v", name, err))
	}
	raw, err := json.Marshal(s)
	if err != nil {
		panic(fmt.Sprintf("tools.New(%s): %v", name, err))
	}
	resolved, err := s.Resolve(nil)
	if err != nil {
		panic(fmt.Sprintf("tools.New(%s): %v", name, err))
	}
	return &typed[A]{name: name, power: power, desc: description, schema: raw, params: s.PropertyOrder, resolved: resolved, fn: fn}
}

func (t *typed[A]) Name() string            { return t.name }
func (t *typed[A]) Power() Power            { return t.power }
func (t *typed[A]) Description() string     { return t.desc }
func (t *typed[A]) Schema() json.RawMessage { return t.schema }
func (t *typed[A]) Params() []string        { return t.params }

func (t *typed[A]) Check(raw json.RawMessage) error {
	if _, err := t.decode(raw); err != nil {
		return &ArgsError{Tool: t.name, Err: err}
	}
	return nil
}

func (t *typed[A]) Call(ctx context.Context, ws *Workspace, raw json.RawMessage) (Result, error) {
	args, err := t.decode(raw)
	if err != nil {
		return Result{}, &ArgsError{Tool: t.name, Err: err}
	}
	return t.fn(ctx, ws, args)
}

func (t *typed[A]) decode(raw json.RawMessage) (A, error) {
	var args A
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		raw = json.RawMessage("{}")
	}
	if raw[0] != '{' {
		return args, errors.New("arguments must be a JSON object")
	}
	// The schema check gives the model a precise message (missing required
	// field, wrong type); the strict decode below is what actually fills A.
	var generic map[string]any
	if err := json.Unmarshal(raw, &generic); err != nil {
		return args, fmt.Errorf("arguments are not valid JSON: %v", err)
	}
	if problem, ok := generic[ParseErrorKey].(string); ok {
		return args, fmt.Errorf("the call could not be read: %s", problem)
	}
	if err := t.resolved.Validate(generic); err != nil {
		return args, errors.New(cleanSchemaError(err.Error()))
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&args); err != nil {
		return args, err
	}
	return args, nil
}

// cleanSchemaError drops the validator's internal prefix ("validating
// root: ") that means nothing to a model.
func cleanSchemaError(s string) string {
	s = strings.TrimPrefix(s, "validating root: ")
	s = strings.TrimPrefix(s, "validating /: ")
	return s
}
