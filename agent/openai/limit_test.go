package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/firstmate/firstmate/agent"
)

// The hostile servers below offer this much, as the one that took
// firstmate to 4.7 GB did; a client that stops reading takes a few MiB of
// it (what it read, plus what the sockets buffer).
const (
	hostileBytes = 200 << 20
	mostWritten  = 32 << 20 // what the server may write before the client stops it
	mostHeap     = 64 << 20 // the heap in use while it does
)

// endpoint is a fake /v1 endpoint with its own client, so that a test
// can tell what the server managed to write and that nothing is left
// running afterwards.
type endpoint struct {
	srv      *httptest.Server
	client   *http.Client
	requests atomic.Int32
	written  atomic.Int64
	quit     chan struct{} // closed at the end of the test; hanging handlers return
}

// newEndpoint serves handler, which writes through write so that the
// bytes are counted. noLeaks is checked after the server closes.
func newEndpoint(t *testing.T, handler func(e *endpoint, w http.ResponseWriter, r *http.Request, n int)) *endpoint {
	t.Helper()
	noLeaks(t)
	e := &endpoint{quit: make(chan struct{})}
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handler(e, w, r, int(e.requests.Add(1)))
	}))
	e.client = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	t.Cleanup(e.srv.Close)
	t.Cleanup(e.client.CloseIdleConnections)
	t.Cleanup(func() { close(e.quit) })
	return e
}

// write writes b and flushes it, counting what got through.
func (e *endpoint) write(w http.ResponseWriter, b []byte) bool {
	n, err := w.Write(b)
	e.written.Add(int64(n))
	return err == nil && http.NewResponseController(w).Flush() == nil
}

// endless writes head, then body over and over until hostileBytes are
// written or the client goes away.
func (e *endpoint) endless(w http.ResponseWriter, status int, contentType string, head, body []byte) {
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(status)
	if !e.write(w, head) {
		return
	}
	for e.written.Load() < hostileBytes {
		if !e.write(w, body) {
			return
		}
	}
}

// hang waits until the client gives up or the test ends.
func (e *endpoint) hang(r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-e.quit:
	}
}

// model returns a model for e that makes one attempt, unless mut says
// otherwise, and does not sleep between attempts.
func (e *endpoint) model(t *testing.T, mut ...func(*Config)) *Model {
	t.Helper()
	cfg := Config{BaseURL: e.srv.URL + "/v1", Model: "m", MaxRetries: -1, Timeout: 5 * time.Second, HTTPClient: e.client}
	for _, f := range mut {
		f(&cfg)
	}
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m.sleep = func(ctx context.Context, _ time.Duration) error { return ctx.Err() }
	return m
}

// noLeaks fails t if goroutines started during it outlive it. It runs
// after the cleanups registered later (servers, clients).
func noLeaks(t *testing.T) {
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		// Closed connections take a moment to wind down.
		for deadline := time.Now().Add(5 * time.Second); runtime.NumGoroutine() > before && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
		if n := runtime.NumGoroutine(); n > before {
			buf := make([]byte, 1<<20)
			t.Errorf("%d goroutines before the test, %d after:\n%s", before, n, buf[:runtime.Stack(buf, true)])
		}
	})
}

// watchHeap samples the heap in use until the returned function is
// called, which returns the highest figure seen.
func watchHeap() (peak func() uint64) {
	runtime.GC()
	var most uint64
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			most = max(most, ms.HeapInuse)
			select {
			case <-quit:
				return
			case <-tick.C:
			}
		}
	})
	return func() uint64 {
		close(quit)
		wg.Wait()
		return most
	}
}

// event is one server-sent event carrying a chunk with delta.
func event(delta map[string]any) []byte {
	b, err := json.Marshal(map[string]any{
		"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m",
		"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": nil}},
	})
	if err != nil {
		panic(err)
	}
	return fmt.Appendf(nil, "data: %s\n\n", b)
}

