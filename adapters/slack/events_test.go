package slack

import (
	"encoding/json"
	"testing"

	"github.com/slack-go/slack/slackevents"

	"github.com/firstmate/firstmate/agent"
)

var me = identity{TeamID: "T1", BotUserID: "UBOT", BotID: "BBOT"}

// parse turns an inner event's JSON into the type slackevents gives.
func parse(t *testing.T, inner string) any {
	t.Helper()
	outer := `{"type":"event_callback","team_id":"T1","event_id":"Ev1","event":` + inner + `}`
	ev, err := slackevents.ParseEvent(json.RawMessage(outer), slackevents.OptionNoVerifyToken())
	if err != nil {
		t.Fatal(err)
	}
	return ev.InnerEvent.Data
}

func TestInbound(t *testing.T) {
	key := func(chat, thread string) agent.SessionKey {
		return agent.SessionKey{Platform: "slack", Team: "T1", Chat: chat, Thread: thread}
	}
	tests := []struct {
		name      string
		event     string
		ok        bool
		key       agent.SessionKey
		text      string
		addressed bool
		followUp  bool
		files     int
		allowBots bool
	}{
		{"mention in channel starts a thread", `{"type":"app_mention","user":"U1","text":"<@UBOT> hi there","ts":"1700.1","channel":"C1"}`,
			true, key("C1", "1700.1"), "hi there", true, false, 0, false},
		{"mention in a thread", `{"type":"app_mention","user":"U1","text":"<@UBOT|fm>: look","ts":"1700.2","thread_ts":"1700.1","channel":"C1"}`,
			true, key("C1", "1700.1"), "look", true, false, 0, false},
		{"edited mention", `{"type":"app_mention","user":"U1","text":"<@UBOT> hi","ts":"1700.1","channel":"C1","edited":{"user":"U1","ts":"1700.3"}}`,
			false, agent.SessionKey{}, "", false, false, 0, false},
		{"mention by a bot", `{"type":"app_mention","user":"U2","bot_id":"B2","text":"<@UBOT> hi","ts":"1700.1","channel":"C1"}`,
			false, agent.SessionKey{}, "", false, false, 0, false},
		{"mention by a bot, bots allowed", `{"type":"app_mention","user":"U2","bot_id":"B2","text":"<@UBOT> hi","ts":"1700.1","channel":"C1"}`,
			true, key("C1", "1700.1"), "hi", true, false, 0, true},
		{"flat DM", `{"type":"message","channel_type":"im","user":"U1","text":"hello","ts":"1700.5","channel":"D1"}`,
			true, key("D1", ""), "hello", true, false, 0, false},
		{"DM thread", `{"type":"message","channel_type":"im","user":"U1","text":"more","ts":"1700.6","thread_ts":"1700.5","channel":"D1"}`,
			true, key("D1", "1700.5"), "more", true, false, 0, false},
		{"DM with a file", `{"type":"message","subtype":"file_share","channel_type":"im","user":"U1","text":"see","ts":"1700.7","channel":"D1","files":[{"id":"F1","name":"a.csv","mimetype":"text/csv","size":12,"url_private_download":"https://files/a.csv"}]}`,
			true, key("D1", ""), "see", true, false, 1, false},
		{"reply in a thread", `{"type":"message","channel_type":"channel","user":"U1","text":"and then?","ts":"1700.9","thread_ts":"1700.1","channel":"C1"}`,
			true, key("C1", "1700.1"), "and then?", false, true, 0, false},
		{"channel talk", `{"type":"message","channel_type":"channel","user":"U1","text":"lunch?","ts":"1700.9","channel":"C1"}`,
			false, agent.SessionKey{}, "", false, false, 0, false},
		{"message that mentions the bot (app_mention carries it)", `{"type":"message","channel_type":"channel","user":"U1","text":"<@UBOT> hi","ts":"1700.9","channel":"C1"}`,
			false, agent.SessionKey{}, "", false, false, 0, false},
		{"the bot's own message", `{"type":"message","channel_type":"im","user":"UBOT","bot_id":"BBOT","text":"answer","ts":"1700.9","channel":"D1"}`,
			false, agent.SessionKey{}, "", false, false, 0, true},
		{"bot_message subtype", `{"type":"message","subtype":"bot_message","channel_type":"im","bot_id":"B9","text":"x","ts":"1700.9","channel":"D1"}`,
			false, agent.SessionKey{}, "", false, false, 0, true},
		{"message_changed", `{"type":"message","subtype":"message_changed","channel_type":"im","channel":"D1","ts":"1700.9","message":{"type":"message","user":"U1","text":"edited","ts":"1700.5","edited":{"user":"U1","ts":"1700.9"}}}`,
			false, agent.SessionKey{}, "", false, false, 0, false},
		{"message_deleted", `{"type":"message","subtype":"message_deleted","channel_type":"im","channel":"D1","ts":"1700.9","deleted_ts":"1700.5"}`,
			false, agent.SessionKey{}, "", false, false, 0, false},
		{"channel_join", `{"type":"message","subtype":"channel_join","channel_type":"channel","user":"U1","text":"<@U1> has joined","ts":"1700.9","channel":"C1"}`,
			false, agent.SessionKey{}, "", false, false, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := &normalizer{me: me, allowBots: tt.allowBots}
			in, ok := n.inbound("T1", parse(t, tt.event))
			if ok != tt.ok {
				t.Fatalf("ok = %v, want %v (%+v)", ok, tt.ok, in)
			}
			if !ok {
				return
			}
			if in.Key != tt.key || in.Text != tt.text || in.Addressed != tt.addressed || in.FollowUp != tt.followUp || len(in.Files) != tt.files {
				t.Fatalf("got %+v", in)
			}
			if in.MessageID == "" || in.MessageID != in.ReplyTo || in.User.ID == "" {
				t.Fatalf("ids: %+v", in)
			}
		})
	}
}

