package main

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"time"
)

// Tokens: every message carries "q-SSSSSS-NNNNN" (session, its number in
// the session) and the model's answer names each message it answers with
// "ans-SSSSSS-NNNNN". Fixed width, so no token is a prefix of another, and
// only letters, digits and dashes, which survive form and JSON encoding
// and every Markdown renderer as they are: the bot's requests are searched
// for them as raw bytes.
const (
	maxSessions   = 999_999
	maxPerSession = 99_999
)

var (
	questionRE = regexp.MustCompile(`q-(\d{6})-(\d{5})`)
	answerRE   = regexp.MustCompile(`ans-(\d{6})-(\d{5})`)
)

func questionToken(session, seq int) string { return fmt.Sprintf("q-%06d-%05d", session, seq) }
func answerToken(session, seq int) string   { return fmt.Sprintf("ans-%06d-%05d", session, seq) }

// msgID names one message of the load: its session and its number there.
type msgID struct{ session, seq int }

// parseTokens returns the messages named by the matches of re in b.
func parseTokens(re *regexp.Regexp, b []byte) []msgID {
	var out []msgID
	for _, m := range re.FindAllSubmatch(b, -1) {
		s, _ := strconv.Atoi(string(m[1]))
		n, _ := strconv.Atoi(string(m[2]))
		id := msgID{s, n}
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

// tracker keeps, for each message sent, when it was handed to the platform
// and which bot messages answered it. The platform drivers report what
// the bot shows; the senders wait on it. Safe for concurrent use.
type tracker struct {
	mu       sync.Mutex
	msgs     map[msgID]*tracked
	answered int           // messages with at least one answer
	last     time.Time     // the last first answer
	changed  chan struct{} // closed and replaced when a message is first answered
	wake     map[int]chan struct{}
}

type tracked struct {
	sent    time.Time
	shown   time.Time // first visible (a draft or an edit included)
	answers []string  // distinct bot messages that carry the answer
}

func newTracker() *tracker {
	return &tracker{msgs: map[msgID]*tracked{}, changed: make(chan struct{}), wake: map[int]chan struct{}{}}
}

// sent records a message handed to the platform, before it is.
func (t *tracker) sent(id msgID, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.msgs[id]; !ok {
		t.msgs[id] = &tracked{sent: at}
	}
}

// shown records answers seen in a bot's request at at. message names the
// bot message that holds them (channel and ts, chat and message ID), or is
// empty for what is no message of its own (a Telegram draft): that makes
// the answer visible but is not an answer that stays.
func (t *tracker) shown(ids []msgID, at time.Time, message string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, id := range ids {
		m := t.msgs[id]
		if m == nil {
			continue // not ours (an idle session's, or a stale run's)
		}
		if m.shown.IsZero() || at.Before(m.shown) {
			m.shown = at
		}
		if message == "" || slices.Contains(m.answers, message) {
			continue
		}
		m.answers = append(m.answers, message)
		if len(m.answers) == 1 {
			t.answered++
			t.last = at
			close(t.changed)
			t.changed = make(chan struct{})
			if w := t.wake[id.session]; w != nil {
				select {
				case w <- struct{}{}:
				default:
				}
			}
		}
	}
}

// waiter returns a channel that gets a value when a message of session
// is first answered.
func (t *tracker) waiter(session int) <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	w := t.wake[session]
	if w == nil {
		w = make(chan struct{}, 1)
		t.wake[session] = w
	}
	return w
}

// isAnswered reports whether id has an answer.
func (t *tracker) isAnswered(id msgID) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	m := t.msgs[id]
	return m != nil && len(m.answers) > 0
}

// progress returns how many messages are answered, and a channel closed
// at the next first answer.
func (t *tracker) progress() (int, <-chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.answered, t.changed
}

// outcome is what the tracker saw, counted.
type outcome struct {
	sent, answered, lost, twice, outOfOrder int
	lostIDs, twiceIDs, disorderIDs          []string // the first few, for the report
	slowest                                 []string // the slowest few, with their latency
	latencies                               []time.Duration
	first, last                             time.Time // first message sent, last first answer
	steady                                  float64   // answers a second in the middle of the run (steadyRate)
}

const examples = 10

// summarize counts the outcome; model is subtracted from every latency.
func (t *tracker) summarize(model time.Duration) outcome {
	t.mu.Lock()
	defer t.mu.Unlock()
	var o outcome
	bySession := map[int][]msgID{}
	for id, m := range t.msgs {
		o.sent++
		if o.first.IsZero() || m.sent.Before(o.first) {
			o.first = m.sent
		}
		switch {
		case len(m.answers) == 0:
			o.lost++
			if len(o.lostIDs) < examples {
				o.lostIDs = append(o.lostIDs, questionToken(id.session, id.seq))
			}
			continue
		case len(m.answers) > 1:
			o.twice++
			if len(o.twiceIDs) < examples {
				o.twiceIDs = append(o.twiceIDs, fmt.Sprintf("%s in %v", questionToken(id.session, id.seq), m.answers))
			}
		}
		o.answered++
		o.latencies = append(o.latencies, m.shown.Sub(m.sent)-model)
		bySession[id.session] = append(bySession[id.session], id)
	}
	o.last = t.last
	var slow []msgID
	var shown []time.Time
	for id, m := range t.msgs {
		if len(m.answers) > 0 {
			slow = append(slow, id)
			shown = append(shown, m.shown)
		}
	}
	o.steady = steadyRate(shown)
	latency := func(id msgID) time.Duration { return t.msgs[id].shown.Sub(t.msgs[id].sent) }
	slices.SortFunc(slow, func(a, b msgID) int { return cmp.Compare(latency(b), latency(a)) })
	for _, id := range slow[:min(len(slow), examples)] {
		o.slowest = append(o.slowest, fmt.Sprintf("%s %s", questionToken(id.session, id.seq), (latency(id)-model).Round(time.Millisecond)))
	}
	// A message is out of order when a later message of its session was
	// visible before it.
	for _, ids := range bySession {
		slices.SortFunc(ids, func(a, b msgID) int { return a.seq - b.seq })
		var earliest time.Time // of the later messages' answers
		for _, id := range slices.Backward(ids) {
			shown := t.msgs[id].shown
			if !earliest.IsZero() && earliest.Before(shown) {
				o.outOfOrder++
				if len(o.disorderIDs) < examples {
					o.disorderIDs = append(o.disorderIDs, questionToken(id.session, id.seq))
				}
			}
			if earliest.IsZero() || shown.Before(earliest) {
				earliest = shown
			}
		}
	}
	slices.Sort(o.latencies)
	slices.Sort(o.lostIDs)
	slices.Sort(o.twiceIDs)
	slices.Sort(o.disorderIDs)
	return o
}

// reset forgets every message: what comes next is another phase. Late
// answers to the earlier messages are ignored.
func (t *tracker) reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.msgs = map[msgID]*tracked{}
	t.answered = 0
	t.last = time.Time{}
	t.wake = map[int]chan struct{}{}
}

// steadyRate is the rate of answers between the tenth and the ninetieth
// percentile of the times they were shown: the run without its start
// (every session's first message at once) and its drain (the last
// sessions, each paced by its platform to about an answer a second, and
// the cores idle). 0 for fewer than 100 answers. It sorts shown.
func steadyRate(shown []time.Time) float64 {
	if len(shown) < 100 {
		return 0
	}
	slices.SortFunc(shown, time.Time.Compare)
	lo, hi := len(shown)/10, len(shown)*9/10
	d := shown[hi].Sub(shown[lo])
	if d <= 0 {
		return 0
	}
	return float64(hi-lo) / d.Seconds()
}
