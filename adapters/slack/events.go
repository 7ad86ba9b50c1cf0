package slack

import (
	"strings"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"

	"github.com/firstmate/firstmate/adapters"
	"github.com/firstmate/firstmate/agent"
)

// Platform is the agent.SessionKey platform of Slack sessions.
const Platform = "slack"

// identity is who the bot is in its workspace (from auth.test).
type identity struct {
	TeamID    string
	BotUserID string // U…: how people mention it
	BotID     string // B…: set on messages the bot posts
}

// normalizer turns Slack events into agent.Inbound messages: it drops what
// is not a new message from a person, removes the bot's mention and decides
// whether the message is for the bot.
type normalizer struct {
	me        identity
	allowBots bool // answer other bots' messages too
}

// inbound returns the message an Events API inner event carries, and false
// when the event is not one to answer: the bot's own messages, other bots
// (unless allowed), edits, deletions, joins and other subtypes, channel
// messages that neither mention the bot nor reply in a thread.
func (n *normalizer) inbound(teamID string, inner any) (agent.Inbound, bool) {
	if teamID == "" {
		teamID = n.me.TeamID
	}
	switch ev := inner.(type) {
	case *slackevents.AppMentionEvent:
		if ev.Edited != nil || !n.fromPerson(ev.User, ev.BotID) {
			return agent.Inbound{}, false
		}
		thread := ev.ThreadTimeStamp
		if thread == "" {
			thread = ev.TimeStamp // a mention in a channel starts a thread
		}
		in := n.message(teamID, ev.Channel, thread, ev.TimeStamp, ev.User, ev.Text, ev.Files, true, false)
		in.User.Team = authorTeam(ev.UserTeam, ev.SourceTeam)
		return in, true
	case *slackevents.MessageEvent:
		switch ev.SubType {
		case "", "file_share", "thread_broadcast":
		default:
			return agent.Inbound{}, false // edits, deletions, joins, bot_message, …
		}
		if ev.IsEdited() || !n.fromPerson(ev.User, ev.BotID) {
			return agent.Inbound{}, false
		}
		var files []slack.File
		var msgTeam string
		if ev.Message != nil {
			files, msgTeam = ev.Message.Files, ev.Message.Team
		}
		var in agent.Inbound
		switch {
		case ev.ChannelType == "im":
			// A flat DM is one session; a thread in a DM is its own.
			in = n.message(teamID, ev.Channel, ev.ThreadTimeStamp, ev.TimeStamp, ev.User, ev.Text, files, true, false)
			in.Private = true
		case n.mentionsMe(ev.Text):
			return agent.Inbound{}, false // the app_mention event carries it
		case ev.ThreadTimeStamp == "" || ev.ThreadTimeStamp == ev.TimeStamp:
			return agent.Inbound{}, false // channel talk, not for the bot
		default:
			// A reply in a thread: for the bot if it takes part in the thread.
			in = n.message(teamID, ev.Channel, ev.ThreadTimeStamp, ev.TimeStamp, ev.User, ev.Text, files, false, true)
		}
		in.User.Team = authorTeam(ev.UserTeam, msgTeam, ev.SourceTeam)
		return in, true
	}
	return agent.Inbound{}, false
}

// authorTeam is the team an event names for its author: in a Slack
// Connect channel or DM their message names their own (user_team, or the
// message's team, or source_team, whichever Slack sent first). Slack does
// not always send one; Adapter.identify then asks users.info.
func authorTeam(teams ...string) string {
	for _, t := range teams {
		if t != "" {
			return t
		}
	}
	return ""
}

// foreign reports whether a person's team is another organisation's than
// the workspace the bot is installed in, or is not known. A team that is
// neither the installing one nor the event's is foreign; on an Enterprise
// Grid, a sibling workspace of the same organisation is foreign too, which
// errs on the side of asking (the access rules decide what an external
// person may do).
func (n *normalizer) foreign(team, eventTeam string) bool {
	return team == "" || (team != n.me.TeamID && team != eventTeam)
}

