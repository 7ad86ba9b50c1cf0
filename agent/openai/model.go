package openai

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	goai "github.com/sashabaranov/go-openai"

	"github.com/firstmate/firstmate/agent"
)

// Model is an [agent.Model] served by an OpenAI-compatible chat completion
// API. It is safe for concurrent use.
type Model struct {
	cfg    Config
	client *goai.Client
	tools  *toolSets // encoded "tools" arrays (tools.go)

	// sleep waits between attempts; tests replace it to run without waiting.
	sleep func(ctx context.Context, d time.Duration) error
}

var _ agent.Model = (*Model)(nil)

// New validates cfg and returns a model. It does not contact the server;
// [Model.ListModels] does, for a health check.
func New(cfg Config) (*Model, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	hc := cfg.HTTPClient
	if hc == nil {
		// No Client.Timeout: it would cut a long stream. Each attempt has
		// its own idle timeout instead (see Config.Timeout).
		// Enough idle connections for the turns that run at once (the
		// default keeps two per host, so busy turns would dial anew).
		// The connection's buffers stay at net/http's 4 KB: a replica
		// holds one connection per model call in flight (HTTP/1.1), and
		// 32 KB ones cost 28 MB more at 1,000 turns waiting on the model.
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 64
		hc = &http.Client{Transport: t}
	}
	cc := goai.DefaultConfig(cfg.APIKey)
	cc.BaseURL = cfg.BaseURL
	cc.HTTPClient = recordingDoer{next: hc, maxResponse: cfg.MaxResponseBytes}
	return &Model{cfg: cfg, client: goai.NewClientWithConfig(cc), tools: newToolSets(), sleep: sleepCtx}, nil
}

// Name returns the configured model name.
func (m *Model) Name() string { return m.cfg.Model }

