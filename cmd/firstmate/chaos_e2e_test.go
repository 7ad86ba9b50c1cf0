package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/firstmate/firstmate/internal/testkit/fakellm"
	"github.com/firstmate/firstmate/internal/testkit/fakeslack"
)

// The shape of the chaos run.
const (
	chaosSessions  = 100 // the first chaosDMs are DMs, the rest threads in channels
	chaosDMs       = 80
	chaosChannels  = 5
	chaosRounds    = 10 // every session sends one message a round: 1,000 messages
	chaosDuplicate = 10 // per cent of the messages delivered twice
	chaosSlot      = 3500 * time.Millisecond
	chaosPrefix    = "chaos"
	// A long session's turn: ls after a second, then an answer that takes
	// chaosLongAnswer, longer than the dispatcher's 10 s shutdown grace.
	chaosLongFirst  = time.Second
	chaosLongAnswer = 12 * time.Second
)

// chaosMarker is the unique marker of one message: session and index.
var chaosMarker = regexp.MustCompile(`s(\d{2})-m(\d{3})`)

func chaosName(session, k int) string { return fmt.Sprintf("s%02d-m%03d", session, k) }

// chaosLong reports whether a session's turns are long ones.
func chaosLong(session int) bool { return session%10 == 3 }

// TestChaosReplicas is the CI chaos test of issue 11 (many replicas on one
// Redis). Three `firstmate serve` replicas (the race-built binary) share a
// private Redis (appendonly, fsync always) and a data dir, and take Slack
// Socket Mode events from one fake Slack that spreads the envelopes over
// their connections and sends again what is not acked in time. 1,000
// messages over 100 sessions (80 DMs, 20 threads in 5 channels) are sent
// in rounds of bursts, a session's next message only once its previous one
// was acked (so the platform's order is the order of ts); 10% of them are
// delivered a second time, at once or a few rounds later. The fake model
// calls ls once per turn and answers naming the markers of the messages
// the turn answers ("s07-m012"); the turns of one session in ten take
// 13 s, longer than the shutdown grace. While messages flow, one replica
// is SIGKILLed (and stays dead), one is SIGTERMed while a long turn runs
// on it (the turn is handed back) and then restarted under the same
// replica name, and Redis is killed and started again on its data.
//
// Every message must be answered exactly once, no answer shown twice, and
// the answers of a session must come in the order of its messages' ts.
// The figures (total time, take-over latency after the SIGKILL, duplicate
// answers, messages per second) are logged. Set FIRSTMATE_CHAOS_LOGS to a
// directory to keep the replicas' logs.
func TestChaosReplicas(t *testing.T) {
	// Not t.Parallel: three race-built replicas and 1,000 messages take
	// the machine, and its timings (slots, take-over) want it to
	// themselves. Serial tests run before the parallel ones, so it never
	// shares the machine with the other end-to-end tests.
	if testing.Short() {
		t.Skip("the chaos test takes a few minutes")
	}
	redisBin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("no redis-server binary to start a private Redis")
	}
	testStart := time.Now()
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, seed>>1))
	t.Logf("seed %d", seed)

	rd := startChaosRedis(t, redisBin)
	rc := goredis.NewClient(&goredis.Options{Addr: rd.addr()})
	t.Cleanup(func() { rc.Close() })

	// The fake Slack: 100 people, 5 channels.
	opts := []fakeslack.Option{fakeslack.WithSpread(), fakeslack.WithPingInterval(time.Second),
		fakeslack.WithAckTimeout(2 * time.Second), fakeslack.WithMaxRetries(40)}
	sessions := make([]*chaosSession, chaosSessions)
	for i := range sessions {
		s := &chaosSession{idx: i, user: fmt.Sprintf("U0CHAOS%02d", i), long: chaosLong(i)}
		opts = append(opts, fakeslack.WithUser(fakeslack.User{ID: s.user, Name: fmt.Sprintf("person%02d", i), RealName: fmt.Sprintf("Person %02d", i)}))
		if i >= chaosDMs {
			s.channel = fmt.Sprintf("C0CHAOS%d", i%chaosChannels)
		}
		sessions[i] = s
	}
	for c := range chaosChannels {
		opts = append(opts, fakeslack.WithChannel(fakeslack.Channel{ID: fmt.Sprintf("C0CHAOS%d", c), Name: fmt.Sprintf("chaos-%d", c)}))
	}
	sl := fakeslack.New(t, opts...)
	for _, s := range sessions {
		if s.channel == "" {
			s.channel = sl.DirectMessage(s.user, "").Channel() // opens the DM; nothing is sent
		}
	}

	// One fake model per replica, so the model knows whose turn it runs.
	model := &chaosModel{lastLong: map[int]time.Time{}, calls: map[int]int{}, starts: map[int][]turnStart{}}
	var llms [3]*fakellm.Server
	for i := range llms {
		llms[i] = fakellm.New(t, fakellm.WithHandler(model.handler(i)))
	}

	cfg := writeFile(t, "agent:\n  progress: \"off\"\n  workers: 16\nbudgets:\n  user_messages_per_minute: 0\n")
	data := t.TempDir()
	env := func(i int, addr string) []string {
		return []string{
			"OPENAI_BASE_URL=" + llms[i].URL(), "FIRSTMATE_MODEL=fake-model", "FIRSTMATE_DATA_DIR=" + data,
			"FIRSTMATE_CONFIG=" + cfg, "FIRSTMATE_LOG_LEVEL=info",
			"SLACK_BOT_TOKEN=" + sl.BotToken(), "SLACK_APP_TOKEN=" + sl.AppToken(), "SLACK_API_URL=" + sl.APIURL(),
			"FIRSTMATE_HTTP_ADDR=" + addr, "FIRSTMATE_REPLICA=" + chaosReplica(i),
			"REDIS_URL=redis://" + rd.addr() + "/0", "FIRSTMATE_REDIS_PREFIX=" + chaosPrefix,
		}
	}
	procs := &chaosProcs{}
	t.Cleanup(func() { procs.stopAll(t) })
	var reps [3]*chaosProc
	for i := range reps {
		addr := deadAddr(t)
		p, err := startChaosProc(chaosReplica(i)+"#1", addr, t.TempDir(), env(i, addr))
		if err != nil {
			t.Fatal(err)
		}
		procs.add(p)
		reps[i] = p
	}
	if !sl.WaitFor(60*time.Second, func() bool { return sl.OpenConnections() == 3 }) {
		t.Fatalf("%d of 3 replicas opened a Socket Mode connection", sl.OpenConnections())
	}
	for _, p := range reps {
		if err := waitChaosReady(p, 30*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("3 replicas ready in %v", time.Since(testStart).Round(time.Millisecond))

	// Which messages are delivered twice, and when: half at once, half a
	// few rounds later (a replay after the message was answered).
	late := map[[2]int]bool{} // session, message → delivered again later (else at once)
	for n, flat := range rng.Perm(chaosSessions * chaosRounds)[:chaosSessions*chaosRounds*chaosDuplicate/100] {
		late[[2]int{flat / chaosRounds, flat % chaosRounds}] = n%2 == 1
	}
	var lateDups [chaosRounds + 4][]fakeslack.Event

	var (
		killAt       time.Time
		killLeases   []int // sessions whose lease the killed replica held
		termDone     = make(chan chaosTermReport, 1)
		redisDown    time.Duration
		firstSend    time.Time
		lastSend     time.Time
		acksPending  []string
		deliveries   int
		r2Restarted  *chaosProc
		redisRestart time.Time
	)
	// strike runs f a quarter of a second into the round's first burst,
	// beside it: the chaos hits while envelopes are in flight.
	strike := func(f func()) <-chan struct{} {
		done := make(chan struct{})
		go func() {
			defer close(done)
			time.Sleep(250 * time.Millisecond)
			f()
		}()
		return done
	}
	sendEv := func(ev fakeslack.Event) {
		acksPending = append(acksPending, sl.SendEvent(ev))
		deliveries++
	}
	burst := func(round int, part []*chaosSession) {
		for _, s := range part {
			k := round
			text := chaosName(s.idx, k) + " please look at the workspace"
			var ev fakeslack.Event
			switch {
			case s.idx < chaosDMs:
				ev = sl.DirectMessage(s.user, text)
			case k == 0:
				ev = sl.Mention(s.channel, s.user, text) // starts the thread
				s.root = ev.TS()
			default:
				ev = sl.Mention(s.channel, s.user, text).InThread(s.root)
			}
			s.msgs = append(s.msgs, chaosMsg{ts: ev.TS(), sentAt: time.Now()})
			sendEv(ev)
			time.Sleep(12 * time.Millisecond) // a burst lasts about 0.6 s
			if later, ok := late[[2]int{s.idx, k}]; ok {
				if later {
					lateDups[k+3] = append(lateDups[k+3], ev)
				} else {
					sendEv(ev) // the same event_id again, as Slack's retries
				}
			}
		}
	}
	waitAcks := func(round int) {
		deadline := time.Now().Add(60 * time.Second)
		for _, id := range acksPending {
			if _, ok := sl.WaitAck(id, time.Until(deadline)); !ok {
				t.Errorf("round %d: envelope %s not acked within 60s (Slack gives up; the message is lost)", round, id)
			}
		}
		acksPending = acksPending[:0]
	}

	firstSend = time.Now()
	for round := range chaosRounds {
		slot := firstSend.Add(time.Duration(round) * chaosSlot)
		time.Sleep(time.Until(slot))
		if round == 8 {
			// Redis restarts once the restarted replica is back, so that
			// its start (which counts its boot in Redis) is not what fails.
			select {
			case rep := <-termDone:
				termDone <- rep // taken again once the messages are sent
			case <-time.After(45 * time.Second):
				t.Error("the SIGTERMed replica was not back within 45s")
			}
		}
		order := rng.Perm(chaosSessions)
		var part [2][]*chaosSession
		for n, i := range order {
			part[n*2/chaosSessions] = append(part[n*2/chaosSessions], sessions[i])
		}
		for _, ev := range lateDups[round] {
			sendEv(ev)
		}
		var struck <-chan struct{}
		var strikeErr error
		switch round {
		case 3:
			// SIGKILL r1 with envelopes in flight to it; it stays dead.
			struck = strike(func() {
				killAt = time.Now()
				reps[0].kill()
				killLeases, strikeErr = leasesOf(rc, sessions, chaosReplica(0)+"#")
			})
		case 5:
			addr, home := deadAddr(t), t.TempDir()
			go func() { termDone <- termAndRestart(model, procs, reps[1], addr, home, env) }()
		case 8:
			// Redis goes down for a second while messages come in.
			struck = strike(func() {
				redisRestart = time.Now()
				redisDown, strikeErr = rd.restart()
			})
		}
		burst(round, part[0])
		time.Sleep(500 * time.Millisecond)
		burst(round, part[1])
		if struck != nil {
			<-struck
			if strikeErr != nil {
				t.Error(strikeErr)
			}
			switch round {
			case 3:
				t.Logf("SIGKILL %s at +%v; it held the lease of %d session(s)", reps[0].name, killAt.Sub(firstSend).Round(time.Millisecond), len(killLeases))
			case 8:
				t.Logf("Redis killed at +%v and back after %v", redisRestart.Sub(firstSend).Round(time.Millisecond), redisDown.Round(time.Millisecond))
			}
		}
		waitAcks(round)
	}
	for _, evs := range lateDups[chaosRounds:] {
		for _, ev := range evs {
			sendEv(ev)
		}
	}
	lastSend = time.Now()
	waitAcks(chaosRounds)
	term := <-termDone
	r2Restarted = term.restarted
	sendDone := time.Now()

	// Wait until every message is answered, then a little longer for a
	// wrong second answer to show.
	total := chaosSessions * chaosRounds
	var res chaosResult
	deadline := lastSend.Add(120 * time.Second)
	for {
		res = collect(sl, sessions)
		if res.answered == total || time.Now().After(deadline) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	allAnswered := time.Now()
	if res.answered == total {
		allAnswered = res.lastAnswer
	}
	time.Sleep(3 * time.Second)
	res = collect(sl, sessions)

	// The assertions.
	if res.answered != total {
		t.Errorf("%d of %d messages answered within 120s of the last one sent; unanswered: %s", res.answered, total, abbreviate(res.missing, 40))
	}
	// A repeated answer is told with what happened around it. One that the
	// killed replica posted as the SIGKILL landed, and the replica that
	// took the session over showed again from the outbox, is the window
	// the outbox leaves (a crash between the platform call and Delivered,
	// a millisecond or so): it is reported, as the figures' duplicates.
	// Any other repeat fails the test.
	rel := func(at time.Time) string { return "+" + at.Sub(firstSend).Round(time.Millisecond).String() }
	crashWindow := 0
	for _, name := range res.repeated {
		shown := res.shown[name]
		var copies []string
		for _, a := range shown {
			copies = append(copies, fmt.Sprintf("%q posted at %s", a.text, rel(a.posted)))
		}
		if len(shown) == 2 && shown[0].posted.After(killAt.Add(-time.Second)) && shown[0].posted.Before(killAt.Add(250*time.Millisecond)) &&
			shown[1].posted.After(killAt) && strings.Contains(shown[0].text, "("+chaosReplica(0)+")") {
			crashWindow++
			t.Logf("%s answered twice: %s; %s posted it as its SIGKILL landed at %s and the replica that took the session over showed it again from the outbox (the crash window between the platform call and Delivered)",
				name, strings.Join(copies, ", "), chaosReplica(0), rel(killAt))
			continue
		}
		var near []string
		if shown[0].posted.Before(killAt) && shown[1].posted.After(killAt) && strings.Contains(shown[0].text, "("+chaosReplica(0)+")") {
			near = append(near, fmt.Sprintf("%s showed it %v before its SIGKILL at %s, long after it should have been marked delivered, and the replica that took the session over showed it again from the outbox",
				chaosReplica(0), killAt.Sub(shown[0].posted).Round(time.Millisecond), rel(killAt)))
		}
		if !redisRestart.IsZero() && shown[0].posted.After(redisRestart) && shown[0].posted.Before(redisRestart.Add(redisDown+5*time.Second)) {
			near = append(near, fmt.Sprintf("the first copy was shown as Redis came back (killed at %s, answering again at %s): look for a store write applied twice",
				rel(redisRestart), rel(redisRestart.Add(redisDown))))
		}
		t.Errorf("%s answered %d times: %s; %s", name, len(copies), strings.Join(copies, ", "), cmp.Or(strings.Join(near, "; "), "no chaos near it"))
	}
	for _, e := range res.errs {
		t.Error(e)
	}

	// The figures.
	took := allAnswered.Sub(firstSend)
	// Take-over: for each session whose lease the killed replica held,
	// when another replica began its turn again (its next model call),
	// and when the messages it had were answered.
	takeover := "no session was leased by the killed replica"
	if len(killLeases) > 0 {
		var worstTaken, worstDone time.Duration
		var each []string
		for _, i := range killLeases {
			taken, ok := model.firstTurnAfter(i, 0, killAt)
			done, answered := sessions[i].answeredBy(res.firstAnswer, killAt)
			line := fmt.Sprintf("s%02d", i)
			if sessions[i].long {
				line += " (long turns)"
			}
			if ok {
				worstTaken = max(worstTaken, taken.Sub(killAt))
				line += fmt.Sprintf(" taken over +%v", taken.Sub(killAt).Round(time.Millisecond))
			}
			if answered {
				worstDone = max(worstDone, done.Sub(killAt))
				line += fmt.Sprintf(", answered +%v", done.Sub(killAt).Round(time.Millisecond))
			}
			each = append(each, line)
		}
		takeover = fmt.Sprintf("all %d session(s) it held taken over within %v and answered within %v after the SIGKILL: %s",
			len(killLeases), worstTaken.Round(time.Millisecond), worstDone.Round(time.Millisecond), strings.Join(each, "; "))
	}
	envs := sl.Envelopes()
	resent, perConn := 0, map[int]int{}
	for _, e := range envs {
		if e.RetryAttempt > 0 {
			resent++
		}
		perConn[e.Conn]++
	}
	logs := procs.logs()
	count := func(needle string) int { return strings.Count(logs, needle) }
	t.Logf(`chaos figures:
  messages:            %d over %d sessions, %d deliveries (%d duplicates sent), %d envelopes (%d re-sent after an ack timeout), per connection %v
  total time:          %v from the first message to the last answer (sending took %v); whole test %v
  messages per second: %.1f
  answers:             %d turns shown for %d messages (%.2f messages a turn)
  duplicate answers:   %d (%d in the crash window between the platform call and Delivered)
  take-over latency:   %v
  SIGTERM:             %s; %d thread note(s) that a turn was handed back
  Redis restart:       down %v; commit retries logged %d, turns failed %d, claim errors %d
  sessions taken over: %d (ready set), answers redelivered from an outbox: %d, leases lost: %d
  model calls:         %v by replica`,
		total, chaosSessions, deliveries, deliveries-total, len(envs), resent, perConn,
		took.Round(time.Millisecond), sendDone.Sub(firstSend).Round(time.Millisecond), time.Since(testStart).Round(time.Second),
		float64(res.answered)/took.Seconds(),
		res.turns, res.answered, float64(res.answered)/float64(max(res.turns, 1)),
		res.duplicates, crashWindow,
		takeover,
		term.summary(), res.handedOver,
		redisDown.Round(time.Millisecond), count("commit failed; retrying"), count("turn failed"), count("claim session"),
		count("taking over a session nobody holds"), count("showing an answer committed by an earlier holder"), count("lease lost"),
		model.callCounts())

	if term.err != nil {
		t.Error(term.err)
	}
	if term.freshLong && term.handedBack == 0 {
		t.Errorf("a long turn had just started on %s when it was SIGTERMed, yet it handed no turn back", chaosReplica(1))
	}
	if term.handedBack > 0 && res.handedOver == 0 {
		t.Errorf("%s handed %d turn(s) back at SIGTERM, and no thread says so", chaosReplica(1), term.handedBack)
	}
	if r2Restarted == nil {
		t.Errorf("%s was not restarted", chaosReplica(1))
	}
	if n := count("DATA RACE"); n > 0 {
		t.Errorf("the race detector reported %d data race(s) in the replicas", n)
	}
	if dir := os.Getenv("FIRSTMATE_CHAOS_LOGS"); dir != "" {
		procs.save(t, dir)
	}
	if t.Failed() {
		t.Logf("warnings and errors of the replicas:\n%s", procs.problems(200))
	}
}

func chaosReplica(i int) string { return fmt.Sprintf("r%d", i+1) }

type chaosSession struct {
	idx     int
	user    string
	channel string // the DM, or the channel of the thread
	root    string // the thread's root ts; empty for a DM
	long    bool
	msgs    []chaosMsg
}

type chaosMsg struct {
	ts     string
	sentAt time.Time
}

// answeredBy returns when the last of the session's messages sent before
// at was first answered, if they all were and one of them after at.
func (s *chaosSession) answeredBy(first map[string]time.Time, at time.Time) (time.Time, bool) {
	var done time.Time
	pending := false
	for k, m := range s.msgs {
		if !m.sentAt.Before(at) {
			break
		}
		when, ok := first[chaosName(s.idx, k)]
		if !ok {
			return time.Time{}, false
		}
		if when.After(at) {
			pending = true
			done = maxTime(done, when)
		}
	}
	return done, pending
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// chaosResult is what the fake Slack shows of the run.
type shownAnswer struct {
	text   string
	posted time.Time
}

type chaosResult struct {
	answered    int // messages answered at least once
	turns       int // answers shown
	duplicates  int // answers beyond the first, summed over messages
	missing     []string
	repeated    []string                 // markers answered more than once
	shown       map[string][]shownAnswer // marker → the answers that name it
	firstAnswer map[string]time.Time     // marker → when its first answer was posted
	lastAnswer  time.Time
	handedOver  int // notes left by turns handed back at shutdown
	errs        []string
}

// collect reads every session's bot messages: each names the markers it
// answers. It checks that they are the session's own and come in order.
func collect(sl *fakeslack.Server, sessions []*chaosSession) chaosResult {
	res := chaosResult{firstAnswer: map[string]time.Time{}, shown: map[string][]shownAnswer{}}
	counts := map[string]int{}
	for _, s := range sessions {
		var msgs []fakeslack.Message
		if s.root != "" {
			msgs = sl.Thread(s.channel, s.root)
		} else {
			msgs = sl.Messages(s.channel)
		}
		last := -1
		for _, m := range msgs {
			if m.BotID == "" || m.Deleted {
				continue
			}
			if strings.HasPrefix(m.Text, "⏸ Interrupted by a restart") {
				res.handedOver++ // a turn SIGTERM cut short says so; another replica answers
				continue
			}
			found := chaosMarker.FindAllStringSubmatch(m.Text, -1)
			if len(found) == 0 {
				res.errs = append(res.errs, fmt.Sprintf("session s%02d: a bot message that answers nothing: %q", s.idx, m.Text))
				continue
			}
			res.turns++
			for _, f := range found {
				sess, _ := strconv.Atoi(f[1])
				k, _ := strconv.Atoi(f[2])
				if sess != s.idx {
					res.errs = append(res.errs, fmt.Sprintf("session s%02d: an answer names another session's message %s: %q", s.idx, f[0], m.Text))
					continue
				}
				if k <= last && counts[f[0]] == 0 {
					res.errs = append(res.errs, fmt.Sprintf("session s%02d: %s answered after m%03d (answer %s %q): out of the messages' order", s.idx, f[0], last, m.TS, m.Text))
				}
				last = max(last, k)
				counts[f[0]]++
				res.shown[f[0]] = append(res.shown[f[0]], shownAnswer{m.Text, m.Posted})
				if _, ok := res.firstAnswer[f[0]]; !ok {
					res.firstAnswer[f[0]] = m.Posted
					res.lastAnswer = maxTime(res.lastAnswer, m.Posted)
				}
			}
		}
		for k := range s.msgs {
			name := chaosName(s.idx, k)
			switch n := counts[name]; {
			case n == 0:
				res.missing = append(res.missing, name)
			case n > 1:
				res.repeated = append(res.repeated, name)
				res.duplicates += n - 1
				res.answered++
			default:
				res.answered++
			}
		}
	}
	return res
}

func abbreviate(list []string, n int) string {
	if len(list) <= n {
		return strings.Join(list, " ")
	}
	return strings.Join(list[:n], " ") + fmt.Sprintf(" … (%d more)", len(list)-n)
}

// chaosModel is the fake model of every replica: one ls, then an answer
// naming the markers of the turn's input, a little later (13 s in all for
// a long session).
type chaosModel struct {
	mu       sync.Mutex
	lastLong map[int]time.Time // replica → when its latest long answer began
	calls    map[int]int
	starts   map[int][]turnStart // session → when each of its turns began (its first model call)
}

type turnStart struct {
	replica int
	at      time.Time
}

func (m *chaosModel) handler(replica int) func(*fakellm.Request) fakellm.Reply {
	return func(req *fakellm.Request) fakellm.Reply {
		var input string
		for _, msg := range slices.Backward(req.Messages) {
			if msg.Role == "user" {
				input = msg.Text()
				break
			}
		}
		// A thread's first turn carries the thread's earlier messages
		// before the one to answer.
		if _, after, ok := strings.Cut(input, "[The message to answer]"); ok {
			input = after
		}
		var markers []string
		for _, f := range chaosMarker.FindAllString(input, -1) {
			if !slices.Contains(markers, f) {
				markers = append(markers, f)
			}
		}
		long := false
		if len(markers) > 0 {
			n, _ := strconv.Atoi(markers[0][1:3])
			long = chaosLong(n)
		}
		first := req.LastMessage().Role != "tool"
		m.mu.Lock()
		m.calls[replica]++
		if first && len(markers) > 0 {
			n, _ := strconv.Atoi(markers[0][1:3])
			m.starts[n] = append(m.starts[n], turnStart{replica, time.Now()})
		}
		m.mu.Unlock()
		jitter := time.Duration(20+rand.IntN(80)) * time.Millisecond
		if first {
			r := fakellm.Calls(fakellm.Call("ls", `{"path":"."}`))
			r.Delay = jitter
			if long {
				r.Delay = chaosLongFirst
			}
			return r
		}
		r := fakellm.Text(fmt.Sprintf("Answered %s (%s).", strings.Join(markers, " "), chaosReplica(replica)))
		if len(markers) == 0 {
			r = fakellm.Text("I found no message to answer in: " + input)
		}
		r.Delay = jitter
		if long {
			r.Delay = chaosLongAnswer
			m.mu.Lock()
			m.lastLong[replica] = time.Now()
			m.mu.Unlock()
		}
		return r
	}
}

// firstTurnAfter returns when the session's first turn after at began on
// another replica than dead (whose last requests may reach the fake after
// it was killed).
func (m *chaosModel) firstTurnAfter(session, dead int, at time.Time) (time.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range m.starts[session] {
		if s.replica != dead && s.at.After(at) {
			return s.at, true
		}
	}
	return time.Time{}, false
}

// freshLong reports whether a long answer began on replica within d.
func (m *chaosModel) freshLong(replica int, d time.Duration) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	at, ok := m.lastLong[replica]
	return ok && time.Since(at) < d
}

func (m *chaosModel) callCounts() map[string]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]int{}
	for r, n := range m.calls {
		out[chaosReplica(r)] = n
	}
	return out
}

