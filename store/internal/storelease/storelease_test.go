package storelease

import "testing"

func TestEarlier(t *testing.T) {
	for _, tc := range []struct {
		holder, owner string
		want          bool
	}{
		{"web-0#1", "web-0#2", true},
		{"web-0#9", "web-0#10", true},
		{"web-0#0009", "web-0#10", true},
		{"web-0#10", "web-0#010", false}, // the same boot
		{"web-0#2", "web-0#1", false},
		{"web-0#2", "web-0#2", false},
		{"web-0#1", "web-1#2", false},
		{"web-0#1", "web-00#2", false},
		{"a#b#1", "a#b#2", true},
		{"a#b#1", "a#2", false},
		{"a#1", "a#b#2", false},
		{"web-0:8080#99999999999999999999998", "web-0:8080#99999999999999999999999", true},
		// Not of the form: never an earlier boot, never stealing.
		{"web-0", "web-0#2", false},
		{"web-0#", "web-0#2", false},
		{"#1", "#2", false},
		{"web-0#1", "web-0#", false},
		{"web-0#1", "web-0#+2", false},
		{"web-0#-1", "web-0#2", false},
		{"web-0#1", "web-0#2x", false},
		{"web-0#1", "web-0", false},
		{"", "", false},
	} {
		if got := Earlier(tc.holder, tc.owner); got != tc.want {
			t.Errorf("Earlier(%q, %q) = %v, want %v", tc.holder, tc.owner, got, tc.want)
		}
	}
}

func TestGoesAfter(t *testing.T) {
	for _, tc := range []struct {
		seq, next string
		want      bool
	}{
		{"2", "1", true},
		{"1", "2", false},
		{"1", "1", false}, // equals keep arrival order
		{"", "1", true},   // no seq: after every seq
		{"", "", false},
		{"1", "", false},
		{"1700000000.000200", "1700000000.000100", true},
		{"1700000000.000100", "1700000000.000200", false},
		{"b", "a.", true}, // bytes, not a locale's collation
		{"a.", "a", true},
	} {
		if got := GoesAfter(tc.seq, tc.next); got != tc.want {
			t.Errorf("GoesAfter(%q, %q) = %v, want %v", tc.seq, tc.next, got, tc.want)
		}
	}
}