// Complete streams one chat completion, retrying as [Config] allows. A
// failure is a *agent.ModelError, or the context's error when ctx ended.
func (m *Model) Complete(ctx context.Context, req *agent.Request) (*agent.Response, error) {
	creq, tools, err := m.chatRequest(req)
	if err != nil {
		return nil, err
	}
	// Each attempt encodes the body (body.go) and lets it go once sent: a
	// call that waits seconds on the model holds no copy of its request.
	// The first encoding is checked here, for an error before any call.
	full := creq
	body, err := encodeBody(&full, tools)
	if err != nil {
		return nil, err
	}
	// go-openai checks the request and encodes it, but the body it sends
	// is ours: it need not encode the messages.
	creq.Messages = nil
	// Text that reached OnText cannot be taken back, so once some did, a
	// failure is final: a retry would show the person the start twice.
	var sent bool
	emit := func(s string) {
		if s == "" || req.OnText == nil {
			return
		}
		sent = true
		req.OnText(s)
	}
	var resp *agent.Response
	err = m.retry(ctx, func() bool { return sent }, func(ctx context.Context) error {
		if body == nil {
			var err error
			if body, err = encodeBody(&full, tools); err != nil {
				return err
			}
		}
		rec := &record{body: body, encode: func() ([]byte, error) { return encodeBody(&full, tools) }}
		body = nil // the record's, until it is sent
		var err error
		resp, err = m.attempt(ctx, creq, rec, req, emit)
		return err
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// ListModels returns the names of the models the server offers, sorted.
// It makes one attempt, for a quick health check.
func (m *Model) ListModels(ctx context.Context) ([]string, error) {
	actx, cancel := context.WithTimeout(ctx, m.cfg.Timeout)
	defer cancel()
	rec := &record{}
	list, err := m.client.ListModels(withRecord(actx, rec))
	if err != nil {
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		return nil, m.modelError(rec, 1, describe(cause(actx, rec, err), rec, m.cfg.Timeout))
	}
	ids := make([]string, 0, len(list.Models))
	for _, mod := range list.Models {
		ids = append(ids, mod.ID)
	}
	slices.Sort(ids)
	return ids, nil
}

// chatRequest builds the API request; it is the same for every attempt.
// With native tools, the "tools" array is returned encoded, apart from the
// request (see tools.go).
func (m *Model) chatRequest(req *agent.Request) (goai.ChatCompletionRequest, []byte, error) {
	tools := req.Tools
	if !slices.IsSortedFunc(tools, byName) {
		// Sorted already by contract; sorting keeps the prompt byte-stable
		// (provider prompt caches) if a caller forgets.
		tools = slices.Clone(tools)
		slices.SortStableFunc(tools, byName)
	}
	var encoded []byte
	creq := goai.ChatCompletionRequest{
		Model:         m.cfg.Model,
		Stream:        true,
		StreamOptions: &goai.StreamOptions{IncludeUsage: true},
	}
	if m.cfg.ToolProtocol == ToolsText {
		creq.Messages = textMessages(req.System, req.Messages, tools)
		if len(tools) > 0 {
			// Models without native tools like to invent the result of
			// their own call; stop them where a result would begin.
			creq.Stop = []string{resultOpen}
		}
	} else {
		creq.Messages = nativeMessages(req.System, req.Messages)
		if len(tools) > 0 {
			var err error
			if encoded, err = m.tools.encode(tools); err != nil {
				return goai.ChatCompletionRequest{}, nil, err
			}
		}
	}
	if t := m.cfg.Temperature; t != nil {
		// go-openai omits a zero temperature (omitempty), which means the
		// server default (usually 1), not 0; the smallest float32 is 0 in
		// effect and survives.
		creq.Temperature = max(float32(*t), math.SmallestNonzeroFloat32)
	}
	if n := m.cfg.MaxTokens; n > 0 {
		if reasoningModel(m.cfg.Model) {
			creq.MaxCompletionTokens = n // these models refuse max_tokens
		} else {
			//lint:ignore SA1019 max_tokens is deprecated by OpenAI alone; most compatible servers know only it.
			creq.MaxTokens = n
		}
	}
	return creq, encoded, nil
}

func byName(a, b agent.ToolSpec) int { return strings.Compare(a.Name, b.Name) }

func schemaOf(t agent.ToolSpec) json.RawMessage {
	if len(t.Schema) == 0 {
		return json.RawMessage(`{"type":"object","properties":{}}`)
	}
	return t.Schema
}

func reasoningModel(name string) bool {
	for _, p := range []string{"o1", "o3", "o4", "gpt-5", "gpt-6"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// errIdle is the cause of an attempt that heard nothing for Config.Timeout.
var errIdle = errors.New("idle timeout")

// attempt makes one streamed call.
func (m *Model) attempt(ctx context.Context, creq goai.ChatCompletionRequest, rec *record, req *agent.Request, emit func(string)) (*agent.Response, error) {
	actx, cancel := context.WithCancelCause(withRecord(ctx, rec))
	defer cancel(nil)
	// One timer watches the whole attempt: Config.Timeout until the output
	// begins, then Config.StallTimeout between pieces. Each piece resets it;
	// when it fires it cancels the request, which ends a blocked Recv. It
	// starts no goroutine unless it fires, and is stopped on every return.
	var begun atomic.Bool // the model's output has begun
	stalled := &stallError{after: m.cfg.StallTimeout}
	idle := time.AfterFunc(m.cfg.Timeout, func() {
		if begun.Load() {
			cancel(stalled)
		} else {
			cancel(errIdle)
		}
	})
	defer idle.Stop()

	stream, err := m.client.CreateChatCompletionStream(actx, creq)
	if err != nil {
		return nil, &attemptError{rec: rec, err: describe(cause(actx, rec, err), rec, m.cfg.Timeout)}
	}
	defer stream.Close() // also what cuts a stream that passed a limit

	text := m.cfg.ToolProtocol == ToolsText
	var (
		content strings.Builder
		calls   callAccumulator
		usage   agent.Usage
		finish  goai.FinishReason
		chunks  int
		size    int // bytes of the reply so far, against MaxResponseBytes
		filter  = proseFilter{emit: emit}
		chunk   streamChunk
	)
	for {
		err := chunk.recv(stream)
		if errors.Is(err, io.EOF) {
			break // [DONE], or a server that just closes the stream
		}
		if err != nil {
			return nil, &attemptError{rec: rec, err: describe(cause(actx, rec, err), rec, m.cfg.Timeout)}
		}
		chunks++
		if u := chunk.Usage; u != nil {
			usage = agent.Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens}
		}
		for _, ch := range chunk.Choices {
			if ch.Index != 0 {
				continue // only one choice is asked for
			}
			d := ch.Delta.Content
			if d == "" {
				d = ch.Delta.Refusal
			}
			if d != "" || ch.Delta.ReasoningContent != "" || len(ch.Delta.ToolCalls) > 0 {
				begun.Store(true)
			}
			if d != "" {
				if size += len(d); size > m.cfg.MaxResponseBytes {
					return nil, &attemptError{rec: rec, err: replyTooLarge(m.cfg.MaxResponseBytes, nil, false, 0)}
				}
				content.WriteString(d)
				if text {
					filter.write(d)
				} else {
					emit(d)
				}
			}
			for _, tc := range ch.Delta.ToolCalls {
				c, added := calls.add(tc)
				size += len(tc.ID) + len(tc.Function.Name) + len(tc.Function.Arguments)
				if added {
					size += callOverhead
				}
				if size > m.cfg.MaxResponseBytes {
					return nil, &attemptError{rec: rec, err: replyTooLarge(m.cfg.MaxResponseBytes, c, added, len(calls.calls))}
				}
			}
			if ch.FinishReason != "" {
				finish = ch.FinishReason
			}
		}
		if begun.Load() {
			idle.Reset(m.cfg.StallTimeout)
		} else {
			idle.Reset(m.cfg.Timeout)
		}
	}
	if chunks == 0 {
		return nil, &attemptError{rec: rec, err: errors.New("the server closed the stream without sending any event (does it support streaming?)")}
	}
	cut := finish == goai.FinishReasonLength
	msg := agent.Message{Role: agent.RoleAssistant}
	if text {
		filter.flush()
		prose, parsed := parseToolCalls(cutInventedResults(content.String()), req.Tools)
		msg.Content = prose
		for _, p := range parsed {
			msg.ToolCalls = append(msg.ToolCalls, p.toolCall(cut))
		}
	} else {
		msg.Content = content.String()
		msg.ToolCalls = calls.finish(cut)
	}
	return &agent.Response{Message: msg, Usage: usage}, nil
}

// cause is what ended an attempt: a limit its body passed (go-openai may
// report another error in its place), the timer that fired (the context
// error says only "canceled"), or err itself.
func cause(actx context.Context, rec *record, err error) error {
	if rec.tooLarge != nil {
		return rec.tooLarge
	}
	if c := context.Cause(actx); errors.Is(c, errIdle) || errors.Is(c, ErrStalled) {
		return c
	}
	return err
}
