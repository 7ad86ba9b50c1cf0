package schedule

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// ErrBadWhen is wrapped by every error about when a schedule should fire:
// the message says what was wrong, for a person or the model to fix.
var ErrBadWhen = errors.New("cannot schedule that")

// When is when a schedule fires, as a person or the model wrote it:
// exactly one of In, At and Cron.
type When struct {
	In   string // a duration from now: "90m", "2h30m", "1d"
	At   string // a time: RFC 3339, or "2006-01-02 15:04" or "15:04" in the time zone
	Cron string // five fields (minute hour day-of-month month day-of-week), in the time zone
}

// Timing is a [When] read by [Rules.Parse].
type Timing struct {
	Due  time.Time // the first firing
	Cron string    // the cron's five fields, one space apart; "" for a single firing
}

// Rules bound what a [When] may say.
type Rules struct {
	// Location is the time zone of a cron and of a time written without
	// an offset; UTC if nil.
	Location *time.Location
	// MinInterval is the least time between two firings of a cron.
	MinInterval time.Duration
	// MaxAhead is how far ahead a single firing may be; 0 sets no bound.
	MaxAhead time.Duration
}

func (r Rules) loc() *time.Location {
	if r.Location == nil {
		return time.UTC
	}
	return r.Location
}

// Parse reads w at now.
func (r Rules) Parse(w When, now time.Time) (Timing, error) {
	var given []string
	for _, f := range []struct{ name, v string }{{"in", w.In}, {"at", w.At}, {"cron", w.Cron}} {
		if strings.TrimSpace(f.v) != "" {
			given = append(given, f.name)
		}
	}
	switch len(given) {
	case 0:
		return Timing{}, fmt.Errorf("%w: say when, with exactly one of in (a duration such as 90m), at (a time such as 2025-03-04T09:00:00Z) or cron (five fields such as \"0 9 * * 1-5\")", ErrBadWhen)
	case 1:
	default:
		return Timing{}, fmt.Errorf("%w: give exactly one of in, at and cron, not %s", ErrBadWhen, strings.Join(given, " and "))
	}
	var due time.Time
	switch given[0] {
	case "in":
		d, err := ParseDuration(w.In)
		if err != nil {
			return Timing{}, fmt.Errorf("%w: in: %v", ErrBadWhen, err)
		}
		due = now.Add(d)
	case "at":
		t, err := parseAt(strings.TrimSpace(w.At), now, r.loc())
		if err != nil {
			return Timing{}, err
		}
		if !t.After(now) {
			return Timing{}, fmt.Errorf("%w: at %s is in the past (it is now %s)", ErrBadWhen, strings.TrimSpace(w.At), now.In(r.loc()).Format(Layout))
		}
		due = t
	case "cron":
		c, err := ParseCron(w.Cron, r.loc())
		if err != nil {
			return Timing{}, err
		}
		if gap := c.MinGap(); gap < r.MinInterval {
			return Timing{}, fmt.Errorf("%w: cron %q can fire %s apart; the least allowed is %s", ErrBadWhen, c, Round(gap), Round(r.MinInterval))
		}
		next := c.Next(now)
		if next.IsZero() {
			return Timing{}, fmt.Errorf("%w: cron %q never fires (no such date in the next years)", ErrBadWhen, c)
		}
		return Timing{Due: next, Cron: c.String()}, nil
	}
	if r.MaxAhead > 0 && due.Sub(now) > r.MaxAhead {
		return Timing{}, fmt.Errorf("%w: that is more than %s ahead, the most allowed", ErrBadWhen, Round(r.MaxAhead))
	}
	return Timing{Due: due}, nil
}

// ParseDuration reads a positive duration: Go's form ("90m", "1h30m",
// "45s") with whole days in front if wanted ("1d", "2d12h").
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, errors.New("empty duration")
	}
	var days time.Duration
	if i := strings.IndexByte(s, 'd'); i > 0 {
		n, err := strconv.Atoi(s[:i])
		if err != nil || n < 0 || n > 3660 {
			return 0, fmt.Errorf("%q is not a duration such as 90m, 2h or 1d", s)
		}
		days, s = time.Duration(n)*24*time.Hour, s[i+1:]
	}
	var d time.Duration
	if s != "" {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, fmt.Errorf("%q is not a duration such as 90m, 2h or 1d", s)
		}
	}
	if d += days; d <= 0 {
		return 0, fmt.Errorf("%s is not a positive duration", d)
	}
	return d, nil
}

// Layout is how schedules show a time.
const Layout = "2006-01-02 15:04 MST"