// chaosTermReport is what happened to the SIGTERMed replica.
type chaosTermReport struct {
	freshLong  bool // a long answer had just begun on it
	exitAfter  time.Duration
	handedBack int
	restarted  *chaosProc
	err        error
}

func (r chaosTermReport) summary() string {
	if r.exitAfter == 0 {
		return "did not happen"
	}
	return fmt.Sprintf("exited %v after SIGTERM (a long turn had just begun on it: %v), %d turn(s) handed back and redone elsewhere", r.exitAfter.Round(time.Millisecond), r.freshLong, r.handedBack)
}

// termAndRestart SIGTERMs p once a long answer has just begun on it (so
// the grace runs out before the turn ends), waits for it to exit and
// starts it again under the same replica name, listening on addr. It runs
// beside the test's goroutine, so it reports instead of failing the test.
func termAndRestart(model *chaosModel, procs *chaosProcs, p *chaosProc, addr, home string, env func(int, string) []string) chaosTermReport {
	var rep chaosTermReport
	deadline := time.Now().Add(20 * time.Second)
	for !model.freshLong(1, 800*time.Millisecond) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	rep.freshLong = model.freshLong(1, 800*time.Millisecond)
	at := time.Now()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(40 * time.Second):
		p.kill()
		rep.err = fmt.Errorf("%s did not stop within 40s of SIGTERM", p.name)
		return rep
	}
	rep.exitAfter = time.Since(at)
	if p.err != nil {
		rep.err = fmt.Errorf("%s did not exit cleanly after SIGTERM: %v", p.name, p.err)
	}
	rep.handedBack = strings.Count(p.logs.String(), "handing the session back")
	np, err := startChaosProc(chaosReplica(1)+"#2", addr, home, env(1, addr))
	if err != nil {
		rep.err = errors.Join(rep.err, err)
		return rep
	}
	procs.add(np)
	rep.restarted = np
	if err := waitChaosReady(np, 30*time.Second); err != nil {
		rep.err = errors.Join(rep.err, err)
	}
	return rep
}

