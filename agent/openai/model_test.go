package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/internal/testkit/fakellm"
)

// newModel returns a model for srv whose waits between attempts are
// recorded instead of slept.
func newModel(t *testing.T, srv *fakellm.Server, mut ...func(*Config)) (*Model, *[]time.Duration) {
	t.Helper()
	cfg := Config{BaseURL: srv.URL(), Model: "fake-model", Timeout: 5 * time.Second}
	for _, f := range mut {
		f(&cfg)
	}
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	waits := &[]time.Duration{}
	m.sleep = func(ctx context.Context, d time.Duration) error {
		mu.Lock()
		*waits = append(*waits, d)
		mu.Unlock()
		return ctx.Err()
	}
	return m, waits
}

func userReq(text string) *agent.Request {
	return &agent.Request{System: "You are firstmate.", Messages: []agent.Message{{Role: agent.RoleUser, Content: text}}}
}

// collect sets req.OnText to gather the streamed deltas.
func collect(req *agent.Request) *[]string {
	var deltas []string
	req.OnText = func(s string) { deltas = append(deltas, s) }
	return &deltas
}

func TestCompleteStreamsText(t *testing.T) {
	srv := fakellm.New(t, fakellm.WithReplies(fakellm.Text("Hello there, sailor. ⚓ All is well.")))
	m, _ := newModel(t, srv)
	req := userReq("hi")
	req.Tools = []agent.ToolSpec{testTools[4], testTools[1]} // unsorted on purpose
	deltas := collect(req)

	resp, err := m.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	want := "Hello there, sailor. ⚓ All is well."
	if resp.Message.Content != want || resp.Message.Role != agent.RoleAssistant || len(resp.Message.ToolCalls) != 0 {
		t.Errorf("message = %+v", resp.Message)
	}
	if len(*deltas) < 5 || strings.Join(*deltas, "") != want {
		t.Errorf("deltas = %q", *deltas)
	}
	if resp.Usage.PromptTokens == 0 || resp.Usage.CompletionTokens == 0 {
		t.Errorf("usage = %+v", resp.Usage)
	}

	got := srv.Requests()[0]
	if !got.Stream || got.StreamOptions == nil || !got.StreamOptions.IncludeUsage {
		t.Errorf("stream = %v, options = %+v", got.Stream, got.StreamOptions)
	}
	if got.Model != "fake-model" || len(got.Messages) != 2 || got.Messages[0].Role != "system" ||
		got.Messages[0].Text() != "You are firstmate." || got.Messages[1].Text() != "hi" {
		t.Errorf("messages = %+v", got.Messages)
	}
	if names := got.ToolNames(); !slices.Equal(names, []string{"ls", "write"}) {
		t.Errorf("tools = %v, want sorted", names)
	}
	if p := string(got.Tools[0].Function.Parameters); p != string(testTools[1].Schema) {
		t.Errorf("ls parameters = %s", p)
	}
	if got.Temperature != nil || got.MaxTokens != 0 || len(got.Stop) != 0 {
		t.Errorf("unasked options sent: %s", got.Body)
	}
	if h := got.Header["Authorization"]; len(h) != 0 {
		t.Errorf("Authorization sent without a key: %v", h)
	}
}

