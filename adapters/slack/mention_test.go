package slack

import (
	"strings"
	"testing"

	"github.com/yuin/goldmark/util"
)

var inThread = map[string]bool{"U024BE7LH": true}

const z = "\u200b"

func TestNeutralize(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"plain text", "hello world", "hello world"},
		{"channel", "<!channel> look", "&lt;!channel> look"},
		{"here with label", "<!here|here>", "&lt;!here|here>"},
		{"everyone", "<!everyone>", "&lt;!everyone>"},
		{"any case", "<!CHANNEL> <!Here>", "&lt;!CHANNEL> &lt;!Here>"},
		{"user group", "<!subteam^S0123|@oncall>", "&lt;!subteam^S0123|@oncall>"},
		{"unknown special", "<!foo>", "&lt;!foo>"},
		{"unterminated", "<!channel", "&lt;!channel"},
		{"date is harmless", "<!date^1392734382^{date_short}|Feb 18>", "<!date^1392734382^{date_short}|Feb 18>"},
		{"date with a broadcast in its fallback", "<!date^1^{date}|<!here>>", "<!date^1^{date}|&lt;!here>>"},
		{"allowed user", "hi <@U024BE7LH>", "hi <@U024BE7LH>"},
		{"allowed user with label", "<@U024BE7LH|bob>", "<@U024BE7LH|bob>"},
		{"stranger", "hi <@U999>", "hi &lt;@U999>"},
		{"enterprise user", "<@W123>", "&lt;@W123>"},
		{"lowercase lookalike id", "<@u024be7lh>", "&lt;@u024be7lh>"},
		{"allowed id as a prefix", "<@U024BE7LHX>", "&lt;@U024BE7LHX>"},
		{"unterminated mention", "<@U024BE7LH", "&lt;@U024BE7LH"},
		{"mention inside a link label", "<https://x.io|<!channel>>", "<https://x.io|&lt;!channel>>"},
		{"links and channels stay", "<https://x.io|site> <#C123|general> <mailto:a@b.c>", "<https://x.io|site> <#C123|general> <mailto:a@b.c>"},
		{"already escaped", "&lt;!channel&gt;", "&lt;!channel&gt;"},
		{"in code", "`<!here>` ```<@U1>```", "`&lt;!here>` ```&lt;@U1>```"},
		{"plain broadcasts", "@channel @here @everyone @group", "@" + z + "channel @" + z + "here @" + z + "everyone @" + z + "group"},
		{"plain, any case, in punctuation", "(@Here) *@CHANNEL* _@everyone_ ~@here~ @here.", "(@" + z + "Here) *@" + z + "CHANNEL* _@" + z + "everyone_ ~@" + z + "here~ @" + z + "here."},
		{"start and end of text", "@here", "@" + z + "here"},
		{"not broadcasts", "me@here.com https://x.com/@here @channels @hereafter @ here @herb", "me@here.com https://x.com/@here @channels @hereafter @ here @herb"},
		{"idempotent", "@" + z + "here &lt;!here>", "@" + z + "here &lt;!here>"},
		{"fullwidth lookalikes are not pings", "＜!channel＞ ＠here", "＜!channel＞ ＠here"},
		{"a flood", strings.Repeat("<!channel>", 3), strings.Repeat("&lt;!channel>", 3)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Neutralize(tt.in, inThread)
			if got != tt.want {
				t.Errorf("Neutralize(%q)\n got %q\nwant %q", tt.in, got, tt.want)
			}
			if again := Neutralize(got, inThread); again != got {
				t.Errorf("not idempotent: %q", again)
			}
			checkNoPing(t, got, inThread)
		})
	}
	// Without an allowed set nobody may be mentioned.
	if got := Neutralize("<@U024BE7LH>", nil); got != "&lt;@U024BE7LH>" {
		t.Errorf("nil allowed: %q", got)
	}
}

