package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/firstmate/firstmate/adapters/slack"
	"github.com/firstmate/firstmate/adapters/telegram"
	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/agent/govern"
	"github.com/firstmate/firstmate/internal/testkit/fakeslack"
	"github.com/firstmate/firstmate/internal/testkit/faketelegram"
)

const tgToken = "7000000001:AAFakeSecret_tokenPart-xyz"

func TestSlackMethod(t *testing.T) {
	method := slackMethod("http://127.0.0.1:4000/api/")
	official := slackMethod(slackAPI)
	for _, tc := range []struct {
		method func(*url.URL) string
		url    string
		want   string
	}{
		{method, "http://127.0.0.1:4000/api/chat.postMessage", "chat.postMessage"},
		{method, "http://127.0.0.1:4000/api/assistant.threads.setStatus?token=xoxb-1-2-3", "assistant.threads.setStatus"},
		{method, "http://127.0.0.1:4000/api/oauth.v2.access", "oauth.v2.access"},
		{method, "http://127.0.0.1:4000/api/", "other"},
		{method, "http://127.0.0.1:4000/api/xoxb-123-456-secret", "other"},
		{method, "http://127.0.0.1:4000/api/chat.postMessage/extra", "other"},
		{method, "http://127.0.0.1:4000/elsewhere/chat.postMessage", "other"},
		{method, "http://127.0.0.1:9999/api/chat.postMessage", "other"}, // another host
		{official, "https://slack.com/api/chat.update", "chat.update"},
		{official, "https://files.slack.com/files-pri/T1-F1/report.pdf", "file"},
		{official, "https://files.slack.com/upload/v1/CwABAAAA", "file"},
		{official, "https://files.slack.com/files-pri/T1-F1/api/chat.postMessage", "file"},
	} {
		u, err := url.Parse(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		if got := tc.method(u); got != tc.want {
			t.Errorf("%s: method %q, want %q", tc.url, got, tc.want)
		}
	}
}

func TestTelegramMethod(t *testing.T) {
	method := telegramMethod("http://127.0.0.1:4000")
	official := telegramMethod("")
	for _, tc := range []struct {
		method func(*url.URL) string
		url    string
		want   string
	}{
		{method, "http://127.0.0.1:4000/bot" + tgToken + "/sendMessage", "sendMessage"},
		{method, "http://127.0.0.1:4000/bot" + tgToken + "/getUpdates", "getUpdates"},
		{method, "http://127.0.0.1:4000/file/bot" + tgToken + "/documents/file_1.pdf", "file"},
		{method, "http://127.0.0.1:4000/bot" + tgToken, "other"},
		{method, "http://127.0.0.1:4000/bot" + tgToken + "/", "other"},
		{method, "http://127.0.0.1:4000/bot" + tgToken + "/sendMessage/x", "other"},
		{method, "http://127.0.0.1:4000/bot123/" + tgToken, "other"},
		{method, "http://127.0.0.1:4000/bot" + strings.ReplaceAll(tgToken, ":", "/") + "/sendMessage", "other"},
		{method, "http://127.0.0.1:4000/sendMessage", "other"},
		{official, "https://api.telegram.org/bot" + tgToken + "/editMessageText", "editMessageText"},
	} {
		u, err := url.Parse(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		got := tc.method(u)
		if got != tc.want {
			t.Errorf("%s: method %q, want %q", tc.url, got, tc.want)
		}
		if strings.Contains(got, "Secret") || strings.Contains(got, ":") {
			t.Errorf("%s: the token leaks into the label %q", tc.url, got)
		}
	}
}

// The transport counts calls by method and status class, 429s apart, and
// no label it writes holds the token, whatever the path.
func TestTransportCountsAndKeepsTokensOut(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, "/sendMessage"):
			w.WriteHeader(http.StatusTooManyRequests)
		case strings.HasSuffix(r.URL.Path, "/getMe"):
			io.WriteString(w, `{"ok":true}`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	m := newMetrics(nil)
	c := m.client(telegram.Platform, telegramMethod(srv.URL), 5*time.Second)
	for _, p := range []string{"/getMe", "/sendMessage", "/sendMessage", "/", "/x/y", "", "/file/documents/a.pdf"} {
		resp, err := c.Get(srv.URL + "/bot" + tgToken + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	// A refused connection is status "error".
	dead := deadAddr(t)
	if _, err := m.client(telegram.Platform, telegramMethod("http://"+dead), time.Second).Get("http://" + dead + "/bot" + tgToken + "/getMe"); err == nil {
		t.Fatal("a dead address answered")
	}
	body := gather(t, m)
	for _, want := range []struct {
		name   string
		labels string
		value  float64
	}{
		{"firstmate_platform_api_requests_total", `method="getMe",platform="telegram",status="2xx"`, 1},
		{"firstmate_platform_api_requests_total", `method="sendMessage",platform="telegram",status="4xx"`, 2},
		{"firstmate_platform_api_rate_limited_total", `method="sendMessage",platform="telegram"`, 2},
		{"firstmate_platform_api_requests_total", `method="other",platform="telegram",status="4xx"`, 4},
		{"firstmate_platform_api_requests_total", `method="getMe",platform="telegram",status="error"`, 1},
		{"firstmate_platform_api_request_duration_seconds_count", `method="sendMessage",platform="telegram"`, 2},
	} {
		if got, ok := sample(body, want.name, want.labels); !ok || got != want.value {
			t.Errorf("%s{%s} = %v (found %v), want %v", want.name, want.labels, got, ok, want.value)
		}
	}
	if strings.Contains(body, tgToken) || strings.Contains(body, "Secret") {
		t.Errorf("the token is in the metrics:\n%s", body)
	}
}

func TestTransportBoundsMethods(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	m := newMetrics(nil)
	c := m.client(slack.Platform, slackMethod(srv.URL+"/api/"), 5*time.Second)
	for i := range maxMethods + 20 {
		resp, err := c.Get(srv.URL + "/api/made.up" + strconv.Itoa(i))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if n := strings.Count(gather(t, m), "firstmate_platform_api_requests_total{"); n != maxMethods+1 {
		t.Errorf("%d method series, want %d and the rest as other", n, maxMethods+1)
	}
	if got, _ := sample(gather(t, m), "firstmate_platform_api_requests_total", `method="other",platform="slack",status="2xx"`); got != 20 {
		t.Errorf("other = %v, want 20", got)
	}
}

func TestObserverMetrics(t *testing.T) {
	m := newMetrics([]string{"ls", "shell"})
	m.platforms("slack")
	m.TurnDone("slack", agent.OutcomeAnswered, 2*time.Second)
	m.ModelCall(time.Second, agent.Usage{PromptTokens: 100, CompletionTokens: 7}, nil)
	m.ModelCall(time.Second, agent.Usage{}, &agent.ModelError{Status: 429, Attempts: 3, Err: errors.New("slow down")})
	m.ToolCall("ls", "ok", time.Millisecond)
	m.ToolCall("made_up_by_the_model", "error", time.Millisecond)
	m.TakenOver()
	m.Delivered(true)
	body := gather(t, m)
	for _, want := range []struct {
		name, labels string
		value        float64
	}{
		{"firstmate_turns_total", `outcome="answered",platform="slack"`, 1},
		{"firstmate_turns_total", `outcome="failed",platform="slack"`, 0},
		{"firstmate_turn_duration_seconds_sum", `outcome="answered",platform="slack"`, 2},
		{"firstmate_model_call_duration_seconds_count", ``, 2},
		{"firstmate_model_call_errors_total", `reason="rate_limited"`, 1},
		{"firstmate_model_tokens_total", `kind="prompt"`, 100},
		{"firstmate_model_tokens_total", `kind="completion"`, 7},
		{"firstmate_tool_calls_total", `outcome="ok",tool="ls"`, 1},
		{"firstmate_tool_calls_total", `outcome="error",tool="other"`, 1},
		{"firstmate_tool_call_duration_seconds_count", `tool="ls"`, 1},
		{"firstmate_sessions_taken_over_total", ``, 1},
		{"firstmate_outbox_deliveries_total", `ok="true"`, 1},
		{"firstmate_outbox_deliveries_total", `ok="false"`, 0},
	} {
		if got, ok := sample(body, want.name, want.labels); !ok || got != want.value {
			t.Errorf("%s{%s} = %v (found %v), want %v", want.name, want.labels, got, ok, want.value)
		}
	}
	if strings.Contains(body, "made_up_by_the_model") {
		t.Error("a tool name the model made up became a label")
	}
	for _, runtime := range []string{"go_goroutines", "process_cpu_seconds_total"} {
		if !strings.Contains(body, runtime+" ") {
			t.Errorf("no %s", runtime)
		}
	}
}

func TestModelErrorReason(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&agent.ModelError{Status: 429}, "rate_limited"},
		{&agent.ModelError{Status: 503}, "http_5xx"},
		{&agent.ModelError{Status: 400}, "http_4xx"},
		{&agent.ModelError{Err: errors.New("connection refused")}, "network"},
		{fmt.Errorf("turn: %w", &agent.ModelError{Err: context.DeadlineExceeded}), "timeout"},
		{context.Canceled, "canceled"},
		{&agent.ModelError{Attempts: 1, Err: fmt.Errorf("passed the limit: %w", agent.ErrModelTooLarge)}, "too_large"},
		{&agent.ModelError{Attempts: 2, Err: fmt.Errorf("no data for 1m: %w", agent.ErrModelStalled)}, "stalled"},
		{&govern.BudgetError{Used: 10, Limit: 5}, "other"},
	} {
		if got := modelErrorReason(tc.err); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.err, got, tc.want)
		}
	}
}

// readyAdapter is a testAdapter that says whether it is connected.
type readyAdapter struct {
	testAdapter
	err error
}

func (a *readyAdapter) Ready() error { return a.err }

func TestReadyz(t *testing.T) {
	a := testApp(t)
	var stopping atomic.Bool
	up, down := &readyAdapter{}, &readyAdapter{err: errors.New("slack socket mode not connected")}
	get := func(ads ...adapter) (int, string) {
		rec := httptest.NewRecorder()
		readyz(a.store, ads, &stopping).ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), "GET", "/readyz", nil))
		return rec.Code, strings.TrimSpace(rec.Body.String())
	}
	if code, body := get(up, &testAdapter{}); code != 200 || body != "ready" {
		t.Errorf("all ready: %d %q", code, body)
	}
	if code, body := get(up, down); code != 503 || body != "slack socket mode not connected" {
		t.Errorf("an adapter down: %d %q", code, body)
	}
	stopping.Store(true)
	if code, body := get(up); code != 503 || body != "shutting down" {
		t.Errorf("shutting down: %d %q", code, body)
	}
	stopping.Store(false)
	a.store.Close()
	if code, body := get(up); code != 503 || body != "store unavailable" {
		t.Errorf("store closed: %d %q", code, body)
	}
}

