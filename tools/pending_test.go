package tools

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
)

type cmdArgs struct {
	Command string `json:"command"`
}

// shellLike is a tool named shell that answers text.
func shellLike(t *testing.T, text string) Tool {
	return New("shell", PowerExec, "run a command", func(_ context.Context, _ *Workspace, a cmdArgs) (Result, error) {
		if text == "" {
			t.Error("the provisional shell ran; only the final set's may")
		}
		return Result{Text: text + " " + a.Command}, nil
	})
}

func echoTool() Tool {
	return New("echo", PowerRead, "echo", func(_ context.Context, _ *Workspace, a struct {
		S string `json:"s"`
	}) (Result, error) {
		return Result{Text: a.S}, nil
	})
}

// provisional is the set offered while the check runs: echo is ready,
// shell waits for p.
func provisional(t *testing.T, p *Pending) *Set {
	return NewSet([]Tool{shellLike(t, ""), echoTool()}, WithPending(p, "shell"))
}

type callResult struct {
	res Result
	err error
}

// A call of a held tool made before the check ends waits for it and then
// runs in the final set; a call of any other tool meanwhile does not wait.
func TestPendingCallWaitsThenRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := NewPending()
		s := provisional(t, p)
		if s.Current() != s {
			t.Fatal("Current is not the provisional set while the check runs")
		}
		done := make(chan callResult, 1)
		go func() {
			res, err := s.Call(t.Context(), nil, "shell", []byte(`{"command":"id"}`))
			done <- callResult{res, err}
		}()
		synctest.Wait()
		select {
		case r := <-done:
			t.Fatalf("the call did not wait for the check: %+v", r)
		default:
		}

		// The check never ends in this test until echo has run: a wait here
		// would deadlock the bubble and fail the test.
		if res, err := s.Call(t.Context(), nil, "echo", []byte(`{"s":"hi"}`)); err != nil || res.Text != "hi" {
			t.Fatalf("echo while the check runs: %+v %v", res, err)
		}
		if err := s.Check("shell", []byte(`{"command":"id"}`)); err != nil {
			t.Fatalf("Check while the check runs: %v", err)
		}

		final := NewSet([]Tool{shellLike(t, "ran"), echoTool()})
		p.Settle(final)
		r := <-done
		if r.err != nil || r.res.Text != "ran id" {
			t.Fatalf("the waiting call: %+v %v", r.res, r.err)
		}
		if s.Current() != final {
			t.Fatal("Current is not the final set once the check ended")
		}
		if !slices.Equal(s.Names(), final.Names()) {
			t.Fatalf("the model's tool list changed: %v, then %v", s.Names(), final.Names())
		}
	})
}

// When the check fails, a call that waited gets the unavailable error with
// the cause, as does a later one, and the final set does not offer it.
func TestPendingFailedIsUnavailable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := NewPending()
		s := provisional(t, p)
		done := make(chan callResult, 1)
		go func() {
			res, err := s.Call(t.Context(), nil, "shell", []byte(`{"command":"id"}`))
			done <- callResult{res, err}
		}()
		synctest.Wait()

		why := "the sandbox is unavailable: user namespaces are disabled"
		p.Settle(NewSet([]Tool{echoTool()}, WithUnavailable("shell", PowerExec, why)))
		r := <-done
		if !errors.Is(r.err, ErrUnavailable) || !strings.Contains(r.res.Text, why) || r.res.Summary != "shell is unavailable here" {
			t.Fatalf("the waiting call: %+v %v", r.res, r.err)
		}
		if res, err := s.Call(t.Context(), nil, "shell", []byte(`{"command":"id"}`)); !errors.Is(err, ErrUnavailable) || !strings.Contains(res.Text, why) {
			t.Fatalf("a call after the check: %+v %v", res, err)
		}
		if err := s.Check("shell", []byte(`{"command":"id"}`)); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("Check after the check: %v", err)
		}
		cur := s.Current()
		if slices.Contains(cur.Names(), "shell") || !slices.Contains(cur.Known(), "shell") {
			t.Fatalf("final set offers %v, knows %v", cur.Names(), cur.Known())
		}
	})
}

// A call whose turn ends while the check runs says it was not run.
func TestPendingCallEndsWithItsContext(t *testing.T) {
	p := NewPending()
	s := provisional(t, p)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	res, err := s.Call(ctx, nil, "shell", []byte(`{"command":"id"}`))
	if !errors.Is(err, context.Canceled) || !strings.Contains(res.Text, "shell was not run") || res.Summary != "shell was not run" {
		t.Fatalf("%+v %v", res, err)
	}
}
