package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/firstmate/firstmate/internal/testkit/fakellm"
	"github.com/firstmate/firstmate/internal/testkit/fakeslack"
	"github.com/firstmate/firstmate/internal/testkit/faketelegram"
)

// Work that runs later, end to end: the real binary on the fake Slack and
// the fake Telegram, the fake model calling the schedule tools, and Redis
// (the embedded store where a test allows it and Redis does not answer).
// Every test runs on both platforms; a conversation is a thread under a
// mention in #general on Slack, a forum topic on Telegram.
//
// The fake model (schedModel) acts on markers ("m-…") in what it reads,
// and answers a turn started by a schedule or a wait with "ANSWER m-…": a
// marker's ANSWER appearing once, in its conversation, is the schedule
// firing once in the right place.

var schedPlatforms = []string{"slack", "telegram"}

// schedMarker is a test's mark on a message, carried into what it
// schedules.
var schedMarker = regexp.MustCompile(`\bm-[a-z0-9]+\b`)

// schedModel is the fake model of these tests:
//
//	"remind me in 2s m-x"      calls schedule (in 2s) with prompt "PROMPT m-x: tell them"
//	"run a job m-x"            calls start with a job that ends once the file go-on-m-x exists,
//	                           then wait_for_job on it
//	"[scheduled by …] … m-x"   answers "ANSWER m-x" (a schedule fired), for each marker
//	"[woken: …] … m-x"         answers "ANSWER m-x", saying whether the job's output was there
//
// and anything else, or a tool's result, with a line naming the marker.
func schedModel(req *fakellm.Request) fakellm.Reply {
	last := req.LastMessage()
	var input string // the turn's input: the last person's (or schedule's) message
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == "user" {
			input = req.Messages[i].Text()
			break
		}
	}
	mark := schedMarker.FindString(input)
	if last.Role == "tool" {
		if m := startedJob.FindStringSubmatch(last.Text()); m != nil {
			return fakellm.Calls(fakellm.Call("wait_for_job", map[string]string{"id": m[1], "note": "report on " + mark}))
		}
		return fakellm.Text("noted " + mark + ": " + strings.SplitN(last.Text(), "\n", 2)[0])
	}
	switch {
	case strings.Contains(input, "[scheduled by "):
		// Schedules that fire together are one turn's input (a session's
		// mailbox is read whole): each is answered.
		var answers []string
		marks := schedMarker.FindAllString(input, -1)
		slices.Sort(marks)
		for _, m := range slices.Compact(marks) {
			answers = append(answers, "ANSWER "+m)
		}
		return fakellm.Text(strings.Join(answers, "; "))
	case strings.Contains(input, "[woken: "):
		return fakellm.Text(fmt.Sprintf("ANSWER %s; the job's output was there: %t", mark, strings.Contains(input, "done-"+mark)))
	}
	if m := remindIn.FindStringSubmatch(input); m != nil {
		return fakellm.Calls(fakellm.Call("schedule", map[string]string{"prompt": "PROMPT " + mark + ": tell them", "in": m[1]}))
	}
	if strings.Contains(input, "run a job") {
		script := fmt.Sprintf("while [ ! -e go-on-%[1]s ]; do sleep 0.1; done; echo done-%[1]s", mark)
		return fakellm.Calls(fakellm.Call("start", map[string]string{"command": script}))
	}
	return fakellm.Text("plain " + mark)
}

var (
	remindIn   = regexp.MustCompile(`remind me in (\S+)`)
	startedJob = regexp.MustCompile(`^Started job (\d+)`)
	scheduled  = regexp.MustCompile(`Scheduled ([a-z0-9]+):`)
)

// schedEnv is firstmate serve (one or more replicas, one data dir, one
// store) on one platform's fake.
type schedEnv struct {
	platform string
	sl       *fakeslack.Server
	tg       *faketelegram.Server
	llm      *fakellm.Server
	env      []string
	data     string
	reps     []*replica // running
	gone     []*replica // stopped by the test, for their logs
}

