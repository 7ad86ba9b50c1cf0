package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	fastjson "github.com/segmentio/encoding/json"

	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/internal/testkit/fakeslack"
	"github.com/firstmate/firstmate/internal/testkit/faketelegram"
)

// platform is a fake chat platform as the load drives it.
type platform interface {
	// Env is what a replica needs to reach the fake.
	Env() []string
	// Reached reports whether n replicas are connected (Slack: n Socket
	// Mode connections; Telegram: a long poll open, which one replica
	// holds at a time).
	Reached(n int) bool
	// Send hands a message of person session to the bot and returns a
	// function that delivers it once more.
	Send(session int, text string) (again func())
	// Key is the session key the bot gives a session's messages.
	Key(session int) agent.SessionKey
	// Calls counts the bot's API calls by method (the long poll left out)
	// since the last ResetCalls.
	Calls() map[string]int
	ResetCalls()
	// Retries is how many deliveries the fake made again on its own (an
	// envelope not acked in time).
	Retries() int
	// Conns is how many TCP connections the bot opened to the API so far
	// (Socket Mode's WebSocket left out).
	Conns() int64
	Close()
}

// People are numbered from 0; the load's sessions come first, the idle
// sessions made by messages after them.

// callCounter counts API calls by method.
type callCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *callCounter) add(method string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[method]++
}

func (c *callCounter) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.n)
}

func (c *callCounter) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n = nil
}

// front serves h on a loopback port and counts the TCP connections
// clients open to it.
type front struct {
	*httptest.Server
	conns atomic.Int64
}

func newFront(h http.Handler) *front {
	f := &front{Server: httptest.NewUnstartedServer(h)}
	f.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			f.conns.Add(1)
		}
	}
	f.Start()
	return f
}

// capture keeps what a handler answers, for the IDs in it.
type capture struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (c *capture) WriteHeader(code int) {
	c.status = code
	c.ResponseWriter.WriteHeader(code)
}

func (c *capture) Write(b []byte) (int, error) {
	if c.body.Len() < 1<<16 {
		c.body.Write(b)
	}
	return c.ResponseWriter.Write(b)
}

// readBody reads a request's body and puts it back for the fake.
func readBody(r *http.Request) []byte {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	return body
}

// slackPlatform is the fake Slack behind a handler that watches the Web
// API calls for answers. Socket Mode goes straight to the fake (the URL
// apps.connections.open gives is the fake's own).
type slackPlatform struct {
	fake  *fakeslack.Server
	front *front
	track *tracker
	calls callCounter
}

// slackUser is person n's member ID: U, then the fake's ID alphabet.
func slackUser(n int) string { return fmt.Sprintf("U0LOAD%06d", n) }

func newSlack(track *tracker, people int) *slackPlatform {
	// Spread: with several replicas, each one's connection gets a share of
	// the events, as Slack spreads them.
	opts := []fakeslack.Option{fakeslack.WithPingInterval(5 * time.Second), fakeslack.WithSpread()}
	for n := range people {
		id := slackUser(n)
		opts = append(opts, fakeslack.WithUser(fakeslack.User{ID: id, Name: fmt.Sprintf("person%d", n), RealName: fmt.Sprintf("Person %d", n)}))
	}
	p := &slackPlatform{fake: fakeslack.New(nil, opts...), track: track}
	p.front = newFront(http.HandlerFunc(p.serve))
	return p
}

func (p *slackPlatform) Env() []string {
	return []string{
		"SLACK_BOT_TOKEN=" + p.fake.BotToken(), "SLACK_APP_TOKEN=" + p.fake.AppToken(),
		"SLACK_API_URL=" + p.front.URL + "/api/", "SLACK_ACCESS=open",
	}
}

func (p *slackPlatform) Reached(n int) bool { return p.fake.OpenConnections() >= n }

func (p *slackPlatform) Send(session int, text string) func() {
	ev := p.fake.DirectMessage(slackUser(session), text)
	p.fake.SendEvent(ev)
	// The same event again (same event_id), as Slack re-sends one.
	return func() { p.fake.SendEvent(ev) }
}

func (p *slackPlatform) Key(session int) agent.SessionKey {
	// The fake opens person U0X's DM as D0X (see fakeslack's dmLocked).
	return agent.SessionKey{Platform: "slack", Team: p.fake.TeamID(), Chat: "D" + strings.TrimPrefix(slackUser(session), "U")}
}

func (p *slackPlatform) Calls() map[string]int { return p.calls.snapshot() }
func (p *slackPlatform) Conns() int64          { return p.front.conns.Load() }
func (p *slackPlatform) ResetCalls()           { p.calls.reset() }

func (p *slackPlatform) Retries() int {
	n := 0
	for _, e := range p.fake.Envelopes() {
		if e.RetryAttempt > 0 {
			n++
		}
	}
	return n
}

func (p *slackPlatform) Close() {
	p.front.Close()
	p.fake.Close()
}

// slackShows are the methods whose content people see.
var slackShows = map[string]bool{
	"chat.postMessage": true, "chat.update": true, "chat.postEphemeral": true,
	"chat.startStream": true, "chat.appendStream": true, "chat.stopStream": true,
}

