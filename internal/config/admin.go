package config

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Admin is a user who may change a channel's tool policy, written
// "platform:id" in the config file and in FIRSTMATE_ADMINS:
//
//	slack:U0123ABCD    a Slack member ID (U… or W…, upper case), from the
//	                   user's profile, "Copy member ID"
//	telegram:123456789 a Telegram user ID (a positive number); usernames
//	                   can change hands, IDs cannot
//
// FIRSTMATE_ADMINS holds a comma-separated list:
// "slack:U0123ABCD,telegram:123456789".
type Admin struct {
	Platform string // "slack" or "telegram"
	ID       string
}

var slackUserID = regexp.MustCompile(`^[UW][A-Z0-9]{2,}$`)

// ParseAdmin parses "platform:id". Surrounding spaces and the platform's
// case are forgiven; anything else wrong is an error that says how to
// write it.
func ParseAdmin(s string) (Admin, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Admin{}, fmt.Errorf(`empty entry; write "slack:U0123ABCD" or "telegram:123456789"`)
	}
	platform, id, ok := strings.Cut(s, ":")
	if !ok {
		switch {
		case slackUserID.MatchString(s):
			return Admin{}, fmt.Errorf("%q has no platform; write %q", s, "slack:"+s)
		case isTelegramUserID(s):
			return Admin{}, fmt.Errorf("%q has no platform; write %q", s, "telegram:"+s)
		}
		return Admin{}, fmt.Errorf(`%q is not platform:user-id; write it like "slack:U0123ABCD" or "telegram:123456789"`, s)
	}
	a := Admin{Platform: strings.ToLower(strings.TrimSpace(platform)), ID: strings.TrimSpace(id)}
	return a, a.check(s)
}

func (a Admin) check(s string) error {
	switch a.Platform {
	case "slack":
		return slackUserError(s, "slack:", a.ID)
	case "telegram":
		if isTelegramUserID(a.ID) {
			return nil
		}
		if strings.HasPrefix(a.ID, "-") {
			return fmt.Errorf("%q: negative IDs are chats, not users; use the user's own numeric ID", s)
		}
		return fmt.Errorf("%q: a Telegram user ID is a number like 123456789 (usernames can change hands, IDs cannot)", s)
	}
	return fmt.Errorf("%q: platform %q is not one of slack, telegram", s, a.Platform)
}

func isTelegramUserID(s string) bool {
	n, err := strconv.ParseInt(s, 10, 64)
	return err == nil && n > 0 && s[0] != '+' && s[0] != '0'
}

// String returns "platform:id".
func (a Admin) String() string { return a.Platform + ":" + a.ID }

// MarshalText writes "platform:id".
func (a Admin) MarshalText() ([]byte, error) { return []byte(a.String()), nil }

// UnmarshalText parses "platform:id" (for JSON).
func (a *Admin) UnmarshalText(b []byte) error {
	v, err := ParseAdmin(string(b))
	if err != nil {
		return err
	}
	*a = v
	return nil
}

// UnmarshalYAML parses "platform:id". A bad entry is reported as a
// *yaml.TypeError so the decoder goes on with the rest of the file and
// all problems can be reported at once.
func (a *Admin) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: an admin is a string like slack:U0123ABCD", n.Line)}}
	}
	v, err := ParseAdmin(n.Value)
	if err != nil {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: %v", n.Line, err)}}
	}
	*a = v
	return nil
}

// parseAdminList parses FIRSTMATE_ADMINS: comma-separated entries, empty
// entries (a trailing comma) ignored.
func parseAdminList(s string) ([]Admin, []error) {
	var admins []Admin
	var errs []error
	for i, part := range strings.Split(s, ",") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		a, err := ParseAdmin(part)
		if err != nil {
			errs = append(errs, fmt.Errorf("entry %d: %w", i+1, err))
			continue
		}
		admins = append(admins, a)
	}
	return admins, errs
}
