package changes

import (
	"sync/atomic"
	"testing"
	"time"
)

func TestWaitForWakesOnNotify(t *testing.T) {
	var s Signal
	var n atomic.Int32
	done := make(chan struct{})
	go func() {
		for range 3 {
			time.Sleep(5 * time.Millisecond)
			n.Add(1)
			s.Notify()
		}
	}()
	if !s.WaitFor(5*time.Second, done, func() bool { return n.Load() == 3 }) {
		t.Fatal("the condition was not seen")
	}
	start := time.Now()
	if s.WaitFor(20*time.Millisecond, done, func() bool { return false }) {
		t.Fatal("a false condition held")
	}
	if time.Since(start) < 20*time.Millisecond {
		t.Fatal("returned before the timeout")
	}
	close(done)
	if s.WaitFor(time.Hour, done, func() bool { return false }) {
		t.Fatal("a false condition held after done")
	}
}
