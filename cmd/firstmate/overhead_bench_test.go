package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/firstmate/firstmate/internal/testkit/fakellm"
	"github.com/firstmate/firstmate/internal/testkit/fakeslack"
	"github.com/firstmate/firstmate/internal/testkit/faketelegram"
	"github.com/firstmate/firstmate/tools/sandbox"
)

// The cadence of BenchmarkAnswerOverhead; each can be changed by the
// environment variable named beside it (a Go duration).
const (
	benchModelDelay = 200 * time.Millisecond  // FIRSTMATE_BENCH_MODEL_DELAY: every model reply
	benchQuiet      = 1500 * time.Millisecond // FIRSTMATE_BENCH_QUIET: no platform call for this long ends a turn
	benchGap        = 2500 * time.Millisecond // FIRSTMATE_BENCH_GAP: between two questions of a person
	benchGroupGap   = 6 * time.Second         // FIRSTMATE_BENCH_GROUP_GAP: the same in a Telegram group
	benchIdle       = 3 * time.Second         // FIRSTMATE_BENCH_IDLE: BenchmarkStartup's wait before reading the RSS
	// FIRSTMATE_BENCH_API_LATENCY (default none) is a round trip added to
	// every platform call; see behindLatency.

	benchAnswerTimeout = 20 * time.Second
	benchSettleLimit   = time.Minute
)