func textDelta(s string) map[string]any { return map[string]any{"content": s} }

func callDelta(id, name, args string) map[string]any {
	fn := map[string]any{"arguments": args}
	call := map[string]any{"index": 0, "function": fn}
	if id != "" {
		call["id"], call["type"] = id, "function"
	}
	if name != "" {
		fn["name"] = name
	}
	return map[string]any{"tool_calls": []any{call}}
}

var (
	roleEvent = event(map[string]any{"role": "assistant", "content": ""})
	stopEvent = []byte(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n")
)

// wantTooLarge checks that err is the limit's error, after one attempt.
func wantTooLarge(t *testing.T, err error, want string) {
	t.Helper()
	var me *agent.ModelError
	if !errors.As(err, &me) || !errors.Is(err, ErrTooLarge) || !errors.Is(err, agent.ErrModelUnavailable) {
		t.Fatalf("err = %v (%T), want a *agent.ModelError for ErrTooLarge", err, err)
	}
	if !strings.Contains(err.Error(), want) {
		t.Errorf("message %q does not contain %q", err, want)
	}
	if me.Attempts != 1 {
		t.Errorf("%d attempts, want 1: a response too large is not retried", me.Attempts)
	}
}

// checkStopped checks that the client stopped reading early and kept the
// heap small while the server tried to send hostileBytes.
func checkStopped(t *testing.T, e *endpoint, peak uint64) {
	t.Helper()
	e.srv.Close() // waits for the handler, which ends when the client hangs up
	written := e.written.Load()
	t.Logf("the server wrote %.1f MiB of %d MiB; peak heap in use %.1f MiB",
		float64(written)/(1<<20), hostileBytes>>20, float64(peak)/(1<<20))
	if written > mostWritten {
		t.Errorf("the server wrote %d bytes before the client stopped reading, want at most %d", written, mostWritten)
	}
	if peak > mostHeap {
		t.Errorf("peak heap in use %d bytes, want at most %d", peak, mostHeap)
	}
}

// A server that streams one tool call's arguments without end: the call
// ends with the limit's error once the arguments pass the default 1 MiB,
// is not retried, and the heap stays small.
func TestEndlessToolCallIsCut(t *testing.T) {
	e := newEndpoint(t, func(e *endpoint, w http.ResponseWriter, r *http.Request, _ int) {
		head := slices.Concat(roleEvent, event(callDelta("call_1", "write", `{"path":"a.txt","content":"`)))
		e.endless(w, http.StatusOK, "text/event-stream", head, event(callDelta("", "", strings.Repeat("a", 8<<10))))
	})
	m := e.model(t, func(c *Config) { c.MaxRetries = 0 }) // the default retries
	peak := watchHeap()
	_, err := m.Complete(context.Background(), userReq("write a file"))
	p := peak()
	wantTooLarge(t, err, `the model's response passed the 1 MiB limit (llm.max_response_kb) in the arguments of its "write" call`)
	checkStopped(t, e, p)
	if n := e.requests.Load(); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
}

// Endless text, and endless calls with no arguments, end the same way;
// so do a line that never ends and events that carry nothing kept
// (reasoning), which pass the limits on one event and on the stream.
func TestEndlessStreamsAreCut(t *testing.T) {
	big := strings.Repeat("a", 8<<10)
	tests := []struct {
		name       string
		limit      int
		head, body []byte
		want       string
	}{
		{"text", 0, roleEvent, event(textDelta(big)), "passed the 1 MiB limit (llm.max_response_kb) in its text"},
		// Without IDs, each whole call is a new one (see callAccumulator).
		{"new calls", 0, roleEvent, event(callDelta("", "ls", "{}")), "in its tool calls (4033 of them)"},
		{"one endless event", 0, []byte(`data: {"choices":[{"index":0,"delta":{"content":"`), []byte(big),
			"passed the 1 MiB limit (llm.max_response_kb): one event of its stream ran past 4 MiB"},
		{"endless reasoning", 64 << 10, roleEvent, event(map[string]any{"reasoning_content": big[:1024]}),
			"passed the 64 KiB limit (llm.max_response_kb): its stream ran past 4 MiB (64 times the limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEndpoint(t, func(e *endpoint, w http.ResponseWriter, r *http.Request, _ int) {
				e.endless(w, http.StatusOK, "text/event-stream", tt.head, tt.body)
			})
			m := e.model(t, func(c *Config) { c.MaxResponseBytes = tt.limit })
			req := userReq("hi")
			var shown int
			req.OnText = func(s string) { shown += len(s) }
			peak := watchHeap()
			_, err := m.Complete(context.Background(), req)
			p := peak()
			wantTooLarge(t, err, tt.want)
			checkStopped(t, e, p)
			if shown > DefaultMaxResponseBytes {
				t.Errorf("%d bytes of text shown, more than the limit", shown)
			}
		})
	}
}

