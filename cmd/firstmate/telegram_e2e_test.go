package main

import (
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/internal/testkit/fakellm"
	"github.com/firstmate/firstmate/internal/testkit/fakeslack"
	"github.com/firstmate/firstmate/internal/testkit/faketelegram"
	"github.com/firstmate/firstmate/store/redis/redisurl"
)

type telegramEnv struct {
	tg   *faketelegram.Server
	llm  *fakellm.Server
	env  []string
	srv  *server
	data string
}

func telegramBase(t *testing.T, model func(*fakellm.Request) fakellm.Reply, opts ...faketelegram.Option) *telegramEnv {
	t.Helper()
	tg := faketelegram.New(t, opts...)
	llm := fakellm.New(t, fakellm.WithHandler(model))
	data := t.TempDir()
	env := []string{
		"OPENAI_BASE_URL=" + llm.URL(), "FIRSTMATE_MODEL=fake-model", "FIRSTMATE_DATA_DIR=" + data,
		"TELEGRAM_BOT_TOKEN=" + tg.Token(), "TELEGRAM_API_URL=" + tg.URL(), "TELEGRAM_ACCESS=open",
		"FIRSTMATE_HTTP_ADDR=" + deadAddr(t), "FIRSTMATE_LOG_LEVEL=debug",
	}
	if redisAnswers() {
		env = append(env, "REDIS_URL="+testRedisURL, "FIRSTMATE_REDIS_PREFIX="+redisPrefix(t, testRedisURL))
	}
	return &telegramEnv{tg: tg, llm: llm, env: env, data: data}
}

func startTelegram(t *testing.T, model func(*fakellm.Request) fakellm.Reply, opts ...faketelegram.Option) *telegramEnv {
	t.Helper()
	e := telegramBase(t, model, opts...)
	e.srv = startServe(t, e.env)
	if !e.tg.WaitFor(20*time.Second, func() bool { return e.tg.Polling() > 0 }) {
		t.Fatalf("firstmate does not poll\n%s", e.srv.logs())
	}
	return e
}

// answers waits for n bot messages in chat (in a topic if thread > 0) and
// returns them.
func (e *telegramEnv) answers(t *testing.T, chat int64, thread, n int) []faketelegram.Message {
	t.Helper()
	var got []faketelegram.Message
	ok := e.tg.WaitFor(20*time.Second, func() bool {
		got = nil
		for _, m := range e.tg.BotMessages(chat) {
			if !m.Deleted && (thread == 0 || m.MessageThreadID == thread) {
				got = append(got, m)
			}
		}
		return len(got) >= n
	})
	if !ok {
		t.Fatalf("chat %d thread %d: %d bot messages, want %d: %+v\n%s", chat, thread, len(got), n, got, e.srv.logs())
	}
	return got
}

// answer waits for a bot message in chat (in a topic if thread > 0) that
// contains text, other than the messages not, and returns it: the answer,
// whether or not a progress message came before it.
func (e *telegramEnv) answer(t *testing.T, chat int64, thread int, text string, not ...int) faketelegram.Message {
	t.Helper()
	var got faketelegram.Message
	ok := e.tg.WaitFor(20*time.Second, func() bool {
		for _, m := range e.tg.BotMessages(chat) {
			if !m.Deleted && (thread == 0 || m.MessageThreadID == thread) && strings.Contains(m.Text, text) && !slices.Contains(not, m.MessageID) {
				got = m
				return true
			}
		}
		return false
	})
	if !ok {
		t.Fatalf("chat %d thread %d: no bot message with %q: %+v\n%s", chat, thread, text, e.tg.BotMessages(chat), e.srv.logs())
	}
	return got
}

// toolModel calls ls, then answers with Markdown (and what the test asks).
func toolModel(answer string) func(*fakellm.Request) fakellm.Reply {
	return func(req *fakellm.Request) fakellm.Reply {
		if req.Messages[len(req.Messages)-1].Role == "tool" {
			return fakellm.Text(answer)
		}
		return fakellm.Calls(fakellm.Call("ls", `{"path":"."}`))
	}
}