// BenchmarkAnswerOverhead measures what the bot adds to the time a person
// waits for an answer: from the moment the platform hands the bot a
// question to the moment the answer is first visible, less the time the
// model took. Each sub-benchmark runs the real `firstmate serve` (built
// without -race; on Redis when it answers, else the embedded store)
// against a fake platform and a fake model that answers every question with
// one ls call and then a short Markdown answer carrying a token of its own.
// Every model reply takes FIRSTMATE_BENCH_MODEL_DELAY (default 200ms).
//
// b.N questions are asked one after another, so give it a count:
//
//	go test -run '^$' -bench AnswerOverhead -benchtime 20x ./cmd/firstmate
//
// A question waits until the previous answer is visible, the platform calls
// have settled (none for FIRSTMATE_BENCH_QUIET, default 1.5s) and a person's
// pause has passed since the previous question (FIRSTMATE_BENCH_GAP, default
// 2.5s; FIRSTMATE_BENCH_GROUP_GAP, default 6s, in the forum topic, as a group
// takes only about twenty bot messages a minute). That cadence keeps within
// each platform's published rate limits, so what is measured is the bot's own
// overhead, not a platform's budget. The fakes answer at once;
// FIRSTMATE_BENCH_API_LATENCY adds a round trip to every platform call, to
// see what the calls the answer waits for cost on a real network.
//
// An answer is visible at the Call.At of the first call the fake answered
// ok whose content holds the token: a post, an edit of a message posted
// earlier (a live answer), a Telegram draft, or the stream call that
// completes it in Slack. A fake sets Call.At when it has read the request,
// before handling it: within microseconds of Message.Sent or Posted for a
// post, and an edit has no time of its own in the fakes.
//
// Reported: the overhead's p50-ms, p95-ms and max-ms; writes/turn (posts,
// edits, deletes, drafts, reactions, statuses, streams, uploads) and, on
// Telegram, typing/turn (sendChatAction). The calls per method per turn are
// logged. A turn's calls are the ones recorded from its question to the next
// question (to the end of the settle for the last), so that a late edit
// still counts for its turn; getUpdates, the long poll that is always open,
// is left out.
func BenchmarkAnswerOverhead(b *testing.B) {
	b.Run("telegram-private", func(b *testing.B) {
		tg, llm, logs, delay := startTelegramBench(b)
		measureAnswers(b, telegramChat(tg, benchEnvDuration(b, "FIRSTMATE_BENCH_GAP", benchGap), logs,
			func(_ int, text string) { tg.PrivateMessage(faketelegram.Alice, text) }), llm, delay)
	})
	b.Run("telegram-topic", func(b *testing.B) {
		tg, llm, logs, delay := startTelegramBench(b)
		topic := tg.CreateTopic(faketelegram.Forum, faketelegram.Alice, "benchmarks")
		if !tg.WaitFor(benchAnswerTimeout, func() bool { return tg.Offset() > topic.UpdateID }) {
			b.Fatalf("the topic's creation was not received\n%s", logs.String())
		}
		thread := topic.Message.MessageThreadID
		measureAnswers(b, telegramChat(tg, benchEnvDuration(b, "FIRSTMATE_BENCH_GROUP_GAP", benchGroupGap), logs,
			func(_ int, text string) {
				tg.Mention(faketelegram.Forum, faketelegram.Alice, text, faketelegram.InTopic(thread))
			}), llm, delay)
	})
	// A channel thread as people hold one: a mention in the channel starts
	// it, and the follow-ups are plain replies in that thread (no mention,
	// the bot answers there already). A new mention per question would be
	// a new thread each time, which is what slack-dm's top-level messages
	// already measure.
	b.Run("slack-thread", func(b *testing.B) {
		sl, llm, logs, delay := startSlackBench(b)
		var root string
		measureAnswers(b, slackChat(sl, benchEnvDuration(b, "FIRSTMATE_BENCH_GAP", benchGap), logs,
			func(_ int, text string) {
				if root == "" {
					ev := sl.Mention(fakeslack.General, fakeslack.Alice, text)
					root = ev.TS()
					sl.SendEvent(ev)
					return
				}
				sl.SendEvent(sl.UserMessage(fakeslack.General, fakeslack.Alice, text).InThread(root))
			}), llm, delay)
	})
	b.Run("slack-dm", func(b *testing.B) {
		sl, llm, logs, delay := startSlackBench(b)
		measureAnswers(b, slackChat(sl, benchEnvDuration(b, "FIRSTMATE_BENCH_GAP", benchGap), logs,
			func(_ int, text string) { sl.SendEvent(sl.DirectMessage(fakeslack.Alice, text)) }), llm, delay)
	})
	// The same beside four background jobs that spin on the CPU, started
	// the way the start tool starts them (the sandbox's helper, nice 10,
	// SCHED_BATCH): on two cores they would take it all if they ran at
	// firstmate's priority.
	b.Run("slack-dm-4-spinning-jobs", func(b *testing.B) {
		spin(b, 4)
		sl, llm, logs, delay := startSlackBench(b)
		measureAnswers(b, slackChat(sl, benchEnvDuration(b, "FIRSTMATE_BENCH_GAP", benchGap), logs,
			func(_ int, text string) { sl.SendEvent(sl.DirectMessage(fakeslack.Alice, text)) }), llm, delay)
	})
}

