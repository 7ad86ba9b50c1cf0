package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/internal/config"
	"github.com/firstmate/firstmate/internal/testkit/fakellm"
)

// testAdapter submits one message when it starts and records the answer.
type testAdapter struct {
	mu      sync.Mutex
	answers []string
}

func (a *testAdapter) Name() string                                        { return "test" }
func (a *testAdapter) Routes(*http.ServeMux, agent.Submitter)              {}
func (a *testAdapter) Drain(context.Context)                               {}
func (a *testAdapter) Thread(agent.SessionKey, agent.Inbound) agent.Thread { return a }
func (a *testAdapter) Emit(_ context.Context, ev agent.Event) error {
	if ans, ok := ev.(agent.Answer); ok {
		a.mu.Lock()
		a.answers = append(a.answers, ans.Text)
		a.mu.Unlock()
	}
	return nil
}

func (a *testAdapter) Run(ctx context.Context, d agent.Submitter) error {
	in := agent.Inbound{Key: agent.SessionKey{Platform: "test", Chat: "C1"}, MessageID: "1", Text: "hi", Addressed: true}
	if err := d.Submit(ctx, in); err != nil {
		return err
	}
	<-ctx.Done()
	return nil
}

func (a *testAdapter) got() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.answers...)
}

func testApp(t *testing.T) *app {
	llm := fakellm.New(t, fakellm.WithHandler(func(*fakellm.Request) fakellm.Reply { return fakellm.Text("hello") }))
	env := map[string]string{"OPENAI_BASE_URL": llm.URL(), "FIRSTMATE_MODEL": "m", "FIRSTMATE_DATA_DIR": t.TempDir()}
	cfg, err := config.Load("", func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	a, err := newApp(t.Context(), cfg, slog.New(slog.DiscardHandler), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.tools.close) // the sandbox probe, if it still runs
	return a
}

func TestServeRunsAdaptersAndHealth(t *testing.T) {
	a := testApp(t)
	defer a.store.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ad := &testAdapter{}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- runServe(ctx, a, ln, []adapter{ad}) }()

	deadline := time.Now().Add(10 * time.Second)
	for len(ad.got()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no answer from the dispatcher")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if ad.got()[0] != "hello" {
		t.Fatalf("answers %q", ad.got())
	}
	resp, err := http.Get("http://" + ln.Addr().String() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "ok\n" {
		t.Fatalf("healthz: %d %q", resp.StatusCode, body)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("serve did not stop")
	}
	if _, err := http.Get("http://" + ln.Addr().String() + "/healthz"); err == nil {
		t.Fatal("listener still answers after shutdown")
	}
}

func TestHealthzReportsStoreDown(t *testing.T) {
	a := testApp(t)
	a.store.Close()
	rec := httptest.NewRecorder()
	healthz(a.store).ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), "GET", "/healthz", nil))
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "store unavailable") {
		t.Fatalf("healthz with a closed store: %d %q", rec.Code, rec.Body.String())
	}
}