func TestCompleteToolCalls(t *testing.T) {
	tests := []struct {
		name string
		opts []fakellm.Option
	}{
		{"openai", nil},
		{"parallel at index 0", []fakellm.Option{fakellm.ParallelAtIndexZero()}},
		{"no call IDs", []fakellm.Option{fakellm.WithoutCallIDs()}},
		{"no call IDs, index 0", []fakellm.Option{fakellm.WithoutCallIDs(), fakellm.ParallelAtIndexZero(), fakellm.WithChunkSize(1)}},
		{"big chunks", []fakellm.Option{fakellm.WithChunkSize(1000)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := fakellm.New(t, append(tt.opts, fakellm.WithReplies(fakellm.Reply{
				Text: "Looking.",
				ToolCalls: []fakellm.ToolCall{
					fakellm.Call("ls", map[string]string{"path": "."}),
					fakellm.Call("jobs", ""),
					fakellm.Call("write", `{"path": "hello.txt", "content": "hello \"world\"\n"}`),
					fakellm.Call("read", `{"path":"a","limit":20}`),
				},
			}))...)
			m, _ := newModel(t, srv)
			resp, err := m.Complete(context.Background(), userReq("go"))
			if err != nil {
				t.Fatal(err)
			}
			calls := resp.Message.ToolCalls
			want := []struct{ name, args string }{
				{"ls", `{"path":"."}`},
				{"jobs", `{}`},
				{"write", `{"path":"hello.txt","content":"hello \"world\"\n"}`},
				{"read", `{"path":"a","limit":20}`},
			}
			if len(calls) != len(want) {
				t.Fatalf("calls = %+v", calls)
			}
			ids := map[string]bool{}
			for i, w := range want {
				if calls[i].Name != w.name || string(calls[i].Args) != w.args {
					t.Errorf("call %d = %s %s, want %s %s", i, calls[i].Name, calls[i].Args, w.name, w.args)
				}
				if calls[i].ID == "" || ids[calls[i].ID] {
					t.Errorf("call %d: ID %q empty or repeated", i, calls[i].ID)
				}
				ids[calls[i].ID] = true
			}
			if resp.Message.Content != "Looking." {
				t.Errorf("content = %q", resp.Message.Content)
			}
		})
	}
}

// The whole conversation goes back in the wire shape, in order, and the
// fake (which validates like OpenAI) accepts it.
func TestHistoryConversionNative(t *testing.T) {
	srv := fakellm.New(t, fakellm.WithReplies(fakellm.Text("ok")))
	m, _ := newModel(t, srv)
	hist := []agent.Message{
		{Role: agent.RoleUser, Content: "make a file"},
		{Role: agent.RoleAssistant, Content: "Sure.", ToolCalls: []agent.ToolCall{
			{ID: "c1", Name: "write", Args: json.RawMessage(`{"path":"a","content":"x"}`)},
			{ID: "c2", Name: "ls"},
		}},
		{Role: agent.RoleTool, ToolCallID: "c1", ToolName: "write", Content: "wrote 1 byte"},
		{Role: agent.RoleTool, ToolCallID: "c2", ToolName: "ls", Content: ""},
		{Role: agent.RoleAssistant, Content: "Done."},
		{Role: agent.RoleAssistant},
		{Role: agent.RoleUser, Content: "thanks"},
	}
	if _, err := m.Complete(context.Background(), &agent.Request{System: "sys", Messages: hist}); err != nil {
		t.Fatal(err)
	}
	got := srv.Requests()[0].Messages
	type wire struct{ role, content, callID, calls string }
	var flat []wire
	for _, w := range got {
		var calls []string
		for _, c := range w.ToolCalls {
			calls = append(calls, c.ID+":"+c.Type+":"+c.Function.Name+c.Function.Arguments)
		}
		flat = append(flat, wire{w.Role, w.Text(), w.ToolCallID, strings.Join(calls, " ")})
	}
	want := []wire{
		{"system", "sys", "", ""},
		{"user", "make a file", "", ""},
		{"assistant", "Sure.", "", `c1:function:write{"path":"a","content":"x"} c2:function:ls{}`},
		{"tool", "wrote 1 byte", "c1", ""},
		{"tool", "(no output)", "c2", ""},
		{"assistant", "Done.", "", ""},
		{"user", "thanks", "", ""},
	}
	if !slices.Equal(flat, want) {
		t.Errorf("wire messages:\n got %q\nwant %q", flat, want)
	}
}

