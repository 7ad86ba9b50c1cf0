package main

import (
	"strings"
	"testing"
	"time"

	"github.com/firstmate/firstmate/internal/testkit/fakellm"
	"github.com/firstmate/firstmate/internal/testkit/fakeslack"
	"github.com/firstmate/firstmate/internal/testkit/faketelegram"
)

// handsModel calls an MCP server's tool or loads a skill when asked to,
// and answers with what the tool returned.
func handsModel(req *fakellm.Request) fakellm.Reply {
	last := req.LastMessage()
	switch {
	case last.Role == "tool":
		return fakellm.Text("tool said: " + last.Text())
	case strings.Contains(last.Text(), "use notes"):
		return fakellm.Calls(fakellm.Call("notes__echo", map[string]string{"text": "HELLO-FROM-MCP"}))
	case strings.Contains(last.Text(), "use deploy"):
		return fakellm.Calls(fakellm.Call("skill", map[string]string{"name": "deploy"}))
	}
	return fakellm.Text("answer to: " + last.Text())
}

// From Slack and from Telegram, a turn calls an MCP server's tool (the
// fake server over HTTP) and loads a skill; the answer in the thread
// carries what each returned.
func TestMCPAndSkillsFromThePlatforms(t *testing.T) {
	t.Parallel()
	t.Run("slack", func(t *testing.T) {
		t.Parallel()
		g := startSlackGov(t, handsModel, "FIRSTMATE_CONFIG="+screensConfig(t), "FIRSTMATE_ADMINS=slack:"+fakeslack.Alice)
		if !g.slack.WaitFor(20*time.Second, func() bool { return strings.Contains(g.srv.logs(), "MCP server tools listed") }) {
			t.Fatalf("the MCP server did not list its tools\n%s", g.srv.logs())
		}
		for _, c := range []struct{ ask, want string }{
			{"use notes please", "tool said: HELLO-FROM-MCP"},
			{"use deploy please", "Do it."},
		} {
			ev := g.mention(t, fakeslack.General, fakeslack.Bob, c.ask)
			g.waitMessage(t, fakeslack.General, ev.TS(), c.want, func(m fakeslack.Message) bool {
				return strings.Contains(m.Text, "tool said:") && strings.Contains(m.Text, c.want)
			})
		}
	})
	t.Run("telegram", func(t *testing.T) {
		t.Parallel()
		e := startTelegramGov(t, handsModel, "TELEGRAM_ACCESS=open", "FIRSTMATE_CONFIG="+screensConfig(t))
		if !e.tg.WaitFor(20*time.Second, func() bool { return strings.Contains(e.srv.logs(), "MCP server tools listed") }) {
			t.Fatalf("the MCP server did not list its tools\n%s", e.srv.logs())
		}
		e.tg.Mention(faketelegram.Group, faketelegram.Bob, "use notes please")
		e.answer(t, faketelegram.Group, 0, "tool said: HELLO-FROM-MCP")
		e.tg.Mention(faketelegram.Group, faketelegram.Bob, "use deploy please")
		e.answer(t, faketelegram.Group, 0, "Do it.")
	})
}
