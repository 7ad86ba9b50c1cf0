package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/firstmate/firstmate/internal/testkit/fakellm"
	"github.com/firstmate/firstmate/internal/testkit/fakeslack"
)

// server is the real firstmate binary running `serve` in the background;
// its output is kept.
type server struct {
	safeBuffer
	cmd  *exec.Cmd
	done chan error
}

func (s *server) logs() string { return s.String() }

// startServe runs `firstmate serve` until the test ends (SIGTERM, then a
// wait: a clean shutdown is part of what is tested).
func startServe(t *testing.T, env []string) *server {
	t.Helper()
	s := &server{done: make(chan error, 1)}
	s.cmd = exec.Command(binary, "serve")
	s.cmd.Env = append([]string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}, env...)
	s.cmd.Stdout, s.cmd.Stderr = s, s
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.done <- s.cmd.Wait() }()
	t.Cleanup(func() {
		s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-s.done:
			if err != nil {
				t.Errorf("serve did not exit cleanly: %v\n%s", err, s.logs())
			}
		case <-time.After(30 * time.Second):
			s.cmd.Process.Kill()
			t.Errorf("serve did not stop within 30s of SIGTERM\n%s", s.logs())
		}
		if t.Failed() {
			t.Logf("serve logs:\n%s", s.logs())
		}
	})
	return s
}

// slackAgentModel calls ls once, then answers with Markdown that tries to
// ping the whole channel.
func slackAgentModel(req *fakellm.Request) fakellm.Reply {
	last := req.Messages[len(req.Messages)-1]
	if last.Role == "tool" {
		return fakellm.Text("**Done.** The workspace is listed. <!channel> @here <!everyone> <@U0BOB> see `code`")
	}
	return fakellm.Calls(fakellm.Call("ls", `{"path":"."}`))
}

type slackEnv struct {
	slack *fakeslack.Server
	llm   *fakellm.Server
	srv   *server
	http  string // the HTTP listener's address
}

func startSlack(t *testing.T, model func(*fakellm.Request) fakellm.Reply, extra ...string) *slackEnv {
	t.Helper()
	sl := fakeslack.New(t, fakeslack.WithPingInterval(200*time.Millisecond), fakeslack.WithAckTimeout(2*time.Second))
	llm := fakellm.New(t, fakellm.WithHandler(model))
	addr := deadAddr(t)
	env := append([]string{
		"OPENAI_BASE_URL=" + llm.URL(), "FIRSTMATE_MODEL=fake-model", "FIRSTMATE_DATA_DIR=" + t.TempDir(),
		"SLACK_BOT_TOKEN=" + sl.BotToken(), "SLACK_APP_TOKEN=" + sl.AppToken(), "SLACK_API_URL=" + sl.APIURL(),
		"FIRSTMATE_HTTP_ADDR=" + addr, "FIRSTMATE_LOG_LEVEL=debug",
	}, extra...)
	if redisAnswers() {
		env = append(env, "REDIS_URL="+testRedisURL, "FIRSTMATE_REDIS_PREFIX="+redisPrefix(t, testRedisURL))
	}
	e := &slackEnv{slack: sl, llm: llm, srv: startServe(t, env), http: addr}
	if !sl.WaitConnections(1, 20*time.Second) {
		t.Fatalf("firstmate did not open a Socket Mode connection\n%s", e.srv.logs())
	}
	return e
}

// answers returns the bot's messages in a thread other than the progress
// message (the first reply, which ends as a one-line summary).
func botReplies(thread []fakeslack.Message) []fakeslack.Message {
	var out []fakeslack.Message
	for _, m := range thread {
		if m.BotID != "" && !m.Deleted {
			out = append(out, m)
		}
	}
	return out
}

// waitReplies waits until the turn answering the message at ts has ended
// (its ✅ or ❌) and the thread has n bot replies, and returns them.
func (e *slackEnv) waitReplies(t *testing.T, channel, ts string, n int) []fakeslack.Message {
	t.Helper()
	var got []fakeslack.Message
	ok := e.slack.WaitFor(20*time.Second, func() bool {
		done := false
		for _, r := range e.slack.Reactions(channel, ts) {
			done = done || r == "white_check_mark" || r == "x"
		}
		got = botReplies(e.slack.Thread(channel, ts))
		return done && len(got) >= n
	})
	if !ok {
		t.Fatalf("thread %s/%s has %d bot replies, want %d: %+v\n%s", channel, ts, len(got), n, e.slack.Thread(channel, ts), e.srv.logs())
	}
	return got
}