// Arguments that are not JSON become a call carrying the problem; sent
// back, the call is valid on the wire and its result explains the problem.
func TestMalformedNativeArgs(t *testing.T) {
	srv := fakellm.New(t, fakellm.WithReplies(
		fakellm.Reply{ToolCalls: []fakellm.ToolCall{fakellm.Call("write", `{"path": "a", "content": "unfinished`)}, FinishReason: "length"},
		fakellm.Text("retrying"),
	))
	m, _ := newModel(t, srv)
	req := userReq("go")
	resp, err := m.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	c := resp.Message.ToolCalls[0]
	problem, raw, ok := parseErrorOf(c.Args)
	if !ok || !strings.Contains(problem, "not valid JSON") || !strings.Contains(problem, "length limit") || raw != `{"path": "a", "content": "unfinished` {
		t.Fatalf("args = %s", c.Args)
	}
	req.Messages = append(req.Messages, resp.Message,
		agent.Message{Role: agent.RoleTool, ToolCallID: c.ID, ToolName: "write", Content: "error: invalid arguments for write: ..."})
	if _, err := m.Complete(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	sent := srv.Requests()[1].Messages
	if res := sent[len(sent)-1].Text(); !strings.Contains(res, "could not be read") || !strings.Contains(res, "not valid JSON") {
		t.Errorf("tool result sent = %q", res)
	}
}

func TestStreamWithoutDone(t *testing.T) {
	srv := fakellm.New(t, fakellm.WithReplies(fakellm.Reply{Text: "no done here", NoDone: true}))
	m, _ := newModel(t, srv)
	resp, err := m.Complete(context.Background(), userReq("hi"))
	if err != nil || resp.Message.Content != "no done here" {
		t.Fatalf("resp = %+v, err = %v", resp, err)
	}
}

func TestOptionsSent(t *testing.T) {
	zero := 0.0
	srv := fakellm.New(t, fakellm.WithReplies(fakellm.Text("a"), fakellm.Text("b")), fakellm.WithAPIKey("sk-test"))
	m, _ := newModel(t, srv, func(c *Config) { c.Temperature, c.MaxTokens, c.APIKey = &zero, 100, "sk-test" })
	if _, err := m.Complete(context.Background(), userReq("hi")); err != nil {
		t.Fatal(err)
	}
	got := srv.Requests()[0]
	if got.Temperature == nil || *got.Temperature > 1e-6 || got.MaxTokens != 100 {
		t.Errorf("temperature %v, max_tokens %d in %s", got.Temperature, got.MaxTokens, got.Body)
	}
	if a := got.Header["Authorization"]; len(a) != 1 || a[0] != "Bearer sk-test" {
		t.Errorf("Authorization = %v", a)
	}

	r, _ := newModel(t, srv, func(c *Config) { c.Model, c.MaxTokens, c.APIKey = "o3-mini", 50, "sk-test" })
	if _, err := r.Complete(context.Background(), userReq("hi")); err != nil {
		t.Fatal(err)
	}
	if got := srv.Requests()[1]; got.MaxCompletionTokens != 50 || got.MaxTokens != 0 {
		t.Errorf("reasoning model got max_tokens %d, max_completion_tokens %d", got.MaxTokens, got.MaxCompletionTokens)
	}
}

func TestRetries(t *testing.T) {
	text := fakellm.Text("finally")
	date := time.Now().Add(30 * time.Second).UTC().Format(http.TimeFormat)
	tests := []struct {
		name     string
		replies  []fakellm.Reply
		onText   bool
		wantReqs int
		// the model's waits; a negative entry means "some backoff"
		wantWaits []time.Duration
	}{
		{"500 then ok", []fakellm.Reply{fakellm.Error(500, "boom"), text}, true, 2, []time.Duration{-1}},
		{"502 503 then ok", []fakellm.Reply{fakellm.Error(502, ""), fakellm.Error(503, ""), text}, true, 3, []time.Duration{-1, -1}},
		{"429 retry-after seconds", []fakellm.Reply{fakellm.RateLimited("7"), text}, true, 2, []time.Duration{7 * time.Second}},
		{"429 retry-after fraction", []fakellm.Reply{fakellm.RateLimited("0.5"), text}, true, 2, []time.Duration{500 * time.Millisecond}},
		{"429 retry-after date", []fakellm.Reply{fakellm.RateLimited(date), text}, true, 2, []time.Duration{30 * time.Second}},
		{"429 without retry-after", []fakellm.Reply{fakellm.RateLimited(""), text}, true, 2, []time.Duration{-1}},
		{"408", []fakellm.Reply{fakellm.Error(408, ""), text}, true, 2, []time.Duration{-1}},
		{"dropped connection", []fakellm.Reply{fakellm.Dropped(), text}, true, 2, []time.Duration{-1}},
		{"dropped before any text", []fakellm.Reply{{Text: "lost", Fault: fakellm.Drop, FaultAfter: 1}, text}, true, 2, []time.Duration{-1}},
		{"dropped after text, nobody watching", []fakellm.Reply{{Text: "lost words", Fault: fakellm.Drop, FaultAfter: 3}, text}, false, 2, []time.Duration{-1}},
		{"dropped after tool-call pieces only", []fakellm.Reply{{ToolCalls: []fakellm.ToolCall{fakellm.Call("ls", `{"path":"."}`)}, Fault: fakellm.Drop, FaultAfter: 3}, text}, true, 2, []time.Duration{-1}},
		{"error event before text", []fakellm.Reply{{Fault: fakellm.ErrorEvent, FaultAfter: 1, Message: "overloaded"}, text}, true, 2, []time.Duration{-1}},
		{"empty stream", []fakellm.Reply{{Fault: fakellm.ErrorEvent, FaultAfter: 0}, text}, true, 2, []time.Duration{-1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := fakellm.New(t, fakellm.WithReplies(tt.replies...))
			m, waits := newModel(t, srv)
			req := userReq("hi")
			var deltas *[]string
			if tt.onText {
				deltas = collect(req)
			}
			resp, err := m.Complete(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Message.Content != "finally" {
				t.Errorf("content = %q", resp.Message.Content)
			}
			if deltas != nil && strings.Join(*deltas, "") != "finally" {
				t.Errorf("streamed %q", *deltas)
			}
			if n := len(srv.Requests()); n != tt.wantReqs {
				t.Errorf("%d requests, want %d", n, tt.wantReqs)
			}
			// Each attempt encodes its body afresh (the last one's was let
			// go once sent): the same bytes every time.
			for i, r := range srv.Requests() {
				if first := srv.Requests()[0].Body; len(r.Body) == 0 || string(r.Body) != string(first) {
					t.Errorf("attempt %d sent %d bytes, not the first's %d", i+1, len(r.Body), len(first))
				}
			}
			if len(*waits) != len(tt.wantWaits) {
				t.Fatalf("waits = %v, want %v", *waits, tt.wantWaits)
			}
			for i, w := range tt.wantWaits {
				got := (*waits)[i]
				switch {
				case w < 0 && (got < 0 || got > DefaultRetryBase<<i):
					t.Errorf("wait %d = %v, want a backoff up to %v", i, got, DefaultRetryBase<<i)
				case w >= 0 && (got > w || got < w-2*time.Second):
					t.Errorf("wait %d = %v, want about %v", i, got, w)
				}
			}
		})
	}
}

func TestFailures(t *testing.T) {
	tests := []struct {
		name       string
		replies    []fakellm.Reply
		cfg        func(*Config)
		status     int
		attempts   int
		retryAfter time.Duration
		msg        string
	}{
		{"400 is not retried", []fakellm.Reply{fakellm.Error(400, "context too long")}, nil, 400, 1, 0, "HTTP 400 after 1 attempts: context too long"},
		{"404 hints at the URL", []fakellm.Reply{fakellm.Error(404, "model not found")}, nil, 404, 1, 0, "model not found (check the base URL"},
		{"500 until out of retries", []fakellm.Reply{fakellm.Error(500, "a"), fakellm.Error(500, "b"), fakellm.Error(500, "c")},
			func(c *Config) { c.MaxRetries = 2 }, 500, 3, 0, "HTTP 500 after 3 attempts: c"},
		{"no retries", []fakellm.Reply{fakellm.Error(503, "busy")}, func(c *Config) { c.MaxRetries = -1 }, 503, 1, 0, "busy"},
		{"retry-after too long", []fakellm.Reply{fakellm.RateLimited("120")}, nil, 429, 1, 120 * time.Second,
			"the server asks to wait 2m0s, longer than the 1m0s allowed"},
		{"retry-after kept on the last attempt", []fakellm.Reply{fakellm.RateLimited("1"), fakellm.RateLimited("2")},
			func(c *Config) { c.MaxRetries = 1 }, 429, 2, 2 * time.Second, "Rate limit reached"},
		{"network failures", []fakellm.Reply{fakellm.Dropped(), fakellm.Dropped()}, func(c *Config) { c.MaxRetries = 1 }, 0, 2, 0, "EOF"},
		{"error event", []fakellm.Reply{{Fault: fakellm.ErrorEvent, FaultAfter: 1, Message: "overloaded"}},
			func(c *Config) { c.MaxRetries = -1 }, 0, 1, 0, "the server reported an error in the stream: overloaded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := fakellm.New(t, fakellm.WithReplies(tt.replies...))
			var cfgs []func(*Config)
			if tt.cfg != nil {
				cfgs = append(cfgs, tt.cfg)
			}
			m, _ := newModel(t, srv, cfgs...)
			_, err := m.Complete(context.Background(), userReq("hi"))
			var me *agent.ModelError
			if !errors.As(err, &me) {
				t.Fatalf("err = %v (%T), want *agent.ModelError", err, err)
			}
			if !errors.Is(err, agent.ErrModelUnavailable) {
				t.Error("error does not unwrap to ErrModelUnavailable")
			}
			if me.Status != tt.status || me.Attempts != tt.attempts || me.RetryAfter != tt.retryAfter {
				t.Errorf("got status %d, attempts %d, retry-after %v; want %d, %d, %v",
					me.Status, me.Attempts, me.RetryAfter, tt.status, tt.attempts, tt.retryAfter)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("message %q does not contain %q", err, tt.msg)
			}
			if me.RateLimited() != (tt.status == 429) {
				t.Errorf("RateLimited() = %v", me.RateLimited())
			}
			if n := len(srv.Requests()); n != tt.attempts {
				t.Errorf("%d requests, want %d", n, tt.attempts)
			}
		})
	}
}

// Once text reached the person, a broken stream is not retried: a retry
// would show the beginning of the answer twice.
func TestNoRetryAfterText(t *testing.T) {
	srv := fakellm.New(t, fakellm.WithReplies(fakellm.Reply{Text: "The answer is", Fault: fakellm.Drop, FaultAfter: 3}, fakellm.Text("never")))
	m, _ := newModel(t, srv)
	req := userReq("hi")
	deltas := collect(req)
	_, err := m.Complete(context.Background(), req)
	var me *agent.ModelError
	if !errors.As(err, &me) || me.Attempts != 1 || !strings.Contains(err.Error(), "the answer broke off after it had started") {
		t.Fatalf("err = %v", err)
	}
	if len(srv.Requests()) != 1 || strings.Join(*deltas, "") != "The answ" {
		t.Errorf("requests %d, streamed %q", len(srv.Requests()), *deltas)
	}
}

func TestIdleTimeout(t *testing.T) {
	srv := fakellm.New(t, fakellm.WithReplies(
		fakellm.Reply{Fault: fakellm.Hang},
		fakellm.Reply{Text: "slow", Fault: fakellm.Hang, FaultAfter: 1},
		fakellm.Text("awake"),
	))
	m, waits := newModel(t, srv, func(c *Config) { c.Timeout = 100 * time.Millisecond })
	resp, err := m.Complete(context.Background(), userReq("hi"))
	if err != nil || resp.Message.Content != "awake" || len(*waits) != 2 {
		t.Fatalf("resp %+v, err %v, waits %v", resp, err, *waits)
	}

	srv.Push(fakellm.Reply{Fault: fakellm.Hang})
	one, _ := newModel(t, srv, func(c *Config) { c.Timeout, c.MaxRetries = 100*time.Millisecond, -1 })
	_, err = one.Complete(context.Background(), userReq("hi"))
	if err == nil || !strings.Contains(err.Error(), "the server sent nothing for 100ms") {
		t.Fatalf("err = %v", err)
	}
}

// A slow stream that keeps sending is not cut by the per-attempt timeout.
func TestSlowSteadyStreamIsNotCut(t *testing.T) {
	srv := fakellm.New(t, fakellm.WithHandler(func(*fakellm.Request) fakellm.Reply { return fakellm.Text("steady") }))
	m, _ := newModel(t, srv, func(c *Config) { c.Timeout = time.Second })
	// The fake sends chunks at once; what is checked here is that the
	// timer is reset per chunk and stopped at the end without firing.
	for range 3 {
		if _, err := m.Complete(context.Background(), userReq("hi")); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCancelDuringWait(t *testing.T) {
	srv := fakellm.New(t, fakellm.WithReplies(fakellm.RateLimited("30")))
	m, err := New(Config{BaseURL: srv.URL(), Model: "m"}) // the real sleep
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	start := time.Now()
	_, err = m.Complete(ctx, userReq("hi"))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("cancel took %v", took)
	}
}

func TestDeadlineBeforeRetry(t *testing.T) {
	srv := fakellm.New(t, fakellm.WithReplies(fakellm.RateLimited("30")))
	m, waits := newModel(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := m.Complete(ctx, userReq("hi"))
	var me *agent.ModelError
	if !errors.As(err, &me) || me.RetryAfter != 30*time.Second || !strings.Contains(err.Error(), "no time left") || len(*waits) != 0 {
		t.Fatalf("err = %v, waits %v", err, *waits)
	}
}

func TestAuth(t *testing.T) {
	srv := fakellm.New(t, fakellm.WithAPIKey("right"), fakellm.WithModels("zeta", "alpha"))
	bad, _ := newModel(t, srv, func(c *Config) { c.APIKey = "wrong" })
	_, err := bad.Complete(context.Background(), userReq("hi"))
	var me *agent.ModelError
	if !errors.As(err, &me) || me.Status != 401 || me.Attempts != 1 || !strings.Contains(err.Error(), "check the API key") {
		t.Fatalf("err = %v", err)
	}
	if _, err := bad.ListModels(context.Background()); !errors.As(err, &me) || me.Status != 401 {
		t.Fatalf("ListModels err = %v", err)
	}
	good, _ := newModel(t, srv, func(c *Config) { c.APIKey = "right" })
	ids, err := good.ListModels(context.Background())
	if err != nil || !slices.Equal(ids, []string{"alpha", "zeta"}) {
		t.Fatalf("ListModels = %v, %v", ids, err)
	}
}

func TestUnreachable(t *testing.T) {
	srv := fakellm.New(nil)
	url := srv.URL()
	srv.Close()
	m, waits := newModel(t, srv, func(c *Config) { c.BaseURL, c.MaxRetries = url, 1 })
	_, err := m.Complete(context.Background(), userReq("hi"))
	var me *agent.ModelError
	if !errors.As(err, &me) || me.Status != 0 || me.Attempts != 2 || len(*waits) != 1 {
		t.Fatalf("err = %v, waits %v", err, *waits)
	}
	if _, err := m.ListModels(context.Background()); !errors.As(err, &me) {
		t.Fatalf("ListModels err = %v", err)
	}
}

func TestConcurrentCalls(t *testing.T) {
	srv := fakellm.New(t, fakellm.WithHandler(func(r *fakellm.Request) fakellm.Reply {
		return fakellm.Text("echo: " + r.LastMessage().Text())
	}))
	m, _ := newModel(t, srv)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		wg.Go(func() {
			msg := fmt.Sprintf("n%d", i)
			resp, err := m.Complete(context.Background(), userReq(msg))
			if err == nil && resp.Message.Content != "echo: "+msg {
				err = fmt.Errorf("got %q for %q", resp.Message.Content, msg)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

func TestTextProtocol(t *testing.T) {
	reply := "I'll read it first.\n[TOOL] read(\"notes.md\", 1, 20) [/TOOL]\n[TOOL] write({\"path\": \"b.txt\", \"content\": \"x\"}) [/TOOL]"
	srv := fakellm.New(t, fakellm.WithReplies(fakellm.Text(reply), fakellm.Text("All [done].")))
	m, _ := newModel(t, srv, func(c *Config) { c.ToolProtocol = ToolsText })
	req := userReq("summarize notes.md")
	req.Tools = testTools
	deltas := collect(req)
	resp, err := m.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if s := strings.Join(*deltas, ""); s != "I'll read it first.\n" {
		t.Errorf("streamed %q, want only the prose before the call", s)
	}
	msg := resp.Message
	if msg.Content != "I'll read it first." || len(msg.ToolCalls) != 2 ||
		msg.ToolCalls[0].Name != "read" || string(msg.ToolCalls[0].Args) != `{"path":"notes.md","offset":1,"limit":20}` ||
		msg.ToolCalls[1].Name != "write" || string(msg.ToolCalls[1].Args) != `{"path":"b.txt","content":"x"}` {
		t.Fatalf("message = %+v", msg)
	}

	first := srv.Requests()[0]
	if len(first.Tools) != 0 || !slices.Equal(first.Stop, []string{"[TOOL_RESULT"}) {
		t.Errorf("tools %v, stop %v", first.ToolNames(), first.Stop)
	}
	sys := first.Messages[0].Text()
	for _, want := range []string{"You are firstmate.\n\n# Tools", "[TOOL] tool_name(arguments) [/TOOL]",
		"### read\nRead a file.\nArguments, in order:\n1. path (string, required)\n2. offset (integer, optional)\n3. limit (integer, optional)\n",
		"### jobs\nList background jobs.\nNo arguments.\n", "1. path (string, optional): The directory.\n"} {
		if !strings.Contains(sys, want) {
			t.Errorf("system prompt lacks %q:\n%s", want, sys)
		}
	}

	// The results go back as one user message; the calls as text.
	req.Messages = append(req.Messages, msg,
		agent.Message{Role: agent.RoleTool, ToolCallID: msg.ToolCalls[0].ID, ToolName: "read", Content: "hello notes"},
		agent.Message{Role: agent.RoleTool, ToolCallID: msg.ToolCalls[1].ID, Content: "wrote 1 byte"},
	)
	*deltas = nil
	resp, err = m.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Message.Content != "All [done]." || len(resp.Message.ToolCalls) != 0 || strings.Join(*deltas, "") != "All [done]." {
		t.Errorf("final = %+v, streamed %q", resp.Message, *deltas)
	}
	sent := srv.Requests()[1].Messages
	if len(sent) != 4 || sent[2].Role != "assistant" || sent[3].Role != "user" {
		t.Fatalf("sent %+v", sent)
	}
	wantAssistant := "I'll read it first.\n" + `[TOOL] read({"path":"notes.md","offset":1,"limit":20}) [/TOOL]` + "\n" +
		`[TOOL] write({"path":"b.txt","content":"x"}) [/TOOL]`
	if sent[2].Text() != wantAssistant {
		t.Errorf("assistant sent as %q", sent[2].Text())
	}
	wantResults := fmt.Sprintf("[TOOL_RESULT read %s]\nhello notes\n[/TOOL_RESULT]\n\n[TOOL_RESULT write %s]\nwrote 1 byte\n[/TOOL_RESULT]",
		msg.ToolCalls[0].ID, msg.ToolCalls[1].ID)
	if sent[3].Text() != wantResults {
		t.Errorf("results sent as %q", sent[3].Text())
	}
}

// The demo script of cmd/fakellm drives a turn in both protocols.
func TestDemoScript(t *testing.T) {
	for _, proto := range []ToolProtocol{ToolsNative, ToolsText} {
		t.Run(string(proto), func(t *testing.T) {
			srv := fakellm.New(t, fakellm.WithHandler(fakellm.Demo))
			m, _ := newModel(t, srv, func(c *Config) { c.ToolProtocol = proto })
			req := userReq("hello")
			req.Tools = testTools
			resp, err := m.Complete(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			calls := resp.Message.ToolCalls
			if len(calls) != 2 || calls[0].Name != "ls" || calls[1].Name != "write" ||
				string(calls[1].Args) != `{"path":"hello.txt","content":"hello from firstmate\n"}` {
				t.Fatalf("calls = %+v", calls)
			}
			req.Messages = append(req.Messages, resp.Message,
				agent.Message{Role: agent.RoleTool, ToolCallID: calls[0].ID, ToolName: "ls", Content: "notes.md\n"},
				agent.Message{Role: agent.RoleTool, ToolCallID: calls[1].ID, ToolName: "write", Content: "wrote 21 bytes"})
			resp, err = m.Complete(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if c := resp.Message.Content; len(resp.Message.ToolCalls) != 0 || !strings.Contains(c, "- ls: notes.md") || !strings.Contains(c, "- write: wrote 21 bytes") {
				t.Errorf("summary = %q", c)
			}
		})
	}
}

func TestInvalidSchema(t *testing.T) {
	srv := fakellm.New(t)
	m, _ := newModel(t, srv)
	req := userReq("hi")
	req.Tools = []agent.ToolSpec{{Name: "bad", Schema: json.RawMessage(`{"type":`)}}
	if _, err := m.Complete(context.Background(), req); err == nil || !strings.Contains(err.Error(), "tool bad has a schema that is not valid JSON") {
		t.Fatalf("err = %v", err)
	}
	if len(srv.Requests()) != 0 {
		t.Error("a request was sent")
	}
}

// A server that ignores the stop sequence lets the model invent a result;
// the invention and what follows are dropped, and never streamed.
func TestTextProtocolInventedResult(t *testing.T) {
	srv := fakellm.New(t, fakellm.WithReplies(fakellm.Text(
		"Checking.\n[TOOL] ls(\".\") [/TOOL]\n[TOOL_RESULT ls call_1]\nnothing here\n[/TOOL_RESULT]\nThe folder is empty.")))
	m, _ := newModel(t, srv, func(c *Config) { c.ToolProtocol = ToolsText })
	req := userReq("what is here?")
	req.Tools = testTools
	deltas := collect(req)
	resp, err := m.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Message.Content != "Checking." || len(resp.Message.ToolCalls) != 1 || strings.Join(*deltas, "") != "Checking.\n" {
		t.Errorf("message %+v, streamed %q", resp.Message, *deltas)
	}
}

// A text-protocol call that cannot be read still comes back as a call, so
// the loop answers it; the model then reads what was wrong.
func TestTextProtocolMalformedCall(t *testing.T) {
	srv := fakellm.New(t, fakellm.WithReplies(fakellm.Text(`[TOOL] read(notes.md) [/TOOL]`), fakellm.Text("ok")))
	m, _ := newModel(t, srv, func(c *Config) { c.ToolProtocol = ToolsText })
	req := userReq("read notes")
	req.Tools = testTools
	resp, err := m.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	c := resp.Message.ToolCalls[0]
	if c.Name != "read" || !json.Valid(c.Args) {
		t.Fatalf("call = %+v", c)
	}
	req.Messages = append(req.Messages, resp.Message,
		agent.Message{Role: agent.RoleTool, ToolCallID: c.ID, ToolName: "read", Content: "error: invalid arguments for read: ..."})
	if _, err := m.Complete(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	sent := srv.Requests()[1].Messages
	if a := sent[2].Text(); a != `[TOOL] read(notes.md) [/TOOL]` {
		t.Errorf("assistant sent as %q", a)
	}
	if r := sent[3].Text(); !strings.Contains(r, "notes.md is not quoted; write text in double quotes") || !strings.HasPrefix(r, "[TOOL_RESULT read "+c.ID+"]\nerror: the call could not be read") {
		t.Errorf("result sent as %q", r)
	}
}

// A server that ignores "stream": true and answers with plain JSON is
// reported as such rather than taken for an empty answer.
func TestServerIgnoresStream(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"choices":[{"index":0,"message":{"role":"assistant","content":"hi"}}]}`)
	}))
	defer srv.Close()
	m, err := New(Config{BaseURL: srv.URL + "/v1", Model: "m", MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Complete(context.Background(), userReq("hi"))
	var me *agent.ModelError
	if !errors.As(err, &me) || !strings.Contains(err.Error(), "does it support streaming?") {
		t.Fatalf("err = %v", err)
	}
}