func TestTelegramWhereTheBotAnswers(t *testing.T) {
	t.Parallel()
	e := startTelegram(t, toolModel("**Done.** The workspace is <i>listed</i> <script>alert(1)</script> and `code`"))
	before := map[string]int{}
	for _, m := range []string{"sendMessage", "editMessageText", "deleteMessage", "sendMessageDraft", "sendChatAction"} {
		before[m] = e.tg.Count(m)
	}
	// A private chat: the progress lives in the draft, so the answer is the
	// one message.
	pm := e.tg.PrivateMessage(faketelegram.Alice, "what is in the workspace?")
	answer := e.answers(t, faketelegram.Alice, 0, 1)[0]
	if answer.ParseMode != "HTML" || !strings.Contains(answer.Source, "<b>Done.</b>") || !strings.Contains(answer.Text, "<script>alert(1)</script>") || strings.Contains(answer.Source, "<script>") {
		t.Errorf("answer source %q text %q", answer.Source, answer.Text)
	}
	if answer.ReplyToMessage == nil || answer.ReplyToMessage.MessageID != pm.Message.MessageID {
		t.Errorf("the answer does not reply to the question: %+v", answer.ReplyToMessage)
	}
	drafted := false
	for _, d := range e.tg.Drafts() {
		drafted = drafted || d.Chat == faketelegram.Alice && strings.Contains(d.Text, "ls")
	}
	if !drafted {
		t.Errorf("the draft never showed the tool: %+v", e.tg.Drafts())
	}
	time.Sleep(300 * time.Millisecond) // room for a write that should not come
	writes := 0
	for _, m := range []string{"sendMessage", "editMessageText", "deleteMessage", "sendMessageDraft"} {
		writes += e.tg.Count(m) - before[m]
	}
	t.Logf("Bot API writes for a one-tool turn in a private chat: %d (%d typing)", writes, e.tg.Count("sendChatAction")-before["sendChatAction"])
	if writes > 3 {
		t.Errorf("%d Bot API writes besides typing for one turn, budget 3", writes)
	}
	if e.tg.Count("sendChatAction") == 0 {
		t.Error("no typing indicator")
	}

	// A group: a mention by entity, then a reply to the bot's answer.
	e.tg.GroupMessage(faketelegram.Group, faketelegram.Bob, "lunch anyone? @firstmate_botanist knows") // not a mention of this bot
	mention := e.tg.Mention(faketelegram.Group, faketelegram.Bob, "what is here?")
	groupAnswer := e.answer(t, faketelegram.Group, 0, "Done.")
	if groupAnswer.ReplyToMessage == nil || groupAnswer.ReplyToMessage.MessageID != mention.Message.MessageID {
		t.Errorf("group answer %+v", groupAnswer)
	}
	e.tg.Reply(faketelegram.Group, faketelegram.Alice, groupAnswer.MessageID, "and then?")
	e.tg.WaitFor(20*time.Second, func() bool { return len(e.llm.Requests()) == 6 })
	e.answer(t, faketelegram.Group, 0, "Done.", groupAnswer.MessageID)

	// A forum topic: the answer goes to that topic.
	topic := e.tg.CreateTopic(faketelegram.Forum, faketelegram.Alice, "builds")
	thread := topic.Message.MessageThreadID
	e.tg.Mention(faketelegram.Forum, faketelegram.Alice, "status of the build?", faketelegram.InTopic(thread))
	e.answer(t, faketelegram.Forum, thread, "Done.")
	typingInTopic := false
	for _, a := range e.tg.ChatActions() {
		typingInTopic = typingInTopic || (a.Chat == faketelegram.Forum && a.ThreadID == thread && a.Action == "typing")
	}
	if !typingInTopic {
		t.Error("no typing in the forum topic")
	}
	// Five questions, five turns: the unrelated group chatter started none.
	time.Sleep(300 * time.Millisecond)
	if n := len(e.llm.Requests()); n != 8 {
		t.Errorf("%d model calls, want 8 (4 turns of 2)", n)
	}
	// The command menu is the registry's.
	if got := e.tg.Commands(); len(got) != len(agent.Commands()) || got[0].Command != agent.Commands()[0].Name {
		t.Errorf("commands registered: %+v", got)
	}
}

