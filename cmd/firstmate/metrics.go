package main

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/firstmate/firstmate/agent"
)

// metrics is what serve shows at /metrics: the agent.Observer the
// dispatcher reports to, the platforms' API calls (see transport), and the
// Go runtime and process. It has a registry of its own, so nothing is
// registered at init time and two in one process (tests) do not collide.
//
// Labels are bounded: platforms, outcomes, tool names the tool set knows
// and API method names, never a session, chat or user.
type metrics struct {
	done  atomic.Int64 // turns done, for trimAfterBusy
	reg   *prometheus.Registry
	tools map[string]bool // the tool label's values; any other name is "other"

	turns        *prometheus.CounterVec   // platform, outcome
	turnSeconds  *prometheus.HistogramVec // platform, outcome
	modelSeconds prometheus.Observer
	modelErrors  *prometheus.CounterVec // reason
	tokens       *prometheus.CounterVec // kind: prompt, completion
	toolCalls    *prometheus.CounterVec // tool, outcome
	toolSeconds  *prometheus.HistogramVec
	takenOver    prometheus.Counter
	deliveries   *prometheus.CounterVec // ok

	apiCalls    *prometheus.CounterVec   // platform, method, status
	apiSeconds  *prometheus.HistogramVec // platform, method
	rateLimited *prometheus.CounterVec   // platform, method
}

var _ agent.Observer = (*metrics)(nil)

// newMetrics makes the metrics; tools are the names a tool call may carry
// as a label (the model can ask for a tool that does not exist).
func newMetrics(tools []string) *metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	m := &metrics{reg: reg, tools: map[string]bool{}}
	for _, t := range tools {
		m.tools[t] = true
	}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
		reg.MustRegister(c)
		return c
	}
	histogram := func(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
		h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
		reg.MustRegister(h)
		return h
	}
	m.turns = counter("firstmate_turns_total", "Turns ended, by platform and outcome.", "platform", "outcome")
	m.turnSeconds = histogram("firstmate_turn_duration_seconds", "How long a turn took, from taking the session to its end.",
		[]float64{0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600}, "platform", "outcome")
	m.modelSeconds = histogram("firstmate_model_call_duration_seconds", "How long one model call took, retries included.",
		[]float64{0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120}).WithLabelValues()
	m.modelErrors = counter("firstmate_model_call_errors_total", "Model calls that failed, by reason.", "reason")
	m.tokens = counter("firstmate_model_tokens_total", "Tokens the model reported, by kind (prompt, completion).", "kind")
	m.toolCalls = counter("firstmate_tool_calls_total", "Tool calls, by tool and outcome (ok, error, denied).", "tool", "outcome")
	m.toolSeconds = histogram("firstmate_tool_call_duration_seconds", "How long a tool call took.",
		[]float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300}, "tool")
	takenOver := prometheus.NewCounter(prometheus.CounterOpts{Name: "firstmate_sessions_taken_over_total",
		Help: "Sessions this replica claimed from the ready set (their holder died, or handed them back)."})
	reg.MustRegister(takenOver)
	m.takenOver = takenOver
	m.deliveries = counter("firstmate_outbox_deliveries_total", "Outbox entries shown (ok=true) or given up on (ok=false).", "ok")
	m.apiCalls = counter("firstmate_platform_api_requests_total",
		"HTTP requests to a platform's API, by platform, API method and status class (2xx, 4xx, 5xx, error).", "platform", "method", "status")
	m.apiSeconds = histogram("firstmate_platform_api_request_duration_seconds", "How long a platform API request took until its response headers.",
		[]float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}, "platform", "method")
	m.rateLimited = counter("firstmate_platform_api_rate_limited_total", "Platform API requests answered 429, by platform and API method.", "platform", "method")

	// Series that alerts divide by exist from the start, at 0.
	for _, k := range []string{"prompt", "completion"} {
		m.tokens.WithLabelValues(k)
	}
	for _, ok := range []string{"true", "false"} {
		m.deliveries.WithLabelValues(ok)
	}
	return m
}

// platforms creates the turn series of each platform served, at 0.
func (m *metrics) platforms(names ...string) {
	for _, p := range names {
		for _, o := range []string{agent.OutcomeAnswered, agent.OutcomeFailed, agent.OutcomeStopped,
			agent.OutcomeHandedOver, agent.OutcomeLeaseLost, agent.OutcomeNotSaved} {
			m.turns.WithLabelValues(p, o)
		}
	}
}

// handler serves the registry in the Prometheus text (or OpenMetrics)
// format.
func (m *metrics) handler(log *slog.Logger) http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		Registry: m.reg, // counts its own scrape errors
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	})
}

func (m *metrics) TurnDone(platform, outcome string, took time.Duration) {
	m.done.Add(1)
	m.turns.WithLabelValues(platform, outcome).Inc()
	m.turnSeconds.WithLabelValues(platform, outcome).Observe(took.Seconds())
}

func (m *metrics) ModelCall(took time.Duration, u agent.Usage, err error) {
	m.modelSeconds.Observe(took.Seconds())
	if err != nil {
		m.modelErrors.WithLabelValues(modelErrorReason(err)).Inc()
	}
	if u.PromptTokens > 0 {
		m.tokens.WithLabelValues("prompt").Add(float64(u.PromptTokens))
	}
	if u.CompletionTokens > 0 {
		m.tokens.WithLabelValues("completion").Add(float64(u.CompletionTokens))
	}
}

