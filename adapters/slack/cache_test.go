package slack

import (
	"strconv"
	"testing"
	"time"
)

// The per-person caches hold at most max entries however many people
// write, and an answer stands for ttl only.
func TestExpiringIsBoundedAndExpires(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	c := &expiring[string]{ttl: time.Hour, max: 100, now: func() time.Time { return now }}
	for i := range 10_000 {
		c.put("U"+strconv.Itoa(i), "name")
		if n := c.len(); n > 100 {
			t.Fatalf("%d entries after %d people, at most 100", n, i+1)
		}
	}
	if v, ok := c.get("U9999"); !ok || v != "name" {
		t.Errorf("the latest entry is gone: %q %v", v, ok)
	}
	c.put("U1", "Ann")
	now = now.Add(59 * time.Minute)
	if v, ok := c.get("U1"); !ok || v != "Ann" {
		t.Errorf("within ttl: %q %v", v, ok)
	}
	now = now.Add(time.Minute)
	if _, ok := c.get("U1"); ok {
		t.Error("an answer older than ttl still stands")
	}
	c.put("U1", "Ann B.") // asked again
	if v, _ := c.get("U1"); v != "Ann B." {
		t.Errorf("renewed entry = %q", v)
	}
	// Replacing an entry when full evicts nothing.
	full := c.len()
	c.put("U1", "Ann C.")
	if c.len() != full {
		t.Errorf("replacing an entry changed the count: %d → %d", full, c.len())
	}
}