// A server that ignores "stream": true and sends a huge JSON body, in one
// line or pretty-printed: what is not an event is held by go-openai, so it
// is capped too.
func TestHugeBodyInsteadOfStream(t *testing.T) {
	for _, pretty := range []bool{false, true} {
		t.Run(fmt.Sprintf("pretty=%v", pretty), func(t *testing.T) {
			e := newEndpoint(t, func(e *endpoint, w http.ResponseWriter, r *http.Request, _ int) {
				head := []byte(`{"choices":[{"index":0,"message":{"role":"assistant","content":"`)
				body := []byte(strings.Repeat("a", 16<<10))
				if pretty {
					head, body = []byte("{\n  \"choices\": [\n"), []byte(`    "`+strings.Repeat("a", 16<<10)+"\",\n")
				}
				e.endless(w, http.StatusOK, "application/json", head, body)
			})
			peak := watchHeap()
			_, err := e.model(t).Complete(context.Background(), userReq("hi"))
			p := peak()
			wantTooLarge(t, err, "more than 4 MiB arrived outside stream events (does the server support streaming?)")
			checkStopped(t, e, p)
		})
	}
}

// Bodies that are not streams are capped: the model list, and an error's
// body, which is cut short and reported by its status.
func TestHugeNonStreamedBodies(t *testing.T) {
	t.Run("model list", func(t *testing.T) {
		e := newEndpoint(t, func(e *endpoint, w http.ResponseWriter, r *http.Request, _ int) {
			e.endless(w, http.StatusOK, "application/json", []byte(`{"object":"list","data":[`), []byte(`{"id":"model-0123456789","object":"model"},`))
		})
		peak := watchHeap()
		_, err := e.model(t, func(c *Config) { c.MaxResponseBytes = 64 << 10 }).ListModels(context.Background())
		p := peak()
		wantTooLarge(t, err, "passed the 64 KiB limit (llm.max_response_kb): the server's answer ran past 256 KiB")
		checkStopped(t, e, p)
	})
	t.Run("error body", func(t *testing.T) {
		e := newEndpoint(t, func(e *endpoint, w http.ResponseWriter, r *http.Request, _ int) {
			e.endless(w, http.StatusInternalServerError, "text/plain", []byte("overloaded "), []byte(strings.Repeat("x", 16<<10)))
		})
		peak := watchHeap()
		_, err := e.model(t).Complete(context.Background(), userReq("hi"))
		p := peak()
		var me *agent.ModelError
		if !errors.As(err, &me) || me.Status != 500 || !strings.Contains(err.Error(), "overloaded xxx") {
			t.Fatalf("err = %v", err)
		}
		checkStopped(t, e, p)
	})
}

