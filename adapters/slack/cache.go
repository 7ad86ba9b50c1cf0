package slack

import (
	"sync"
	"time"
)

// expiring is a bounded map of what users.info said about people: each
// answer stands for ttl, and at most max people are remembered, so a
// workspace of many thousands costs a fixed amount of memory and a name
// or an admin's rights that change are seen again within ttl. Past max,
// the stale entries go first, then any: it is a cache; what went is asked
// again.
type expiring[V any] struct {
	ttl time.Duration
	max int
	now func() time.Time // time.Now; tests move it

	mu sync.Mutex
	m  map[string]expiringEntry[V]
}

type expiringEntry[V any] struct {
	v  V
	at time.Time
}

func (c *expiring[V]) clock() time.Time {
	if c.now != nil {
		return c.now()
	}
	return time.Now()
}

// get returns what was put for key within ttl.
func (c *expiring[V]) get(key string) (v V, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[key]
	if !ok || c.clock().Sub(e.at) >= c.ttl {
		return v, false
	}
	return e.v, true
}

func (c *expiring[V]) put(key string, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock()
	if c.m == nil {
		c.m = map[string]expiringEntry[V]{}
	}
	if _, ok := c.m[key]; !ok && len(c.m) >= c.max {
		for k, e := range c.m {
			if now.Sub(e.at) >= c.ttl {
				delete(c.m, k)
			}
		}
		// Still full: a quarter goes, in map order (no order is kept).
		for k := range c.m {
			if len(c.m) < c.max*3/4 {
				break
			}
			delete(c.m, k)
		}
	}
	c.m[key] = expiringEntry[V]{v: v, at: now}
}

// len is how many entries are held, stale ones included.
func (c *expiring[V]) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}