// spin starts n background commands that loop on the CPU until b ends, in
// the sandbox background jobs run in.
func spin(b *testing.B, n int) {
	sb := sandbox.New(sandbox.Config{Limits: sandbox.Limits{Timeout: sandbox.MaxTimeout}})
	if _, err := sb.Probe(b.Context()); err != nil {
		b.Skipf("no sandbox here: %v", err)
	}
	dir := b.TempDir()
	if uid, gid := sb.Owner(); uid >= 0 {
		os.Chown(dir, uid, gid)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var procs []*sandbox.Process
	for range n {
		p, err := sb.Start(ctx, sandbox.Command{Dir: dir, Script: "while :; do :; done"}, io.Discard)
		if err != nil {
			b.Fatal(err)
		}
		procs = append(procs, p)
	}
	b.Cleanup(func() {
		cancel()
		for _, p := range procs {
			p.Wait()
		}
	})
}

// questionNumber finds the number a question of the benchmark carries.
var questionNumber = regexp.MustCompile(`question (\d+):`)

// overheadModel calls ls once per question, then answers with Markdown
// holding the question's token. The question is read from the last user
// message, so an answer to the wrong question never counts as visible.
func overheadModel(delay time.Duration) func(*fakellm.Request) fakellm.Reply {
	return func(req *fakellm.Request) fakellm.Reply {
		var reply fakellm.Reply
		if req.LastMessage().Role == "tool" {
			reply = fakellm.Text("**Done** but the question was lost")
			for _, m := range slices.Backward(req.Messages) {
				if m.Role != "user" {
					continue
				}
				// The last match: earlier questions may come along as
				// context before the current one.
				if all := questionNumber.FindAllStringSubmatch(m.Text(), -1); len(all) > 0 {
					n, _ := strconv.Atoi(all[len(all)-1][1])
					reply = fakellm.Text("**Done** " + answerToken(n))
				}
				break
			}
		} else {
			reply = fakellm.Calls(fakellm.Call("ls", `{"path":"."}`))
		}
		reply.Delay = delay
		return reply
	}
}

// answerToken is what the answer to question n carries. Fixed width, so
// that no token is a prefix of another.
func answerToken(n int) string { return fmt.Sprintf("answer-%05d", n) }

// platformCall is a call recorded by either fake, as the benchmark reads it.
type platformCall struct {
	Method string
	At     time.Time
	OK     bool
	Params url.Values
}

// overheadChat is the benchmark's conversation on one fake platform.
type overheadChat struct {
	gap     time.Duration
	typing  bool                     // the platform has a typing indicator to count
	ready   func() bool              // a question handed over now reaches the bot at once
	ask     func(i int, text string) // hands a question to the fake
	calls   func() []platformCall    // every call recorded, in order of recording
	active  func() int               // counts the calls that show the bot at work
	waitFor func(time.Duration, func() bool) bool
	logs    func() string
}

func telegramChat(tg *faketelegram.Server, gap time.Duration, logs *safeBuffer, ask func(int, string)) *overheadChat {
	return &overheadChat{
		gap:    gap,
		typing: true,
		// A waiting long poll returns the update at once.
		ready: func() bool { return tg.Polling() > 0 },
		ask:   ask,
		calls: func() []platformCall {
			var out []platformCall
			for _, c := range tg.Calls("") {
				if c.Method != "getUpdates" {
					out = append(out, platformCall{Method: c.Method, At: c.At, OK: c.OK(), Params: c.Params})
				}
			}
			return out
		},
		active:  func() int { return tg.Count("") - tg.Count("getUpdates") },
		waitFor: tg.WaitFor,
		logs:    logs.String,
	}
}

func slackChat(sl *fakeslack.Server, gap time.Duration, logs *safeBuffer, ask func(int, string)) *overheadChat {
	return &overheadChat{
		gap: gap,
		// SendEvent writes the envelope before it returns.
		ready: func() bool { return sl.OpenConnections() > 0 },
		ask:   ask,
		calls: func() []platformCall {
			var out []platformCall
			for _, c := range sl.Calls("") {
				out = append(out, platformCall{Method: c.Method, At: c.At, OK: c.OK(), Params: c.Params})
			}
			return out
		},
		active:  func() int { return sl.Count("") },
		waitFor: sl.WaitFor,
		logs:    logs.String,
	}
}

// benchTurn is one question and what answering it took.
type benchTurn struct {
	delivered time.Time
	visible   time.Time
	via       string         // the method that made the answer visible
	calls     map[string]int // platform calls by method
	timeline  []platformCall // the calls, for the slowest turn's log
	model     int            // model requests
}

func measureAnswers(b *testing.B, c *overheadChat, llm *fakellm.Server, delay time.Duration) {
	quiet := benchEnvDuration(b, "FIRSTMATE_BENCH_QUIET", benchQuiet)
	var (
		turns             []benchTurn
		open              *benchTurn
		callMark, reqMark int
	)
	closeTurn := func() {
		open.calls = map[string]int{}
		open.timeline = c.calls()[callMark:]
		for _, call := range open.timeline {
			open.calls[call.Method]++
		}
		open.model = len(llm.Requests()) - reqMark
		turns = append(turns, *open)
	}
	var last time.Time
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		time.Sleep(time.Until(last.Add(c.gap)))
		if !c.waitFor(benchAnswerTimeout, c.ready) {
			b.Fatalf("the bot cannot take question %d\n%s", i, c.logs())
		}
		if open != nil {
			closeTurn()
		}
		callMark, reqMark = len(c.calls()), len(llm.Requests())
		token := answerToken(i)
		open = &benchTurn{delivered: time.Now()}
		c.ask(i, fmt.Sprintf("question %d: what is in the workspace?", i))
		last = open.delivered
		shown := c.waitFor(benchAnswerTimeout, func() bool {
			var ok bool
			open.visible, open.via, ok = visibleAt(c.calls()[callMark:], token)
			return ok
		})
		if !shown {
			b.Fatalf("the answer to question %d (%s) did not show within %s\n%s", i, token, benchAnswerTimeout, c.logs())
		}
		if !settle(c, quiet) {
			b.Fatalf("the platform calls of question %d did not settle within %s\n%s", i, benchSettleLimit, c.logs())
		}
	}
	b.StopTimer()
	closeTurn()
	reportAnswers(b, turns, delay, c.typing)
}

