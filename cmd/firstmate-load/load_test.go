package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/firstmate/firstmate/internal/testkit/fakellm"
	fmredis "github.com/firstmate/firstmate/store/redis"
)

// binary is the firstmate built for the tests (without -race: it is the
// system under load, not under test).
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "firstmate-load-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "firstmate")
	out, err := exec.Command("go", "build", "-o", binary, "github.com/firstmate/firstmate/cmd/firstmate").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build firstmate: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// testRedis is $REDIS_URL or the local Redis; the test skips without one.
func testRedis(t *testing.T) string {
	url := os.Getenv("REDIS_URL")
	if url == "" {
		url = "redis://127.0.0.1:6379/0"
	}
	opt, err := goredis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	c := goredis.NewClient(opt)
	defer c.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Skipf("no Redis at %s: %v", opt.Addr, err)
	}
	return url
}

// A small run on each platform: one replica, 20 people, 100 messages of
// which a tenth are delivered twice, two in flight a person so that turns
// collect messages. Every message is answered once, in order, and the
// report says so in all its fields.
func TestSmallRun(t *testing.T) {
	url := testRedis(t)
	for _, platform := range []string{"slack", "telegram"} {
		t.Run(platform, func(t *testing.T) {
			cfg := &config{
				Platform: platform, Firstmate: binary, Replicas: 1, Redis: url,
				Sessions: 20, Messages: 100, Dup: 0.1, Window: 2,
				Tools: 1, Chunk: 4, Idle: time.Second, Settle: time.Second, ModelLatency: 300 * time.Millisecond,
				Timeout: 40 * time.Second, Stall: 20 * time.Second, IdleVia: "store", Seed: 1,
			}
			if err := cfg.check(); err != nil {
				t.Fatal(err)
			}
			var log bytes.Buffer
			rep, err := run(t.Context(), cfg, &log)
			if err != nil {
				t.Fatalf("run: %v\n%s", err, log.String())
			}
			var text bytes.Buffer
			rep.WriteText(&text)
			t.Logf("\n%s", text.String())

			if rep.Answered != 100 || rep.Lost != 0 || rep.AnsweredTwice != 0 || rep.OutOfOrder != 0 {
				t.Errorf("answered %d, lost %d, answered twice %d, out of order %d; want 100, 0, 0, 0",
					rep.Answered, rep.Lost, rep.AnsweredTwice, rep.OutOfOrder)
			}
			if rep.Duplicated == 0 {
				t.Error("no message was delivered twice")
			}
			if rep.Turns == 0 || rep.Turns > 100 || rep.TurnsPerS <= 0 || rep.DurationS <= 0 {
				t.Errorf("turns %d, %.1f/s in %.2fs", rep.Turns, rep.TurnsPerS, rep.DurationS)
			}
			if rep.ModelCallsTurn < 2 {
				t.Errorf("%.2f model requests a turn; a one-tool turn takes two", rep.ModelCallsTurn)
			}
			if l := rep.LatencyMS; l.P50 <= 0 || l.P50 > l.P95 || l.P95 > l.P99 || l.P99 > l.Max {
				t.Errorf("latency percentiles out of order: %+v", l)
			}
			// A shared Redis counts every client's commands, and clients that
			// leave during the run take theirs away: only a private server's
			// round trips are this run's alone.
			if rep.Redis.CommandsPerTurn <= 0 || rep.Redis.ByCommand["evalsha"] <= 0 ||
				rep.Redis.Private && rep.Redis.RoundTripsPerTurn <= 0 {
				t.Errorf("redis: %+v", rep.Redis)
			}
			if len(rep.PlatformCalls) == 0 {
				t.Error("no platform calls counted")
			}
			if len(rep.Replica) != 1 || rep.Replica[0].PID == 0 || rep.Replica[0].IdleRSSMB <= 0 ||
				rep.Replica[0].LoadRSSMB <= 0 || rep.Replica[0].PeakRSSMB < rep.Replica[0].LoadRSSMB {
				t.Errorf("replicas: %+v", rep.Replica)
			}

			// Turns wait 300 ms on the model: the samples every 100 ms see
			// some, at most one a person.
			if h := rep.Held; h.Turns < 1 || h.Turns > 20 || h.RSSMB <= 0 || h.PerTurnKB < 0 {
				t.Errorf("held at once: %+v", h)
			}

			// The JSON has every field an operator reads.
			b, err := json.Marshal(rep)
			if err != nil {
				t.Fatal(err)
			}
			var fields map[string]any
			if err := json.Unmarshal(b, &fields); err != nil {
				t.Fatal(err)
			}
			for _, f := range []string{"turns_per_s", "latency_ms", "lost", "answered_twice", "out_of_order", "redis", "replica", "platform_calls_per_turn", "cpu_s", "held"} {
				if _, ok := fields[f]; !ok {
					t.Errorf("the JSON report has no %q: %s", f, b)
				}
			}
			for _, f := range []string{"p50", "p95", "p99", "max"} {
				if _, ok := fields["latency_ms"].(map[string]any)[f]; !ok {
					t.Errorf("latency_ms has no %q", f)
				}
			}
			for _, f := range []string{"commands_per_turn", "round_trips_per_turn"} {
				if _, ok := fields["redis"].(map[string]any)[f]; !ok {
					t.Errorf("redis has no %q", f)
				}
			}
		})
	}
}