// The libraries' own lines go through slog.
func TestLibraryLogAdapters(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	redisLog{log}.Printf(t.Context(), "redis: %s:%d: pool exhausted\n", "conn.go", 12)
	printfLog{log}.Println("Failed to get updates, retrying in 3 seconds...")
	printfLog{log}.Printf("Endpoint: %s", "getMe")
	lines := checkJSONLines(t, buf.String())
	if len(lines) != 3 || lines[0]["level"] != "WARN" || lines[0]["msg"] != "redis: conn.go:12: pool exhausted" ||
		lines[1]["msg"] != "Failed to get updates, retrying in 3 seconds..." {
		t.Errorf("lines: %v", lines)
	}
}

// checkJSONLines fails the test for a line of logs that is not a JSON
// object, and returns the objects.
func checkJSONLines(t *testing.T, logs string) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(logs))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var v map[string]any
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Errorf("a log line is not JSON: %q", sc.Text())
			continue
		}
		out = append(out, v)
	}
	return out
}

// gather returns what m's /metrics shows.
func gather(t *testing.T, m *metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.handler(slog.New(slog.DiscardHandler)).ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), "GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("/metrics: %d %s", rec.Code, rec.Body.String())
	}
	return rec.Body.String()
}

// sample finds name{labels} in a text exposition (labels as Prometheus
// writes them: sorted by name) and returns its value.
func sample(body, name, labels string) (float64, bool) {
	prefix := name + " "
	if labels != "" {
		prefix = name + "{" + labels + "} "
	}
	for line := range strings.Lines(body) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), prefix); ok {
			f, err := strconv.ParseFloat(v, 64)
			return f, err == nil
		}
	}
	return 0, false
}

