package openai

import (
	"bytes"
	"io"
	"net/http"
	"runtime"
	"testing"
	"weak"
)

// A request's body is let go once read to the end (on its way to the
// server), so a call that waits on the model keeps no copy of it; should
// net/http need it again (GetBody, after a connection that failed before
// a byte was written), it is made anew, the same bytes.
func TestBodyLetGoOnceSent(t *testing.T) {
	body := bytes.Repeat([]byte("x"), 64<<10)
	gone := weak.Make(&body[0])
	encoded := 0
	encode := func() ([]byte, error) { encoded++; return bytes.Repeat([]byte("x"), 64<<10), nil }
	req, err := http.NewRequest(http.MethodPost, "http://model.invalid/v1/chat/completions", bytes.NewReader([]byte("{}")))
	if err != nil {
		t.Fatal(err)
	}
	sent := setBody(req, body, encode)
	body = nil
	if req.ContentLength != 64<<10 {
		t.Errorf("ContentLength %d", req.ContentLength)
	}
	// A resend before the first was read: the same bytes, not encoded again.
	early, err := req.GetBody()
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := io.ReadAll(early); len(b) != 64<<10 || encoded != 0 {
		t.Fatalf("an early resend read %d bytes, encoded %d times", len(b), encoded)
	}
	first, err := io.ReadAll(req.Body)
	if err != nil || len(first) != 64<<10 {
		t.Fatalf("the send read %d bytes, %v", len(first), err)
	}
	req.Body.Close()
	first = nil
	runtime.GC()
	runtime.GC()
	if gone.Value() != nil {
		t.Error("the body's bytes are still held once it was read to the end")
	}
	again, err := req.GetBody()
	if err != nil {
		t.Fatalf("a resend after the send: %v", err)
	}
	if b, _ := io.ReadAll(again); !bytes.Equal(b, bytes.Repeat([]byte("x"), 64<<10)) || encoded != 1 {
		t.Fatalf("the resend read %d bytes, encoded %d times; want the body, made anew once", len(b), encoded)
	}
	sent()
	runtime.KeepAlive(req)
}

// A body closed before it was read to the end (a write that failed) keeps
// the request's bytes for another send, and reads nothing more itself.
func TestBodyClosedEarly(t *testing.T) {
	h := &heldBody{b: []byte("hello")}
	s, _ := h.open()
	p := make([]byte, 2)
	if n, err := s.Read(p); n != 2 || err != nil {
		t.Fatalf("Read = %d, %v", n, err)
	}
	s.Close()
	if n, err := s.Read(p); n != 0 || err != io.EOF {
		t.Fatalf("after Close: Read = %d, %v", n, err)
	}
	if string(h.b) != "hello" {
		t.Fatalf("the request's bytes became %q", h.b)
	}
	h.letGo()
	if _, err := h.open(); err == nil {
		t.Error("a body let go, with nothing to make it anew, opened")
	}
}
