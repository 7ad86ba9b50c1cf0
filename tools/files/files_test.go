package files_test

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/firstmate/firstmate/internal/testkit/fstest"
	"github.com/firstmate/firstmate/tools"
	"github.com/firstmate/firstmate/tools/files"
	"github.com/google/jsonschema-go/jsonschema"
)

// env is a workspace with the file tools, an outside directory holding a
// canary, and a helper to call tools the way the agent does (through Set).
type env struct {
	t       *testing.T
	ws      *tools.Workspace
	set     *tools.Set
	dir     string // workspace host dir
	outside string
	secret  string
	before  string // snapshot of outside
}

const secretText = "TOP SECRET canary\n"

func newEnv(t *testing.T, opts files.Options) *env {
	t.Helper()
	base := t.TempDir()
	e := &env{t: t, outside: filepath.Join(base, "outside")}
	e.secret = filepath.Join(e.outside, "secret")
	must(t, os.MkdirAll(filepath.Join(e.outside, "sub"), 0o755))
	must(t, os.WriteFile(e.secret, []byte(secretText), 0o644))
	must(t, os.WriteFile(filepath.Join(e.outside, "sub", "deep.txt"), []byte("DEEP SECRET canary\n"), 0o644))
	ws, err := tools.OpenWorkspace(filepath.Join(base, "data"), "C42")
	must(t, err)
	t.Cleanup(func() { ws.Close() })
	e.ws, e.dir = ws, ws.Dir()
	e.set = tools.NewSet(files.All(opts))
	e.before = fstest.Snapshot(t, e.outside)
	t.Cleanup(e.checkOutside)
	return e
}

// plant puts the usual traps in the workspace: symlinks out of it (absolute,
// relative, through /proc/self/root, to a directory) and a hard link to the
// canary.
func (e *env) plant() {
	e.t.Helper()
	links := map[string]string{
		"abs":     e.secret,
		"rel":     "../../outside/secret",
		"proc":    "/proc/self/root" + e.secret,
		"dirlink": e.outside,
		"reldir":  "../../outside",
	}
	for name, target := range links {
		must(e.t, os.Symlink(target, filepath.Join(e.dir, name)))
	}
	must(e.t, os.Link(e.secret, filepath.Join(e.dir, "hard")))
}

func (e *env) checkOutside() {
	e.t.Helper()
	if got := fstest.Snapshot(e.t, e.outside); got != e.before {
		e.t.Fatalf("something outside the workspace changed:\n%s\nwas:\n%s", got, e.before)
	}
}

// write creates files in the workspace (host side, for setup).
func (e *env) write(files map[string]string) {
	e.t.Helper()
	for p, content := range files {
		full := filepath.Join(e.dir, p)
		must(e.t, os.MkdirAll(filepath.Dir(full), 0o755))
		must(e.t, os.WriteFile(full, []byte(content), 0o644))
	}
}

func (e *env) read(p string) (string, bool) {
	data, err := os.ReadFile(filepath.Join(e.dir, p))
	return string(data), err == nil
}

