package tools

import (
	"context"
	"testing"
)

func TestCallFromContext(t *testing.T) {
	if _, ok := CallFrom(context.Background()); ok {
		t.Fatal("a call found in a bare context")
	}
	want := Call{Session: "slack:T1:C1:1700.01", User: "U1", UserName: "ann", ID: "call_1"}
	got, ok := CallFrom(WithCall(context.Background(), want))
	if !ok || got != want {
		t.Fatalf("CallFrom = %+v, %v; want %+v", got, ok, want)
	}
}