// leasesOf lists the sessions whose lease an owner starting with prefix
// holds, read from Redis.
func leasesOf(rc *goredis.Client, sessions []*chaosSession, prefix string) ([]int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var out []int
	iter := rc.Scan(ctx, 0, chaosPrefix+":*:lease", 1000).Iterator()
	for iter.Next(ctx) {
		key := iter.Val()
		owner, err := rc.Get(ctx, key).Result()
		if err != nil || !strings.HasPrefix(owner, prefix) {
			continue
		}
		// chaos:{slack:T:CHAT:}:s:slack:T:CHAT:THREAD:lease
		_, rest, _ := strings.Cut(key, "}:s:")
		parts := strings.Split(strings.TrimSuffix(rest, ":lease"), ":")
		if len(parts) != 4 {
			continue
		}
		for _, s := range sessions {
			if s.channel == parts[2] && s.root == parts[3] {
				out = append(out, s.idx)
			}
		}
	}
	if err := iter.Err(); err != nil {
		return out, fmt.Errorf("read the leases: %w", err)
	}
	return out, nil
}

// chaosRedis is a private redis-server that can be killed and started
// again on the same port and data.
type chaosRedis struct {
	bin, dir string
	port     int
	mu       sync.Mutex
	cmd      *exec.Cmd
	log      *safeBuffer
}

