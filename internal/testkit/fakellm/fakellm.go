// Package fakellm is an OpenAI-compatible chat completion server for tests.
//
// It speaks the wire protocol (POST /v1/chat/completions, streamed as
// server-sent events or not, and GET /v1/models), so the real go-openai
// client, and so firstmate's agent/openai model, can be tested against it
// without a real LLM. Replies are scripted: a queue of [Reply] values used in
// order, and then an optional handler that decides from the request. Every
// request is recorded for assertions. Faults (HTTP errors with Retry-After,
// dropped connections, hangs, streams without [DONE]) and the quirks of
// compatible servers (parallel tool calls all at index 0, no call IDs) can
// be scripted too.
//
// A test:
//
//	srv := fakellm.New(t,
//		fakellm.WithReplies(
//			fakellm.Calls(fakellm.Call("read", map[string]any{"path": "notes.md"})),
//			fakellm.Text("The notes say hello."),
//		))
//	model, _ := openai.New(openai.Config{BaseURL: srv.URL(), Model: "fake"})
//	…
//	req := srv.Requests()[1] // the second call carries the tool result
//
// cmd/fakellm serves [Demo] on a fixed address so a person can chat with
// firstmate without a model.
package fakellm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/firstmate/firstmate/internal/testkit"
)

// TB is the kits' one [testkit.TB].
type TB = testkit.TB

// Server is a running fake. It is safe for concurrent use.
type Server struct {
	srv  *httptest.Server
	done chan struct{}
	once sync.Once

	apiKey         string
	models         []string
	parallelAtZero bool
	noIDs          bool
	chunkSize      int
	noRecord       bool
	logger         *slog.Logger
	handler        func(*Request) Reply

	mu       sync.Mutex
	queue    []Reply
	requests []Request
	seen     int // requests received, recorded or not

	seq   atomic.Int64 // for response and call IDs
	tools toolsCache
}

// Option configures a Server.
type Option func(*Server)

// WithReplies queues replies, used one per chat request in order.
func WithReplies(replies ...Reply) Option {
	return func(s *Server) { s.queue = append(s.queue, replies...) }
}

// WithHandler decides the reply of each chat request once the queue is
// empty. It runs on the server's goroutines; it must be safe for that.
func WithHandler(h func(req *Request) Reply) Option {
	return func(s *Server) { s.handler = h }
}

// WithAPIKey makes the server require "Authorization: Bearer key".
// Without it any or no key is accepted, as local servers do.
func WithAPIKey(key string) Option { return func(s *Server) { s.apiKey = key } }

// WithModels sets what GET /v1/models lists; the default is "fake-model".
func WithModels(ids ...string) Option { return func(s *Server) { s.models = ids } }

// ParallelAtIndexZero streams every tool call of a reply at index 0, each
// with a new ID, as some compatible servers do.
func ParallelAtIndexZero() Option { return func(s *Server) { s.parallelAtZero = true } }

// WithoutCallIDs sends tool calls without IDs, as some compatible servers do.
func WithoutCallIDs() Option { return func(s *Server) { s.noIDs = true } }

// WithChunkSize sets how many characters of text or arguments go in one
// stream chunk (default 4), so that clients must reassemble them.
func WithChunkSize(n int) Option { return func(s *Server) { s.chunkSize = max(n, 1) } }

// WithoutRecording keeps no requests (Requests returns none), so that a
// long load test does not hold every prompt it sent in memory.
func WithoutRecording() Option { return func(s *Server) { s.noRecord = true } }

// WithLogger logs one line per request.
func WithLogger(l *slog.Logger) Option { return func(s *Server) { s.logger = l } }

// New starts a server on a random loopback port. With tb (which may be
// nil) the server is closed when the test ends; otherwise call Close.
func New(tb TB, opts ...Option) *Server {
	if tb != nil {
		tb.Helper()
	}
	s := newServer(opts)
	s.srv = httptest.NewServer(s)
	if tb != nil {
		tb.Cleanup(s.Close)
	}
	return s
}

// Listen starts a server on addr (host:port), for a standalone process.
func Listen(addr string, opts ...Option) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := newServer(opts)
	s.srv = httptest.NewUnstartedServer(s)
	s.srv.Listener.Close()
	s.srv.Listener = ln
	s.srv.Start()
	return s, nil
}

