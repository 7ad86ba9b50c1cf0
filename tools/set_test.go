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
	echo := New("echo", "echo", func(_ context.Context, _ *Workspace, a struct {
		S string `json:"s"`
	}) (Result, error) {
		return Result{Text: a.S}, nil
	})
	why := "the sandbox probe failed: user namespaces are disabled; enable them with sysctl"
	s := NewSet([]Tool{echo}, WithUnavailable("shell", why))
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
