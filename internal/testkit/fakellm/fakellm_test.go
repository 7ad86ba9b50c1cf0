package fakellm_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	goai "github.com/sashabaranov/go-openai"

	"github.com/firstmate/firstmate/internal/testkit/fakellm"
)

func client(srv *fakellm.Server, key string) *goai.Client {
	cfg := goai.DefaultConfig(key)
	cfg.BaseURL = srv.URL()
	return goai.NewClientWithConfig(cfg)
}

func chatReq(stream bool, msgs ...goai.ChatCompletionMessage) goai.ChatCompletionRequest {
	if len(msgs) == 0 {
		msgs = []goai.ChatCompletionMessage{{Role: "user", Content: "hi"}}
	}
	r := goai.ChatCompletionRequest{Model: "fake-model", Messages: msgs, Stream: stream}
	if stream {
		r.StreamOptions = &goai.StreamOptions{IncludeUsage: true}
	}
	return r
}

// streamAll reads a whole stream the way a careful client would.
func streamAll(t *testing.T, c *goai.Client, req goai.ChatCompletionRequest) (text string, calls map[int]*goai.ToolCall, usage *goai.Usage, chunks int) {
	t.Helper()
	s, err := c.CreateChatCompletionStream(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	calls = map[int]*goai.ToolCall{}
	var b strings.Builder
	for {
		ch, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return b.String(), calls, usage, chunks
		}
		if err != nil {
			t.Fatal(err)
		}
		chunks++
		if ch.Usage != nil {
			usage = ch.Usage
		}
		for _, choice := range ch.Choices {
			b.WriteString(choice.Delta.Content)
			for _, tc := range choice.Delta.ToolCalls {
				c := calls[*tc.Index]
				if c == nil {
					c = &goai.ToolCall{ID: tc.ID, Type: tc.Type}
					calls[*tc.Index] = c
				}
				c.Function.Name += tc.Function.Name
				c.Function.Arguments += tc.Function.Arguments
			}
		}
	}
}

func TestStreamText(t *testing.T) {
	srv := fakellm.New(t, fakellm.WithReplies(fakellm.Text("Hello, wörld! ⚓")), fakellm.WithChunkSize(3))
	text, calls, usage, chunks := streamAll(t, client(srv, ""), chatReq(true))
	if text != "Hello, wörld! ⚓" || len(calls) != 0 {
		t.Errorf("text %q, calls %v", text, calls)
	}
	if chunks < 6 || usage == nil || usage.CompletionTokens == 0 || usage.TotalTokens != usage.PromptTokens+usage.CompletionTokens {
		t.Errorf("chunks %d, usage %+v", chunks, usage)
	}
	if srv.Pending() != 0 || len(srv.Requests()) != 1 {
		t.Errorf("pending %d, requests %d", srv.Pending(), len(srv.Requests()))
	}
}

func TestStreamToolCalls(t *testing.T) {
	srv := fakellm.New(t, fakellm.WithReplies(fakellm.Calls(
		fakellm.Call("ls", map[string]string{"path": "."}),
		fakellm.ToolCall{ID: "mine", Name: "write", Args: `{"path":"a","content":"x"}`},
	)))
	_, calls, _, _ := streamAll(t, client(srv, ""), chatReq(true))
	if len(calls) != 2 || calls[0].Function.Name != "ls" || calls[0].Function.Arguments != `{"path":"."}` || calls[0].ID == "" ||
		calls[1].ID != "mine" || calls[1].Function.Arguments != `{"path":"a","content":"x"}` {
		t.Errorf("calls = %+v %+v", calls[0], calls[1])
	}
}