func newServer(opts []Option) *Server {
	s := &Server{done: make(chan struct{}), models: []string{"fake-model"}, chunkSize: 4}
	for _, o := range opts {
		o(s)
	}
	return s
}

// URL is the API base URL, ending in /v1 (what OPENAI_BASE_URL takes).
func (s *Server) URL() string { return s.srv.URL + "/v1" }

// Close stops the server. Hanging replies are released first, so Close
// does not wait for a client that never gives up.
func (s *Server) Close() {
	s.once.Do(func() {
		close(s.done)
		s.srv.Close()
	})
}

// Push queues more replies.
func (s *Server) Push(replies ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, replies...)
}

// Pending returns how many queued replies are not used yet.
func (s *Server) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue)
}

// Requests returns every chat completion request received so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// ServeHTTP serves the API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.apiKey != "" && r.Header.Get("Authorization") != "Bearer "+s.apiKey {
		writeError(w, http.StatusUnauthorized, "invalid_request_error", "Incorrect API key provided.", "invalid_api_key")
		return
	}
	switch {
	case r.URL.Path == "/v1/chat/completions" && r.Method == http.MethodPost:
		s.chat(w, r)
	case r.URL.Path == "/v1/models" && r.Method == http.MethodGet:
		s.listModels(w)
	default:
		writeError(w, http.StatusNotFound, "invalid_request_error",
			fmt.Sprintf("Unknown request URL: %s %s.", r.Method, r.URL.Path), "unknown_url")
	}
}

func (s *Server) listModels(w http.ResponseWriter) {
	list := modelList{Object: "list", Data: []modelInfo{}}
	for _, id := range s.models {
		list.Data = append(list.Data, modelInfo{ID: id, Object: "model", Created: 1700000000, OwnedBy: "fakellm"})
	}
	writeJSON(w, http.StatusOK, list)
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(r)
	if err != nil {
		return // the client went away
	}
	req, err := s.tools.decodeRequest(body)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "We could not parse the JSON body of your request: "+err.Error(), nil)
		return
	}
	req.Header = r.Header.Clone()
	req.Body = body
	invalid := validate(&req)

	s.mu.Lock()
	s.seen++
	n := s.seen
	if !s.noRecord {
		s.requests = append(s.requests, req)
	}
	var reply Reply
	// An invalid request does not use up a scripted reply: the test fails
	// on the 400 and should not also see its script shifted.
	scripted := invalid == "" && len(s.queue) > 0
	if scripted {
		reply = s.queue[0]
		s.queue = s.queue[1:]
	}
	s.mu.Unlock()

	if invalid != "" {
		s.log(n, &req, "HTTP 400: "+invalid)
		writeError(w, http.StatusBadRequest, "invalid_request_error", invalid, nil)
		return
	}
	switch {
	case scripted:
	case s.handler != nil:
		reqCopy := req
		reply = s.handler(&reqCopy)
	default:
		reply = Error(http.StatusInternalServerError, fmt.Sprintf("fakellm: no reply scripted for request %d", n))
	}
	s.log(n, &req, reply.kind())

	if reply.Delay > 0 && !s.wait(r, reply.Delay) {
		return
	}
	if reply.Fault != NoFault && (reply.FaultAfter == 0 || !req.Stream) {
		// Before any response (a non-streamed answer has no chunks to
		// write first), an error event can only be an HTTP error.
		if reply.Fault != ErrorEvent {
			s.fault(w, r, reply)
			return
		}
		reply.Status = http.StatusInternalServerError
	}
	if reply.Status != 0 {
		if reply.RetryAfter != "" {
			w.Header().Set("Retry-After", reply.RetryAfter)
		}
		typ := "invalid_request_error"
		switch {
		case reply.Status == http.StatusTooManyRequests:
			typ = "rate_limit_error"
		case reply.Status >= 500:
			typ = "server_error"
		}
		msg := reply.Message
		if msg == "" {
			msg = http.StatusText(reply.Status)
		}
		writeError(w, reply.Status, typ, msg, nil)
		return
	}
	if req.Stream {
		s.stream(w, r, &req, reply)
	} else {
		s.complete(w, &req, reply)
	}
}

