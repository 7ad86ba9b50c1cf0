package mcp

import (
	"slices"
	"strings"
	"testing"
)

func TestCheckSchema(t *testing.T) {
	for _, c := range []struct {
		schema string
		params []string
		err    string
	}{
		{`{"type":"object","properties":{"b":{"type":"string"},"a":{"type":"integer"},"c":{}},"required":["c","b"]}`, []string{"c", "b", "a"}, ""},
		{`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"x":{"type":["string","null"]}},"additionalProperties":false}`, []string{"x"}, ""},
		{`{"type":"object","properties":{"a":{"$ref":"#/$defs/A"}},"$defs":{"A":{"type":"string","default":{"type":"anything"}}}}`, []string{"a"}, ""},
		{`{"type":"object","properties":{"type":{"type":"string"}}}`, []string{"type"}, ""},
		{`{"type":"object"}`, nil, ""},
		{`{"type":"string"}`, nil, `its type is "string", not "object"`},
		{`{"properties":{}}`, nil, `its type is missing, not "object"`},
		{`[]`, nil, "not a JSON object"},
		{`{"type":"object","properties":{"x":{"type":"frobnicate"}}}`, nil, `type "frobnicate" is not a JSON type`},
		{`{"type":"object","properties":{"x":{"items":{"type":7}}}}`, nil, "type 7 is not a type name"},
		{`{"type":"object","properties":"no"}`, nil, "cannot unmarshal"},
		{`{"type":"object","required":"x"}`, nil, "cannot unmarshal"},
		{`{"type":"object","properties":{"a":{"$ref":"#/$defs/Missing"}}}`, nil, "Missing"},
	} {
		_, params, err := checkSchema([]byte(c.schema))
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%s: %v", c.schema, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: error %v, want %q", c.schema, err, c.err)
		case c.err == "" && !slices.Equal(params, c.params):
			t.Errorf("%s: params %v, want %v", c.schema, params, c.params)
		}
	}
}

func TestScript(t *testing.T) {
	if got, want := script([]string{"/usr/bin/python3", "it's here.py", "$HOME"}), `exec '/usr/bin/python3' 'it'\''s here.py' '$HOME'`; got != want {
		t.Errorf("script %s, want %s", got, want)
	}
}