// A reply just under the limit, streamed a few bytes per event as OpenAI
// does (its framing many times the text), arrives whole; a little more
// fails.
func TestReplyAtTheLimit(t *testing.T) {
	const limit = 64 << 10
	text := strings.Repeat("abcd", 8<<10) // 32 KiB in 8192 events
	const id, name, prefix, suffix = "call_1", "write", `{"path":"a.txt","content":"`, `"}`
	// What the reply counts: the text, the call's ID, name, arguments and
	// overhead. under leaves 10 bytes to spare.
	under := limit - len(text) - len(id) - len(name) - callOverhead - len(prefix) - len(suffix) - 10
	for _, tt := range []struct {
		name string
		fill int
		ok   bool
	}{{"just under", under, true}, {"just over", under + 11, false}} {
		t.Run(tt.name, func(t *testing.T) {
			args := prefix + strings.Repeat("x", tt.fill) + suffix
			e := newEndpoint(t, func(e *endpoint, w http.ResponseWriter, r *http.Request, _ int) {
				w.Header().Set("Content-Type", "text/event-stream")
				b := slices.Clone(roleEvent)
				for i := 0; i < len(text); i += 4 {
					b = append(b, event(textDelta(text[i:i+4]))...)
				}
				b = append(b, event(callDelta(id, name, ""))...)
				for i := 0; i < len(args); i += 100 {
					b = append(b, event(callDelta("", "", args[i:min(i+100, len(args))]))...)
				}
				e.write(w, append(b, stopEvent...))
			})
			resp, err := e.model(t, func(c *Config) { c.MaxResponseBytes = limit }).Complete(context.Background(), userReq("hi"))
			if !tt.ok {
				wantTooLarge(t, err, `passed the 64 KiB limit (llm.max_response_kb) in the arguments of its "write" call`)
				return
			}
			if err != nil {
				t.Fatalf("streamed %d bytes: %v", e.written.Load(), err)
			}
			if resp.Message.Content != text || len(resp.Message.ToolCalls) != 1 || len(resp.Message.ToolCalls[0].Args) != len(args) {
				t.Errorf("got %d bytes of text and calls %d, want %d bytes and one call", len(resp.Message.Content), len(resp.Message.ToolCalls), len(text))
			}
			if w := e.written.Load(); w < 8*limit {
				t.Errorf("the stream was only %d bytes: not the framing-heavy case this test is for", w)
			}
		})
	}
}

// A stream that stops halfway ends with the stall error after
// StallTimeout, though Timeout is far longer.
func TestStall(t *testing.T) {
	e := newEndpoint(t, func(e *endpoint, w http.ResponseWriter, r *http.Request, _ int) {
		w.Header().Set("Content-Type", "text/event-stream")
		if e.write(w, slices.Concat(roleEvent, event(textDelta("The answer is")))) {
			e.hang(r)
		}
	})
	m := e.model(t, func(c *Config) { c.StallTimeout, c.Timeout = 200*time.Millisecond, time.Minute })
	_, err := m.Complete(context.Background(), userReq("hi"))
	var me *agent.ModelError
	if !errors.As(err, &me) || !errors.Is(err, ErrStalled) {
		t.Fatalf("err = %v (%T), want a *agent.ModelError for ErrStalled", err, err)
	}
	if want := "the model's stream stalled: no data for 200ms (llm.stall_timeout)"; !strings.Contains(err.Error(), want) {
		t.Errorf("message %q does not contain %q", err, want)
	}
}

// A stall is retried like a timeout while no text has been shown; once
// text was shown, it is final.
func TestStallRetry(t *testing.T) {
	e := newEndpoint(t, func(e *endpoint, w http.ResponseWriter, r *http.Request, n int) {
		w.Header().Set("Content-Type", "text/event-stream")
		if n == 1 {
			if e.write(w, event(textDelta("lost"))) {
				e.hang(r)
			}
			return
		}
		e.write(w, slices.Concat(event(textDelta("found")), stopEvent))
	})
	m := e.model(t, func(c *Config) { c.StallTimeout, c.MaxRetries = 100*time.Millisecond, 1 })
	resp, err := m.Complete(context.Background(), userReq("hi"))
	if err != nil || resp.Message.Content != "found" || e.requests.Load() != 2 {
		t.Fatalf("resp %+v, err %v, %d requests", resp, err, e.requests.Load())
	}

	e.requests.Store(0)
	req := userReq("hi")
	collect(req)
	_, err = m.Complete(context.Background(), req)
	if !errors.Is(err, ErrStalled) || !strings.Contains(err.Error(), "the answer broke off after it had started") || e.requests.Load() != 1 {
		t.Fatalf("err %v, %d requests", err, e.requests.Load())
	}
}