// readBody reads a request's body whole, in one allocation when the
// request says its length.
func readBody(r *http.Request) ([]byte, error) {
	var b bytes.Buffer
	if n := r.ContentLength; n > 0 && n < 64<<20 {
		b.Grow(int(n) + bytes.MinRead)
	}
	_, err := b.ReadFrom(r.Body)
	return b.Bytes(), err
}

// fault breaks the response. http.ErrAbortHandler makes net/http close the
// connection without finishing the body, which is what a crashed or
// restarted server looks like to the client.
func (s *Server) fault(w http.ResponseWriter, r *http.Request, reply Reply) {
	switch reply.Fault {
	case Hang:
		select {
		case <-r.Context().Done():
		case <-s.done:
		}
		return
	case ErrorEvent:
		b, _ := json.Marshal(apiError{Error: apiErrorBody{Message: reply.Message, Type: "server_error"}})
		fmt.Fprintf(w, "data: %s\n\n", b)
		return
	}
	panic(http.ErrAbortHandler)
}

func (s *Server) wait(r *http.Request, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
	case <-s.done:
	}
	return false
}

func (s *Server) complete(w http.ResponseWriter, req *Request, reply Reply) {
	msg := Message{Role: "assistant"}
	if reply.Text != "" || len(reply.ToolCalls) == 0 {
		msg.Content = &reply.Text
	}
	for _, c := range s.calls(reply) {
		msg.ToolCalls = append(msg.ToolCalls, WireToolCall{ID: c.ID, Type: "function",
			Function: WireFunction{Name: c.Name, Arguments: c.Args}})
	}
	writeJSON(w, http.StatusOK, completion{
		ID: s.id("chatcmpl"), Object: "chat.completion", Created: time.Now().Unix(), Model: req.Model,
		Choices: []completionChoice{{Index: 0, Message: msg, FinishReason: finishReason(reply)}},
		Usage:   usage(req, reply),
	})
}

func (s *Server) stream(w http.ResponseWriter, r *http.Request, req *Request, reply Reply) {
	id, created := s.id("chatcmpl"), time.Now().Unix()
	f := newFrames(id, created, req.Model)
	calls := s.calls(reply)
	// Room for the chunks: the first, the text's, each call's, the last
	// and the usage.
	n := 4 + len(reply.Text)/s.chunkSize
	for _, c := range calls {
		n += 2 + len(c.Args)/s.chunkSize
	}
	f.grow(n)
	empty := ""
	f.add(&delta{Role: "assistant", Content: &empty}, nil)
	for _, piece := range split(reply.Text, s.chunkSize) {
		f.add(&delta{Content: &piece}, nil)
	}
	for i, c := range calls {
		idx := i
		if s.parallelAtZero {
			idx = 0
		}
		// The first delta of a call names it; the arguments follow in
		// pieces that carry only the index, as OpenAI streams them.
		f.add(&delta{ToolCalls: []WireToolCall{{Index: &idx, ID: c.ID, Type: "function",
			Function: WireFunction{Name: c.Name}}}}, nil)
		for _, piece := range split(c.Args, s.chunkSize) {
			f.add(&delta{ToolCalls: []WireToolCall{{Index: &idx,
				Function: WireFunction{Arguments: piece}}}}, nil)
		}
	}
	fr := finishReason(reply)
	f.add(&delta{}, &fr)
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		u := usage(req, reply)
		f.addChunk(&chunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: req.Model,
			Choices: []chunkChoice{}, Usage: &u})
	}

	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	for i := range f.len() {
		if reply.Fault != NoFault && i == reply.FaultAfter {
			s.fault(w, r, reply)
			return
		}
		if _, err := w.Write(f.frame(i)); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
		if reply.Every > 0 && i < f.len()-1 && !s.wait(r, reply.Every) {
			return
		}
	}
	if reply.Fault != NoFault {
		s.fault(w, r, reply)
		return
	}
	if !reply.NoDone {
		fmt.Fprint(w, "data: [DONE]\n\n")
	}
}

// calls returns the reply's calls with IDs filled in (or removed, for a
// server WithoutCallIDs).
func (s *Server) calls(reply Reply) []ToolCall {
	out := slices.Clone(reply.ToolCalls)
	for i := range out {
		switch {
		case s.noIDs:
			out[i].ID = ""
		case out[i].ID == "":
			out[i].ID = s.id("call")
		}
	}
	return out
}

