package main

import (
	"strings"
	"sync/atomic"
	"time"

	"github.com/firstmate/firstmate/internal/testkit/fakellm"
)

// model is the fake model's behaviour: each turn calls ls tools times (in
// one reply), then answers in Markdown naming every message of the turn.
// It counts requests and answers (one answer a turn).
type model struct {
	tools    int
	latency  time.Duration
	requests atomic.Int64
	answers  atomic.Int64
}

// reply decides from the request. The turn's messages are the user
// messages after the last answer in the conversation (history comes
// first); messages collected from the mailbox arrive as one user message,
// and a message that steers a running turn comes after its tool results.
func (m *model) reply(req *fakellm.Request) fakellm.Reply {
	m.requests.Add(1)
	var (
		asked   []string
		results int
	)
	for _, msg := range req.Messages {
		switch {
		case msg.Role == "assistant" && len(msg.ToolCalls) == 0 && msg.Text() != "":
			asked, results = nil, 0 // an answer: what came before is answered
		case msg.Role == "user":
			asked = append(asked, msg.Text())
		case msg.Role == "tool":
			results++
		}
	}
	var reply fakellm.Reply
	if results < m.tools {
		calls := make([]fakellm.ToolCall, m.tools)
		for i := range calls {
			calls[i] = fakellm.Call("ls", `{"path":"."}`)
		}
		reply = fakellm.Calls(calls...)
	} else {
		m.answers.Add(1)
		var b strings.Builder
		b.WriteString("**Done.** The workspace is empty.")
		for _, id := range parseTokens(questionRE, []byte(strings.Join(asked, "\n"))) {
			b.WriteString(" ")
			b.WriteString(answerToken(id.session, id.seq))
		}
		reply = fakellm.Text(b.String())
	}
	reply.Delay = m.latency
	return reply
}

// perTurn is the model's time in one turn, which the latency excludes.
func (m *model) perTurn() time.Duration {
	if m.tools > 0 {
		return 2 * m.latency
	}
	return m.latency
}
