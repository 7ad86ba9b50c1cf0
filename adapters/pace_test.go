package adapters

import (
	"fmt"
	"testing"
	"time"
)

// A set that grew with a burst of chats forgets those whose buckets
// refilled, without waiting for another chat to come along, and keeps the
// ones still spending.
func TestBucketsForgetRefilled(t *testing.T) {
	s := NewBuckets(time.Hour, 1)
	now := time.Now()
	for i := range sweepAbove + 500 {
		b := s.Get(fmt.Sprint("chat", i))
		if i%100 == 0 {
			b.take(now) // spent: an hour to refill
		}
	}
	s.mu.Lock()
	due := s.sweep != nil
	s.mu.Unlock()
	if !due {
		t.Fatal("no sweep is due after the set grew past sweepAbove")
	}
	s.forget()
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := len(s.m); n != (sweepAbove+500+99)/100 {
		t.Fatalf("%d buckets kept; want the %d still refilling", n, (sweepAbove+500+99)/100)
	}
	if s.sweep != nil {
		t.Error("another sweep is due with few buckets left")
	}
	if _, ok := s.m["chat100"]; !ok {
		t.Error("a bucket still refilling was forgotten")
	}
}