// startSched starts n replicas on platform. config is a config file's
// text ("" for none). With n > 1 it needs Redis (it skips without);
// otherwise it uses Redis when it answers.
func startSched(t *testing.T, platform string, n int, config string) *schedEnv {
	t.Helper()
	e := &schedEnv{platform: platform, llm: fakellm.New(t, fakellm.WithHandler(schedModel)), data: t.TempDir()}
	e.env = []string{"OPENAI_BASE_URL=" + e.llm.URL(), "FIRSTMATE_MODEL=fake-model", "FIRSTMATE_DATA_DIR=" + e.data, "FIRSTMATE_LOG_LEVEL=debug"}
	if config != "" {
		e.env = append(e.env, "FIRSTMATE_CONFIG="+writeFile(t, config))
	}
	if n > 1 {
		redisURL(t) // skips without Redis (fails in CI)
	}
	if redisAnswers() {
		e.env = append(e.env, "REDIS_URL="+testRedisURL, "FIRSTMATE_REDIS_PREFIX="+redisPrefix(t, testRedisURL))
	}
	switch platform {
	case "slack":
		opts := []fakeslack.Option{fakeslack.WithPingInterval(200 * time.Millisecond), fakeslack.WithAckTimeout(2 * time.Second)}
		if n > 1 {
			opts = append(opts, fakeslack.WithSpread()) // each replica gets a share of the events
		}
		e.sl = fakeslack.New(t, opts...)
		e.env = append(e.env, "SLACK_BOT_TOKEN="+e.sl.BotToken(), "SLACK_APP_TOKEN="+e.sl.AppToken(), "SLACK_API_URL="+e.sl.APIURL())
	case "telegram":
		e.tg = faketelegram.New(t)
		e.env = append(e.env, "TELEGRAM_BOT_TOKEN="+e.tg.Token(), "TELEGRAM_API_URL="+e.tg.URL(), "TELEGRAM_ACCESS=open")
	}
	for i := range n {
		e.reps = append(e.reps, startReplica(t, fmt.Sprintf("%s-%c", platform, 'a'+i), e.env))
	}
	e.waitConnected(t)
	return e
}

// waitConnected waits until every replica is connected to Slack, or one
// polls Telegram (the others stand by).
func (e *schedEnv) waitConnected(t *testing.T) {
	t.Helper()
	var ok bool
	switch e.platform {
	case "slack":
		ok = e.sl.WaitFor(20*time.Second, func() bool { return e.sl.OpenConnections() >= len(e.reps) })
	case "telegram":
		ok = e.tg.WaitFor(20*time.Second, func() bool { return e.tg.Polling() > 0 })
	}
	if !ok {
		t.Fatalf("firstmate is not connected to %s\n%s", e.platform, e.logs())
	}
}

func (e *schedEnv) logs() string {
	var b strings.Builder
	for _, r := range slices.Concat(e.gone, e.reps) {
		fmt.Fprintf(&b, "--- replica %s:\n%s\n", r.name, r.String())
	}
	return b.String()
}