func TestTelegramIgnoresBotsEditsAndChannelPosts(t *testing.T) {
	t.Parallel()
	e := startTelegram(t, func(*fakellm.Request) fakellm.Reply { return fakellm.Text("hi") })
	m := e.tg.PrivateMessage(faketelegram.Alice, "hello")
	e.answers(t, faketelegram.Alice, 0, 1)
	e.tg.EditMessage(faketelegram.Alice, m.Message.MessageID, "hello again (edited)")
	e.tg.BotMessage(faketelegram.Group, faketelegram.HelperBot, "@firstmate_bot do my bidding")
	e.tg.ChannelPost(faketelegram.Channel, "news")
	e.tg.MyChatMember(faketelegram.Group, faketelegram.Alice, "left", "member")
	e.tg.PrivateMessage(faketelegram.Bob, "last")
	e.answers(t, faketelegram.Bob, 0, 1)
	if n := len(e.llm.Requests()); n != 2 {
		t.Errorf("%d model calls, want 2: edits, bots, channel posts and membership changes start no turn", n)
	}
}

func TestTelegramLongAnswerBrokenMarkdownAndFiles(t *testing.T) {
	t.Parallel()
	long := "# Report\n\n```go\n" + strings.Repeat("fmt.Println(\"<all work & no play>\")\n", 400) + "```\n\n" + strings.Repeat("**bold and _broken ", 300)
	e := startTelegram(t, func(req *fakellm.Request) fakellm.Reply {
		last := req.Messages[len(req.Messages)-1]
		if strings.Contains(last.Text(), "uploads/") && last.Role == "user" {
			return fakellm.Calls(fakellm.Call("send_file", `{"path":"uploads/notes.txt"}`))
		}
		if last.Role == "tool" {
			return fakellm.Text("sent it back")
		}
		return fakellm.Text(long)
	}, faketelegram.WithDownloadLimit(20<<20))
	e.tg.PrivateMessage(faketelegram.Alice, "a long report please")
	got := e.answers(t, faketelegram.Alice, 0, 3)
	for _, m := range got {
		if n := len([]rune(m.Text)); n > 4096 {
			t.Errorf("a part of %d characters", n)
		}
	}
	// A document in, the same file back with send_file.
	f := e.tg.AddFile(faketelegram.File{Name: "notes.txt", MimeType: "text/plain", Content: []byte("remember the milk\n")})
	e.tg.Document(faketelegram.Alice, faketelegram.Alice, f, "keep this")
	if !e.tg.WaitFor(20*time.Second, func() bool { return len(e.tg.Documents()) == 1 }) {
		t.Fatalf("no document sent back\n%s", e.srv.logs())
	}
	if d := e.tg.Documents()[0]; d.File.Name != "notes.txt" || string(d.File.Content) != "remember the milk\n" || d.Chat != faketelegram.Alice {
		t.Errorf("document %+v", d)
	}
	// A 30 MB file: refused with a clear message, the turn still answered.
	big := e.tg.AddFile(faketelegram.File{Name: "big.iso", MimeType: "application/octet-stream", Content: []byte("x"), Size: 30 << 20})
	e.tg.Document(faketelegram.Bob, faketelegram.Bob, big, "")
	e.answers(t, faketelegram.Bob, 0, 1)
	var input string
	for _, r := range e.llm.Requests() {
		for _, m := range r.Messages {
			if m.Role == "user" && strings.Contains(m.Text(), "big.iso") {
				input = m.Text()
			}
		}
	}
	if !strings.Contains(input, "could not be saved") || !strings.Contains(input, "30 MiB") {
		t.Errorf("the model was told %q about the 30 MB file", input)
	}
}

