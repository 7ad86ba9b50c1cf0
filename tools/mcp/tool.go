package mcp

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/firstmate/firstmate/tools"
)

// MaxName is the longest tool name offered: the limit of the OpenAI API's
// function names.
const MaxName = 64

// maxDescription caps a tool's description: it is in every prompt.
const maxDescription = 2 << 10

// ToolName is the name a server's tool is offered as: "SERVER__TOOL",
// where TOOL is the server's name for it in lower case, a capital that
// starts a word preceded by "_" (readFile: read_file), and any character
// but a letter, a digit, "_" and "-" as "_". Policy names are lower case,
// and function names allow only those characters. A name longer than
// MaxName is cut and ends in a hash of the whole.
func ToolName(server, tool string) string {
	var b strings.Builder
	b.WriteString(server)
	b.WriteString("__")
	prevLower := false
	for _, r := range tool {
		switch {
		case r >= 'A' && r <= 'Z':
			if prevLower {
				b.WriteByte('_')
			}
			b.WriteRune(r - 'A' + 'a')
			prevLower = false
		case r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
			prevLower = true
		case r == '_' || r == '-':
			b.WriteRune(r)
			prevLower = false
		default:
			b.WriteByte('_')
			prevLower = false
		}
	}
	name := b.String()
	if len(name) > MaxName {
		sum := sha256.Sum256([]byte(tool))
		name = name[:MaxName-9] + "_" + hex.EncodeToString(sum[:4])
	}
	return name
}

// remoteTool is one tool of a server, as a firstmate tool.
type remoteTool struct {
	srv      *server
	name     string // as offered
	remote   string // the server's name for it
	desc     string
	schema   json.RawMessage
	params   []string
	resolved *jsonschema.Resolved
}

func (t *remoteTool) Name() string            { return t.name }
func (t *remoteTool) Power() tools.Power      { return tools.MCPPower(t.srv.cfg.Name) }
func (t *remoteTool) Description() string     { return t.desc }
func (t *remoteTool) Schema() json.RawMessage { return t.schema }
func (t *remoteTool) Params() []string        { return t.params }

func (t *remoteTool) Check(raw json.RawMessage) error {
	_, err := t.decode(raw)
	return err
}

func (t *remoteTool) Call(ctx context.Context, ws *tools.Workspace, raw json.RawMessage) (tools.Result, error) {
	args, err := t.decode(raw)
	if err != nil {
		return tools.Result{}, err
	}
	return t.srv.call(ctx, ws, t, args)
}

// decode reads the arguments and checks them against the schema, so that
// the model is told what is wrong without a round trip to the server.
func (t *remoteTool) decode(raw json.RawMessage) (map[string]any, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		raw = json.RawMessage("{}")
	}
	fail := func(err error) (map[string]any, error) { return nil, &tools.ArgsError{Tool: t.name, Err: err} }
	if raw[0] != '{' {
		return fail(errors.New("arguments must be a JSON object"))
	}
	var args map[string]any
	if err := json.Unmarshal(raw, &args); err != nil {
		return fail(fmt.Errorf("arguments are not valid JSON: %v", err))
	}
	if problem, ok := args[tools.ParseErrorKey].(string); ok {
		return fail(fmt.Errorf("the call could not be read: %s", problem))
	}
	if err := t.resolved.Validate(args); err != nil {
		msg := strings.TrimPrefix(err.Error(), "validating root: ")
		return fail(errors.New(strings.TrimPrefix(msg, "validating /: ")))
	}
	return args, nil
}

