package slack

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Text from the model or from tools must never ping people. Slack pings on
// control sequences in mrkdwn: <!channel>, <!here>, <!everyone>,
// <!subteam^ID> (a user group) and <@U…>/<@W…> (a user); and, when a
// message is posted with link_names, on plain @channel, @here, @everyone
// and handles. The adapter never sets link_names; the plain broadcasts are
// broken up anyway, in case some surface links them.
//
// Neutralizing keeps the text readable: mrkdwn gets the "<" of a sequence
// escaped, so Slack shows "<!channel>" as typed; Markdown for a markdown
// block (whose conversion to Slack's format is not documented) gets a
// zero-width space after the "<" or the "@", which no syntax reads through.
// Both apply inside code too: whether Slack resolves mentions in code is
// not documented either.

// zeroWidthSpace breaks a token without showing.
const zeroWidthSpace = "\u200b"

// broadcasts are the words that, after an @, address a whole channel.
var broadcasts = []string{"channel", "here", "everyone", "group"}

// Neutralize makes mrkdwn text unable to ping: every <!…> sequence except
// the harmless <!date^…>, and every user mention <@…> whose user is not in
// allowed (the people in the conversation), is escaped so that Slack shows
// it as text; plain @channel, @here, @everyone get a zero-width space.
// Links, channel references (<#C…>) and formatting are left alone.
func Neutralize(s string, allowed map[string]bool) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '<' && i+1 < len(s) && !keepSpecial(s[i+1:], allowed) {
			b.WriteString("&lt;")
			continue
		}
		b.WriteByte(s[i])
	}
	return neutralizePlain(b.String())
}

// keepSpecial reports whether the text after a "<" is safe to leave: not a
// control sequence that pings, or a mention of an allowed user.
func keepSpecial(rest string, allowed map[string]bool) bool {
	switch rest[0] {
	case '!':
		return strings.HasPrefix(rest, "!date^")
	case '@':
		id, ok := mentionID(rest[1:])
		return ok && allowed[id]
	}
	return true
}

// mentionID reads a user ID up to the ">" or "|" that ends a mention.
func mentionID(s string) (string, bool) {
	n := 0
	for n < len(s) && (s[n] >= 'A' && s[n] <= 'Z' || s[n] >= '0' && s[n] <= '9') {
		n++
	}
	if n == 0 || n == len(s) || s[n] != '>' && s[n] != '|' {
		return "", false
	}
	return s[:n], true
}

// SafeMarkdown makes standard Markdown for a Slack markdown block unable to
// ping, with the same rules as [Neutralize]: a zero-width space goes after
// the "<" of <!…> (except <!date^…>) and of <@…> mentions of users not in
// allowed, in whatever spelling Markdown would turn into those characters
// (&lt;, &#60;, a backslash-escaped \!); before a "!" or "@" that starts a
// link's destination ([x](!channel) could become <!channel|x>); and after
// the @ of plain broadcasts.
func SafeMarkdown(md string, allowed map[string]bool) string {
	var b strings.Builder
	b.Grow(len(md))
	for i := 0; i < len(md); {
		if n := ltAt(md, i); n > 0 {
			j := i + n
			if j < len(md) && md[j] == '\\' {
				j++ // \! and \@ are ! and @ to Markdown
			}
			if c, w := bangOrAt(md, j); c != 0 && !(n == 1 && j == i+1 && w == 1 && keepSpecial(md[j:], allowed)) {
				b.WriteString(md[i : i+n])
				b.WriteString(zeroWidthSpace)
				i += n
				continue
			}
		}
		if md[i] == ']' && i+1 < len(md) && (md[i+1] == '(' || md[i+1] == ':') {
			// A link destination: skip blanks and an opening <.
			j := i + 2
			for j < len(md) && (md[j] == ' ' || md[j] == '\t' || md[j] == '\n' || md[j] == '\r') {
				j++
			}
			if j < len(md) && md[j] == '<' {
				j++
			}
			if c, _ := bangOrAt(md, j); c != 0 {
				b.WriteString(md[i:j])
				b.WriteString(zeroWidthSpace)
				i = j
				continue
			}
		}
		b.WriteByte(md[i])
		i++
	}
	return neutralizePlainForms(b.String(), true)
}

// ltAt is the length of a "<" at s[i], literal or as an entity; 0 if none.
func ltAt(s string, i int) int {
	if s[i] == '<' {
		return 1
	}
	if r, n := entityAt(s, i); r == '<' {
		return n
	}
	return 0
}

// bangOrAt reads a "!" or "@" at s[i], literal or as an entity.
func bangOrAt(s string, i int) (byte, int) {
	if i >= len(s) {
		return 0, 0
	}
	if s[i] == '!' || s[i] == '@' {
		return s[i], 1
	}
	if r, n := entityAt(s, i); r == '!' || r == '@' {
		return byte(r), n
	}
	return 0, 0
}

// entityAt decodes an HTML character reference at s[i] (as CommonMark
// reads them: with the semicolon) for the few characters that matter here.
func entityAt(s string, i int) (rune, int) {
	if s[i] != '&' {
		return 0, 0
	}
	end := strings.IndexByte(s[i:min(len(s), i+12)], ';')
	if end < 2 {
		return 0, 0
	}
	name := s[i+1 : i+end]
	n := end + 1
	if name[0] == '#' {
		var v uint64
		var err error
		if len(name) > 1 && (name[1] == 'x' || name[1] == 'X') {
			v, err = strconv.ParseUint(name[2:], 16, 32)
		} else {
			v, err = strconv.ParseUint(name[1:], 10, 32)
		}
		if err != nil {
			return 0, 0
		}
		return rune(v), n
	}
	switch name {
	case "lt", "LT":
		return '<', n
	case "excl":
		return '!', n
	case "commat":
		return '@', n
	}
	return 0, 0
}

// neutralizePlain breaks up plain @channel, @here, @everyone and @group in
// mrkdwn.
func neutralizePlain(s string) string { return neutralizePlainForms(s, false) }

// neutralizePlainForms puts a zero-width space after the @ of a broadcast
// word that stands on its own: not inside an e-mail address or a URL
// (a@here.com, https://x.com/@here), not the start of a longer word
// (@channels). entities also reads &#64; and &commat; as an @.
func neutralizePlainForms(s string, entities bool) string {
	var b strings.Builder
	last := 0
	for i := 0; i < len(s); i++ {
		n := 0
		if s[i] == '@' {
			n = 1
		} else if entities && s[i] == '&' {
			if r, m := entityAt(s, i); r == '@' {
				n = m
			}
		}
		if n == 0 || !standsAlone(s, i, i+n) {
			continue
		}
		b.WriteString(s[last : i+n])
		b.WriteString(zeroWidthSpace)
		last = i + n
		i += n - 1
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// standsAlone: the @ at s[at:word] is followed by a broadcast word that
// ends there, and preceded by something a mention could follow.
func standsAlone(s string, at, word int) bool {
	if prev, _ := utf8.DecodeLastRuneInString(s[:at]); at > 0 &&
		(unicode.IsLetter(prev) || unicode.IsDigit(prev) || strings.ContainsRune("/.:=&?#%+@", prev)) {
		return false
	}
	for _, w := range broadcasts {
		end := word + len(w)
		if end > len(s) || !strings.EqualFold(s[word:end], w) {
			continue
		}
		if next, _ := utf8.DecodeRuneInString(s[end:]); end < len(s) && (unicode.IsLetter(next) || unicode.IsDigit(next)) {
			continue
		}
		return true
	}
	return false
}
