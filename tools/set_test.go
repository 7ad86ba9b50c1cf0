package tools

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
)

// A tool this host cannot run is not offered, but a call of it says why
// instead of calling it unknown, and policy may still name it.
func TestSetUnavailable(t *testing.T) {
	echo := New("echo", PowerRead, "echo", func(_ context.Context, _ *Workspace, a struct {
		S string `json:"s"`
	}) (Result, error) {
		return Result{Text: a.S}, nil
	})
	why := "the sandbox probe failed: user namespaces are disabled; enable them with sysctl"
	s := NewSet([]Tool{echo}, WithUnavailable("shell", PowerExec, why))
	if got := s.Names(); !slices.Equal(got, []string{"echo"}) {
		t.Fatalf("offered %v, want only echo", got)
	}
	if got := s.Known(); !slices.Equal(got, []string{"echo", "shell"}) {
		t.Fatalf("known %v", got)
	}
	res, err := s.Call(context.Background(), nil, "shell", []byte(`{"command":"id"}`))
	if !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrUnknownTool) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	if !strings.Contains(res.Text, why) || res.Summary != "shell is unavailable here" {
		t.Fatalf("result %+v does not carry the reason", res)
	}
	if err := s.Check("shel", nil); !errors.Is(err, ErrUnknownTool) {
		t.Fatalf("a misspelt name: %v, want ErrUnknownTool", err)
	}
}

// powerless is a tool that declares no power.
type powerless struct{ Tool }

func (powerless) Power() Power { return "" }

// Every tool is governed: a tool without a power (or with one that is no
// power) cannot be built or registered, and a set says the power of each
// tool it knows, offered or not.
func TestToolsDeclareTheirPower(t *testing.T) {
	echo := New("echo", PowerRead, "echo", func(context.Context, *Workspace, struct{}) (Result, error) { return Result{}, nil })
	mustPanic := func(what string, f func()) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Errorf("%s: no panic", what)
			}
		}()
		f()
	}
	mustPanic("NewSet with a powerless tool", func() { NewSet([]Tool{powerless{echo}}) })
	mustPanic("New with no power", func() {
		New("x", "", "x", func(context.Context, *Workspace, struct{}) (Result, error) { return Result{}, nil })
	})
	mustPanic("New with a made-up power", func() {
		New("x", "root", "x", func(context.Context, *Workspace, struct{}) (Result, error) { return Result{}, nil })
	})
	mustPanic("a skill's power declared by a tool", func() {
		New("x", SkillPower("deploy"), "x", func(context.Context, *Workspace, struct{}) (Result, error) { return Result{}, nil })
	})
	mustPanic("an unavailable tool without a power", func() { NewSet(nil, WithUnavailable("shell", "", "no sandbox")) })

	s := NewSet([]Tool{echo, New("notes__add", MCPPower("notes"), "add", func(context.Context, *Workspace, struct{}) (Result, error) { return Result{}, nil })},
		WithUnavailable("shell", PowerExec, "no sandbox"))
	for name, want := range map[string]Power{"echo": PowerRead, "notes__add": "mcp:notes", "shell": PowerExec, "nope": ""} {
		if got, ok := s.PowerOf(name); got != want || ok != (want != "") {
			t.Errorf("PowerOf(%s) = %q, %v; want %q", name, got, ok, want)
		}
	}
	if name, ok := SkillPower("Deploy").Skill(); !ok || name != "deploy" {
		t.Errorf("SkillPower(Deploy).Skill() = %q, %v", name, ok)
	}
}
