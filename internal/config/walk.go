package config

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

var (
	configType   = reflect.TypeFor[Config]()
	durationType = reflect.TypeFor[time.Duration]()
	adminType    = reflect.TypeFor[Admin]()
)

// fileCheck walks the YAML node tree against the Config struct tree. It
// finds what the strict decoder would refuse, but names the key, its line,
// the keys that are known there, and what a good value looks like. It also
// records the line of every key for later messages.
type fileCheck struct {
	file  string
	lines map[string]int
	probs []error
}

func (fc *fileCheck) add(key string, line int, format string, args ...any) {
	fc.probs = append(fc.probs, &Problem{Key: key, File: fc.file, Line: line, Msg: fmt.Sprintf(format, args...), path: key})
}

func (fc *fileCheck) walk(n *yaml.Node, t reflect.Type, path string) {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.ShortTag() == "!!null" {
		return // leaves the default in place, or empties a list
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == adminType:
		if n.Kind != yaml.ScalarNode {
			fc.add(path, n.Line, `expected a string like "slack:U0123ABCD", not %s`, describe(n))
		} else if _, err := ParseAdmin(n.Value); err != nil {
			fc.add(path, n.Line, "%v", err)
		}
	case t.Kind() == reflect.Struct:
		fc.mapping(n, t, path)
	case t.Kind() == reflect.Map && t.Key().Kind() == reflect.String:
		// Entries keyed by a name of the operator's (mcp.servers.NAME).
		if n.Kind != yaml.MappingNode {
			fc.add(path, n.Line, "expected NAME: value entries, not %s", describe(n))
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			p := path + "." + n.Content[i].Value
			fc.lines[p] = n.Content[i].Line
			fc.walk(n.Content[i+1], t.Elem(), p)
		}
	case t.Kind() == reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			fc.add(path, n.Line, "expected a list (one \"- item\" per line, or [a, b]), not %s", describe(n))
			return
		}
		for i, item := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			fc.lines[p] = item.Line
			fc.walk(item, t.Elem(), p)
		}
	default:
		if err := n.Decode(reflect.New(t).Interface()); err != nil {
			fc.add(path, n.Line, "%s", leafProblem(n, t))
		}
	}
}

func (fc *fileCheck) mapping(n *yaml.Node, t reflect.Type, path string) {
	fields := yamlFields(t)
	if n.Kind != yaml.MappingNode {
		fc.add(path, n.Line, "expected keys (%s), not %s", strings.Join(sortedKeys(fields), ", "), describe(n))
		return
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.ShortTag() == "!!merge" { // <<: *anchor
			if v.Kind == yaml.SequenceNode {
				for _, m := range v.Content {
					fc.walk(m, t, path)
				}
			} else {
				fc.walk(v, t, path)
			}
			continue
		}
		key := k.Value
		kp := key
		if path != "" {
			kp = path + "." + key
		}
		if first, dup := seen[key]; dup {
			fc.add(kp, k.Line, "set twice (first on line %d); keep one", first)
			continue
		}
		seen[key] = k.Line
		f, ok := fields[key]
		if !ok {
			fc.add(kp, k.Line, "%s", unknownKey(key, path, fields))
			continue
		}
		fc.lines[kp] = k.Line
		fc.walk(v, f, kp)
	}
}

func unknownKey(key, path string, fields map[string]reflect.Type) string {
	known := sortedKeys(fields)
	var b strings.Builder
	b.WriteString("unknown key")
	if s := closest(key, known); s != "" {
		fmt.Fprintf(&b, "; did you mean %q? Known", s)
	} else {
		b.WriteString("; known")
	}
	if path == "" {
		b.WriteString(" top-level keys: ")
	} else {
		fmt.Fprintf(&b, " keys under %s: ", path)
	}
	b.WriteString(strings.Join(known, ", "))
	return b.String()
}

// leafProblem says what is wrong with a value the decoder refused.
func leafProblem(n *yaml.Node, t reflect.Type) string {
	if n.Kind != yaml.ScalarNode {
		return fmt.Sprintf("expected a single value, not %s", describe(n))
	}
	if t == durationType {
		if n.ShortTag() == "!!int" {
			return fmt.Sprintf(`%s has no unit; write a duration such as "%ss" or "%sm"`, n.Value, n.Value, n.Value)
		}
		return fmt.Sprintf(`%q is not a duration; write one such as "90s", "10m" or "1h30m"`, n.Value)
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return fmt.Sprintf("%q is not a whole number", n.Value)
	case reflect.Float32, reflect.Float64:
		return fmt.Sprintf("%q is not a number", n.Value)
	case reflect.Bool:
		return fmt.Sprintf("%q is not true or false", n.Value)
	}
	return fmt.Sprintf("%q is not a valid %s", n.Value, t)
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	return fmt.Sprintf("%q", n.Value)
}

// yamlFields maps the yaml keys of struct type t to their field types.
func yamlFields(t reflect.Type) map[string]reflect.Type {
	m := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		m[name] = f.Type
	}
	return m
}

func sortedKeys(m map[string]reflect.Type) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// closest returns the candidate nearest to s, if it is near enough to be
// a typo of it.
func closest(s string, candidates []string) string {
	limit := 2
	if len(s) <= 3 {
		limit = 1
	}
	best, bestD := "", limit+1
	for _, c := range candidates {
		if d := editDistance(s, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