func TestSlackMentionProgressAndAnswer(t *testing.T) {
	t.Parallel()
	e := startSlack(t, slackAgentModel)
	ev := e.slack.Mention(fakeslack.General, fakeslack.Alice, "<@"+e.slack.BotUserID()+"> what is in the workspace?")
	id := e.slack.SendEvent(ev)
	if _, ok := e.slack.WaitAck(id, 5*time.Second); !ok {
		t.Fatal("the envelope was not acked")
	}
	replies := e.waitReplies(t, fakeslack.General, ev.TS(), 2)
	answer := replies[1]
	// The progress message shrinks to its summary after the answer.
	if !e.slack.WaitFor(5*time.Second, func() bool {
		return strings.Contains(botReplies(e.slack.Thread(fakeslack.General, ev.TS()))[0].Text, "1 tool")
	}) {
		t.Errorf("progress message = %q, want the one-line summary", botReplies(e.slack.Thread(fakeslack.General, ev.TS()))[0].Text)
	}
	if p := botReplies(e.slack.Thread(fakeslack.General, ev.TS()))[0]; !p.Posted.Before(answer.Posted) || !p.Edited.After(answer.Posted) {
		t.Errorf("progress posted %v, edited %v; answer posted %v: want post, answer, then the summary edit", p.Posted, p.Edited, answer.Posted)
	}
	var blocks []map[string]any
	json.Unmarshal(answer.Blocks, &blocks)
	if len(blocks) != 1 || blocks[0]["type"] != "markdown" || !strings.Contains(blocks[0]["text"].(string), "**Done.**") {
		t.Errorf("answer blocks = %s", answer.Blocks)
	}
	for _, ping := range []string{"<!channel>", "<!everyone>", "<!here>", "<@U0BOB>"} {
		if strings.Contains(answer.Text, ping) || strings.Contains(string(answer.Blocks), ping) {
			t.Errorf("the answer can ping: %q in %q / %s", ping, answer.Text, answer.Blocks)
		}
	}
	e.slack.WaitFor(5*time.Second, func() bool { return len(e.slack.Reactions(fakeslack.General, ev.TS())) > 0 })
	if r := e.slack.Reactions(fakeslack.General, ev.TS()); len(r) != 1 || r[0] != "white_check_mark" {
		t.Errorf("reactions on the question = %v", r)
	}
	// The budget: at most 4 Web API writes for a turn with one tool call,
	// the ✅ included (users.info, a read, runs once per new user).
	calls := 0
	for _, m := range []string{"chat.postMessage", "chat.update", "chat.delete", "reactions.add", "reactions.remove", "assistant.threads.setStatus"} {
		calls += e.slack.Count(m)
	}
	if calls > 4 {
		t.Errorf("%d Web API writes for one turn, budget 4", calls)
	}
	t.Logf("Web API calls for a one-tool turn: %d (%d postMessage, %d update, %d reactions.add, %d users.info, %d conversations.replies)", calls,
		e.slack.Count("chat.postMessage"), e.slack.Count("chat.update"), e.slack.Count("reactions.add"), e.slack.Count("users.info"), e.slack.Count("conversations.replies"))

	// A follow-up in the thread without a mention continues the session.
	follow := e.slack.UserMessage(fakeslack.General, fakeslack.Alice, "and now?").InThread(ev.TS())
	e.slack.SendEvent(follow)
	e.waitReplies(t, fakeslack.General, ev.TS(), 4)
	reqs := e.llm.Requests()
	last := reqs[len(reqs)-1].Messages
	if len(last) < 6 {
		t.Errorf("the follow-up's model call saw %d messages; the session's history is missing", len(last))
	}
}

