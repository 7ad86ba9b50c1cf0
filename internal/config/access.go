package config

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/firstmate/firstmate/agent/govern"
)

// Who may talk to the bot, what it may spend, and how long people are
// waited for: the settings the agent's governance reads.

// Access returns each platform's access setting by platform name, for
// agent.DispatcherConfig.Access. Both "slack" and "telegram" are always
// there, enabled or not.
func (c *Config) Access() map[string]govern.Access {
	return map[string]govern.Access{
		"slack": {Mode: c.Slack.Access, Users: slices.Clone(c.Slack.AllowedUsers),
			Chats: slices.Clone(c.Slack.AllowedChannels)},
		"telegram": {Mode: c.Telegram.Access, Users: slices.Clone(c.Telegram.AllowedUsers),
			Chats: slices.Clone(c.Telegram.AllowedChats)},
	}
}

// Budgets returns the budgets section for the agent.
func (c *Config) Budgets() govern.Budgets {
	return govern.Budgets{
		ChannelTokensPerDay:   c.Budget.ChannelTokensPerDay,
		UserMessagesPerMinute: c.Budget.UserMessagesPerMinute,
	}
}

var accessModes = []string{string(govern.AccessOpen), string(govern.AccessAllowlist), string(govern.AccessPairing)}

func (v *validator) access() {
	s, t := &v.c.Slack, &v.c.Telegram
	v.oneOf("slack.access", string(s.Access), accessModes...)
	v.ids("slack.allowed_users", s.AllowedUsers, checkSlackUser)
	v.ids("slack.allowed_channels", s.AllowedChannels, checkSlackChannel)
	v.oneOf("telegram.access", string(t.Access), accessModes...)
	v.ids("telegram.allowed_users", t.AllowedUsers, checkTelegramUser)
	v.ids("telegram.allowed_chats", t.AllowedChats, checkTelegramChat)
}

func (v *validator) ids(key string, ids []string, check func(string) error) {
	for i, id := range ids {
		if err := check(id); err != nil {
			v.add(fmt.Sprintf("%s[%d]", key, i), "%v", err)
		}
	}
}

// limits checks budgets, approvals and pairing.
func (v *validator) limits() {
	b := &v.c.Budget
	if b.ChannelTokensPerDay < 0 {
		v.add("budgets.channel_tokens_per_day", "%d is too small; use 0 (no limit) or more", b.ChannelTokensPerDay)
	}
	if b.UserMessagesPerMinute < 0 {
		v.add("budgets.user_messages_per_minute", "%d is too small; use 0 (no limit) or more", b.UserMessagesPerMinute)
	}
	v.within("approvals.timeout", v.c.Approvals.Timeout, 10*time.Second, 24*time.Hour, "10s to 24h")
	v.within("pairing.code_ttl", v.c.Pairing.CodeTTL, time.Minute, 7*24*time.Hour, "1m to 168h (7 days)")
}

// within checks that d is in [lo, hi], which span says to people.
func (v *validator) within(key string, d, lo, hi time.Duration, span string) {
	switch {
	case d < lo:
		v.add(key, "%v is too short; use %s", shortDuration(d), span)
	case d > hi:
		v.add(key, "%v is too long; use %s", shortDuration(d), span)
	}
}

// shortDuration writes d as people write it: 5m, not 5m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// accessWarnings are access settings that shut people out, probably
// without meaning to.
func (c *Config) accessWarnings(add func(key, format string, args ...any)) {
	for _, p := range []struct {
		name    string
		enabled bool
		mode    govern.AccessMode
		allowed int
	}{
		{"slack", c.Slack.Enabled(), c.Slack.Access, len(c.Slack.AllowedUsers) + len(c.Slack.AllowedChannels)},
		{"telegram", c.Telegram.Enabled(), c.Telegram.Access, len(c.Telegram.AllowedUsers) + len(c.Telegram.AllowedChats)},
	} {
		if !p.enabled || slices.ContainsFunc(c.Admins, func(a Admin) bool { return a.Platform == p.name }) {
			continue
		}
		// Pairing codes are approved by the bot's admins in chat.
		switch {
		case p.mode == govern.AccessPairing:
			add(p.name+".access", "pairing, but admins lists no %s user, so nobody can approve a pairing code in chat; add yourself to %s",
				p.name, c.name("admins"))
		case p.mode == govern.AccessAllowlist && p.allowed == 0:
			add(p.name+".access", "allowlist, but nobody is allowed and admins lists no %s user; allow someone, or add yourself to %s",
				p.name, c.name("admins"))
		}
	}
}

