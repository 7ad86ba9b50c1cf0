package console

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/firstmate/firstmate/adapters"
	"github.com/firstmate/firstmate/agent"
)

// failingModel fails the turns whose input is "fail" and echoes the rest.
type failingModel struct{}

func (failingModel) Complete(_ context.Context, req *agent.Request) (*agent.Response, error) {
	in := req.Messages[len(req.Messages)-1].Content
	if in == "fail" {
		return nil, &agent.ModelError{Status: 500, Attempts: 1, Err: errors.New("upstream exploded")}
	}
	return &agent.Response{Message: agent.Message{Role: agent.RoleAssistant, Content: "echo: " + in}}, nil
}

// TestRunEchoReadsAsConversation: scripted input, echoed, reads as a
// transcript, each line before its answer.
func TestRunEchoReadsAsConversation(t *testing.T) {
	var out syncBuffer
	c := New(&out, false, adapters.ModeFull)
	d := newDispatcher(t, &model{}, c)
	if err := c.Run(t.Context(), d, Options{In: strings.NewReader("one\n\ntwo\n"), Echo: true}); err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), "> one\necho: one\n> two\necho: two\n"; got != want {
		t.Fatalf("output %q, want %q", got, want)
	}
	if n := c.Failures(); n != 0 {
		t.Errorf("%d failures", n)
	}
}

func TestFailuresCountsFailedTurns(t *testing.T) {
	var out syncBuffer
	c := New(&out, false, adapters.ModeFull)
	d := newDispatcher(t, failingModel{}, c)
	if err := c.Run(t.Context(), d, Options{In: strings.NewReader("ok\nfail\nok again\n")}); err != nil {
		t.Fatal(err)
	}
	if n := c.Failures(); n != 1 {
		t.Errorf("%d failures, want 1:\n%s", n, out.String())
	}
	c = New(&out, false, adapters.ModeFull)
	if err := c.Run(t.Context(), failing{}, Options{In: strings.NewReader("hello\n")}); err != nil {
		t.Fatal(err)
	}
	if n := c.Failures(); n != 1 {
		t.Errorf("a message that could not be sent: %d failures, want 1", n)
	}
}