func (p *slackPlatform) serve(w http.ResponseWriter, r *http.Request) {
	at := time.Now()
	method, ok := strings.CutPrefix(r.URL.Path, "/api/")
	if !ok {
		p.fake.ServeHTTP(w, r)
		return
	}
	p.calls.add(method)
	if !slackShows[method] {
		p.fake.ServeHTTP(w, r)
		return
	}
	ids := parseTokens(answerRE, readBody(r))
	if len(ids) == 0 {
		p.fake.ServeHTTP(w, r)
		return
	}
	c := &capture{ResponseWriter: w, status: http.StatusOK}
	p.fake.ServeHTTP(c, r)
	// Every method answers the message's channel and ts: the message
	// that holds the answer, whether posted, edited or streamed.
	var res struct {
		OK      bool   `json:"ok"`
		Channel string `json:"channel"`
		TS      string `json:"ts"`
	}
	// The fake's answer is encoding/json's output, which segmentio's
	// decoder reads the same, faster: this runs for every answer.
	if c.status != http.StatusOK || fastjson.Unmarshal(c.body.Bytes(), &res) != nil || !res.OK {
		return
	}
	p.track.shown(ids, at, res.Channel+"/"+res.TS)
}

// telegramPlatform is the fake Telegram behind a handler that watches the
// Bot API calls for answers.
type telegramPlatform struct {
	fake  *faketelegram.Server
	front *front
	track *tracker
	calls callCounter
}

// telegramUser is person n's user ID, which is also their private chat's.
func telegramUser(n int) int64 { return 5_000_000_000 + int64(n) }

func newTelegram(track *tracker) *telegramPlatform {
	p := &telegramPlatform{fake: faketelegram.New(nil), track: track}
	p.front = newFront(http.HandlerFunc(p.serve))
	return p
}

func (p *telegramPlatform) Env() []string {
	return []string{"TELEGRAM_BOT_TOKEN=" + p.fake.Token(), "TELEGRAM_API_URL=" + p.front.URL, "TELEGRAM_ACCESS=open"}
}

func (p *telegramPlatform) Reached(int) bool { return p.fake.Polling() > 0 }

func (p *telegramPlatform) Send(session int, text string) func() {
	u := p.fake.PrivateMessage(telegramUser(session), text)
	// The same message in a second update.
	return func() { p.fake.Enqueue(u) }
}

func (p *telegramPlatform) Key(session int) agent.SessionKey {
	return agent.SessionKey{Platform: "telegram", Chat: strconv.FormatInt(telegramUser(session), 10)}
}

func (p *telegramPlatform) Calls() map[string]int { return p.calls.snapshot() }
func (p *telegramPlatform) Conns() int64          { return p.front.conns.Load() }
func (p *telegramPlatform) ResetCalls()           { p.calls.reset() }
func (p *telegramPlatform) Retries() int          { return 0 }

func (p *telegramPlatform) Close() {
	p.front.Close()
	p.fake.Close()
}

func (p *telegramPlatform) serve(w http.ResponseWriter, r *http.Request) {
	at := time.Now()
	// /bot<token>/<method>, method names in any case.
	_, method, ok := strings.Cut(strings.TrimPrefix(r.URL.Path, "/bot"), "/")
	if !ok || strings.HasPrefix(r.URL.Path, "/file/") {
		p.fake.ServeHTTP(w, r)
		return
	}
	method = strings.ToLower(method)
	if method != "getupdates" {
		p.calls.add(method)
	}
	switch method {
	case "sendmessage", "editmessagetext", "sendmessagedraft":
	default:
		p.fake.ServeHTTP(w, r)
		return
	}
	ids := parseTokens(answerRE, readBody(r))
	if len(ids) == 0 {
		p.fake.ServeHTTP(w, r)
		return
	}
	c := &capture{ResponseWriter: w, status: http.StatusOK}
	p.fake.ServeHTTP(c, r)
	var res struct {
		OK     bool            `json:"ok"`
		Result json.RawMessage `json:"result"`
	}
	if c.status != http.StatusOK || json.Unmarshal(c.body.Bytes(), &res) != nil || !res.OK {
		return
	}
	var msg struct {
		MessageID int `json:"message_id"`
		Chat      struct {
			ID int64 `json:"id"`
		} `json:"chat"`
	}
	// A draft answers true: visible, but no message of its own.
	holder := ""
	if json.Unmarshal(res.Result, &msg) == nil && msg.MessageID != 0 {
		holder = fmt.Sprintf("%d/%d", msg.Chat.ID, msg.MessageID)
	}
	p.track.shown(ids, at, holder)
}

// waitReached waits until the fake sees n replicas, or ctx ends.
func waitReached(ctx context.Context, p platform, n int) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for !p.Reached(n) {
		select {
		case <-ctx.Done():
			return fmt.Errorf("the platform did not see %d replica(s): %w", n, context.Cause(ctx))
		case <-t.C:
		}
	}
	return nil
}