func TestSlackDirectMessageAndDuplicates(t *testing.T) {
	t.Parallel()
	e := startSlack(t, func(*fakellm.Request) fakellm.Reply { return fakellm.Text("hello from the bot") })
	dm := e.slack.DirectMessage(fakeslack.Bob, "hi")
	e.slack.SendEvent(dm)
	e.slack.SendEvent(dm) // a replay with the same event_id
	mention := e.slack.Mention(fakeslack.General, fakeslack.Alice, "<@"+e.slack.BotUserID()+"> ping")
	e.slack.SendEvent(mention)
	e.slack.SendEvent(mention.AsMessage()) // the same message as a message event
	e.slack.SendEvent(mention)             // and a retry
	e.slack.SendEvent(e.slack.BotMessage(fakeslack.General, fakeslack.Bob, "<@"+e.slack.BotUserID()+"> from a bot"))
	e.slack.SendEvent(e.slack.MessageChanged(fakeslack.General, mention.TS(), "<@"+e.slack.BotUserID()+"> edited"))

	e.waitReplies(t, fakeslack.General, mention.TS(), 1)
	var dmReplies []fakeslack.Message
	e.slack.WaitFor(20*time.Second, func() bool {
		dmReplies = nil
		for _, m := range e.slack.Messages(dm.Channel()) {
			if m.BotID != "" && !m.Deleted {
				dmReplies = append(dmReplies, m)
			}
		}
		return len(e.slack.Reactions(dm.Channel(), dm.TS())) > 0
	})
	time.Sleep(500 * time.Millisecond) // room for a wrong second answer to show up
	if n := len(e.llm.Requests()); n != 2 {
		t.Errorf("%d model calls, want 2 (one DM, one mention)", n)
	}
	if got := len(botReplies(e.slack.Thread(fakeslack.General, mention.TS()))); got != 1 {
		t.Errorf("%d bot replies to the mention, want 1", got)
	}
	if len(dmReplies) != 1 || dmReplies[0].ThreadTS != "" {
		t.Errorf("DM replies = %+v, want one, not in a thread", dmReplies)
	}
}

func TestSlackRateLimitStormAndReconnect(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var once sync.Once
	e := startSlack(t, func(req *fakellm.Request) fakellm.Reply {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == "tool" {
			<-release // the socket drops while the turn runs
			return fakellm.Text("answer after the storm")
		}
		return fakellm.Calls(fakellm.Call("ls", `{}`))
	})
	e.slack.RateLimitFor("chat.update", 3*time.Second, time.Second)
	e.slack.RateLimitNext("chat.postMessage", 2, time.Second)
	ev := e.slack.Mention(fakeslack.General, fakeslack.Alice, "<@"+e.slack.BotUserID()+"> go")
	e.slack.SendEvent(ev)
	e.slack.WaitFor(10*time.Second, func() bool { return len(e.llm.Requests()) >= 2 })
	e.slack.DropConnections()
	if !e.slack.WaitConnections(2, 20*time.Second) {
		t.Fatalf("no reconnect after the socket dropped\n%s", e.srv.logs())
	}
	once.Do(func() { close(release) })
	// The progress post was refused twice (429) while the turn ran; the
	// answer does not wait for it.
	replies := e.waitReplies(t, fakeslack.General, ev.TS(), 1)
	if !strings.Contains(replies[len(replies)-1].Text, "answer after the storm") {
		t.Errorf("replies %+v", replies)
	}
	// A message sent after the reconnect is answered too.
	ev2 := e.slack.Mention(fakeslack.General, fakeslack.Bob, "<@"+e.slack.BotUserID()+"> again")
	e.slack.SendEvent(ev2)
	e.waitReplies(t, fakeslack.General, ev2.TS(), 1)
}

func TestSlackHTTPEvents(t *testing.T) {
	t.Parallel()
	const secret = "signing-secret-for-tests"
	e := startSlack(t, func(*fakellm.Request) fakellm.Reply { return fakellm.Text("over http") }, "SLACK_SIGNING_SECRET="+secret)
	url := "http://" + e.http + "/slack/events"
	waitHTTP(t, "http://"+e.http+"/healthz")
	ctx := t.Context()
	if err := e.slack.VerifyURL(ctx, url, secret); err != nil {
		t.Fatalf("url_verification: %v", err)
	}
	ev := e.slack.Mention(fakeslack.General, fakeslack.Alice, "<@"+e.slack.BotUserID()+"> via http")
	for _, bad := range []fakeslack.DeliverOption{fakeslack.BadSignature(), fakeslack.StaleTimestamp()} {
		d, err := e.slack.DeliverHTTP(ctx, url, ev, secret, bad)
		if err != nil || d.Status != http.StatusUnauthorized {
			t.Errorf("hostile delivery: %+v %v, want 401", d, err)
		}
	}
	d, err := e.slack.DeliverHTTP(ctx, url, ev, secret)
	if err != nil || d.Status != http.StatusOK {
		t.Fatalf("delivery: %+v %v", d, err)
	}
	d, err = e.slack.DeliverHTTP(ctx, url, ev, secret, fakeslack.Retry(1, "http_timeout"))
	if err != nil || d.Status != http.StatusOK {
		t.Fatalf("retried delivery: %+v %v", d, err)
	}
	e.waitReplies(t, fakeslack.General, ev.TS(), 1)
	time.Sleep(300 * time.Millisecond)
	if n := len(e.llm.Requests()); n != 1 {
		t.Errorf("%d model calls for one event delivered twice and two refused", n)
	}
}