func TestTelegramRateLimitsAndSecondPoller(t *testing.T) {
	t.Parallel()
	e := startTelegram(t, toolModel("done after the storm"))
	e.tg.RateLimitFor("editMessageText", 2*time.Second, 1)
	e.tg.RateLimitNext("sendMessage", 2, 1)
	e.tg.PrivateMessage(faketelegram.Alice, "go")
	e.answer(t, faketelegram.Alice, 0, "done after the storm")
	// In a group the progress message is edited through the storm.
	e.tg.Mention(faketelegram.Group, faketelegram.Bob, "go")
	e.answer(t, faketelegram.Group, 0, "done after the storm")
	// A second firstmate on the same token: Telegram ends one poll with 409.
	second := startServe(t, e.env)
	e.tg.WaitFor(5*time.Second, func() bool { return e.tg.Conflicts() > 0 })
	second.cmd.Process.Signal(syscall.SIGTERM)
	<-second.done
	second.done <- nil // the cleanup waits on it too
	if n := strings.Count(e.srv.logs()+second.logs(), "conflict"); n > 4 {
		t.Errorf("%d conflict log lines; one a minute is enough", n)
	}
	e.tg.PrivateMessage(faketelegram.Bob, "still there?")
	e.answer(t, faketelegram.Bob, 0, "done after the storm")
}

// A crash between receiving an update and recording it: the update comes
// again after the restart and is answered once; a message recorded before
// the crash but not answered is answered after it.
func TestTelegramCrashLosesNothing(t *testing.T) {
	t.Parallel()
	// The proxy in front of Redis stands for a store that goes away.
	u, err := redisurl.Parse(redisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	if u.Kind != redisurl.Node || u.Scheme != "redis" {
		t.Skip("the proxy stands in front of one redis:// node; REDIS_URL names " + u.String())
	}
	proxy := newTCPProxy(t, u.Options().Addr)
	e := telegramBase(t, func(*fakellm.Request) fakellm.Reply { return fakellm.Text("answered") })
	for i, kv := range e.env {
		if v, ok := strings.CutPrefix(kv, "REDIS_URL="); ok {
			e.env[i] = "REDIS_URL=" + withHost(t, v, proxy.addr())
		}
	}
	first := exec.Command(binary, "serve")
	first.Env = append([]string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}, e.env...)
	var logs safeBuffer
	first.Stdout, first.Stderr = &logs, &logs
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	if !e.tg.WaitFor(20*time.Second, func() bool { return e.tg.Polling() > 0 }) {
		t.Fatalf("no poll\n%s", logs.String())
	}
	proxy.pause() // the store goes away: nothing can be recorded
	e.tg.PrivateMessage(faketelegram.Alice, "are you there?")
	if !e.tg.WaitFor(10*time.Second, func() bool { return strings.Contains(logs.String(), "not recorded") }) {
		t.Fatalf("the update was not received while the store was away\n%s", logs.String())
	}
	first.Process.Kill() // crash
	first.Wait()
	if e.tg.Pending() != 1 {
		t.Fatalf("the update was confirmed without being recorded (offset %d, %d pending)", e.tg.Offset(), e.tg.Pending())
	}
	proxy.resume()
	e.srv = startServe(t, e.env)
	got := e.answers(t, faketelegram.Alice, 0, 1)
	time.Sleep(500 * time.Millisecond)
	if n := len(e.llm.Requests()); n != 1 || len(e.tg.BotMessages(faketelegram.Alice)) != len(got) {
		t.Errorf("%d model calls, %d bot messages; want the message answered once", n, len(e.tg.BotMessages(faketelegram.Alice)))
	}
}

type safeBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *safeBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *safeBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// withHost is the Redis URL raw with its host replaced by addr: the same
// password and database through a proxy.
func withHost(t *testing.T, raw, addr string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("REDIS_URL %s: %v", redisurl.Redact(raw), err)
	}
	u.Host = addr
	return u.String()
}

// tcpProxy forwards connections to a target; pause cuts every connection
// and refuses new ones until resume.
type tcpProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	paused bool
	conns  []net.Conn
	wg     sync.WaitGroup
}