// The IDs people are allowed by. Each check returns an error that quotes
// the ID and says how to write it.

var slackChannelID = regexp.MustCompile(`^[CGD][A-Z0-9]{2,}$`)

// slackLike reports whether id, upper-cased, could be a Slack ID that was
// lower-cased: IDs have digits, and "general" is a channel's name, not
// "GENERAL".
func slackLike(id string, re *regexp.Regexp) bool {
	return strings.ContainsAny(id, "0123456789") && re.MatchString(strings.ToUpper(id))
}

// slackUserError checks the Slack member ID id, written as s, where
// prefix comes before the ID ("slack:" in an admin); nil if it is good.
func slackUserError(s, prefix, id string) error {
	switch {
	case slackUserID.MatchString(id):
		return nil
	case slackLike(id, slackUserID):
		return fmt.Errorf("%q: Slack member IDs are upper case; write %q", s, prefix+strings.ToUpper(id))
	case slackLike(id, slackChannelID):
		return fmt.Errorf(`%q is a channel's ID, not a person's; a Slack member ID looks like U0123ABCD (the user's profile, "Copy member ID")`, s)
	}
	return fmt.Errorf(`%q: a Slack member ID looks like U0123ABCD (the user's profile, "Copy member ID")`, s)
}

func checkSlackUser(id string) error { return slackUserError(id, "", id) }

func checkSlackChannel(id string) error {
	switch {
	case slackChannelID.MatchString(id):
		return nil
	case slackLike(id, slackChannelID):
		return fmt.Errorf("%q: Slack channel IDs are upper case; write %q", id, strings.ToUpper(id))
	case slackLike(id, slackUserID):
		return fmt.Errorf("%q is a person's member ID; people go in allowed_users, and a channel ID looks like C0123ABCD", id)
	case strings.HasPrefix(id, "#") || !strings.ContainsAny(id, "0123456789"):
		return fmt.Errorf("%q is a channel's name, which can change; use its ID, like C0123ABCD (the channel's details, at the bottom)", id)
	}
	return fmt.Errorf("%q: a Slack channel ID looks like C0123ABCD (G… or D… for older private channels and DMs; the channel's details, at the bottom)", id)
}

func checkTelegramUser(id string) error {
	switch {
	case isTelegramUserID(id):
		return nil
	case strings.HasPrefix(id, "-"):
		return fmt.Errorf("%q: negative IDs are chats, not people; put it in allowed_chats", id)
	}
	return fmt.Errorf("%q: a Telegram user ID is a number like 123456789 (usernames can change hands, IDs cannot)", id)
}

func checkTelegramChat(id string) error {
	if n, err := strconv.ParseInt(id, 10, 64); err == nil && n != 0 && strconv.FormatInt(n, 10) == id {
		return nil
	}
	if strings.HasPrefix(id, "@") {
		return fmt.Errorf("%q is a username; use the chat's numeric ID, like -1001234567890 for a group", id)
	}
	return fmt.Errorf("%q: a Telegram chat ID is a number, like -1001234567890 for a group (a private chat's ID is the person's user ID)", id)
}

// parseIDList parses a comma-separated list of IDs from the environment,
// empty entries ignored; a bad entry is left out, and reported by its
// number.
func parseIDList(s string, check func(string) error) ([]string, []error) {
	ids := []string{}
	var errs []error
	for i, part := range strings.Split(s, ",") {
		id := strings.TrimSpace(part)
		if id == "" {
			continue
		}
		if err := check(id); err != nil {
			errs = append(errs, fmt.Errorf("entry %d: %w", i+1, err))
			continue
		}
		ids = append(ids, id)
	}
	return ids, errs
}

// setBool parses a switch from the environment.
func setBool(dst *bool, v string) []error {
	switch strings.ToLower(v) {
	case "true", "1":
		*dst = true
	case "false", "0":
		*dst = false
	default:
		return []error{fmt.Errorf("%q is not true or false (or 1 or 0)", v)}
	}
	return nil
}

// setInt parses a whole number from the environment.
func setInt[T int | int64](dst *T, v string) []error {
	bits := 64
	if _, ok := any(*dst).(int); ok {
		bits = strconv.IntSize
	}
	n, err := strconv.ParseInt(v, 10, bits)
	if err != nil {
		return []error{fmt.Errorf("%q is not a whole number", v)}
	}
	*dst = T(n)
	return nil
}

// trimAll trims the spaces around each entry of a list from the file.
func trimAll(list []string) {
	for i, s := range list {
		list[i] = strings.TrimSpace(s)
	}
}