// A pause before the output begins is the model thinking: an event with
// only a role does not start the stall clock, Timeout still applies.
func TestThinkingIsNotAStall(t *testing.T) {
	e := newEndpoint(t, func(e *endpoint, w http.ResponseWriter, r *http.Request, _ int) {
		w.Header().Set("Content-Type", "text/event-stream")
		if !e.write(w, roleEvent) {
			return
		}
		select {
		case <-time.After(300 * time.Millisecond):
		case <-r.Context().Done():
			return
		}
		e.write(w, slices.Concat(event(textDelta("thought it over")), stopEvent))
	})
	m := e.model(t, func(c *Config) { c.StallTimeout = 100 * time.Millisecond })
	resp, err := m.Complete(context.Background(), userReq("hi"))
	if err != nil || resp.Message.Content != "thought it over" {
		t.Fatalf("resp %+v, err %v", resp, err)
	}
}

func TestLimitBody(t *testing.T) {
	// Every way of cutting a stream into reads counts the same.
	stream := string(roleEvent) + ": keep-alive\n\n" + "  data: {}\r\n" + "event: x\n" + string(stopEvent)
	for size := 1; size <= len(stream); size++ {
		b := &limitedBody{lim: bodyLimits{line: 1 << 20, outside: 1 << 20}}
		for i := 0; i < len(stream); i += size {
			if err := b.count([]byte(stream[i:min(i+size, len(stream))])); err != nil {
				t.Fatal(err)
			}
		}
		if want := int64(len(": keep-alive") + len("event: x")); b.outsideDone != want || b.line != 0 {
			t.Fatalf("reads of %d: %d bytes outside events, %d in the line; want %d, 0", size, b.outsideDone, b.line, want)
		}
	}
	for _, tt := range []struct {
		n    int64
		want string
	}{{1 << 20, "1 MiB"}, {64 << 10, "64 KiB"}, {1000, "1000 bytes"}, {3<<20 + 1<<10, "3073 KiB"}} {
		if got := formatSize(tt.n); got != tt.want {
			t.Errorf("formatSize(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
	if got := shortDuration(time.Minute); got != "1m" {
		t.Errorf("shortDuration(1m) = %q", got)
	}
}

func TestReplyTooLargeMessage(t *testing.T) {
	var a callAccumulator
	whole, _ := a.add(delta(idx(0), "call_1", "write", `{"content":"`+strings.Repeat("x", 1000)+`"}`))
	empty, _ := a.add(delta(idx(1), "call_2", "ls", "{}"))
	nameless, _ := a.add(delta(idx(2), "call_3", "", "{"))
	for _, tt := range []struct {
		err  error
		want string
	}{
		{replyTooLarge(1<<20, nil, false, 0), "the model's response passed the 1 MiB limit (llm.max_response_kb) in its text, so the reply was dropped"},
		{replyTooLarge(1<<20, whole, true, 1), `in the arguments of its "write" call, so`},
		{replyTooLarge(1<<20, empty, true, 2), "in its tool calls (2 of them), so"},
		{replyTooLarge(1<<20, nameless, false, 3), "in the arguments of a tool call, so"},
	} {
		if !strings.Contains(tt.err.Error(), tt.want) || !errors.Is(tt.err, ErrTooLarge) {
			t.Errorf("%q does not contain %q", tt.err, tt.want)
		}
	}
}