func TestSlackHugeInput(t *testing.T) {
	t.Parallel()
	var seen int
	var mu sync.Mutex
	e := startSlack(t, func(req *fakellm.Request) fakellm.Reply {
		mu.Lock()
		for _, m := range req.Messages {
			if m.Role == "user" {
				seen = len(m.Text())
			}
		}
		mu.Unlock()
		return fakellm.Text("read it")
	})
	ev := e.slack.Mention(fakeslack.General, fakeslack.Alice, "<@"+e.slack.BotUserID()+"> "+strings.Repeat("all work and no play ", 2000))
	e.slack.SendEvent(ev)
	e.waitReplies(t, fakeslack.General, ev.TS(), 1)
	mu.Lock()
	defer mu.Unlock()
	if seen < 40000 || seen > 70000 {
		t.Errorf("the model saw %d bytes of a 42,000-character message", seen)
	}
}

func waitHTTP(t *testing.T, url string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not answer: %v", url, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// BenchmarkSlackAck measures envelope received → acked by the real binary
// on Redis (when it answers): b.N direct messages over Socket Mode, each
// recorded by Submit before its ack. It reports the fake's measured
// latencies; the turns run behind them on an instant fake model.
func BenchmarkSlackAck(b *testing.B) {
	sl := fakeslack.New(b, fakeslack.WithPingInterval(time.Second))
	llm := fakellm.New(b, fakellm.WithHandler(func(*fakellm.Request) fakellm.Reply { return fakellm.Text("ok") }))
	env := []string{
		"OPENAI_BASE_URL=" + llm.URL(), "FIRSTMATE_MODEL=fake-model", "FIRSTMATE_DATA_DIR=" + b.TempDir(),
		"SLACK_BOT_TOKEN=" + sl.BotToken(), "SLACK_APP_TOKEN=" + sl.AppToken(), "SLACK_API_URL=" + sl.APIURL(),
		"FIRSTMATE_HTTP_ADDR=127.0.0.1:0", "FIRSTMATE_LOG_LEVEL=warn",
	}
	if redisAnswers() {
		env = append(env, "REDIS_URL="+testRedisURL, "FIRSTMATE_REDIS_PREFIX="+redisPrefix(b, testRedisURL))
	}
	cmd := exec.Command(plainBinary(b), "serve")
	cmd.Env = append([]string{"HOME=" + b.TempDir(), "PATH=" + os.Getenv("PATH")}, env...)
	var logs bytes.Buffer
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
	if !sl.WaitConnections(1, 20*time.Second) {
		b.Fatalf("no Socket Mode connection\n%s", logs.String())
	}
	users := []string{fakeslack.Alice, fakeslack.Bob}
	var lat []time.Duration
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		id := sl.SendEvent(sl.DirectMessage(users[i%2], fmt.Sprintf("message %d", i)))
		ack, ok := sl.WaitAck(id, 10*time.Second)
		if !ok {
			b.Fatalf("envelope %d not acked\n%s", i, logs.String())
		}
		lat = append(lat, ack.Latency)
	}
	b.StopTimer()
	slices.Sort(lat)
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(pct(0.5), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
}

var plain struct {
	once sync.Once
	path string
	err  error
}

// plainBinary is firstmate built without the race detector, for
// benchmarks: the tests' binary is built with it, which slows everything.
func plainBinary(b *testing.B) string {
	plain.once.Do(func() {
		plain.path = binary + "-plain"
		out, err := exec.Command("go", "build", "-o", plain.path, ".").CombinedOutput()
		if err != nil {
			plain.err = fmt.Errorf("%v\n%s", err, out)
		}
	})
	if plain.err != nil {
		b.Fatal(plain.err)
	}
	return plain.path
}

// A file shared in a DM lands in the workspace, the agent reads it, writes
// a file and attaches it; the bot's own posts echoed back by Slack start
// nothing; a mention inside someone else's thread brings that thread along.
func TestSlackFilesEchoAndThreadContext(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var userTexts []string
	model := func(req *fakellm.Request) fakellm.Reply {
		last := req.Messages[len(req.Messages)-1]
		mu.Lock()
		if last.Role == "user" {
			userTexts = append(userTexts, last.Text())
		}
		mu.Unlock()
		switch {
		case last.Role == "user" && strings.Contains(last.Text(), "uploads/notes.txt"):
			return fakellm.Calls(fakellm.Call("read", `{"path":"uploads/notes.txt"}`))
		case last.Role == "tool" && strings.Contains(last.Text(), "remember the milk"):
			return fakellm.Calls(fakellm.Call("write", `{"path":"out/list.txt","content":"milk\n"}`), fakellm.Call("send_file", `{"path":"out/list.txt"}`))
		case last.Role == "tool":
			return fakellm.Text("Here is your list.")
		}
		return fakellm.Text("noted")
	}
	sl := fakeslack.New(t, fakeslack.WithEcho(), fakeslack.WithPingInterval(200*time.Millisecond))
	llm := fakellm.New(t, fakellm.WithHandler(model))
	e := &slackEnv{slack: sl, llm: llm, http: deadAddr(t)}
	e.srv = startServe(t, []string{
		"OPENAI_BASE_URL=" + llm.URL(), "FIRSTMATE_MODEL=fake-model", "FIRSTMATE_DATA_DIR=" + t.TempDir(),
		"SLACK_BOT_TOKEN=" + sl.BotToken(), "SLACK_APP_TOKEN=" + sl.AppToken(), "SLACK_API_URL=" + sl.APIURL(),
		"FIRSTMATE_HTTP_ADDR=" + e.http,
	})
	if !sl.WaitConnections(1, 20*time.Second) {
		t.Fatalf("no connection\n%s", e.srv.logs())
	}
	f := sl.AddFile("notes.txt", "text/plain", []byte("remember the milk\n"))
	dm := sl.DirectMessage(fakeslack.Alice, "make a list from this").WithFiles(f)
	sl.SendEvent(dm)
	ok := sl.WaitFor(20*time.Second, func() bool {
		for _, up := range sl.Files() {
			if up.Name == "list.txt" && up.Channel == dm.Channel() && string(up.Content) == "milk\n" {
				return len(sl.Reactions(dm.Channel(), dm.TS())) > 0
			}
		}
		return false
	})
	if !ok {
		t.Fatalf("list.txt was not attached in the DM; files %+v\n%s", sl.Files(), e.srv.logs())
	}

	root := sl.AddMessage(fakeslack.Message{Channel: fakeslack.General, User: fakeslack.Bob, Text: "the deploy failed at step 3"})
	mention := sl.Mention(fakeslack.General, fakeslack.Alice, "what do you make of it?").InThread(root.TS)
	sl.SendEvent(mention)
	if !sl.WaitFor(20*time.Second, func() bool { return len(sl.Reactions(fakeslack.General, mention.TS())) > 0 }) {
		t.Fatalf("the mention in the thread was not answered\n%s", e.srv.logs())
	}
	if got := botReplies(sl.Thread(fakeslack.General, root.TS)); len(got) != 1 || !strings.Contains(got[0].Text, "noted") {
		t.Errorf("replies in the thread %+v", got)
	}
	time.Sleep(300 * time.Millisecond) // room for echoes to cause a wrong turn
	mu.Lock()
	defer mu.Unlock()
	if len(userTexts) != 2 {
		t.Fatalf("the model was asked %d times by a person, want 2 (echoes of the bot's own posts must start nothing): %q", len(userTexts), userTexts)
	}
	if !strings.Contains(userTexts[0], "[attached file: uploads/notes.txt") {
		t.Errorf("DM turn input %q", userTexts[0])
	}
	if !strings.Contains(userTexts[1], "Earlier messages in this thread") || !strings.Contains(userTexts[1], "the deploy failed at step 3") {
		t.Errorf("thread turn input %q", userTexts[1])
	}
}
