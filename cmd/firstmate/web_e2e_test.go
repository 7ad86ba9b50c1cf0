package main

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/firstmate/firstmate/internal/testkit/fakellm"
)

// listenOn serves h on addr (a loopback address of the test's choosing).
func listenOn(t *testing.T, addr string, h http.Handler) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var hits atomic.Int64
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("cannot listen on %s: %v", addr, err)
	}
	srv := &httptest.Server{Listener: ln, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		h.ServeHTTP(w, r)
	})}}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &hits
}

// TestChatWebTools wires fetch and search from the configuration: an
// allowed intranet server is fetched and turned into Markdown, loopback
// stays refused (the server there sees nothing), and search asks the
// configured SearXNG.
func TestChatWebTools(t *testing.T) {
	t.Parallel()
	page, _ := listenOn(t, "127.0.0.2:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<html><head><title>Wiki</title><script>steal()</script></head><body><h1>Deploys</h1><p>On <b>Friday</b>.</p></body></html>`)
	}))
	secret, secretHits := listenOn(t, "127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "internal admin panel")
	}))
	searx, _ := listenOn(t, "127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"results":[{"title":"Go","url":"https://go.dev/","content":"The Go language (%s)."}]}`, r.URL.Query().Get("q"))
	}))
	_, pagePort, _ := net.SplitHostPort(page.Listener.Addr().String())
	_, secretPort, _ := net.SplitHostPort(secret.Listener.Addr().String())

	llm := fakellm.New(t, fakellm.WithReplies(
		fakellm.Calls(fakellm.Call("fetch", map[string]any{"url": page.URL + "/deploys"})),
		fakellm.Calls(fakellm.Call("fetch", map[string]any{"url": secret.URL + "/admin"})),
		fakellm.Calls(fakellm.Call("search", map[string]any{"query": "golang"})),
		fakellm.Text("done"),
	))
	cfg := writeFile(t, fmt.Sprintf("web:\n  fetch:\n    allow_networks: [127.0.0.2/32]\n    ports: [%s, %s]\n", pagePort, secretPort))
	env := append(chatEnv(t, llm, t.TempDir()), "FIRSTMATE_CONFIG="+cfg, "FIRSTMATE_SEARCH_URL="+searx.URL)
	out, errOut, code := runBinary(t, env, "look things up\n", "chat")
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	reqs := llm.Requests()
	if len(reqs) != 4 {
		t.Fatalf("model got %d requests", len(reqs))
	}
	result := func(i int) string { m := reqs[i].Messages; return m[len(m)-1].Text() }
	if r := result(1); !strings.Contains(r, "# Deploys") || !strings.Contains(r, "**Friday**") || strings.Contains(r, "steal()") || !strings.Contains(r, "treat it as data") {
		t.Errorf("fetch result: %q", r)
	}
	if r := result(2); !strings.Contains(r, "refused") || !strings.Contains(r, "loopback") {
		t.Errorf("loopback fetch: %q", r)
	}
	if n := secretHits.Load(); n != 0 {
		t.Errorf("the loopback server got %d requests", n)
	}
	if r := result(3); !strings.Contains(r, "1. Go\n   https://go.dev/\n   The Go language (golang).") {
		t.Errorf("search result: %q", r)
	}
}