// settle waits until no call that shows the bot at work has come for quiet.
func settle(c *overheadChat, quiet time.Duration) bool {
	deadline := time.Now().Add(benchSettleLimit)
	for time.Now().Before(deadline) {
		n := c.active()
		if !c.waitFor(quiet, func() bool { return c.active() != n }) {
			return true
		}
	}
	return false
}

// visibleAt finds when the token first became visible, and through which
// method. Calls are in order of recording (of their answers), so the
// earliest At is taken; a stream is read as the concatenation of its calls.
func visibleAt(calls []platformCall, token string) (at time.Time, via string, ok bool) {
	streams := map[string]string{} // channel → the text streamed so far
	for _, c := range calls {
		if !c.OK {
			continue
		}
		var shown string
		switch c.Method {
		case "sendMessage", "editMessageText", "sendMessageDraft":
			shown = c.Params.Get("text")
		case "chat.postMessage", "chat.update":
			shown = c.Params.Get("text") + "\n" + c.Params.Get("blocks")
		case "chat.startStream", "chat.appendStream", "chat.stopStream":
			ch := c.Params.Get("channel")
			if c.Method == "chat.startStream" {
				streams[ch] = ""
			}
			streams[ch] += c.Params.Get("markdown_text") + c.Params.Get("chunks")
			shown = streams[ch]
		}
		if strings.Contains(shown, token) && (!ok || c.At.Before(at)) {
			at, via, ok = c.At, c.Method, true
		}
	}
	return at, via, ok
}

// writeMethods are the calls that change what people see.
var writeMethods = map[string]bool{
	"sendMessage": true, "editMessageText": true, "deleteMessage": true, "sendMessageDraft": true, "sendDocument": true,
	"chat.postMessage": true, "chat.update": true, "chat.delete": true, "chat.postEphemeral": true,
	"reactions.add": true, "reactions.remove": true, "assistant.threads.setStatus": true,
	"chat.startStream": true, "chat.appendStream": true, "chat.stopStream": true,
	"files.upload": true, "files.getUploadURLExternal": true, "files.completeUploadExternal": true,
}

func callKind(method string) string {
	switch {
	case method == "sendChatAction":
		return "typing"
	case writeMethods[method]:
		return "write"
	}
	return "read"
}