func TestStreamWire(t *testing.T) {
	srv := fakellm.New(t, fakellm.WithReplies(fakellm.Reply{Text: "ab", ToolCalls: []fakellm.ToolCall{
		fakellm.Call("ls", `{}`), fakellm.Call("jobs", `{}`)}}), fakellm.ParallelAtIndexZero(), fakellm.WithChunkSize(1))
	body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	resp, err := http.Post(srv.URL()+"/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type = %q", ct)
	}
	var lines []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if l := sc.Text(); l != "" {
			lines = append(lines, l)
		}
	}
	if lines[len(lines)-1] != "data: [DONE]" {
		t.Errorf("last line %q", lines[len(lines)-1])
	}
	var indexes, ids []string
	for _, l := range lines {
		var c struct {
			Choices []struct {
				Delta struct {
					ToolCalls []struct {
						Index *int   `json:"index"`
						ID    string `json:"id"`
					} `json:"tool_calls"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Usage *fakellm.Usage `json:"usage"`
		}
		if l == "data: [DONE]" {
			continue
		}
		if err := json.Unmarshal([]byte(strings.TrimPrefix(l, "data: ")), &c); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		if c.Usage != nil {
			t.Error("usage sent without stream_options.include_usage")
		}
		for _, ch := range c.Choices {
			for _, tc := range ch.Delta.ToolCalls {
				indexes = append(indexes, string(rune('0'+*tc.Index)))
				if tc.ID != "" {
					ids = append(ids, tc.ID)
				}
			}
		}
	}
	if strings.Join(indexes, "") != strings.Repeat("0", len(indexes)) || len(ids) != 2 || ids[0] == ids[1] {
		t.Errorf("indexes %v, ids %v", indexes, ids)
	}
}

func TestNonStreaming(t *testing.T) {
	srv := fakellm.New(t, fakellm.WithReplies(
		fakellm.Reply{Text: "sure", ToolCalls: []fakellm.ToolCall{fakellm.Call("ls", `{"path":"."}`)}},
		fakellm.Text("plain"),
	))
	c := client(srv, "")
	resp, err := c.CreateChatCompletion(context.Background(), chatReq(false))
	if err != nil {
		t.Fatal(err)
	}
	msg := resp.Choices[0].Message
	if msg.Content != "sure" || len(msg.ToolCalls) != 1 || msg.ToolCalls[0].Function.Name != "ls" ||
		resp.Choices[0].FinishReason != "tool_calls" || resp.Usage.TotalTokens == 0 {
		t.Errorf("resp = %+v", resp)
	}
	resp, err = c.CreateChatCompletion(context.Background(), chatReq(false))
	if err != nil || resp.Choices[0].Message.Content != "plain" || resp.Choices[0].FinishReason != "stop" {
		t.Errorf("resp = %+v, %v", resp, err)
	}
}

func TestErrors(t *testing.T) {
	srv := fakellm.New(t, fakellm.WithReplies(fakellm.RateLimited("3"), fakellm.Error(500, "boom")))
	body := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	resp, err := http.Post(srv.URL()+"/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "3" {
		t.Errorf("status %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	_, err = client(srv, "").CreateChatCompletion(context.Background(), chatReq(false))
	var apiErr *goai.APIError
	if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != 500 || apiErr.Message != "boom" || apiErr.Type != "server_error" {
		t.Errorf("err = %v", err)
	}
	// With the script used up and no handler, the server says so.
	_, err = client(srv, "").CreateChatCompletion(context.Background(), chatReq(false))
	if !errors.As(err, &apiErr) || !strings.Contains(apiErr.Message, "no reply scripted for request 3") {
		t.Errorf("err = %v", err)
	}
}

func TestFaults(t *testing.T) {
	srv := fakellm.New(t, fakellm.WithReplies(
		fakellm.Dropped(),
		fakellm.Reply{Text: "partial answer", Fault: fakellm.Drop, FaultAfter: 2},
		fakellm.Reply{Text: "x", Fault: fakellm.ErrorEvent, FaultAfter: 1, Message: "overloaded"},
		fakellm.Reply{Fault: fakellm.Hang},
	))
	c := client(srv, "")
	if _, err := c.CreateChatCompletionStream(context.Background(), chatReq(true)); err == nil {
		t.Error("dropped connection gave no error")
	}

	s, err := c.CreateChatCompletionStream(context.Background(), chatReq(true))
	if err != nil {
		t.Fatal(err)
	}
	var recvErr error
	for recvErr == nil {
		_, recvErr = s.Recv()
	}
	s.Close()
	if !errors.Is(recvErr, io.ErrUnexpectedEOF) {
		t.Errorf("mid-stream drop gave %v, want unexpected EOF", recvErr)
	}

	s, err = c.CreateChatCompletionStream(context.Background(), chatReq(true))
	if err != nil {
		t.Fatal(err)
	}
	for recvErr = nil; recvErr == nil; {
		_, recvErr = s.Recv()
	}
	s.Close()
	var apiErr *goai.APIError
	if !errors.As(recvErr, &apiErr) || apiErr.Message != "overloaded" {
		t.Errorf("error event gave %v", recvErr)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := c.CreateChatCompletionStream(ctx, chatReq(true)); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("hang gave %v", err)
	}
}

func TestNoDone(t *testing.T) {
	srv := fakellm.New(t, fakellm.WithReplies(fakellm.Reply{Text: "abc", NoDone: true}))
	text, _, _, _ := streamAll(t, client(srv, ""), chatReq(true))
	if text != "abc" {
		t.Errorf("text %q", text)
	}
}

func TestHandlerSeesRequest(t *testing.T) {
	srv := fakellm.New(t, fakellm.WithReplies(fakellm.Calls(fakellm.ToolCall{ID: "c1", Name: "ls", Args: `{}`})),
		fakellm.WithHandler(func(r *fakellm.Request) fakellm.Reply {
			last := r.LastMessage()
			if last.Role == "tool" {
				return fakellm.Text("the tool said " + last.Text())
			}
			return fakellm.Text("no tool yet")
		}))
	c := client(srv, "")
	if _, err := c.CreateChatCompletion(context.Background(), chatReq(false)); err != nil {
		t.Fatal(err)
	}
	resp, err := c.CreateChatCompletion(context.Background(), chatReq(false,
		goai.ChatCompletionMessage{Role: "user", Content: "hi"},
		goai.ChatCompletionMessage{Role: "assistant", ToolCalls: []goai.ToolCall{{ID: "c1", Type: "function", Function: goai.FunctionCall{Name: "ls", Arguments: "{}"}}}},
		goai.ChatCompletionMessage{Role: "tool", ToolCallID: "c1", Content: "a.txt"},
	))
	if err != nil || resp.Choices[0].Message.Content != "the tool said a.txt" {
		t.Fatalf("resp %+v, err %v", resp, err)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 || reqs[1].Messages[1].ToolCalls[0].Function.Name != "ls" || reqs[1].Messages[2].ToolCallID != "c1" {
		t.Errorf("recorded %+v", reqs)
	}
}

func TestValidation(t *testing.T) {
	tests := []struct {
		name string
		msgs []goai.ChatCompletionMessage
		want string
	}{
		{"orphan tool result", []goai.ChatCompletionMessage{{Role: "user", Content: "hi"}, {Role: "tool", ToolCallID: "x", Content: "r"}},
			"must be a response to a preceding message with 'tool_calls'"},
		{"missing tool result", []goai.ChatCompletionMessage{{Role: "user", Content: "hi"},
			{Role: "assistant", ToolCalls: []goai.ToolCall{{ID: "x", Type: "function", Function: goai.FunctionCall{Name: "ls", Arguments: "{}"}}}},
			{Role: "user", Content: "and?"}}, "missing: x"},
		{"bad arguments", []goai.ChatCompletionMessage{{Role: "user", Content: "hi"},
			{Role: "assistant", ToolCalls: []goai.ToolCall{{ID: "x", Type: "function", Function: goai.FunctionCall{Name: "ls", Arguments: "{"}}}},
			{Role: "tool", ToolCallID: "x", Content: "r"}}, "not valid JSON"},
		{"empty assistant", []goai.ChatCompletionMessage{{Role: "user", Content: "hi"}, {Role: "assistant"}}, "needs content or tool_calls"},
		{"empty user", []goai.ChatCompletionMessage{{Role: "user"}}, "content is required"},
		{"bad role", []goai.ChatCompletionMessage{{Role: "robot", Content: "beep"}}, "invalid role"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := fakellm.New(t, fakellm.WithReplies(fakellm.Text("unused")))
			_, err := client(srv, "").CreateChatCompletion(context.Background(), chatReq(false, tt.msgs...))
			var apiErr *goai.APIError
			if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != 400 || !strings.Contains(apiErr.Message, tt.want) {
				t.Fatalf("err = %v, want 400 with %q", err, tt.want)
			}
			if srv.Pending() != 1 || len(srv.Requests()) != 1 {
				t.Errorf("an invalid request used up the script")
			}
		})
	}
}

func TestModelsAndAuth(t *testing.T) {
	srv := fakellm.New(t, fakellm.WithAPIKey("k"), fakellm.WithModels("a", "b"))
	if _, err := client(srv, "wrong").ListModels(context.Background()); err == nil {
		t.Error("wrong key accepted")
	}
	list, err := client(srv, "k").ListModels(context.Background())
	if err != nil || len(list.Models) != 2 || list.Models[0].ID != "a" {
		t.Fatalf("models %+v, %v", list, err)
	}
	resp, err := http.Get(srv.URL() + "/nope")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Errorf("unauthenticated unknown path gave %d", resp.StatusCode)
	}
}

func TestListen(t *testing.T) {
	srv, err := fakellm.Listen("127.0.0.1:0", fakellm.WithHandler(fakellm.Demo))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if !strings.HasPrefix(srv.URL(), "http://127.0.0.1:") || !strings.HasSuffix(srv.URL(), "/v1") {
		t.Errorf("URL %q", srv.URL())
	}
	resp, err := client(srv, "").CreateChatCompletion(context.Background(), chatReq(false))
	if err != nil || !strings.Contains(resp.Choices[0].Message.Content, "fakellm's demo") {
		t.Fatalf("resp %+v, err %v", resp, err)
	}
}

// Close returns even while a reply hangs.
func TestCloseReleasesHang(t *testing.T) {
	srv := fakellm.New(nil, fakellm.WithReplies(fakellm.Reply{Fault: fakellm.Hang}))
	errc := make(chan error, 1)
	go func() {
		_, err := client(srv, "").CreateChatCompletion(context.Background(), chatReq(false))
		errc <- err
	}()
	for len(srv.Requests()) == 0 {
		time.Sleep(time.Millisecond)
	}
	done := make(chan struct{})
	go func() { srv.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close blocked on a hanging reply")
	}
	if err := <-errc; err == nil {
		t.Error("hung request succeeded")
	}
}

func TestDemo(t *testing.T) {
	native := &fakellm.Request{Messages: []fakellm.Message{{Role: "user", Content: ptr("hi")}}}
	native.Tools = make([]fakellm.Tool, 2)
	native.Tools[0].Type, native.Tools[0].Function.Name = "function", "ls"
	native.Tools[1].Type, native.Tools[1].Function.Name = "function", "write"
	r := fakellm.Demo(native)
	if len(r.ToolCalls) != 2 || r.ToolCalls[0].Name != "ls" || r.ToolCalls[1].Args != `{"path":"hello.txt","content":"hello from firstmate\n"}` {
		t.Errorf("native demo = %+v", r)
	}
	text := &fakellm.Request{Messages: []fakellm.Message{{Role: "system", Content: ptr("call [TOOL] name() [/TOOL]")}, {Role: "user", Content: ptr("hi")}}}
	if r := fakellm.Demo(text); !strings.Contains(r.Text, `[TOOL] ls(".") [/TOOL]`) {
		t.Errorf("text demo = %+v", r)
	}
	text.Messages = append(text.Messages, fakellm.Message{Role: "assistant", Content: ptr("…")},
		fakellm.Message{Role: "user", Content: ptr("[TOOL_RESULT ls c1]\na.txt\n[/TOOL_RESULT]\n\n[TOOL_RESULT write c2]\nwrote\n[/TOOL_RESULT]")})
	if r := fakellm.Demo(text); !strings.Contains(r.Text, "- ls: a.txt\n- write: wrote\n") {
		t.Errorf("text summary = %q", r.Text)
	}

	// "$ command" runs the command with the shell when it is offered, and
	// the summary shows all it printed.
	cmd := &fakellm.Request{Messages: []fakellm.Message{{Role: "user", Content: ptr("$ go version")}}}
	if r := fakellm.Demo(cmd); len(r.ToolCalls) != 0 || !strings.Contains(r.Text, "not offered") {
		t.Errorf("without a shell: %+v", r)
	}
	cmd.Tools = make([]fakellm.Tool, 1)
	cmd.Tools[0].Type, cmd.Tools[0].Function.Name = "function", "shell"
	if r := fakellm.Demo(cmd); len(r.ToolCalls) != 1 || r.ToolCalls[0].Name != "shell" || r.ToolCalls[0].Args != `{"command":"go version"}` {
		t.Errorf("shell call = %+v", r)
	}
	text.Messages = append(text.Messages, fakellm.Message{Role: "user", Content: ptr("$ ls -l")})
	if r := fakellm.Demo(text); !strings.Contains(r.Text, `[TOOL] shell({"command":"ls -l"}) [/TOOL]`) {
		t.Errorf("text shell call = %q", r.Text)
	}
	text.Messages = append(text.Messages, fakellm.Message{Role: "user", Content: ptr("[TOOL_RESULT shell c3]\nline one\nline two\n[exit code 0 · 5ms]\n[/TOOL_RESULT]")})
	if r := fakellm.Demo(text); !strings.Contains(r.Text, "- shell:\n```\nline one\nline two\n[exit code 0 · 5ms]\n```") || strings.Contains(r.Text, "hello.txt") {
		t.Errorf("shell summary = %q", r.Text)
	}
}

func ptr(s string) *string { return &s }
