package telegram

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/firstmate/firstmate/agent"
)

var bot = user{ID: 700, IsBot: true, FirstName: "Firstmate", Username: "firstmate_bot"}

func TestInbound(t *testing.T) {
	tests := []struct {
		name      string
		update    string
		ok        bool
		key       agent.SessionKey
		text      string
		files     int
		allowBots bool
		channels  bool
	}{
		{"private message", `{"update_id":1,"message":{"message_id":5,"from":{"id":42,"first_name":"Ann"},"chat":{"id":42,"type":"private"},"date":1700000000,"text":"hello"}}`,
			true, agent.SessionKey{Platform: "telegram", Chat: "42"}, "hello", 0, false, false},
		{"group mention by entity", `{"update_id":2,"message":{"message_id":6,"from":{"id":42,"first_name":"Ann"},"chat":{"id":-100,"type":"supergroup"},"date":1,"text":"hey @firstmate_bot what now?","entities":[{"type":"mention","offset":4,"length":14}]}}`,
			true, agent.SessionKey{Platform: "telegram", Chat: "-100"}, "hey  what now?", 0, false, false},
		{"mention after emoji (UTF-16 offsets)", `{"update_id":3,"message":{"message_id":7,"from":{"id":42,"first_name":"Ann"},"chat":{"id":-100,"type":"supergroup"},"date":1,"text":"🚀🚀 @firstmate_bot go","entities":[{"type":"mention","offset":5,"length":14}]}}`,
			true, agent.SessionKey{Platform: "telegram", Chat: "-100"}, "🚀🚀  go", 0, false, false},
		{"a longer username is someone else", `{"update_id":4,"message":{"message_id":8,"from":{"id":42,"first_name":"Ann"},"chat":{"id":-100,"type":"supergroup"},"date":1,"text":"ask @firstmate_botanist","entities":[{"type":"mention","offset":4,"length":19}]}}`,
			false, agent.SessionKey{}, "", 0, false, false},
		{"the name as plain text is no mention", `{"update_id":5,"message":{"message_id":9,"from":{"id":42,"first_name":"Ann"},"chat":{"id":-100,"type":"supergroup"},"date":1,"text":"@firstmate_bot without an entity"}}`,
			false, agent.SessionKey{}, "", 0, false, false},
		{"reply to the bot", `{"update_id":6,"message":{"message_id":10,"from":{"id":42,"first_name":"Ann"},"chat":{"id":-100,"type":"supergroup"},"date":1,"text":"and then?","reply_to_message":{"message_id":3,"from":{"id":700,"is_bot":true,"first_name":"Firstmate"},"chat":{"id":-100,"type":"supergroup"},"date":1}}}`,
			true, agent.SessionKey{Platform: "telegram", Chat: "-100"}, "and then?", 0, false, false},
		{"command to the bot", `{"update_id":7,"message":{"message_id":11,"from":{"id":42,"first_name":"Ann"},"chat":{"id":-100,"type":"supergroup"},"date":1,"text":"/reset@firstmate_bot","entities":[{"type":"bot_command","offset":0,"length":20}]}}`,
			true, agent.SessionKey{Platform: "telegram", Chat: "-100"}, "/reset", 0, false, false},
		{"command to another bot", `{"update_id":8,"message":{"message_id":12,"from":{"id":42,"first_name":"Ann"},"chat":{"id":-100,"type":"supergroup"},"date":1,"text":"/reset@other_bot","entities":[{"type":"bot_command","offset":0,"length":16}]}}`,
			false, agent.SessionKey{}, "", 0, false, false},
		{"our command, to no bot in particular", `{"update_id":19,"message":{"message_id":40,"from":{"id":42,"first_name":"Ann"},"chat":{"id":-100,"type":"supergroup","title":"Crew"},"date":1,"text":"/why shell","entities":[{"type":"bot_command","offset":0,"length":4}]}}`,
			true, agent.SessionKey{Platform: "telegram", Chat: "-100"}, "/why shell", 0, false, false},
		{"someone else's command, to no bot in particular", `{"update_id":20,"message":{"message_id":41,"from":{"id":42,"first_name":"Ann"},"chat":{"id":-100,"type":"supergroup"},"date":1,"text":"/start now","entities":[{"type":"bot_command","offset":0,"length":6}]}}`,
			false, agent.SessionKey{}, "", 0, false, false},
		{"a slash without the entity is no command", `{"update_id":21,"message":{"message_id":42,"from":{"id":42,"first_name":"Ann"},"chat":{"id":-100,"type":"supergroup"},"date":1,"text":"/why shell"}}`,
			false, agent.SessionKey{}, "", 0, false, false},
		{"forum topic", `{"update_id":9,"message":{"message_id":20,"message_thread_id":15,"is_topic_message":true,"from":{"id":42,"first_name":"Ann"},"chat":{"id":-200,"type":"supergroup","is_forum":true},"date":1,"text":"@firstmate_bot build?","entities":[{"type":"mention","offset":0,"length":14}],"reply_to_message":{"message_id":15,"from":{"id":700,"is_bot":true,"first_name":"Firstmate"},"chat":{"id":-200,"type":"supergroup"},"date":1}}}`,
			true, agent.SessionKey{Platform: "telegram", Chat: "-200", Thread: "15"}, "build?", 0, false, false},
		{"topic chatter is no reply to the bot", `{"update_id":10,"message":{"message_id":21,"message_thread_id":15,"is_topic_message":true,"from":{"id":42,"first_name":"Ann"},"chat":{"id":-200,"type":"supergroup","is_forum":true},"date":1,"text":"lunch?","reply_to_message":{"message_id":15,"from":{"id":700,"is_bot":true,"first_name":"Firstmate"},"chat":{"id":-200,"type":"supergroup"},"date":1}}}`,
			false, agent.SessionKey{}, "", 0, false, false},
		{"another bot", `{"update_id":11,"message":{"message_id":22,"from":{"id":800,"is_bot":true,"first_name":"Helper"},"chat":{"id":800,"type":"private"},"date":1,"text":"hi"}}`,
			false, agent.SessionKey{}, "", 0, false, false},
		{"another bot, allowed", `{"update_id":12,"message":{"message_id":23,"from":{"id":800,"is_bot":true,"first_name":"Helper"},"chat":{"id":800,"type":"private"},"date":1,"text":"hi"}}`,
			true, agent.SessionKey{Platform: "telegram", Chat: "800"}, "hi", 0, true, false},
		{"edited message", `{"update_id":13,"edited_message":{"message_id":5,"from":{"id":42,"first_name":"Ann"},"chat":{"id":42,"type":"private"},"date":1,"text":"hello!"}}`,
			false, agent.SessionKey{}, "", 0, false, false},
		{"channel post", `{"update_id":14,"channel_post":{"message_id":30,"sender_chat":{"id":-300,"type":"channel","title":"News"},"chat":{"id":-300,"type":"channel"},"date":1,"text":"news"}}`,
			false, agent.SessionKey{}, "", 0, false, false},
		{"channel post, enabled", `{"update_id":15,"channel_post":{"message_id":31,"sender_chat":{"id":-300,"type":"channel","title":"News"},"chat":{"id":-300,"type":"channel"},"date":1,"text":"news"}}`,
			true, agent.SessionKey{Platform: "telegram", Chat: "-300"}, "news", 0, false, true},
		{"service message", `{"update_id":16,"message":{"message_id":32,"from":{"id":42,"first_name":"Ann"},"chat":{"id":-100,"type":"supergroup"},"date":1,"new_chat_members":[{"id":43,"first_name":"Bo"}]}}`,
			false, agent.SessionKey{}, "", 0, false, false},
		{"document with caption", `{"update_id":17,"message":{"message_id":33,"from":{"id":42,"first_name":"Ann"},"chat":{"id":42,"type":"private"},"date":1,"caption":"keep it","document":{"file_id":"F1","file_name":"a.csv","mime_type":"text/csv","file_size":12}}}`,
			true, agent.SessionKey{Platform: "telegram", Chat: "42"}, "keep it", 1, false, false},
		{"photo, largest size", `{"update_id":18,"message":{"message_id":34,"from":{"id":42,"first_name":"Ann"},"chat":{"id":42,"type":"private"},"date":1,"photo":[{"file_id":"small","width":90,"height":90},{"file_id":"big","width":1280,"height":960}]}}`,
			true, agent.SessionKey{Platform: "telegram", Chat: "42"}, "", 1, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var u update
			if err := json.Unmarshal([]byte(tt.update), &u); err != nil {
				t.Fatal(err)
			}
			n := &normalizer{me: bot, allowBots: tt.allowBots, channelPosts: tt.channels}
			in, ok := n.inbound(&u)
			if ok != tt.ok {
				t.Fatalf("ok = %v, want %v (%+v)", ok, tt.ok, in)
			}
			if !ok {
				return
			}
			if in.Key != tt.key || in.Text != tt.text || len(in.Files) != tt.files || !in.Addressed || in.MessageID == "" || in.ReplyTo != in.MessageID {
				t.Fatalf("got %+v", in)
			}
			if private := strings.Contains(tt.update, `"type":"private"`); in.Private != private {
				t.Errorf("Private = %v", in.Private)
			}
			if strings.Contains(tt.update, `"title":"Crew"`) && in.ChatName != "Crew" {
				t.Errorf("ChatName = %q", in.ChatName)
			}
			if tt.name == "photo, largest size" && in.Files[0].ID != "big" {
				t.Fatalf("photo %+v", in.Files)
			}
		})
	}
}

// TestInboundFileName: a document's name is made safe before anything
// stores or shows it; an override cannot turn "fdp.exe" into "exe.pdf".
func TestInboundFileName(t *testing.T) {
	n := &normalizer{me: bot}
	for name, want := range map[string]string{
		`invoice\u202efdp.exe`:         "invoicefdp.exe",
		`\u2066\u202e\u200d\u2069`:     "file",
		`a\u200d.csv`:                  "a.csv",
		`..\\..\\\u200fboot.ini`:       "boot.ini",
		`\u2067report\u2069\u200e.txt`: "report.txt",
	} {
		var u update
		raw := `{"update_id":17,"message":{"message_id":33,"from":{"id":42,"first_name":"Ann"},"chat":{"id":42,"type":"private"},"date":1,"document":{"file_id":"F1","file_name":"` + name + `"}}}`
		if err := json.Unmarshal([]byte(raw), &u); err != nil {
			t.Fatal(err)
		}
		in, ok := n.inbound(&u)
		if !ok || len(in.Files) != 1 {
			t.Fatalf("%s: %+v", name, in)
		}
		if got := in.Files[0].Name; got != want {
			t.Errorf("%s: name %q, want %q", name, got, want)
		}
	}
}