func TestSafeMarkdown(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"plain", "**Hello** [x](https://x.io)", "**Hello** [x](https://x.io)"},
		{"channel", "<!channel> look", "<" + z + "!channel> look"},
		{"everyone and here", "<!everyone> <!here|x>", "<" + z + "!everyone> <" + z + "!here|x>"},
		{"user group", "<!subteam^S1|@team>", "<" + z + "!subteam^S1|@team>"},
		{"date stays", "<!date^1^{date}|x>", "<!date^1^{date}|x>"},
		{"allowed user", "thanks <@U024BE7LH>", "thanks <@U024BE7LH>"},
		{"stranger", "cc <@U999>", "cc <" + z + "@U999>"},
		{"entity <", "&lt;!channel&gt; &LT;!here&gt;", "&lt;" + z + "!channel&gt; &LT;" + z + "!here&gt;"},
		{"numeric entities", "&#60;!here&#62; &#x3C;!channel> &#0060;@U999>", "&#60;" + z + "!here&#62; &#x3C;" + z + "!channel> &#0060;" + z + "@U999>"},
		{"entity !", "<&excl;channel> <&#33;here> <&commat;U999>", "<" + z + "&excl;channel> <" + z + "&#33;here> <" + z + "&commat;U999>"},
		{"entity @ for an allowed user is not trusted", "<&#64;U024BE7LH>", "<" + z + "&#64;U024BE7LH>"},
		{"backslash escape", `<\!channel> \<!here>`, "<" + z + `\!channel> \<` + z + "!here>"},
		{"link destinations", "[a](!channel) [b](@U999) [c]( <!here>) [d](<@U1>)", "[a](" + z + "!channel) [b](" + z + "@U999) [c]( <" + z + "!here>) [d](<" + z + "@U1>)"},
		{"reference definitions", "[a]\n\n[a]: !channel", "[a]\n\n[a]: " + z + "!channel"},
		{"in code spans and fences", "`<!here>` and\n```\n<!channel> @here\n```", "`<" + z + "!here>` and\n```\n<" + z + "!channel> @" + z + "here\n```"},
		{"plain broadcasts", "@here and @Channel", "@" + z + "here and @" + z + "Channel"},
		{"entity @ broadcast", "&#64;here &commat;channel", "&#64;" + z + "here &commat;" + z + "channel"},
		{"not broadcasts", "me@here.com and https://x.com/@here and @hereafter", "me@here.com and https://x.com/@here and @hereafter"},
		{"harmless angles", "a < b and <https://x.io> and <b>", "a < b and <https://x.io> and <b>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := SafeMarkdown(tt.in, inThread)
			if got != tt.want {
				t.Errorf("SafeMarkdown(%q)\n got %q\nwant %q", tt.in, got, tt.want)
			}
			if again := SafeMarkdown(got, inThread); again != got {
				t.Errorf("not idempotent: %q", again)
			}
			checkNoPing(t, decodeMarkdown(got), inThread)
		})
	}
}

// TestHostileAnswer is a model answer written to ping everyone, through each
// way the Slack adapter posts an answer.
func TestHostileAnswer(t *testing.T) {
	answer := strings.Repeat("<!channel> <!here> <!everyone> @here @channel <@U999> <!subteam^S1> ", 20) +
		"\n\n`<!here>` [x](!channel) &lt;!everyone&gt; <@U024BE7LH>\n\n```\n<!channel>\n```\n"
	md := SafeMarkdown(answer, inThread)
	checkNoPing(t, decodeMarkdown(md), inThread)
	if !strings.Contains(md, "<@U024BE7LH>") {
		t.Error("the allowed mention was lost")
	}
	text := RenderMrkdwn(md) // the notification fallback
	checkNoPing(t, text, nil)
	checkNoPing(t, RenderMrkdwn(answer), nil)
	checkNoPing(t, Neutralize(answer, inThread), inThread)
}

// checkNoPing fails if s, read as mrkdwn, holds a broadcast, a user group
// or a mention of someone not allowed.
func checkNoPing(t *testing.T, s string, allowed map[string]bool) {
	t.Helper()
	for i := 0; i+1 < len(s); i++ {
		if s[i] != '<' {
			continue
		}
		rest := s[i+1:]
		switch {
		case rest[0] == '!' && !strings.HasPrefix(rest, "!date^"):
			t.Errorf("special left at %d: %q", i, clip(rest))
		case rest[0] == '@':
			id, ok := mentionID(rest[1:])
			if !ok || !allowed[id] {
				t.Errorf("mention left at %d: %q", i, clip(rest))
			}
		}
	}
	if n := neutralizePlain(s); n != s {
		t.Errorf("plain broadcast left in %q", clip(s))
	}
}

// decodeMarkdown is what a Markdown reader makes of characters: entities
// resolved, backslash escapes removed.
func decodeMarkdown(s string) string {
	b := util.ResolveEntityNames(util.ResolveNumericReferences([]byte(s)))
	return string(util.UnescapePunctuations(b))
}

func FuzzNeutralize(f *testing.F) {
	for _, s := range []string{
		"<!channel>", "<@U024BE7LH>", "<@U999|x>", "@here", "&lt;!here&gt;", "&#60;&#33;here>", `<\!channel>`,
		"[a](!here)", "<!date^1^x|<!here>>", "<<!!channel>>", "me@here.com", "&commat;everyone",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n := Neutralize(s, inThread)
		checkNoPing(t, n, inThread)
		if Neutralize(n, inThread) != n {
			t.Error("Neutralize is not idempotent")
		}
		m := SafeMarkdown(s, inThread)
		decoded := decodeMarkdown(m)
		checkNoPing(t, decoded, inThread)
		for _, open := range []string{"](", "]:"} {
			for i := strings.Index(decoded, open); i >= 0; i = strings.Index(decoded[i+1:], open) + i + 1 {
				dest := strings.TrimLeft(decoded[i+2:], " \t\r\n")
				dest = strings.TrimPrefix(dest, "<")
				if strings.HasPrefix(dest, "!") || strings.HasPrefix(dest, "@") {
					t.Errorf("link destination %q", clip(dest))
				}
				if !strings.Contains(decoded[i+1:], open) {
					break
				}
			}
		}
		if strings.ReplaceAll(m, z, "") != strings.ReplaceAll(s, z, "") {
			t.Error("SafeMarkdown changed more than zero-width spaces")
		}
	})
}