// convert turns a server's listing into the tools it offers and those it
// cannot, with why: a name that another tool's also becomes, or an input
// schema that is not valid.
func convert(s *server, list []*sdk.Tool) ([]tools.Tool, map[string]string) {
	server := s.cfg.Name
	byName := map[string][]string{} // offered name → the server's names
	for _, mt := range list {
		if mt == nil || mt.Name == "" {
			continue
		}
		n := ToolName(server, mt.Name)
		byName[n] = append(byName[n], mt.Name)
	}
	var out []tools.Tool
	unavailable := map[string]string{}
	for _, mt := range list {
		if mt == nil || mt.Name == "" {
			continue
		}
		name := ToolName(server, mt.Name)
		if same := byName[name]; len(same) > 1 {
			slices.Sort(same)
			unavailable[name] = fmt.Sprintf("the MCP server %s has tools named %s, which all become %s; none of them is offered (rename them on the server so that they differ by more than case and punctuation)",
				server, quoteAll(same), name)
			continue
		}
		raw, err := json.Marshal(mt.InputSchema)
		if err != nil {
			unavailable[name] = fmt.Sprintf("the input schema of %s (tool %q of the MCP server %s) cannot be read: %v", name, mt.Name, server, err)
			continue
		}
		resolved, params, err := checkSchema(raw)
		if err != nil {
			unavailable[name] = fmt.Sprintf("the input schema of %s (tool %q of the MCP server %s) is not valid: %v; the server must fix it", name, mt.Name, server, err)
			continue
		}
		desc := strings.TrimSpace(mt.Description)
		if desc == "" {
			desc = cmpOr(mt.Title, mt.Name)
		}
		desc = tools.Cap(desc, maxDescription)
		out = append(out, &remoteTool{srv: s, name: name, remote: mt.Name, desc: desc, schema: raw, params: params, resolved: resolved})
	}
	return out, unavailable
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func quoteAll(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, " and ")
}

// jsonTypes are the types a JSON Schema may name.
var jsonTypes = []string{"array", "boolean", "integer", "null", "number", "object", "string"}

// checkSchema checks that raw is a JSON Schema of an object and returns
// it resolved, and the argument names: the required ones in their order,
// then the others sorted.
func checkSchema(raw json.RawMessage) (*jsonschema.Resolved, []string, error) {
	var generic any
	if err := json.Unmarshal(raw, &generic); err != nil {
		return nil, nil, err
	}
	top, ok := generic.(map[string]any)
	if !ok {
		return nil, nil, errors.New("it is not a JSON object")
	}
	if top["type"] != "object" {
		return nil, nil, fmt.Errorf(`its type is %s, not "object": a tool's arguments are an object`, describeType(top["type"]))
	}
	if err := checkTypes(top); err != nil {
		return nil, nil, err
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, nil, errors.New(strings.TrimPrefix(err.Error(), "json: "))
	}
	resolved, err := s.Resolve(nil)
	if err != nil {
		return nil, nil, err
	}
	params := slices.Clone(s.Required)
	var rest []string
	for p := range s.Properties {
		if !slices.Contains(params, p) {
			rest = append(rest, p)
		}
	}
	slices.Sort(rest)
	return resolved, append(params, rest...), nil
}

func describeType(v any) string {
	if v == nil {
		return "missing"
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// checkTypes refuses a "type" that names no JSON type, anywhere in the
// schema (the resolver does not check them). The values of keywords that
// hold data rather than schemas are not looked into.
func checkTypes(v any) error {
	switch v := v.(type) {
	case map[string]any:
		for k, sub := range v {
			switch k {
			case "default", "const", "enum", "examples":
				continue
			case "type":
				if err := checkType(sub); err != nil {
					return err
				}
				continue
			}
			if err := checkTypes(sub); err != nil {
				return err
			}
		}
	case []any:
		for _, sub := range v {
			if err := checkTypes(sub); err != nil {
				return err
			}
		}
	}
	return nil
}

func checkType(v any) error {
	names, ok := v.([]any)
	if !ok {
		names = []any{v}
	}
	for _, n := range names {
		s, ok := n.(string)
		if !ok {
			if _, isSchema := n.(map[string]any); isSchema && len(names) == 1 {
				return checkTypes(n) // a property named "type"
			}
			return fmt.Errorf("type %s is not a type name", describeType(n))
		}
		if !slices.Contains(jsonTypes, s) {
			return fmt.Errorf("type %q is not a JSON type (%s)", s, strings.Join(jsonTypes, ", "))
		}
	}
	return nil
}