// atLayouts are the times at accepts besides RFC 3339, read in the
// schedule's time zone.
var atLayouts = []string{"2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02 15:04:05", "2006-01-02 15:04"}

func parseAt(s string, now time.Time, loc *time.Location) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	for _, l := range atLayouts {
		if t, err := time.ParseInLocation(l, s, loc); err == nil {
			return t, nil
		}
	}
	// A time of day alone is its next occurrence.
	if t, err := time.ParseInLocation("15:04", s, loc); err == nil {
		n := now.In(loc)
		at := time.Date(n.Year(), n.Month(), n.Day(), t.Hour(), t.Minute(), 0, 0, loc)
		if !at.After(now) {
			at = time.Date(n.Year(), n.Month(), n.Day()+1, t.Hour(), t.Minute(), 0, 0, loc)
		}
		return at, nil
	}
	return time.Time{}, fmt.Errorf("%w: at %q is not a time; write it as RFC 3339 (2025-03-04T09:00:00Z, or with an offset such as +01:00), "+
		"or as 2025-03-04 09:00 or 09:00 in %s", ErrBadWhen, s, loc)
}

// CronSpec is a parsed cron schedule of five fields.
type CronSpec struct {
	spec  string
	sched *cron.SpecSchedule
}

// cronParser reads exactly the five standard fields: no seconds, no
// descriptors (@daily), no time zone prefix (the channel's is used).
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow)

// ParseCron reads a five-field cron schedule (minute hour day-of-month
// month day-of-week, as crontab(5) writes them: *, lists, ranges, steps,
// month and day names) in loc.
func ParseCron(spec string, loc *time.Location) (*CronSpec, error) {
	fields := strings.Fields(spec)
	if len(fields) != 5 {
		return nil, fmt.Errorf("%w: cron %q has %d fields; write five: minute hour day-of-month month day-of-week, such as \"0 9 * * 1-5\"", ErrBadWhen, spec, len(fields))
	}
	for _, f := range fields {
		if strings.ContainsAny(f, "@=") {
			return nil, fmt.Errorf("%w: cron %q: write five plain fields (no @descriptors, no time zone: the channel's, %s, is used)", ErrBadWhen, spec, loc)
		}
	}
	norm := strings.Join(fields, " ")
	s, err := cronParser.Parse(norm)
	if err != nil {
		return nil, fmt.Errorf("%w: cron %q: %v", ErrBadWhen, norm, err)
	}
	ss, ok := s.(*cron.SpecSchedule)
	if !ok {
		return nil, fmt.Errorf("%w: cron %q is not a plain schedule", ErrBadWhen, norm)
	}
	// The parser takes an empty item of a list (",") as no value at all.
	const starBit = 1 << 63
	for _, bits := range []uint64{ss.Minute, ss.Hour, ss.Dom, ss.Month, ss.Dow} {
		if bits&^starBit == 0 {
			return nil, fmt.Errorf("%w: cron %q has a field with no value", ErrBadWhen, norm)
		}
	}
	ss.Location = loc
	return &CronSpec{spec: norm, sched: ss}, nil
}

// String is the five fields, one space apart.
func (c *CronSpec) String() string { return c.spec }

// Next is the first firing after t, in t's location; zero if there is
// none in the next five years.
func (c *CronSpec) Next(t time.Time) time.Time { return c.sched.Next(t) }

// MinGap is the shortest time two firings may come apart, from the minutes
// and hours the schedule names: the closest two times of one day, or the
// last of a day and the first of the next, whether or not both days match
// (a bound, not always reached).
func (c *CronSpec) MinGap() time.Duration {
	var times []int // minutes since midnight
	for h := range 24 {
		if c.sched.Hour&(1<<uint(h)) == 0 {
			continue
		}
		for m := range 60 {
			if c.sched.Minute&(1<<uint(m)) != 0 {
				times = append(times, h*60+m)
			}
		}
	}
	if len(times) == 0 {
		return 0
	}
	slices.Sort(times)
	gap := times[0] + 24*60 - times[len(times)-1]
	for i := 1; i < len(times); i++ {
		gap = min(gap, times[i]-times[i-1])
	}
	return time.Duration(gap) * time.Minute
}

// Round shows a duration the way people write it: 1h30m, 5m, 1m35s, 24h,
// 200ms.
func Round(d time.Duration) string {
	switch {
	case d >= time.Hour:
		d = d.Round(time.Minute)
	case d >= time.Second:
		d = d.Round(time.Second)
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}