// modelErrorReason is a model error's label: rate_limited, http_4xx,
// http_5xx, network, timeout, canceled (stop, shutdown) or other (a
// budget, a reply that could not be read).
func modelErrorReason(err error) string {
	switch {
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, agent.ErrModelTooLarge):
		return "too_large"
	case errors.Is(err, agent.ErrModelStalled):
		return "stalled"
	}
	var me *agent.ModelError
	if !errors.As(err, &me) {
		return "other"
	}
	switch {
	case me.RateLimited():
		return "rate_limited"
	case me.Status >= 500:
		return "http_5xx"
	case me.Status >= 400:
		return "http_4xx"
	case me.Status == 0:
		return "network"
	}
	return "other"
}

func (m *metrics) ToolCall(tool, outcome string, took time.Duration) {
	if !m.tools[tool] {
		tool = "other"
	}
	m.toolCalls.WithLabelValues(tool, outcome).Inc()
	m.toolSeconds.WithLabelValues(tool).Observe(took.Seconds())
}

func (m *metrics) TakenOver() { m.takenOver.Inc() }

func (m *metrics) Delivered(ok bool) { m.deliveries.WithLabelValues(strconv.FormatBool(ok)).Inc() }

// client is an HTTP client for a platform's API whose requests are
// counted; method names the API method of a request (see slackMethod,
// telegramMethod). timeout 0 means none.
func (m *metrics) client(platform string, method func(*url.URL) string, timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: &transport{
		platform: platform, method: method, next: pooledTransport(), m: m,
		seen: map[string]bool{},
	}}
}

// pooledTransport keeps enough idle connections to one API host for the
// turns that run at once: the default two make busy turns dial (and, over
// TLS, handshake) for most requests. It opens no more than that many to one
// host (over HTTP/1.1, as to a local Bot API server, a burst of answers
// would otherwise open hundreds), and closes those idle for 30 s, so a
// burst leaves none behind.
func pooledTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 64
	t.MaxConnsPerHost = 64
	t.IdleConnTimeout = 30 * time.Second
	return t
}

// transport counts the requests a platform adapter makes: by API method
// and status class, their latency, and 429s.
type transport struct {
	platform string
	method   func(*url.URL) string
	next     http.RoundTripper
	m        *metrics

	mu   sync.Mutex
	seen map[string]bool // method labels given so far
}

// maxMethods bounds the method label's values per platform: method names
// come from our code, but a server (or a fake) could lead us anywhere.
const maxMethods = 100

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	method := t.label(t.method(req.URL))
	start := time.Now()
	resp, err := t.next.RoundTrip(req)
	t.m.apiSeconds.WithLabelValues(t.platform, method).Observe(time.Since(start).Seconds())
	status := "error"
	if err == nil {
		status = strconv.Itoa(resp.StatusCode/100) + "xx"
		if resp.StatusCode == http.StatusTooManyRequests {
			t.m.rateLimited.WithLabelValues(t.platform, method).Inc()
		}
	}
	t.m.apiCalls.WithLabelValues(t.platform, method, status).Inc()
	return resp, err
}

func (t *transport) label(method string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.seen[method] {
		return method
	}
	if len(t.seen) >= maxMethods {
		return "other"
	}
	t.seen[method] = true
	return method
}

// slackMethod names the Web API method of a request to base (the API
// URL, ending in /api/): /api/chat.postMessage is chat.postMessage.
// Anything else (a file download or upload, on Slack's file hosts) is
// "file" or "other". Slack's tokens travel in headers and bodies, and
// contain a '-' no method name has.
func slackMethod(base string) func(*url.URL) string {
	b, err := url.Parse(base)
	if err != nil || b.Path == "" {
		b = &url.URL{Host: "slack.com", Path: "/api/"}
	}
	prefix := strings.TrimSuffix(b.Path, "/") + "/"
	return func(u *url.URL) string {
		if u.Host != b.Host || !strings.HasPrefix(u.Path, prefix) {
			if strings.HasPrefix(u.Path, "/files-pri/") || strings.HasPrefix(u.Path, "/upload/") {
				return "file"
			}
			return "other"
		}
		if m := strings.TrimPrefix(u.Path, prefix); slackMethodName.MatchString(m) {
			return m
		}
		return "other"
	}
}

var slackMethodName = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9]*(\.[a-zA-Z][a-zA-Z0-9]*){0,4}$`)

// telegramMethod names the Bot API method of a request to root (the Bot
// API server): /bot<token>/sendMessage is sendMessage, a getFile download
// (/file/bot<token>/…) is "file". The token is never part of a label: a
// method name is letters only, and a token has a ':'.
func telegramMethod(root string) func(*url.URL) string {
	r, err := url.Parse(root)
	if err != nil {
		r = &url.URL{}
	}
	prefix := strings.TrimSuffix(r.Path, "/")
	return func(u *url.URL) string {
		rest, ok := strings.CutPrefix(u.Path, prefix)
		switch {
		case !ok:
			return "other"
		case strings.HasPrefix(rest, "/file/bot"):
			return "file"
		case strings.HasPrefix(rest, "/bot"):
			_, m, ok := strings.Cut(rest[len("/bot"):], "/")
			if ok && telegramMethodName.MatchString(m) {
				return m
			}
		}
		return "other"
	}
}

var telegramMethodName = regexp.MustCompile(`^[a-zA-Z]{1,64}$`)