func reportAnswers(b *testing.B, turns []benchTurn, delay time.Duration, typing bool) {
	overhead := make([]time.Duration, len(turns))
	slowest := 0
	kinds := map[string]int{}
	perMethod := map[string][]int{}
	via := map[string]int{}
	var model int
	for i, t := range turns {
		overhead[i] = t.visible.Sub(t.delivered) - time.Duration(t.model)*delay
		if overhead[i] > overhead[slowest] {
			slowest = i
		}
		via[t.via]++
		model += t.model
		for m, n := range t.calls {
			kinds[callKind(m)] += n
			if perMethod[m] == nil {
				perMethod[m] = make([]int, len(turns))
			}
			perMethod[m][i] = n
		}
	}
	n := float64(len(turns))
	// go test keeps ten lines of a benchmark's log, over the probe run
	// with b.N = 1 and the real one: two lines a run.
	t := turns[slowest]
	var calls []string
	for _, c := range t.timeline {
		line := fmt.Sprintf("%s +%s", c.Method, c.At.Sub(t.delivered).Round(time.Millisecond))
		if !c.OK {
			line += " (failed)"
		}
		calls = append(calls, line)
	}
	b.Logf("%d turns, %.1f model requests a turn, answers shown by %v; the slowest, question %d, shown at +%s (overhead %s): %s",
		len(turns), float64(model)/n, via, slowest, t.visible.Sub(t.delivered).Round(time.Millisecond),
		overhead[slowest].Round(time.Millisecond), strings.Join(calls, ", "))

	methods := slices.Sorted(maps.Keys(perMethod))
	// Writes, then typing, then reads.
	slices.SortStableFunc(methods, func(x, y string) int { return cmp.Compare(callKind(y), callKind(x)) })
	var table []string
	kind := ""
	for _, m := range methods {
		entry := fmt.Sprintf("%s %.2f (%d)", m, float64(sumInts(perMethod[m]))/n, slices.Max(perMethod[m]))
		if k := callKind(m); k != kind {
			kind = k
			entry = k + ": " + entry
		}
		table = append(table, entry)
	}
	b.Logf("calls a turn, mean (max): %s", strings.Join(table, ", "))

	slices.Sort(overhead)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	pct := func(p float64) float64 { return ms(overhead[int(p*float64(len(overhead)-1))]) }
	b.ReportMetric(pct(0.5), "p50-ms")
	b.ReportMetric(pct(0.95), "p95-ms")
	b.ReportMetric(ms(overhead[len(overhead)-1]), "max-ms")
	b.ReportMetric(float64(kinds["write"])/n, "writes/turn")
	if typing {
		b.ReportMetric(float64(kinds["typing"])/n, "typing/turn")
	}
}

func sumInts(xs []int) int {
	sum := 0
	for _, x := range xs {
		sum += x
	}
	return sum
}

// benchBaseEnv is what every benchmark's firstmate gets: the fake model,
// a data directory, no HTTP port of consequence, and Redis when it answers.
func benchBaseEnv(b *testing.B, llm *fakellm.Server) []string {
	env := []string{
		"OPENAI_BASE_URL=" + llm.URL(), "FIRSTMATE_MODEL=fake-model", "FIRSTMATE_DATA_DIR=" + b.TempDir(),
		"FIRSTMATE_HTTP_ADDR=127.0.0.1:0", "FIRSTMATE_LOG_LEVEL=info",
	}
	if redisAnswers() {
		env = append(env, "REDIS_URL="+testRedisURL, "FIRSTMATE_REDIS_PREFIX="+redisPrefix(b, testRedisURL))
	}
	return env
}