func (n *normalizer) fromPerson(user, botID string) bool {
	if user == "" || user == n.me.BotUserID || (botID != "" && botID == n.me.BotID) {
		return false
	}
	return botID == "" || n.allowBots
}

func (n *normalizer) mentionsMe(text string) bool {
	if n.me.BotUserID == "" {
		return false
	}
	tag := "<@" + n.me.BotUserID
	for i := strings.Index(text, tag); i >= 0; {
		end := i + len(tag)
		if end < len(text) && (text[end] == '>' || text[end] == '|') {
			return true
		}
		j := strings.Index(text[end:], tag)
		if j < 0 {
			break
		}
		i = end + j
	}
	return false
}

// tsSeq makes a message ts sort as Slack orders messages: "1700000000.000200"
// with its seconds zero-padded, so a string comparison is a numeric one.
func tsSeq(ts string) string {
	sec, frac, _ := strings.Cut(ts, ".")
	if sec == "" || len(sec) > 20 || strings.Trim(sec, "0123456789") != "" || strings.Trim(frac, "0123456789") != "" {
		return ""
	}
	return strings.Repeat("0", 20-len(sec)) + sec + "." + frac + strings.Repeat("0", max(0, 6-len(frac)))
}

func (n *normalizer) message(team, channel, thread, ts, user, text string, files []slack.File, addressed, followUp bool) agent.Inbound {
	in := agent.Inbound{
		Key:       agent.SessionKey{Platform: Platform, Team: team, Chat: channel, Thread: thread},
		MessageID: ts,
		User:      agent.User{ID: user},
		Text:      n.stripMention(text),
		Addressed: addressed,
		FollowUp:  followUp,
		Time:      tsTime(ts),
		ReplyTo:   ts,
		Seq:       tsSeq(ts),
	}
	for _, f := range files {
		in.Files = append(in.Files, agent.File{ID: f.ID, Name: fileName(f), URL: f.URLPrivateDownload, MIME: f.Mimetype, Size: int64(f.Size)})
	}
	return in
}

// stripMention removes the bot's own mentions (<@U123> or <@U123|name>)
// and the punctuation people put after a leading one ("@bot: do X");
// other mentions stay as they are.
func (n *normalizer) stripMention(text string) string {
	if n.me.BotUserID == "" {
		return strings.TrimSpace(text)
	}
	tag := "<@" + n.me.BotUserID
	var b strings.Builder
	for {
		i := strings.Index(text, tag)
		end := i + len(tag)
		if i < 0 || end >= len(text) {
			b.WriteString(text)
			break
		}
		if text[end] != '>' && text[end] != '|' { // another user whose ID starts with ours
			b.WriteString(text[:end])
			text = text[end:]
			continue
		}
		j := strings.IndexByte(text[end:], '>')
		if j < 0 {
			b.WriteString(text)
			break
		}
		b.WriteString(text[:i])
		text = text[end+j+1:]
	}
	return strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(b.String()), ",:"))
}

// fileName is the name a shared file is saved and shown under, made safe
// (adapters.SafeFileName).
func fileName(f slack.File) string {
	name := f.Name
	if name == "" {
		name = f.Title
	}
	if name == "" {
		name = f.ID
	}
	return adapters.SafeFileName(name)
}

// tsTime turns a Slack ts ("1700000000.000100") into a time.
func tsTime(ts string) time.Time {
	sec, frac, _ := strings.Cut(ts, ".")
	var s, us int64
	for _, c := range sec {
		if c < '0' || c > '9' {
			return time.Time{}
		}
		s = s*10 + int64(c-'0')
	}
	for i, c := range frac {
		if i >= 6 || c < '0' || c > '9' {
			break
		}
		us = us*10 + int64(c-'0')
	}
	for i := len(frac); i < 6; i++ {
		us *= 10
	}
	return time.Unix(s, us*1000).UTC()
}
