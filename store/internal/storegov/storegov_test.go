package storegov

import (
	"testing"
	"time"

	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/agent/govern"
)

func TestEscape(t *testing.T) {
	for in, want := range map[string]string{
		"":           "",
		"U123":       "U123",
		"a:b":        "a%3Ab",
		"a%3Ab":      "a%253Ab",
		"{x}":        "%7Bx%7D",
		"refused:1:": "refused%3A1%3A",
		"世界":         "世界",
	} {
		if got := Escape(in); got != want {
			t.Errorf("Escape(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSubjectsAreDistinct(t *testing.T) {
	subjects := map[string]bool{}
	for _, s := range [][3]string{
		{"x", "user", "a:b"},
		{"x:user", "user", "b"},
		{"x", "user", "a%3Ab"},
		{"x", "chat", "a:b"},
		{"x:user:a", "user", ""},
	} {
		k := Subject(s[0], govern.GrantKind(s[1]), s[2])
		if subjects[k] {
			t.Errorf("Subject%q = %q, taken", s, k)
		}
		subjects[k] = true
	}
}

func TestWindow(t *testing.T) {
	at := time.UnixMilli(1_700_000_039_999)
	if n, wms := Window(at, time.Minute); n != 28_333_333 || wms != 60_000 {
		t.Errorf("Window = %d, %d", n, wms)
	}
	if n, _ := Window(at.Add(time.Millisecond), time.Minute); n != 28_333_334 {
		t.Errorf("Window a millisecond later = %d", n)
	}
	if _, wms := Window(at, time.Microsecond); wms != 1 {
		t.Errorf("Window of a microsecond is %d ms", wms)
	}
}

func TestCheckUsage(t *testing.T) {
	ch := agent.SessionKey{Platform: "slack", Team: "T1", Chat: "C1"}
	for day, ok := range map[string]bool{"2025-03-04": true, "2025-3-4": false, "": false, "2025-02-30": false, "2025-03-04x": false} {
		if err := CheckUsage(ch, day, 1); (err == nil) != ok {
			t.Errorf("CheckUsage(%q) = %v", day, err)
		}
	}
}

func TestDecodeSettings(t *testing.T) {
	at := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want agent.ChannelSettings
	}{
		{`{"version":2,"tools":{"shell":{"mode":"deny","by":"cli:root","at":"2025-03-04T05:06:07Z"}}}`,
			agent.ChannelSettings{Version: 2, Tools: map[string]agent.Rule{"shell": {Mode: agent.ToolDeny, By: "cli:root", At: at}}}},
		{`{"version":3,"tools":{"shell":"deny","fetch":"ask"}}`,
			agent.ChannelSettings{Version: 3, Tools: map[string]agent.Rule{"shell": {Mode: agent.ToolDeny}, "fetch": {Mode: agent.ToolAsk}}}},
		{`{"version":1}`, agent.ChannelSettings{Version: 1}},
	} {
		got, err := DecodeSettings([]byte(tc.in))
		if err != nil || got.Version != tc.want.Version || len(got.Tools) != len(tc.want.Tools) {
			t.Fatalf("DecodeSettings(%s) = %+v, %v", tc.in, got, err)
		}
		for name, r := range tc.want.Tools {
			if g := got.Tools[name]; g.Mode != r.Mode || g.By != r.By || !g.At.Equal(r.At) {
				t.Errorf("DecodeSettings(%s)[%s] = %+v, want %+v", tc.in, name, g, r)
			}
		}
	}
	if _, err := DecodeSettings([]byte(`{"version":"x"}`)); err == nil {
		t.Error("DecodeSettings of a malformed record succeeded")
	}
}