func newTCPProxy(t *testing.T, target string) *tcpProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{ln: ln, target: target}
	p.wg.Go(p.serve)
	t.Cleanup(func() { ln.Close(); p.pause(); p.wg.Wait() })
	return p
}

func (p *tcpProxy) addr() string { return p.ln.Addr().String() }

func (p *tcpProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.paused {
			p.mu.Unlock()
			c.Close()
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		p.wg.Go(func() { io.Copy(up, c); up.Close() })
		p.wg.Go(func() { io.Copy(c, up); c.Close() })
	}
}

func (p *tcpProxy) pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.paused = true
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func (p *tcpProxy) resume() {
	p.mu.Lock()
	p.paused = false
	p.mu.Unlock()
}

// BenchmarkTelegramOffset measures update received → offset committed by
// the real binary on Redis (when it answers): the time from queueing a
// private message (a waiting long poll returns it at once) to the next
// getUpdates that confirms it, which the bot sends only after Submit.
func BenchmarkTelegramOffset(b *testing.B) {
	tg := faketelegram.New(b)
	llm := fakellm.New(b, fakellm.WithHandler(func(*fakellm.Request) fakellm.Reply { return fakellm.Text("ok") }))
	env := []string{
		"OPENAI_BASE_URL=" + llm.URL(), "FIRSTMATE_MODEL=fake-model", "FIRSTMATE_DATA_DIR=" + b.TempDir(),
		"TELEGRAM_BOT_TOKEN=" + tg.Token(), "TELEGRAM_API_URL=" + tg.URL(), "TELEGRAM_ACCESS=open",
		"FIRSTMATE_HTTP_ADDR=127.0.0.1:0", "FIRSTMATE_LOG_LEVEL=warn",
	}
	if redisAnswers() {
		env = append(env, "REDIS_URL="+testRedisURL, "FIRSTMATE_REDIS_PREFIX="+redisPrefix(b, testRedisURL))
	}
	cmd := exec.Command(plainBinary(b), "serve")
	cmd.Env = append([]string{"HOME=" + b.TempDir(), "PATH=" + os.Getenv("PATH")}, env...)
	var logs safeBuffer
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
	if !tg.WaitFor(20*time.Second, func() bool { return tg.Polling() > 0 }) {
		b.Fatalf("no poll\n%s", logs.String())
	}
	var lat []time.Duration
	users := []int64{faketelegram.Alice, faketelegram.Bob}
	for i := 0; b.Loop(); i++ {
		tg.WaitFor(10*time.Second, func() bool { return tg.Polling() > 0 }) // a poll is waiting
		sent := time.Now()
		u := tg.PrivateMessage(users[i%2], "message")
		// The fake confirms the offset when the next getUpdates arrives;
		// watch for it closely (the call is recorded only when it returns).
		deadline := sent.Add(10 * time.Second)
		for tg.Offset() <= u.UpdateID {
			if time.Now().After(deadline) {
				b.Fatalf("update %d not confirmed\n%s", u.UpdateID, logs.String())
			}
			time.Sleep(20 * time.Microsecond)
		}
		lat = append(lat, time.Since(sent))
	}
	b.StopTimer()
	if len(lat) == 0 {
		b.Fatal("no latencies measured")
	}
	slices.Sort(lat)
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(pct(0.5), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
}

func TestTelegramDraftsInPrivateChats(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("All work and no play makes a dull answer. ", 40)
	// An answer that takes longer than a second to write shows as it grows.
	slow := func(req *fakellm.Request) fakellm.Reply {
		r := fakellm.Text(long)
		r.Every = 5 * time.Millisecond // about 2 s for the whole answer
		return r
	}
	e := startTelegram(t, slow)
	e.tg.PrivateMessage(faketelegram.Alice, "write a lot")
	e.answers(t, faketelegram.Alice, 0, 1)
	drafts := e.tg.Drafts()
	if len(drafts) == 0 {
		t.Fatalf("no draft streamed in a private chat\n%s", e.srv.logs())
	}
	if d := drafts[0]; d.Chat != faketelegram.Alice || d.Text == "" || !strings.HasPrefix(long, strings.TrimSpace(d.Text)) {
		t.Errorf("draft %+v", d)
	}
	// A server without sendMessageDraft: the answer comes whole.
	e2 := startTelegram(t, slow, faketelegram.WithoutMethods("sendMessageDraft"))
	e2.tg.PrivateMessage(faketelegram.Bob, "write a lot")
	got := e2.answers(t, faketelegram.Bob, 0, 1)
	if !strings.Contains(got[0].Text, "dull answer") {
		t.Errorf("answer %q", got[0].Text)
	}
}

func TestTelegramWebhook(t *testing.T) {
	t.Parallel()
	const secret = "hook-secret_0123456789"
	e := telegramBase(t, func(*fakellm.Request) fakellm.Reply { return fakellm.Text("over the webhook") })
	addr := ""
	for _, kv := range e.env {
		if v, ok := strings.CutPrefix(kv, "FIRSTMATE_HTTP_ADDR="); ok {
			addr = v
		}
	}
	e.env = append(e.env, "TELEGRAM_WEBHOOK_URL=https://bot.example/telegram/webhook", "TELEGRAM_WEBHOOK_SECRET="+secret)
	e.srv = startServe(t, e.env)
	if !e.tg.WaitFor(20*time.Second, func() bool { wh, ok := e.tg.Webhook(); return ok && wh.SecretToken == secret }) {
		t.Fatalf("no webhook set with the secret\n%s", e.srv.logs())
	}
	waitHTTP(t, "http://"+addr+"/healthz")
	url := "http://" + addr + "/telegram/webhook"
	u := e.tg.PrivateMessage(faketelegram.Alice, "hello by webhook")
	for _, bad := range []faketelegram.DeliverOption{faketelegram.WrongSecret(), faketelegram.NoSecret()} {
		if status, err := e.tg.DeliverWebhook(t.Context(), url, u, secret, bad); err != nil || status != 403 {
			t.Errorf("a forged delivery: %d %v, want 403", status, err)
		}
	}
	for range 2 { // delivered twice, answered once
		if status, err := e.tg.DeliverWebhook(t.Context(), url, u, secret); err != nil || status != 200 {
			t.Fatalf("delivery: %d %v", status, err)
		}
	}
	e.answers(t, faketelegram.Alice, 0, 1)
	time.Sleep(300 * time.Millisecond)
	if n := len(e.llm.Requests()); n != 1 {
		t.Errorf("%d model calls, want 1", n)
	}
	if e.tg.Count("getUpdates") != 0 {
		t.Errorf("polled %d times with a webhook set", e.tg.Count("getUpdates"))
	}
}

func TestDoctorChecksPlatformTokens(t *testing.T) {
	t.Parallel()
	tg := faketelegram.New(t)
	sl := fakeslack.New(t)
	llm := fakellm.New(t, fakellm.WithHandler(toolCaller)) // doctor asks for a tool call
	env := []string{"OPENAI_BASE_URL=" + llm.URL(), "FIRSTMATE_MODEL=fake-model", "FIRSTMATE_DATA_DIR=" + t.TempDir(),
		"TELEGRAM_BOT_TOKEN=" + tg.Token(), "TELEGRAM_API_URL=" + tg.URL(), "TELEGRAM_ACCESS=open",
		"SLACK_BOT_TOKEN=" + sl.BotToken(), "SLACK_APP_TOKEN=" + sl.AppToken(), "SLACK_API_URL=" + sl.APIURL()}
	out, _, code := runBinary(t, env, "", "doctor")
	if code != 0 || !strings.Contains(out, "ok    telegram   bot @firstmate_bot; long polling") || !strings.Contains(out, "ok    slack      bot U0BOT") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	env = append(env, "TELEGRAM_BOT_TOKEN=999:not-the-token")
	out, _, code = runBinary(t, env, "", "doctor")
	if code != 1 || !strings.Contains(out, "FAIL  telegram") || strings.Contains(out, "999:not-the-token") {
		t.Fatalf("a refused token: exit %d:\n%s", code, out)
	}
}