// The tracker's verdicts: a check that never fails proves nothing.
func TestTrackerFindsFailures(t *testing.T) {
	tr := newTracker()
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	for seq := range 4 {
		tr.sent(msgID{1, seq}, at(seq))
	}
	tr.sent(msgID{2, 0}, at(0))
	tr.shown([]msgID{{1, 0}}, at(10), "D1/1")
	tr.shown([]msgID{{1, 0}}, at(11), "D1/1")         // an edit of the same answer: once
	tr.shown([]msgID{{1, 2}}, at(20), "D1/2")         // 2 before 1: 1 is out of order
	tr.shown([]msgID{{1, 1}}, at(30), "D1/3")         //
	tr.shown([]msgID{{1, 1}, {1, 3}}, at(40), "D1/4") // 1 a second time; 3 with it
	tr.shown([]msgID{{9, 9}}, at(50), "D9/1")         // not ours
	tr.shown([]msgID{{2, 0}}, at(5), "")              // visible, as a draft only: not answered

	o := tr.summarize(time.Millisecond)
	if o.sent != 5 || o.answered != 4 || o.lost != 1 || o.twice != 1 || o.outOfOrder != 1 {
		t.Errorf("sent %d answered %d lost %d twice %d out of order %d; want 5 4 1 1 1", o.sent, o.answered, o.lost, o.twice, o.outOfOrder)
	}
	if !slices.Equal(o.lostIDs, []string{"q-000002-00000"}) || !slices.Equal(o.disorderIDs, []string{"q-000001-00001"}) {
		t.Errorf("lost %v, out of order %v", o.lostIDs, o.disorderIDs)
	}
	if len(o.twiceIDs) != 1 || !strings.HasPrefix(o.twiceIDs[0], "q-000001-00001") {
		t.Errorf("answered twice: %v", o.twiceIDs)
	}
	// Latencies less the model's millisecond, sorted: 9 (0), 17 (2), 28
	// (1, first shown at 30), 36 (3).
	want := []time.Duration{9, 17, 28, 36}
	for i := range want {
		want[i] *= time.Millisecond
	}
	if !slices.Equal(o.latencies, want) {
		t.Errorf("latencies %v, want %v", o.latencies, want)
	}
}

func TestModelAnswersTheTurnsMessages(t *testing.T) {
	text := func(s string) *string { return &s }
	m := &model{tools: 1}
	history := []fakellm.Message{
		{Role: "system", Content: text("You are firstmate.")},
		{Role: "user", Content: text("q-000003-00000 what is in the workspace?")},
		{Role: "assistant", ToolCalls: []fakellm.WireToolCall{{ID: "c1", Type: "function", Function: fakellm.WireFunction{Name: "ls", Arguments: "{}"}}}},
		{Role: "tool", ToolCallID: "c1", Content: text("(empty)")},
		{Role: "assistant", Content: text("**Done.** ans-000003-00000")},
		// Two messages collected into one turn.
		{Role: "user", Content: text("[person3] q-000003-00001 what?\n[person3] q-000003-00002 and?")},
	}
	first := m.reply(&fakellm.Request{Messages: history})
	if len(first.ToolCalls) != 1 || first.ToolCalls[0].Name != "ls" {
		t.Fatalf("first reply %+v, want one ls call", first)
	}
	history = append(history,
		fakellm.Message{Role: "assistant", ToolCalls: []fakellm.WireToolCall{{ID: "c2", Type: "function", Function: fakellm.WireFunction{Name: "ls", Arguments: "{}"}}}},
		fakellm.Message{Role: "tool", ToolCallID: "c2", Content: text("(empty)")},
		// A message that steers the running turn.
		fakellm.Message{Role: "user", Content: text("q-000003-00003 also")},
	)
	second := m.reply(&fakellm.Request{Messages: history})
	got := parseTokens(answerRE, []byte(second.Text))
	want := []msgID{{3, 1}, {3, 2}, {3, 3}}
	if len(second.ToolCalls) != 0 || !slices.Equal(got, want) {
		t.Errorf("second reply %+v answers %v, want %v", second, got, want)
	}
	if m.requests.Load() != 2 || m.answers.Load() != 1 {
		t.Errorf("%d requests, %d answers; want 2, 1", m.requests.Load(), m.answers.Load())
	}
}

