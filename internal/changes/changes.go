// Package changes lets the in-repo fakes (fakeslack, faketelegram) wake
// tests that wait for something to happen, without polling: every change
// a fake records is a Notify, and WaitFor checks its condition again after
// each one.
package changes

import (
	"sync"
	"time"
)

// Signal is a broadcast of "something changed". The zero value is ready.
type Signal struct {
	mu sync.Mutex
	ch chan struct{} // closed and replaced on every Notify
}

func (s *Signal) current() chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	return s.ch
}

// Notify wakes every WaitFor.
func (s *Signal) Notify() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch != nil {
		close(s.ch)
	}
	s.ch = make(chan struct{})
}

// WaitFor blocks until cond returns true, timeout passes or done is
// closed, and reports whether cond held. cond is evaluated again after
// every Notify; it may take the caller's locks (WaitFor holds none).
func (s *Signal) WaitFor(timeout time.Duration, done <-chan struct{}, cond func() bool) bool {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		ch := s.current()
		if cond() {
			return true
		}
		select {
		case <-ch:
		case <-t.C:
			return cond()
		case <-done:
			return cond()
		}
	}
}