func startChaosRedis(t *testing.T, bin string) *chaosRedis {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &chaosRedis{bin: bin, dir: t.TempDir(), port: l.Addr().(*net.TCPAddr).Port}
	l.Close()
	if err := r.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.kill)
	return r
}

func (r *chaosRedis) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(r.port)) }

// start runs the server, with every write fsynced before it is
// acknowledged, and waits until it answers.
func (r *chaosRedis) start() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.log = &safeBuffer{}
	r.cmd = exec.Command(r.bin, "--bind", "127.0.0.1", "--port", strconv.Itoa(r.port), "--dir", r.dir,
		"--save", "", "--appendonly", "yes", "--appendfsync", "always", "--daemonize", "no", "--loglevel", "warning")
	r.cmd.Stdout, r.cmd.Stderr = r.log, r.log
	if err := r.cmd.Start(); err != nil {
		return err
	}
	c := goredis.NewClient(&goredis.Options{Addr: r.addr(), MaxRetries: -1})
	defer c.Close()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if c.Ping(context.Background()).Err() == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server on %s did not start: %s", r.addr(), r.log.String())
		}
	}
}

func (r *chaosRedis) kill() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd != nil {
		r.cmd.Process.Kill()
		r.cmd.Wait()
		r.cmd = nil
	}
}