// stop ends the running replica i with SIGTERM and waits for it (the
// test's cleanup then finds it ended).
func (e *schedEnv) stop(t *testing.T, i int) {
	t.Helper()
	r := e.reps[i]
	r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-r.done:
		r.done <- err // for the cleanup, which waits too
		if err != nil {
			t.Errorf("replica %s did not stop cleanly: %v", r.name, err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("replica %s did not stop within 30 s of SIGTERM\n%s", r.name, r.String())
	}
	e.reps = slices.Delete(e.reps, i, i+1)
	e.gone = append(e.gone, r)
}

// convo is one conversation: a thread in #general on Slack (ts is its
// root), a forum topic on Telegram.
type convo struct {
	ts    string
	topic int
}

// open starts a conversation with text, addressed to the bot.
func (e *schedEnv) open(t *testing.T, text string) convo {
	t.Helper()
	switch e.platform {
	case "slack":
		ev := e.sl.Mention(fakeslack.General, fakeslack.Alice, "<@"+e.sl.BotUserID()+"> "+text)
		e.sl.SendEvent(ev)
		return convo{ts: ev.TS()}
	default:
		topic := e.tg.CreateTopic(faketelegram.Forum, faketelegram.Alice, "later").Message.MessageThreadID
		e.tg.Mention(faketelegram.Forum, faketelegram.Alice, text, faketelegram.InTopic(topic))
		return convo{topic: topic}
	}
}

// command sends a chat command in the conversation: a mention on Slack,
// "/name@bot args" on Telegram.
func (e *schedEnv) command(t *testing.T, c convo, name, args string) {
	t.Helper()
	switch e.platform {
	case "slack":
		e.sl.SendEvent(e.sl.Mention(fakeslack.General, fakeslack.Alice, "<@"+e.sl.BotUserID()+"> "+strings.TrimSpace(name+" "+args)).InThread(c.ts))
	default:
		e.tg.Command(faketelegram.Forum, faketelegram.Alice, name, args, faketelegram.InTopic(c.topic))
	}
}

// botMessage is a bot's message as these tests look at it.
type botMessage struct {
	text    string
	where   convo // the conversation it is in
	replyTo int   // on Telegram: the message it replies to
}

// botMessages are the bot's messages on the platform (#general on Slack,
// the forum on Telegram), deleted ones left out.
func (e *schedEnv) botMessages() []botMessage {
	var out []botMessage
	switch e.platform {
	case "slack":
		for _, m := range e.sl.Messages(fakeslack.General) {
			if m.BotID != "" && !m.Deleted {
				out = append(out, botMessage{text: m.Text + "\n" + string(m.Blocks), where: convo{ts: m.ThreadTS}})
			}
		}
	default:
		for _, m := range e.tg.BotMessages(faketelegram.Forum) {
			if !m.Deleted {
				bm := botMessage{text: m.Text, where: convo{topic: m.MessageThreadID}}
				if m.ReplyToMessage != nil {
					bm.replyTo = m.ReplyToMessage.MessageID
				}
				out = append(out, bm)
			}
		}
	}
	return out
}

// with returns the bot's messages that contain text, and how many of them
// are in c.
func (e *schedEnv) with(c convo, text string) (all []botMessage, inC int) {
	for _, m := range e.botMessages() {
		if strings.Contains(m.text, text) {
			all = append(all, m)
			if m.where == c {
				inC++
			}
		}
	}
	return all, inC
}

// wait waits until a bot message in c contains text, and returns it.
func (e *schedEnv) wait(t *testing.T, c convo, text string) botMessage {
	t.Helper()
	var got botMessage
	ok := e.waitFor(30*time.Second, func() bool {
		for _, m := range e.botMessages() {
			if m.where == c && strings.Contains(m.text, text) {
				got = m
				return true
			}
		}
		return false
	})
	if !ok {
		t.Fatalf("no bot message with %q in %+v: %+v\n%s", text, c, e.botMessages(), e.logs())
	}
	return got
}

func (e *schedEnv) waitFor(d time.Duration, cond func() bool) bool {
	if e.sl != nil {
		return e.sl.WaitFor(d, cond)
	}
	return e.tg.WaitFor(d, cond)
}

// fired is a schedule's firing as a test expects it: the model is asked
// with a message containing input, and answers "ANSWER mark".
type fired struct{ mark, input string }

// answeredOnce checks that each firing's answer came once, in c, and that
// the model was asked once with its input. Once all are answered, it
// waits a moment for a second firing that should not come.
func (e *schedEnv) answeredOnce(t *testing.T, c convo, want ...fired) {
	t.Helper()
	for _, f := range want {
		e.wait(t, c, "ANSWER "+f.mark)
	}
	time.Sleep(2 * time.Second) // a second firing (schedules are looked at every second) would be here by now
	for _, f := range want {
		all, inC := e.with(c, "ANSWER "+f.mark)
		if len(all) != 1 || inC != 1 {
			t.Errorf("ANSWER %s came %d times, %d in the conversation %+v: %+v", f.mark, len(all), inC, c, all)
		}
		if n := e.asked(f.input); n != 1 {
			t.Errorf("the model was asked %d times with %q, want once", n, f.input)
		}
	}
}

// asked counts the model requests whose last message contains text: the
// turns started by it.
func (e *schedEnv) asked(text string) int {
	n := 0
	for _, r := range e.llm.Requests() {
		if last := r.LastMessage(); last.Role == "user" && strings.Contains(last.Text(), text) {
			n++
		}
	}
	return n
}

// 1. The model schedules a prompt a moment ahead; it comes back as a new
// turn in the same thread (Slack) or topic (Telegram), once, and the model
// reads the prompt it stored.
func TestScheduleToolFiresInTheThread(t *testing.T) {
	t.Parallel()
	for _, platform := range schedPlatforms {
		t.Run(platform, func(t *testing.T) {
			t.Parallel()
			e := startSched(t, platform, 1, "")
			c := e.open(t, "remind me in 2s m-tool")
			e.wait(t, c, "noted m-tool: Scheduled ")
			e.answeredOnce(t, c, fired{"m-tool", "PROMPT m-tool: tell them"})
			for _, r := range e.llm.Requests() {
				if last := r.LastMessage(); last.Role == "user" && strings.Contains(last.Text(), "PROMPT m-tool") && !strings.Contains(last.Text(), "[scheduled by ") {
					t.Errorf("the fired turn's input does not say it was scheduled: %q", last.Text())
				}
			}
			if platform == "telegram" {
				// A schedule answers no one's message: it is posted in the
				// topic (a message there replies to the topic's first).
				if all, _ := e.with(c, "ANSWER m-tool"); len(all) == 1 && all[0].replyTo != 0 && all[0].replyTo != c.topic {
					t.Errorf("the fired answer replies to message %d", all[0].replyTo)
				}
			}
		})
	}
}

// 2. The chat commands: schedule, schedules and unschedule; a schedule
// removed never fires, the other does.
func TestScheduleCommands(t *testing.T) {
	t.Parallel()
	for _, platform := range schedPlatforms {
		t.Run(platform, func(t *testing.T) {
			t.Parallel()
			e := startSched(t, platform, 1, "")
			c := e.open(t, "hello m-open")
			e.wait(t, c, "plain m-open")

			// Goodbye is due in 6 s: removed at once, it must not fire.
			e.command(t, c, "schedule", "in 6s say goodbye m-bye")
			bye := scheduled.FindStringSubmatch(e.wait(t, c, "say goodbye m-bye").text)
			if bye == nil {
				t.Fatalf("the schedule command's reply names no ID: %+v", e.botMessages())
			}
			e.command(t, c, "unschedule", bye[1])
			e.wait(t, c, "Removed "+bye[1])

			// Hello is made after goodbye's removal, due after goodbye was.
			e.command(t, c, "schedule", "in 6s say hello m-hi")
			hi := scheduled.FindStringSubmatch(e.wait(t, c, "say hello m-hi").text)
			if hi == nil {
				t.Fatalf("the schedule command's reply names no ID: %+v", e.botMessages())
			}
			e.command(t, c, "schedules", "")
			list := e.wait(t, c, hi[1]+" · once")
			if strings.Contains(list.text, bye[1]) || !strings.Contains(list.text, "say hello m-hi") {
				t.Errorf("schedules lists %q; want hello (%s) and not goodbye (%s)", list.text, hi[1], bye[1])
			}

			e.answeredOnce(t, c, fired{"m-hi", "say hello m-hi"})
			if all, _ := e.with(c, "ANSWER m-bye"); len(all) != 0 || e.asked("m-bye") != 0 {
				t.Errorf("the removed schedule fired: %+v", all)
			}
			// Once fired, it is gone.
			e.command(t, c, "schedules", "")
			e.wait(t, c, "No schedules in this channel.")
		})
	}
}

// 3. Two replicas share the store: each due schedule is posted by one of
// them, once.
func TestScheduleFiresOnceAmongReplicas(t *testing.T) {
	t.Parallel()
	for _, platform := range schedPlatforms {
		t.Run(platform, func(t *testing.T) {
			t.Parallel()
			e := startSched(t, platform, 2, "")
			c := e.open(t, "hello m-open")
			e.wait(t, c, "plain m-open")
			var want []fired
			for _, m := range []string{"m-r1", "m-r2", "m-r3"} {
				e.command(t, c, "schedule", "in 3s say hi "+m)
				e.wait(t, c, "say hi "+m)
				want = append(want, fired{m, "say hi " + m})
			}
			e.answeredOnce(t, c, want...)
		})
	}
}

// 4. A schedule that falls due while firstmate is down fires once when it
// is back.
func TestScheduleDueWhileDownFiresOnRestart(t *testing.T) {
	t.Parallel()
	for _, platform := range schedPlatforms {
		t.Run(platform, func(t *testing.T) {
			t.Parallel()
			e := startSched(t, platform, 1, "")
			c := e.open(t, "remind me in 6s m-down")
			e.wait(t, c, "noted m-down: Scheduled ")
			made := time.Now()
			name := e.reps[0].name
			e.stop(t, 0)
			if all, _ := e.with(c, "ANSWER m-down"); len(all) != 0 {
				t.Fatalf("the schedule fired before firstmate stopped (the stop took %v): %+v", time.Since(made), all)
			}
			time.Sleep(time.Until(made.Add(7 * time.Second))) // due while down
			if e.asked("PROMPT m-down") != 0 {
				t.Fatal("the schedule fired while firstmate was down")
			}
			e.reps = append(e.reps, startReplica(t, name, e.env)) // the same replica, back
			e.waitConnected(t)
			e.answeredOnce(t, c, fired{"m-down", "PROMPT m-down: tell them"})
		})
	}
}

// 5. wait_for_job: the model starts a background job and waits for it;
// the turn ends and frees its worker (the only one: another conversation
// is answered while the job runs); when the job ends, a new turn in the
// same thread reads its result.
func TestScheduleWaitForJobResumesTheThread(t *testing.T) {
	t.Parallel()
	for _, platform := range schedPlatforms {
		t.Run(platform, func(t *testing.T) {
			t.Parallel()
			e := startSched(t, platform, 1, "agent:\n  workers: 1\n")
			c := e.open(t, "run a job m-job")
			e.wait(t, c, "noted m-job: Waiting for job 1")

			// The job still runs (it waits for a file); the one worker is free.
			other := e.open(t, "hello m-other")
			e.wait(t, other, "plain m-other")
			if all, _ := e.with(c, "ANSWER m-job"); len(all) != 0 {
				t.Fatalf("the wait ended before the job did: %+v", all)
			}

			// Let the job end: it waits for go-on-m-job in the workspace.
			logs, _ := filepath.Glob(filepath.Join(e.data, "workspaces", "*", ".jobs", "1.log"))
			if len(logs) != 1 {
				t.Fatalf("no single workspace with job 1's log: %v\n%s", logs, e.logs())
			}
			ws := filepath.Dir(filepath.Dir(logs[0]))
			if err := os.WriteFile(filepath.Join(ws, "go-on-m-job"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			e.answeredOnce(t, c, fired{"m-job", "report on m-job"})
			if got := e.wait(t, c, "ANSWER m-job"); !strings.Contains(got.text, "output was there: true") {
				t.Errorf("the woken turn did not read the job's output: %q", got.text)
			}
			var woken string
			for _, r := range e.llm.Requests() {
				if last := r.LastMessage().Text(); strings.Contains(last, "[woken: ") {
					woken = last
				}
			}
			for _, want := range []string{"job 1 ended", "done-m-job", "report on m-job"} {
				if !strings.Contains(woken, want) {
					t.Errorf("the woken turn's input lacks %q: %q", want, woken)
				}
			}
			if slices.ContainsFunc(e.botMessages(), func(m botMessage) bool { return strings.Contains(m.text, "ANSWER m-job") && m.where != c }) {
				t.Error("the woken turn answered elsewhere")
			}
		})
	}
}
