package tools

import (
	"errors"
	"fmt"
	"testing"
)

// A refusal says only why, and is told from a failure to decide however
// it is wrapped.
func TestNotPermitted(t *testing.T) {
	no := NotPermitted("exec is denied in this channel")
	if no.Error() != "exec is denied in this channel" || !errors.Is(no, ErrNotPermitted) {
		t.Fatalf("NotPermitted = %q, Is(ErrNotPermitted) %v", no, errors.Is(no, ErrNotPermitted))
	}
	if wrapped := fmt.Errorf("job 3: %w", no); !errors.Is(wrapped, ErrNotPermitted) {
		t.Fatalf("%v does not wrap ErrNotPermitted", wrapped)
	}
	if errors.Is(errors.New("exec is denied in this channel"), ErrNotPermitted) {
		t.Fatal("a plain error is a refusal")
	}
}