func TestParseStats(t *testing.T) {
	info := "# Stats\r\ntotal_connections_received:3\r\ntotal_reads_processed:1234\r\n\r\n# Commandstats\r\n" +
		"cmdstat_evalsha:calls=7,usec=70,usec_per_call=10.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_get:calls=4,usec=4,usec_per_call=1.00,rejected_calls=0,failed_calls=0\r\n"
	s, err := parseStats(info, time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	if s.reads != 1234 || s.commands["evalsha"] != 7 || s.commands["get"] != 4 || len(s.commands) != 2 {
		t.Errorf("parsed %+v", s)
	}
	later, _ := parseStats(strings.ReplaceAll(strings.ReplaceAll(info, "calls=7,", "calls=9,"), ":1234", ":1240"), time.Unix(2, 0))
	d := later.since(s)
	if d.reads != 6 || d.total() != 2 || d.commands["evalsha"] != 2 || d.took != 2*time.Second {
		t.Errorf("delta %+v", d)
	}
}

func TestPercentiles(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 100; i++ {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	if p := percentiles(ds); p != (Percentiles{P50: 50, P95: 95, P99: 99, Max: 100}) {
		t.Errorf("percentiles of 1..100ms: %+v", p)
	}
	if p := percentiles(nil); p != (Percentiles{}) {
		t.Errorf("percentiles of nothing: %+v", p)
	}
}

// The steady rate leaves out a slow start and a slow drain: 1000 answers,
// the middle 800 at 500 a second, the first and last 100 at 10 a second.
func TestSteadyRate(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	var shown []time.Time
	at := t0
	for i := range 1000 {
		switch {
		case i <= 100 || i > 900:
			at = at.Add(100 * time.Millisecond)
		default:
			at = at.Add(2 * time.Millisecond)
		}
		shown = append(shown, at)
	}
	slices.Reverse(shown) // in any order
	if r := steadyRate(shown); r < 499 || r > 501 {
		t.Errorf("steady rate %.1f a second, want 500", r)
	}
	if overall := 1000 / at.Sub(t0).Seconds(); overall > 60 {
		t.Fatalf("the test's overall rate is %.1f, want it low", overall)
	}
	if r := steadyRate(shown[:99]); r != 0 {
		t.Errorf("steady rate of 99 answers %.1f, want 0", r)
	}
	same := make([]time.Time, 200)
	if r := steadyRate(same); r != 0 {
		t.Errorf("steady rate of answers at one instant %.1f, want 0", r)
	}
}

func TestFlags(t *testing.T) {
	var stderr bytes.Buffer
	cfg, err := parseFlags(strings.Fields("-platform telegram -replicas 2 -sessions 1000 -messages 5000 -dup 0.1 -env A=1 -env B=2"), &stderr)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	if cfg.Platform != "telegram" || cfg.Replicas != 2 || cfg.Sessions != 1000 || cfg.Messages != 5000 || cfg.Dup != 0.1 ||
		!slices.Equal(cfg.Env, []string{"A=1", "B=2"}) || cfg.Window != 1 || cfg.Tools != 1 {
		t.Errorf("parsed %+v", cfg)
	}
	for _, bad := range []string{"-platform irc", "-replicas 0", "-dup 2", "-env NOEQUALS", "-pids 12", "-idle-via carrier", "extra"} {
		if _, err := parseFlags(strings.Fields(bad), &stderr); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// Seeded sessions hold one finished turn each, with no lease and nothing
// waiting: idle, as a replica leaves them.
func TestSeedSessions(t *testing.T) {
	url := testRedis(t)
	prefix := fmt.Sprintf("fmload-test-%d-%d", os.Getpid(), time.Now().UnixNano())
	opt, _ := goredis.ParseURL(url)
	rc := goredis.NewClient(opt)
	// Cleanups run last first: the keys go, then the client.
	t.Cleanup(func() { rc.Close() })
	t.Cleanup(func() {
		if err := deletePrefix(context.Background(), rc, prefix); err != nil {
			t.Errorf("removing the test's keys: %v", err)
		}
	})

	plat := &telegramPlatform{}
	if err := seedSessions(t.Context(), url, prefix, 5, plat.Key); err != nil {
		t.Fatal(err)
	}
	st, err := fmredis.Open(t.Context(), url, fmredis.Options{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for i := range 5 {
		h, err := st.History(t.Context(), plat.Key(i))
		if err != nil || len(h) != 4 || h[3].Content == "" {
			t.Errorf("session %d: history %v, %v; want one turn of 4 messages", i, h, err)
		}
		if n, err := st.Pending(t.Context(), plat.Key(i)); err != nil || n != 0 {
			t.Errorf("session %d: %d pending, %v", i, n, err)
		}
	}
	if ready, err := st.Ready(t.Context(), 10); err != nil || len(ready) != 0 {
		t.Errorf("ready sessions %v, %v; want none", ready, err)
	}
}

func TestListenerPID(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if pid := listenerPID(ln.Addr().String()); pid != os.Getpid() {
		t.Errorf("listenerPID(%s) = %d, want this process, %d", ln.Addr(), pid, os.Getpid())
	}
	addr := ln.Addr().String()
	ln.Close()
	if pid := listenerPID(addr); pid != 0 {
		t.Errorf("listenerPID of a closed port = %d", pid)
	}
}