// restart kills the server, leaves it down a second and starts it again
// on its data; it returns how long Redis was down.
func (r *chaosRedis) restart() (time.Duration, error) {
	at := time.Now()
	r.kill()
	time.Sleep(time.Second)
	err := r.start()
	return time.Since(at), err
}

// chaosProc is one `firstmate serve` process of a replica.
type chaosProc struct {
	name string // replica#generation
	addr string
	logs *safeBuffer
	cmd  *exec.Cmd
	done chan struct{}
	err  error // the exit, once done is closed
}

func startChaosProc(name, addr, home string, env []string) (*chaosProc, error) {
	p := &chaosProc{name: name, addr: addr, logs: &safeBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(binary, "serve")
	p.cmd.Env = append([]string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}, env...)
	p.cmd.Stdout, p.cmd.Stderr = p.logs, p.logs
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	return p, nil
}

func (p *chaosProc) kill() {
	p.cmd.Process.Kill()
	<-p.done
}

func (p *chaosProc) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

var chaosHTTP = &http.Client{Timeout: 2 * time.Second}

// waitChaosReady waits until the replica's /readyz answers 200: its Socket
// Mode connection is up and the store answers.
func waitChaosReady(p *chaosProc, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if !p.running() {
			return fmt.Errorf("%s exited at start: %v\n%s", p.name, p.err, p.logs.String())
		}
		resp, err := chaosHTTP.Get("http://" + p.addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready within %v: %v", p.name, timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// chaosProcs are every process the test started, dead or alive.
type chaosProcs struct {
	mu    sync.Mutex
	procs []*chaosProc
}

func (c *chaosProcs) add(p *chaosProc) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !slices.Contains(c.procs, p) {
		c.procs = append(c.procs, p)
	}
}

func (c *chaosProcs) list() []*chaosProc {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.procs)
}

