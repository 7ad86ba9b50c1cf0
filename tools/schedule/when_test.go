package schedule

import (
	"errors"
	"strings"
	"testing"
	"time"
)

var now = time.Date(2025, 3, 4, 10, 0, 0, 0, time.UTC)

func TestParse(t *testing.T) {
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Skip("no time zone data:", err)
	}
	r := Rules{Location: paris, MinInterval: 5 * time.Minute, MaxAhead: 366 * 24 * time.Hour}
	for _, tc := range []struct {
		w    When
		due  string // RFC 3339, UTC
		cron string
	}{
		{When{In: "90m"}, "2025-03-04T11:30:00Z", ""},
		{When{In: " 1d2h "}, "2025-03-05T12:00:00Z", ""},
		{When{In: "2d"}, "2025-03-06T10:00:00Z", ""},
		{When{At: "2025-03-04T12:00:00+01:00"}, "2025-03-04T11:00:00Z", ""},
		{When{At: "2025-03-04T12:00:00Z"}, "2025-03-04T12:00:00Z", ""},
		{When{At: "2025-03-05 09:30"}, "2025-03-05T08:30:00Z", ""},         // Paris, winter: UTC+1
		{When{At: "2025-07-05T09:30"}, "2025-07-05T07:30:00Z", ""},         // summer: UTC+2
		{When{At: "12:15"}, "2025-03-04T11:15:00Z", ""},                    // later today
		{When{At: "10:15"}, "2025-03-05T09:15:00Z", ""},                    // 10:15 Paris is past: tomorrow
		{When{Cron: "0 9 * * 1-5"}, "2025-03-05T08:00:00Z", "0 9 * * 1-5"}, // 9:00 Paris
		{When{Cron: "  */15   *  * *  *  "}, "2025-03-04T10:15:00Z", "*/15 * * * *"},
		{When{Cron: "0 12 1 jan,jul *"}, "2025-07-01T10:00:00Z", "0 12 1 jan,jul *"},
	} {
		got, err := r.Parse(tc.w, now)
		if err != nil {
			t.Errorf("%+v: %v", tc.w, err)
			continue
		}
		if got.Due.UTC().Format(time.RFC3339) != tc.due || got.Cron != tc.cron {
			t.Errorf("%+v = due %s cron %q; want %s %q", tc.w, got.Due.UTC().Format(time.RFC3339), got.Cron, tc.due, tc.cron)
		}
	}
}

func TestParseRefuses(t *testing.T) {
	r := Rules{MinInterval: 5 * time.Minute, MaxAhead: 24 * time.Hour}
	for _, tc := range []struct {
		w    When
		want string
	}{
		{When{}, "say when"},
		{When{In: "1h", At: "12:00"}, "not in and at"},
		{When{At: "12:00", Cron: "0 9 * * *"}, "not at and cron"},
		{When{In: "0s"}, "not a positive duration"},
		{When{In: "1x"}, "is not a duration"},
		{When{In: "xd"}, "is not a duration"},
		{When{In: "2d"}, "more than 24h ahead"},
		{When{At: "2025-03-04T09:59:59Z"}, "is in the past"},
		{When{At: "2025-03-04T10:00:00Z"}, "is in the past"},
		{When{At: "4 March"}, "is not a time"},
		{When{Cron: "0 9 * *"}, "has 4 fields"},
		{When{Cron: "0 0 9 * * *"}, "has 6 fields"},
		{When{Cron: "CRON_TZ=UTC 0 9 * *"}, "no time zone"},
		{When{Cron: "*/2 * * * *"}, "can fire 2m apart"},
		{When{Cron: "0,3 9 * * *"}, "can fire 3m apart"},
		{When{Cron: "58 8,9 * * *"}, "58m apart"}, // not refused: see below
		{When{Cron: "0 0 31 4 *"}, "never fires"},
		{When{Cron: "0 25 * * *"}, "above maximum"},
	} {
		_, err := r.Parse(tc.w, now)
		if tc.want == "58m apart" {
			if err != nil {
				t.Errorf("%+v: %v; an hour apart is allowed", tc.w, err)
			}
			continue
		}
		if !errors.Is(err, ErrBadWhen) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err = %v; want ErrBadWhen with %q", tc.w, err, tc.want)
		}
	}
}

func TestMinGap(t *testing.T) {
	for spec, want := range map[string]time.Duration{
		"* * * * *":          time.Minute,
		"*/5 * * * *":        5 * time.Minute,
		"0 * * * *":          time.Hour,
		"0 9 * * *":          24 * time.Hour,
		"0 9 * * 1":          24 * time.Hour, // a bound: weekly fires 7 days apart
		"55 23 * * *":        24 * time.Hour,
		"0,55 0,23 * * *":    5 * time.Minute, // 23:55, then 00:00 the next day
		"10,20 9 * * *":      10 * time.Minute,
		"0 9,21 * * *":       12 * time.Hour,
		"0-59/30 8-10 * * *": 30 * time.Minute,
	} {
		c, err := ParseCron(spec, time.UTC)
		if err != nil {
			t.Errorf("%s: %v", spec, err)
			continue
		}
		if got := c.MinGap(); got != want {
			t.Errorf("MinGap(%s) = %v; want %v", spec, got, want)
		}
	}
}

func TestCronNextKeepsItsZone(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Skip("no time zone data:", err)
	}
	c, err := ParseCron("30 8 * * *", ny)
	if err != nil {
		t.Fatal(err)
	}
	// The night the clocks go forward: 8:30 is still 8:30 in New York.
	got := c.Next(time.Date(2025, 3, 9, 0, 0, 0, 0, time.UTC))
	if got.In(ny).Format("2006-01-02 15:04") != "2025-03-09 08:30" || got.UTC().Hour() != 12 {
		t.Errorf("Next = %v (%v in New York)", got, got.In(ny))
	}
}

func TestRound(t *testing.T) {
	for d, want := range map[time.Duration]string{
		90 * time.Minute: "1h30m", 5 * time.Minute: "5m", 95 * time.Second: "1m35s", 24 * time.Hour: "24h",
		200 * time.Millisecond: "200ms", 40 * time.Second: "40s", 0: "0s", time.Hour + 40*time.Second: "1h1m",
	} {
		if got := Round(d); got != want {
			t.Errorf("Round(%v) = %q; want %q", d, got, want)
		}
	}
}

func FuzzParseCron(f *testing.F) {
	for _, s := range []string{"0 9 * * 1-5", "*/5 * * * *", "0 0 29 2 *", "1-5/2 0 1,15 jan-mar sun"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		c, err := ParseCron(spec, time.UTC)
		if err != nil {
			return
		}
		if gap := c.MinGap(); gap <= 0 || gap > 24*time.Hour {
			t.Fatalf("MinGap(%q) = %v", spec, gap)
		}
		if next := c.Next(now); !next.IsZero() && !next.After(now) {
			t.Fatalf("Next(%q) = %v, not after %v", spec, next, now)
		}
	})
}
