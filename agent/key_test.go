package agent_test

import (
	"errors"
	"testing"

	"github.com/firstmate/firstmate/agent"
)

func TestSessionKeyStringRoundTrip(t *testing.T) {
	keys := []agent.SessionKey{
		{Platform: "slack", Team: "T1", Chat: "C1", Thread: "1700.0001"},
		{Platform: "telegram", Chat: "-100123", Thread: "42"},
		{Platform: "console", Chat: "local"},
		{Platform: "x:y", Team: "%3A", Chat: "a%b:c", Thread: ":"},
	}
	seen := map[string]bool{}
	for _, k := range keys {
		s := k.String()
		if seen[s] {
			t.Errorf("two keys print as %q", s)
		}
		seen[s] = true
		got, err := agent.ParseSessionKey(s)
		if err != nil || got != k {
			t.Errorf("ParseSessionKey(%q) = %+v, %v; want %+v", s, got, err, k)
		}
		if k.Channel().Thread != "" || k.Channel().Chat != k.Chat {
			t.Errorf("Channel(%+v) = %+v", k, k.Channel())
		}
	}
	for _, bad := range []string{"", "a:b:c", "a:b:c:d:e", "slack::C1:%zz", "slack:T1::"} {
		if _, err := agent.ParseSessionKey(bad); !errors.Is(err, agent.ErrInvalid) {
			t.Errorf("ParseSessionKey(%q) err = %v, want ErrInvalid", bad, err)
		}
	}
}

func FuzzParseSessionKey(f *testing.F) {
	f.Add("slack:T1:C1:1700.1")
	f.Add("a%3A:%25::")
	f.Fuzz(func(t *testing.T, s string) {
		k, err := agent.ParseSessionKey(s)
		if err != nil {
			return
		}
		if k2, err := agent.ParseSessionKey(k.String()); err != nil || k2 != k {
			t.Fatalf("%q parsed to %+v, which does not round-trip: %+v %v", s, k, k2, err)
		}
	})
}
