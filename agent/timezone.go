package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// A channel's time zone: crons made there are read in it, and so are
// times written without an offset; schedules are shown in it. Admins set
// it (the timezone command); a channel that sets none has the configured
// one (ScheduleConfig.Location). A cron keeps the zone it was made in.

// ErrBadTimeZone is wrapped by the errors of ParseTimeZone, whose
// messages are for people: they say what to write instead.
var ErrBadTimeZone = errors.New("not a time zone")

// Audit actions of a channel's time zone.
const (
	AuditTimeZoneSet     = "timezone.set"
	AuditTimeZoneRefused = "timezone.refused" // a non-admin tried
)

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
		return told(ErrBadTimeZone, "%q is not a time zone; use an IANA name such as UTC, Europe/Paris or Asia/Tokyo", shorten(name, 40))
	}
	switch {
	case name == "":
		return nil, told(ErrBadTimeZone, "no time zone named; use an IANA name such as UTC, Europe/Paris or Asia/Tokyo")
	case len(name) > maxZoneName:
		return nil, bad()
	case strings.EqualFold(name, "UTC"):
		return time.UTC, nil
	case strings.EqualFold(name, "Local"):
		return nil, told(ErrBadTimeZone, "%s is the server's own zone, not one a channel can have; name the zone, such as Europe/Paris", name)
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

// SetTimeZone sets channel's time zone to name for by (recorded in the
// audit log), or clears it with name "" so the configured zone applies,
// and returns what is stored now. A name ParseTimeZone refuses is an
// error wrapping ErrBadTimeZone, and nothing changes.
func SetTimeZone(ctx context.Context, st Store, channel SessionKey, by, name string) (ChannelSettings, error) {
	channel = channel.Channel()
	if err := channel.Validate(); err != nil {
		return ChannelSettings{}, err
	}
	if name != "" {
		loc, err := ParseTimeZone(name)
		if err != nil {
			return ChannelSettings{}, err
		}
		name = loc.String() // "utc" is stored as UTC
	}
	for attempt := 0; ; attempt++ {
		cur, err := st.Settings(ctx, channel)
		if err != nil {
			return ChannelSettings{}, err
		}
		next := cur
		next.TimeZone = name
		stored, err := st.SetSettings(ctx, channel, next)
		if errors.Is(err, ErrVersionConflict) && attempt < 3 {
			continue // a policy change came first: set the zone on top of it
		}
		if err != nil {
			return cur, err
		}
		detail := "time_zone=" + name
		if name == "" {
			detail = "time_zone=default"
		}
		if cur.TimeZone != "" {
			detail += " (was " + cur.TimeZone + ")"
		}
		auditLog(ctx, st, AuditEntry{Action: AuditTimeZoneSet, Platform: channel.Platform, Channel: channel.String(), User: by,
			Outcome: "ok", Detail: detail})
		return stored, nil
	}
}

// zoneShaped: one word, such as Asia/Tokyo or default.
func zoneShaped(args string) bool {
	return len(strings.Fields(args)) == 1
}

// timezoneCommand shows the channel's time zone or, for an admin, sets it
// (timezone ZONE) or clears it (timezone default).
func timezoneCommand(ctx context.Context, d *Dispatcher, in Inbound, args string) (Notice, error) {
	s, off := d.scheduler()
	if s == nil {
		return text(off, nil) // the zone is only for schedules
	}
	name := strings.TrimSpace(args)
	if name == "" {
		cs, err := d.cfg.Store.Settings(ctx, in.Key.Channel())
		if err != nil {
			return Notice{}, fmt.Errorf("read the channel's settings: %w", err)
		}
		return text(describeZone(s, cs.TimeZone), nil)
	}
	if strings.EqualFold(name, "default") {
		name = ""
	}
	if !d.adminHere(ctx, in.Key, in.User) {
		d.audit(ctx, AuditEntry{Action: AuditTimeZoneRefused, Platform: in.Key.Platform, Channel: in.Key.Channel().String(),
			User: auditUser(in.Key.Platform, in.User.ID), Outcome: "not an admin", Detail: "time_zone=" + shorten(args, 80)})
		return text("Only an admin can change this channel's time zone. Send timezone to see it.", nil)
	}
	cs, err := SetTimeZone(ctx, d.cfg.Store, in.Key, auditUser(in.Key.Platform, in.User.ID), name)
	switch {
	case errors.Is(err, ErrBadTimeZone):
		return text(capitalize(err.Error())+".", nil)
	case err != nil:
		return Notice{}, err
	}
	return text("Saved. "+describeZone(s, cs.TimeZone)+" Schedules made before keep their times; a cron keeps the zone it was made in.", nil)
}

// describeZone says which zone a channel whose stored zone is name has.
func describeZone(s *Scheduler, name string) string {
	if name == "" {
		return fmt.Sprintf("This channel's time zone is %s, the default. Crons and times without an offset are read in it.", s.cfg.Location)
	}
	return fmt.Sprintf("This channel's time zone is %s (the default is %s). Crons and times without an offset are read in it.", s.location(name), s.cfg.Location)
}