// TestInboundFileName: a shared file's name is made safe before anything
// stores or shows it; an override cannot turn "fdp.exe" into "exe.pdf".
func TestInboundFileName(t *testing.T) {
	n := &normalizer{me: me}
	for _, c := range []struct{ file, want string }{
		{`{"id":"F1","name":"invoice\u202efdp.exe"}`, "invoicefdp.exe"},
		{`{"id":"F1","name":"\u2066\u202e\u200d\u2069"}`, "file"},
		{`{"id":"F1","name":"a\u200d.csv"}`, "a.csv"},
		{`{"id":"F1","name":"../../etc/\u200fpasswd"}`, "passwd"},
		{`{"id":"F1","title":"bill\u202efdp.exe"}`, "billfdp.exe"},
	} {
		ev := `{"type":"message","subtype":"file_share","channel_type":"im","user":"U1","text":"see","ts":"1700.7","channel":"D1","files":[` + c.file + `]}`
		in, ok := n.inbound("T1", parse(t, ev))
		if !ok || len(in.Files) != 1 {
			t.Fatalf("%s: %+v", c.file, in)
		}
		if got := in.Files[0].Name; got != c.want {
			t.Errorf("%s: name %q, want %q", c.file, got, c.want)
		}
	}
}

func TestStripMention(t *testing.T) {
	n := &normalizer{me: me}
	for in, want := range map[string]string{
		"<@UBOT> do it":            "do it",
		"<@UBOT>: do it":           "do it",
		"<@UBOT|firstmate>, do it": "do it",
		"ask <@UBOT> about <@U2>":  "ask  about <@U2>",
		"<@UBOT2> is someone else": "<@UBOT2> is someone else",
		"<@UBOT":                   "<@UBOT",
		"<@UBOT><@UBOT> twice":     "twice",
		"":                         "",
	} {
		if got := n.stripMention(in); got != want {
			t.Errorf("stripMention(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestTsTime(t *testing.T) {
	if got := tsTime("1700000000.000100"); got.UnixMicro() != 1700000000000100 {
		t.Fatalf("tsTime = %v", got)
	}
	if !tsTime("garbage").IsZero() {
		t.Fatal("garbage ts parsed")
	}
}