// scrape GETs path on serve's HTTP listener.
func scrape(t *testing.T, addr, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitReady waits until /readyz says 200: the adapter has seen its
// connection come up (a moment after the platform did).
func waitReady(t *testing.T, addr string) {
	t.Helper()
	var code int
	var body string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if code, body = scrape(t, addr, "/readyz"); code == 200 && body == "ready\n" {
			return
		}
	}
	t.Fatalf("/readyz while serving: %d %q", code, body)
}

// waitSample scrapes /metrics until name{labels} reaches at least min.
func waitSample(t *testing.T, addr, name, labels string, min float64) string {
	t.Helper()
	var body string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		_, body = scrape(t, addr, "/metrics")
		if v, ok := sample(body, name, labels); ok && v >= min {
			return body
		}
	}
	t.Fatalf("/metrics has no %s{%s} >= %v:\n%s", name, labels, min, body)
	return ""
}

// One Slack turn with a tool call, on the real binary logging JSON: the
// metrics count it, /readyz is 200 while serving, and every line the
// process wrote is JSON.
func TestServeMetricsSlack(t *testing.T) {
	t.Parallel()
	var e *slackEnv
	// Registered first, so it runs after serve has stopped: the shutdown's
	// lines are checked too.
	t.Cleanup(func() {
		if e != nil && len(checkJSONLines(t, e.srv.logs())) == 0 {
			t.Error("serve wrote no log lines")
		}
	})
	e = startSlack(t, slackAgentModel, "FIRSTMATE_LOG_FORMAT=json")
	addr := e.http
	waitReady(t, addr)
	ev := e.slack.Mention(fakeslack.General, fakeslack.Alice, "<@"+e.slack.BotUserID()+"> what is in the workspace?")
	e.slack.SendEvent(ev)
	e.waitReplies(t, fakeslack.General, ev.TS(), 2)

	body := waitSample(t, addr, "firstmate_turns_total", `outcome="answered",platform="slack"`, 1)
	if v, _ := sample(body, "firstmate_turns_total", `outcome="answered",platform="slack"`); v != 1 {
		t.Errorf("answered turns = %v, want 1", v)
	}
	for _, want := range []struct{ name, labels string }{
		{"firstmate_tool_calls_total", `outcome="ok",tool="ls"`},
		{"firstmate_tool_call_duration_seconds_count", `tool="ls"`},
		{"firstmate_model_call_duration_seconds_count", ``},
		{"firstmate_platform_api_requests_total", `method="chat.postMessage",platform="slack",status="2xx"`},
		{"firstmate_platform_api_requests_total", `method="auth.test",platform="slack",status="2xx"`},
		{"firstmate_platform_api_request_duration_seconds_count", `method="chat.postMessage",platform="slack"`},
		{"firstmate_outbox_deliveries_total", `ok="true"`},
		{"go_goroutines", ``},
	} {
		// The answer may be delivered (from the outbox) after the turn ended.
		body = waitSample(t, addr, want.name, want.labels, 1)
	}
	for _, secret := range []string{e.slack.BotToken(), e.slack.AppToken()} {
		if strings.Contains(body, secret) {
			t.Errorf("a token is in /metrics")
		}
	}
}