func startTelegramBench(b *testing.B) (*faketelegram.Server, *fakellm.Server, *safeBuffer, time.Duration) {
	delay := benchEnvDuration(b, "FIRSTMATE_BENCH_MODEL_DELAY", benchModelDelay)
	tg := faketelegram.New(b)
	llm := fakellm.New(b, fakellm.WithHandler(overheadModel(delay)))
	// The long poll goes straight through: a question reaches the bot as
	// soon as it is handed over.
	api := behindLatency(b, tg, tg.URL(), func(r *http.Request) bool { return strings.HasSuffix(r.URL.Path, "/getUpdates") })
	env := append(benchBaseEnv(b, llm), "TELEGRAM_BOT_TOKEN="+tg.Token(), "TELEGRAM_API_URL="+api, "TELEGRAM_ACCESS=open")
	logs := startBenchServe(b, env)
	if !tg.WaitFor(20*time.Second, func() bool { return tg.Polling() > 0 }) {
		b.Fatalf("firstmate does not poll\n%s", logs.String())
	}
	return tg, llm, logs, delay
}

func startSlackBench(b *testing.B) (*fakeslack.Server, *fakellm.Server, *safeBuffer, time.Duration) {
	delay := benchEnvDuration(b, "FIRSTMATE_BENCH_MODEL_DELAY", benchModelDelay)
	sl := fakeslack.New(b, fakeslack.WithPingInterval(time.Second))
	llm := fakellm.New(b, fakellm.WithHandler(overheadModel(delay)))
	// Socket Mode connects to the fake itself (apps.connections.open names
	// it), so events are not delayed; the Web API calls are.
	api := behindLatency(b, sl, sl.URL(), func(*http.Request) bool { return false })
	env := append(benchBaseEnv(b, llm),
		"SLACK_BOT_TOKEN="+sl.BotToken(), "SLACK_APP_TOKEN="+sl.AppToken(), "SLACK_API_URL="+api+"/api/")
	logs := startBenchServe(b, env)
	if !sl.WaitConnections(1, 20*time.Second) {
		b.Fatalf("firstmate opened no Socket Mode connection\n%s", logs.String())
	}
	return sl, llm, logs, delay
}

// behindLatency returns the address at which the bot reaches a fake: the
// fake's own, or, with FIRSTMATE_BENCH_API_LATENCY, a server in front of it
// that delays every request but the skipped ones by that round trip, half
// before the fake handles it (so a post is visible that much later) and half
// after. The fakes answer at once; a real platform takes a round trip per
// call, so a call the answer waits for costs that much more there.
func behindLatency(b *testing.B, fake http.Handler, url string, skip func(*http.Request) bool) string {
	rtt := benchEnvDuration(b, "FIRSTMATE_BENCH_API_LATENCY", 0)
	if rtt == 0 {
		return url
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if skip(r) {
			fake.ServeHTTP(w, r)
			return
		}
		time.Sleep(rtt / 2)
		rec := httptest.NewRecorder()
		fake.ServeHTTP(rec, r)
		time.Sleep(rtt - rtt/2)
		maps.Copy(w.Header(), rec.Header())
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
	}))
	b.Cleanup(srv.Close)
	return srv.URL
}

// startBenchServe runs the plain binary's `serve` until the benchmark ends.
func startBenchServe(b *testing.B, env []string) *safeBuffer {
	cmd := exec.Command(plainBinary(b), "serve")
	cmd.Env = append([]string{"HOME=" + b.TempDir(), "PATH=" + os.Getenv("PATH")}, env...)
	logs := &safeBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := stopBenchServe(cmd); err != nil {
			b.Errorf("serve: %v\n%s", err, logs.String())
		}
	})
	return logs
}

// stopBenchServe ends serve as a supervisor does: SIGTERM, then a wait.
func stopBenchServe(cmd *exec.Cmd) error {
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-done
		return errors.New("did not stop within 30s of SIGTERM")
	}
}

func benchEnvDuration(b *testing.B, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		b.Fatalf("%s=%q: want a Go duration such as 1.5s", name, v)
	}
	return d
}

