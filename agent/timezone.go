package agent

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// A channel's time zone: crons made there are read in it, and so are
// times written without an offset; schedules are shown in it. Admins set
// it (the timezone command); a channel that sets none has the configured
// one (schedules.Config.Location). A cron keeps the zone it was made in.

// ErrBadTimeZone is wrapped by the errors of ParseTimeZone, whose
// messages are for people: they say what to write instead.
var ErrBadTimeZone = errors.New("not a time zone")

// maxZoneName bounds a zone's name: the longest in the zone database
// (America/Argentina/ComodRivadavia) is 32 bytes.
const maxZoneName = 64

// ParseTimeZone reads the IANA name of a channel's time zone, such as
// Asia/Tokyo or UTC (in any case). It refuses what is no zone of the zone
// database: an empty name, "Local" (the host's zone, which a channel must
// not depend on: replicas may differ), file paths, and anything too long
// to be a zone's name, before the database is looked at.
func ParseTimeZone(name string) (*time.Location, error) {
	name = strings.TrimSpace(name)
	bad := func() error {
		return Toldf(ErrBadTimeZone, "%q is not a time zone; use an IANA name such as UTC, Europe/Paris or Asia/Tokyo", Shorten(name, 40))
	}
	switch {
	case name == "":
		return nil, Toldf(ErrBadTimeZone, "no time zone named; use an IANA name such as UTC, Europe/Paris or Asia/Tokyo")
	case len(name) > maxZoneName:
		return nil, bad()
	case strings.EqualFold(name, "UTC"):
		return time.UTC, nil
	case strings.EqualFold(name, "Local"):
		return nil, Toldf(ErrBadTimeZone, "%s is the server's own zone, not one a channel can have; name the zone, such as Europe/Paris", name)
	}
	for part := range strings.SplitSeq(name, "/") {
		// No empty part (a leading slash, "//"), and no dots (no "..").
		if part == "" {
			return nil, bad()
		}
		for _, r := range part {
			if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '_' || r == '-' || r == '+') {
				return nil, bad()
			}
		}
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, bad()
	}
	return loc, nil
}

// toldError is an error whose message is for people, wrapping the
// sentinel it is.
type toldError struct {
	msg string
	err error
}

func (e *toldError) Error() string { return e.msg }
func (e *toldError) Unwrap() error { return e.err }

// Toldf is an error that says format to people and is err (errors.Is).
func Toldf(err error, format string, args ...any) error {
	return &toldError{msg: fmt.Sprintf(format, args...), err: err}
}

// Shorten cuts s to about n bytes on a rune boundary.
func Shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}