// The same for Telegram: the token is in every Bot API URL, and never in
// a label.
func TestServeMetricsTelegram(t *testing.T) {
	t.Parallel()
	var e *telegramEnv
	t.Cleanup(func() {
		if e != nil && e.srv != nil && len(checkJSONLines(t, e.srv.logs())) == 0 {
			t.Error("serve wrote no log lines")
		}
	})
	e = telegramBase(t, toolModel("**Done.**"))
	addr := ""
	for _, kv := range e.env {
		if v, ok := strings.CutPrefix(kv, "FIRSTMATE_HTTP_ADDR="); ok {
			addr = v
		}
	}
	e.env = append(e.env, "FIRSTMATE_LOG_FORMAT=json")
	e.srv = startServe(t, e.env)
	if !e.tg.WaitFor(20*time.Second, func() bool { return e.tg.Polling() > 0 }) {
		t.Fatalf("firstmate does not poll\n%s", e.srv.logs())
	}
	waitReady(t, addr)
	e.tg.PrivateMessage(faketelegram.Alice, "what is in the workspace?")
	e.answer(t, faketelegram.Alice, 0, "Done.")

	body := waitSample(t, addr, "firstmate_turns_total", `outcome="answered",platform="telegram"`, 1)
	if v, _ := sample(body, "firstmate_turns_total", `outcome="answered",platform="telegram"`); v != 1 {
		t.Errorf("answered turns = %v, want 1", v)
	}
	for _, want := range []struct{ name, labels string }{
		{"firstmate_tool_calls_total", `outcome="ok",tool="ls"`},
		{"firstmate_platform_api_requests_total", `method="sendMessage",platform="telegram",status="2xx"`},
		{"firstmate_platform_api_requests_total", `method="getMe",platform="telegram",status="2xx"`},
		{"firstmate_platform_api_requests_total", `method="getUpdates",platform="telegram",status="2xx"`},
	} {
		// The answer may be delivered (from the outbox) after the turn ended.
		body = waitSample(t, addr, want.name, want.labels, 1)
	}
	token := e.tg.Token()
	_, secret, _ := strings.Cut(token, ":")
	if strings.Contains(body, token) || strings.Contains(body, secret) {
		t.Errorf("the bot token is in /metrics")
	}
}