// BenchmarkStartup measures how long `firstmate serve` (the plain binary,
// one platform configured, on Redis when it answers) takes from its start
// to being reachable: the first getUpdates long poll open at the fake, or
// the first Socket Mode connection. It then lets the process idle for
// FIRSTMATE_BENCH_IDLE (default 3s: the sandbox probe and the rest of the
// start-up are over by then) and reads its resident memory. Each iteration
// is a process of its own on the same data directory (so all but the first
// are restarts):
//
//	go test -run '^$' -bench Startup -benchtime 10x ./cmd/firstmate
//
// Reported: p50-ms and max-ms of the start, and the largest idle rss-MB
// (VmRSS of the firstmate process; a sandboxed command's helper is not
// running then).
func BenchmarkStartup(b *testing.B) {
	b.Run("telegram", func(b *testing.B) { benchStartup(b, "telegram") })
	b.Run("slack", func(b *testing.B) { benchStartup(b, "slack") })
}

func benchStartup(b *testing.B, platform string) {
	bin := plainBinary(b)
	idle := benchEnvDuration(b, "FIRSTMATE_BENCH_IDLE", benchIdle)
	base := benchBaseEnv(b, fakellm.New(b))
	home := b.TempDir()
	var (
		lat []time.Duration
		rss []float64
	)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		d, mb := startOnce(b, bin, home, base, platform, idle)
		lat = append(lat, d)
		rss = append(rss, mb)
	}
	b.StopTimer()
	rounded := make([]string, len(lat))
	for i, d := range lat {
		rounded[i] = fmt.Sprintf("%s/%.1fMB", d.Round(time.Millisecond), rss[i])
	}
	b.Logf("start/idle RSS in order: %s", strings.Join(rounded, " "))
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(lat[len(lat)/2]), "p50-ms")
	b.ReportMetric(ms(lat[len(lat)-1]), "max-ms")
	b.ReportMetric(slices.Max(rss), "rss-MB")
}

// startOnce starts serve against a fresh fake platform and returns how long
// it took to reach it and the resident memory after idling.
func startOnce(b *testing.B, bin, home string, base []string, platform string, idle time.Duration) (time.Duration, float64) {
	var (
		env     []string
		reached func() bool
	)
	switch platform {
	case "telegram":
		tg := faketelegram.New(nil)
		defer tg.Close()
		env = []string{"TELEGRAM_BOT_TOKEN=" + tg.Token(), "TELEGRAM_API_URL=" + tg.URL(), "TELEGRAM_ACCESS=open"}
		reached = func() bool { return tg.Polling() > 0 }
	case "slack":
		sl := fakeslack.New(nil)
		defer sl.Close()
		env = []string{"SLACK_BOT_TOKEN=" + sl.BotToken(), "SLACK_APP_TOKEN=" + sl.AppToken(), "SLACK_API_URL=" + sl.APIURL()}
		reached = func() bool { return sl.Connections() > 0 }
	}
	cmd := exec.Command(bin, "serve")
	cmd.Env = append(append([]string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}, base...), env...)
	var logs safeBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs

	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	// Watched closely rather than with WaitFor: the fakes' notifications
	// would add a goroutine hop to what is measured.
	deadline := start.Add(20 * time.Second)
	for !reached() {
		if time.Now().After(deadline) {
			stopBenchServe(cmd)
			b.Fatalf("%s not reached within 20s\n%s", platform, logs.String())
		}
		time.Sleep(20 * time.Microsecond)
	}
	took := time.Since(start)

	time.Sleep(idle)
	mb, err := residentMB(cmd.Process.Pid)
	if err != nil {
		stopBenchServe(cmd)
		b.Fatalf("reading the RSS: %v\n%s", err, logs.String())
	}
	if err := stopBenchServe(cmd); err != nil {
		b.Errorf("serve: %v\n%s", err, logs.String())
	}
	return took, mb
}

// residentMB reads a process's VmRSS, in MiB.
func residentMB(pid int) (float64, error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(status)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024, err
		}
	}
	return 0, errors.New("no VmRSS in /proc/" + strconv.Itoa(pid) + "/status")
}
