package config

import (
	"strings"
	"testing"
	"time"
)

func TestSchedulesFromFile(t *testing.T) {
	c := mustLoad(t, writeConfig(t, "schedules:\n  per_channel: 5\n  min_interval: 15m\n  time_zone: Europe/Paris\n  max_wait: 2h\n"), env{}.withHome())
	s := c.Schedules
	if s.PerChannel != 5 || s.MinInterval != 15*time.Minute || s.TimeZone != "Europe/Paris" || s.MaxWait != 2*time.Hour {
		t.Fatalf("schedules = %+v", s)
	}
	if s.Location().String() != "Europe/Paris" {
		t.Errorf("Location() = %v", s.Location())
	}
	// 0 turns scheduling off, and is allowed.
	if c := mustLoad(t, writeConfig(t, "schedules: {per_channel: 0}\n"), env{}.withHome()); c.Schedules.PerChannel != 0 {
		t.Errorf("per_channel 0 read as %d", c.Schedules.PerChannel)
	}
}

func TestSchedulesProblems(t *testing.T) {
	for _, tc := range []struct{ file, key, msg string }{
		{"schedules: {per_channel: -1}\n", "schedules.per_channel", "out of range"},
		{"schedules: {min_interval: 10s}\n", "schedules.min_interval", "too short"},
		{"schedules: {max_wait: 30d}\n", "schedules.max_wait", ""},
		{"schedules: {time_zone: Mars/Olympus}\n", "schedules.time_zone", "not a time zone"},
		{"schedules: {time_zone: Local}\n", "schedules.time_zone", "not a time zone"},
	} {
		_, err := Load(writeConfig(t, tc.file), env{}.withHome().lookup)
		if err == nil || !strings.Contains(err.Error(), tc.key) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%q: %v; want a problem with %s saying %q", tc.file, err, tc.key, tc.msg)
		}
	}
}
