package sandbox

import (
	"fmt"
	"sync"
)

// capture keeps the first and the last bytes of a command's output: the
// start says what ran, the end usually says why it failed.
type capture struct {
	mu    sync.Mutex
	max   int
	head  []byte
	tail  []byte // ring buffer of up to max-len(head) bytes
	pos   int    // next write position in tail once it is full
	total int64
}

func newCapture(max int) *capture { return &capture{max: max} }

func (c *capture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(p)
	c.total += int64(n)
	if room := c.max/2 - len(c.head); room > 0 {
		k := min(room, len(p))
		c.head = append(c.head, p[:k]...)
		p = p[k:]
	}
	tmax := c.max - c.max/2
	for len(p) > 0 {
		if len(c.tail) < tmax {
			k := min(tmax-len(c.tail), len(p))
			c.tail = append(c.tail, p[:k]...)
			p = p[k:]
			continue
		}
		if len(p) >= tmax { // only the last tmax bytes can survive
			p = p[len(p)-tmax:]
		}
		k := copy(c.tail[c.pos:], p)
		p = p[k:]
		c.pos = (c.pos + k) % tmax
	}
	return n, nil
}

// bytes is the kept output, with a line saying how much was left out, the
// total written and how much of it was cut.
func (c *capture) bytes() (out []byte, total, cut int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out = append([]byte(nil), c.head...)
	cut = c.total - int64(len(c.head)+len(c.tail))
	if cut > 0 {
		out = fmt.Appendf(out, "\n[… %d bytes of output cut …]\n", cut)
	}
	out = append(out, c.tail[c.pos:]...)
	return append(out, c.tail[:c.pos]...), c.total, cut
}