// call runs a tool through the Set with a timeout, so a hang (a FIFO) fails
// the test instead of stalling it.
func (e *env) call(name string, args any) (tools.Result, error) {
	e.t.Helper()
	raw, ok := args.(string)
	if !ok {
		b, err := json.Marshal(args)
		must(e.t, err)
		raw = string(b)
	}
	type out struct {
		res tools.Result
		err error
	}
	done := make(chan out, 1)
	go func() {
		res, err := e.set.Call(context.Background(), e.ws, name, json.RawMessage(raw))
		done <- out{res, err}
	}()
	select {
	case o := <-done:
		if strings.Contains(o.res.Text, e.dir) || strings.Contains(o.res.Summary, e.dir) {
			e.t.Errorf("%s %s: result shows the host path: %q", name, raw, o.res.Text)
		}
		if strings.Contains(o.res.Text, "SECRET canary") {
			e.t.Errorf("%s %s: result shows the outside canary: %q", name, raw, o.res.Text)
		}
		if o.res.Summary == "" || strings.Contains(o.res.Summary, "\n") {
			e.t.Errorf("%s %s: bad summary %q", name, raw, o.res.Summary)
		}
		return o.res, o.err
	case <-time.After(10 * time.Second):
		e.t.Fatalf("%s %s hung", name, raw)
		return tools.Result{}, nil
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

var toolNames = []string{"copy", "delete", "edit", "find", "grep", "ls", "mkdir", "move", "read", "send_file", "write"}

func TestNamesAndSchemas(t *testing.T) {
	set := tools.NewSet(files.All(files.Options{}))
	if got := set.Names(); !slices.Equal(got, toolNames) {
		t.Fatalf("names = %v, want %v", got, toolNames)
	}
	required := map[string][]string{
		"copy": {"from", "to"}, "delete": {"path"}, "edit": {"path", "old", "new"}, "find": {"pattern"},
		"grep": {"pattern"}, "ls": nil, "mkdir": {"path"}, "move": {"from", "to"}, "read": {"path"}, "send_file": {"path"}, "write": {"path", "content"},
	}
	for _, tool := range set.Tools() {
		t.Run(tool.Name(), func(t *testing.T) {
			if len(tool.Description()) < 40 {
				t.Errorf("description too thin: %q", tool.Description())
			}
			var s jsonschema.Schema
			must(t, json.Unmarshal(tool.Schema(), &s))
			if _, err := s.Resolve(nil); err != nil {
				t.Fatalf("schema does not resolve: %v", err)
			}
			if s.Type != "object" {
				t.Errorf("type = %q", s.Type)
			}
			if s.AdditionalProperties == nil || s.AdditionalProperties.Not == nil {
				t.Errorf("additional properties are not refused: %s", tool.Schema())
			}
			if !slices.Equal(s.Required, required[tool.Name()]) {
				t.Errorf("required = %v, want %v", s.Required, required[tool.Name()])
			}
			for name, p := range s.Properties {
				if p.Description == "" {
					t.Errorf("property %s has no description", name)
				}
			}
			props := slices.Sorted(maps.Keys(s.Properties))
			if params := slices.Sorted(slices.Values(tool.Params())); !slices.Equal(params, props) {
				t.Errorf("params = %v, properties %v", tool.Params(), props)
			}
		})
	}
}

func TestUnknownAndMissingArguments(t *testing.T) {
	e := newEnv(t, files.Options{})
	valid := map[string]map[string]any{
		"copy": {"from": "a", "to": "b"}, "delete": {"path": "a"}, "edit": {"path": "a", "old": "x", "new": "y"},
		"find": {"pattern": "*"}, "grep": {"pattern": "x"}, "ls": {}, "mkdir": {"path": "a"},
		"move": {"from": "a", "to": "b"}, "read": {"path": "a"}, "write": {"path": "a", "content": "x"},
	}
	for _, name := range toolNames {
		args := map[string]any{"bogus": true}
		for k, v := range valid[name] {
			args[k] = v
		}
		res, err := e.call(name, args)
		var ae *tools.ArgsError
		if !errors.As(err, &ae) || !strings.Contains(res.Text, "The arguments schema is") {
			t.Errorf("%s with an unknown field: %v / %q", name, err, res.Text)
		}
		if _, ok := e.read("a"); ok {
			t.Errorf("%s ran despite the unknown field", name)
		}
		if name == "ls" {
			continue
		}
		res, err = e.call(name, `{}`)
		if !errors.As(err, &ae) {
			t.Errorf("%s without required fields: %v / %q", name, err, res.Text)
		}
		if _, err := e.call(name, `{"path": 3, "pattern": 4, "from": 5}`); !errors.As(err, &ae) {
			t.Errorf("%s with wrong types: %v", name, err)
		}
	}
}