// stopAll SIGTERMs the replicas still running, at once, and expects each
// to exit cleanly.
func (c *chaosProcs) stopAll(t *testing.T) {
	var wg sync.WaitGroup
	for _, p := range c.list() {
		if !p.running() {
			continue
		}
		wg.Go(func() {
			p.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-p.done:
				if p.err != nil {
					t.Errorf("%s did not exit cleanly: %v", p.name, p.err)
				}
			case <-time.After(30 * time.Second):
				p.kill()
				t.Errorf("%s did not stop within 30s of SIGTERM", p.name)
			}
		})
	}
	wg.Wait()
}

func (c *chaosProcs) logs() string {
	var b strings.Builder
	for _, p := range c.list() {
		b.WriteString(p.logs.String())
	}
	return b.String()
}

// problems returns the replicas' WARN and ERROR lines, at most n of each
// replica's.
func (c *chaosProcs) problems(n int) string {
	var b strings.Builder
	for _, p := range c.list() {
		var lines []string
		for l := range strings.SplitSeq(p.logs.String(), "\n") {
			if strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") || strings.Contains(l, "DATA RACE") || strings.HasPrefix(l, "panic") {
				lines = append(lines, l)
			}
		}
		fmt.Fprintf(&b, "--- %s: %d warning and error line(s)\n", p.name, len(lines))
		if len(lines) > n {
			lines = append(lines[:n/2], append([]string{"…"}, lines[len(lines)-n/2:]...)...)
		}
		for _, l := range lines {
			b.WriteString(l)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

func (c *chaosProcs) save(t *testing.T, dir string) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Log(err)
		return
	}
	for _, p := range c.list() {
		path := filepath.Join(dir, strings.ReplaceAll(p.name, "#", "-")+".log")
		if err := os.WriteFile(path, []byte(p.logs.String()), 0o644); err != nil {
			t.Log(err)
		}
	}
	t.Logf("replica logs saved in %s", dir)
}