func (s *Server) id(prefix string) string {
	return prefix + "_fake_" + strconv.FormatInt(s.seq.Add(1), 10)
}

func (s *Server) log(n int, req *Request, reply string) {
	if s.logger == nil {
		return
	}
	last := req.LastMessage()
	s.logger.Info("chat completion", "n", n, "model", req.Model, "stream", req.Stream,
		"messages", len(req.Messages), "tools", len(req.Tools), "last_role", last.Role, "reply", reply)
}

// validate rejects what OpenAI rejects and compatible servers choke on, so
// that a client bug fails here as it would in production. It returns the
// error message, or "" for a valid request.
func validate(req *Request) string {
	if req.Model == "" {
		return "you must provide a model parameter"
	}
	if len(req.Messages) == 0 {
		return "'messages' must contain at least one message"
	}
	for i, t := range req.Tools {
		if t.Type != "function" {
			return fmt.Sprintf("tools[%d].type must be 'function', got %q", i, t.Type)
		}
		if t.Function.Name == "" {
			return fmt.Sprintf("tools[%d].function.name is missing", i)
		}
		if p := bytes.TrimSpace(t.Function.Parameters); len(p) > 0 && p[0] != '{' {
			return fmt.Sprintf("tools[%d].function.parameters must be a JSON object", i)
		}
	}
	open := map[string]bool{}
	for i, m := range req.Messages {
		if m.Role != "tool" && len(open) > 0 {
			ids := make([]string, 0, len(open))
			for id := range open {
				ids = append(ids, id)
			}
			slices.Sort(ids)
			return fmt.Sprintf("messages[%d]: an assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'; missing: %s", i, strings.Join(ids, ", "))
		}
		switch m.Role {
		case "system", "developer", "user":
			if m.Content == nil {
				return fmt.Sprintf("messages[%d]: content is required for role '%s'", i, m.Role)
			}
		case "assistant":
			if m.Content == nil && len(m.ToolCalls) == 0 {
				return fmt.Sprintf("messages[%d]: an assistant message needs content or tool_calls", i)
			}
			for j, c := range m.ToolCalls {
				if c.ID == "" || c.Function.Name == "" {
					return fmt.Sprintf("messages[%d].tool_calls[%d]: id and function.name are required", i, j)
				}
				if !json.Valid([]byte(c.Function.Arguments)) {
					return fmt.Sprintf("messages[%d].tool_calls[%d]: function.arguments is not valid JSON", i, j)
				}
				open[c.ID] = true
			}
		case "tool":
			if !open[m.ToolCallID] {
				return fmt.Sprintf("messages[%d]: messages with role 'tool' must be a response to a preceding message with 'tool_calls' (tool_call_id %q)", i, m.ToolCallID)
			}
			if m.Content == nil {
				return fmt.Sprintf("messages[%d]: content is required for role 'tool'", i)
			}
			delete(open, m.ToolCallID)
		default:
			return fmt.Sprintf("messages[%d]: invalid role %q", i, m.Role)
		}
	}
	if len(open) > 0 {
		return "the last assistant message has 'tool_calls' without tool messages responding to them"
	}
	return ""
}

func finishReason(r Reply) string {
	switch {
	case r.FinishReason != "":
		return r.FinishReason
	case len(r.ToolCalls) > 0:
		return "tool_calls"
	default:
		return "stop"
	}
}

// usage estimates tokens at about four bytes each, deterministically.
func usage(req *Request, r Reply) Usage {
	if r.Usage != nil {
		return *r.Usage
	}
	out := len(r.Text)
	for _, c := range r.ToolCalls {
		out += len(c.Name) + len(c.Args)
	}
	u := Usage{PromptTokens: len(req.Body)/4 + 1, CompletionTokens: out/4 + 1}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	return u
}

// split cuts s into pieces of at most n runes; never inside a rune, since
// each piece becomes a JSON string of its own.
func split(s string, n int) []string {
	var out []string
	for s != "" {
		i, count := 0, 0
		for i < len(s) && count < n {
			_, size := utf8.DecodeRuneInString(s[i:])
			i += size
			count++
		}
		out = append(out, s[:i])
		s = s[i:]
	}
	return out
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, typ, msg string, code any) {
	writeJSON(w, status, apiError{Error: apiErrorBody{Message: msg, Type: typ, Code: code}})
}
