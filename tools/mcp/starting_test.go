package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/firstmate/firstmate/internal/testkit/fakemcp"
	"github.com/firstmate/firstmate/tools"
	"github.com/firstmate/firstmate/tools/mcp"
	"github.com/firstmate/firstmate/tools/sandbox"
)

// slowHTTPServer is the fake server over streamable HTTP on loopback,
// answering tools/list only after delay.
func slowHTTPServer(t *testing.T, delay time.Duration) string {
	t.Helper()
	srv := httptest.NewServer(fakemcp.Handler(fakemcp.Options{ListDelay: delay, Crash: func() {}}))
	t.Cleanup(srv.Close)
	return srv.URL + "/"
}

// muteHTTPServer takes requests and never answers them, until the client
// gives up: a server that never lists its tools. (A fake server with a
// long ListDelay would do, but the SDK's server waits for its handlers to
// end before it closes a session, and so would the test.)
func muteHTTPServer(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Read whole, so that the server sees the client hang up.
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), `"method":"notifications/`) {
			w.WriteHeader(http.StatusAccepted) // nothing to answer
			return
		}
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/"
}

// startHub starts a hub of the servers without waiting for anything, as
// serve does at boot, and returns it with a set over it.
func startHub(t *testing.T, cfg mcp.Config, servers ...mcp.Server) (*mcp.Hub, *tools.Set) {
	t.Helper()
	cfg.Servers, cfg.Dir = servers, t.TempDir()
	h := mcp.New(cfg)
	h.Start(t.Context())
	t.Cleanup(h.Close)
	return h, tools.NewSet(nil, tools.WithProvider(h))
}

// A turn that starts while a server is still listing its tools waits for
// the listing, and sees and calls its tools; the set's own methods (what
// firstmate reads at start) do not wait.
func TestTurnWaitsForFirstListing(t *testing.T) {
	const delay = 2 * time.Second
	h, set := startHub(t, mcp.Config{AllowNetworks: loopback},
		mcp.Server{Name: "wiki", URL: slowHTTPServer(t, delay)})
	// The listing takes delay at least: until then the hub is not ready,
	// and the set's own methods answer without the server's tools.
	if err := h.Ready(); err == nil || !strings.Contains(err.Error(), "wiki") {
		t.Errorf("ready while wiki lists its tools: %v", err)
	}
	if h.Starting() == nil {
		t.Error("Starting is nil while wiki lists its tools")
	}
	if names := set.Names(); slices.Contains(names, "wiki__echo") {
		t.Errorf("Names waited for the listing: %v", names)
	}
	if names := set.Now().Names(); slices.Contains(names, "wiki__echo") {
		t.Errorf("Now (what commands read) waited for the listing: %v", names)
	}

	cur := set.Current() // what a turn reads at its start
	if !slices.Contains(cur.Names(), "wiki__echo") {
		t.Fatalf("a turn started during the listing was offered %v", cur.Names())
	}
	res, err := cur.Call(t.Context(), nil, "wiki__echo", json.RawMessage(`{"text":"early bird"}`))
	if err != nil || res.Text != "early bird" {
		t.Fatalf("echo: %+v %v", res, err)
	}
	if h.Starting() != nil || h.Ready() != nil {
		t.Errorf("after the listing: Starting %v, Ready %v", h.Starting(), h.Ready())
	}
}

// A server that never lists its tools holds a turn no longer than
// StartWait after start, far less than a start's own timeout; the other
// servers' tools are offered, and once the wait is over nothing waits
// again.
func TestServerThatNeverListsDoesNotHoldTurns(t *testing.T) {
	const wait = 500 * time.Millisecond
	h, set := startHub(t, mcp.Config{AllowNetworks: loopback, StartWait: wait},
		mcp.Server{Name: "mute", URL: muteHTTPServer(t)},
		mcp.Server{Name: "wiki", URL: slowHTTPServer(t, 0)})
	began := time.Now()
	cur := set.Current()
	// The bound is StartWait; a start gives up after 30 s at the least.
	if took := time.Since(began); took > 20*time.Second {
		t.Errorf("a turn waited %v for a server that never lists its tools (StartWait %v)", took, wait)
	}
	names := cur.Names()
	if !slices.Contains(names, "wiki__echo") || slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, "mute__") }) {
		t.Errorf("offered %v", names)
	}
	if h.Starting() != nil {
		t.Error("Starting is not nil after StartWait")
	}
	if err := h.Ready(); err != nil {
		t.Errorf("not ready after StartWait: %v", err)
	}
	// A call of the mute server's tool is not possible: it is not known.
	if _, err := cur.Call(t.Context(), nil, "mute__echo", json.RawMessage(`{}`)); err == nil {
		t.Error("a tool of a server that never listed its tools ran")
	}
}

// A server that fails to start ends the wait at once, and is not waited
// for again while it is restarted.
func TestFailedServerIsNotWaitedFor(t *testing.T) {
	// Loopback is not allowed: the start fails at once.
	h, set := startHub(t, mcp.Config{StartWait: time.Hour}, mcp.Server{Name: "wiki", URL: slowHTTPServer(t, 0)})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	done := make(chan *tools.Set, 1)
	go func() { done <- set.Current() }()
	select {
	case cur := <-done:
		if len(cur.Names()) != 0 {
			t.Errorf("offered %v", cur.Names())
		}
	case <-ctx.Done():
		t.Fatal("a turn waits for a server that failed to start")
	}
	if h.Starting() != nil || h.Ready() != nil {
		t.Errorf("after the failed start: Starting %v, Ready %v", h.Starting(), h.Ready())
	}
}

// Closing the hub ends the wait of a turn.
func TestCloseEndsTheWait(t *testing.T) {
	h, set := startHub(t, mcp.Config{AllowNetworks: loopback, StartWait: time.Hour},
		mcp.Server{Name: "mute", URL: muteHTTPServer(t)})
	done := make(chan *tools.Set, 1)
	go func() { done <- set.Current() }()
	h.Close()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("a turn still waits after the hub was closed")
	}
}

// A hub never started (doctor's and admin's, before Start) makes nobody
// wait, and a nil hub is ready.
func TestNotStartedHubDoesNotWait(t *testing.T) {
	h := mcp.New(mcp.Config{Servers: []mcp.Server{{Name: "wiki", URL: "http://127.0.0.1:1/"}}})
	if h.Starting() != nil {
		t.Error("a hub not started makes turns wait")
	}
	if h.Ready() == nil {
		t.Error("a hub not started says it is ready")
	}
	var none *mcp.Hub
	if none.Starting() != nil || none.Ready() != nil {
		t.Error("a nil hub is not ready")
	}
}

// Stdio servers start once the host's sandbox probe has ended: the wait
// for them counts from then, not from Start.
func TestWaitCountsFromTheSandbox(t *testing.T) {
	const wait = 100 * time.Millisecond
	probed := make(chan struct{})
	cfg := mcp.Config{StartWait: wait, Sandbox: func(ctx context.Context) (*sandbox.Sandbox, error) {
		select {
		case <-probed:
			return nil, errors.New("no sandbox in this test")
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}}
	h, set := startHub(t, cfg, mcp.Server{Name: "notes", Command: []string{"/bin/true"}})
	time.Sleep(3 * wait)
	if h.Starting() == nil {
		t.Fatal("the wait ended before the sandbox probe did")
	}
	close(probed)
	set.Current()
	if h.Starting() != nil {
		t.Error("still starting after the server failed")
	}
}
