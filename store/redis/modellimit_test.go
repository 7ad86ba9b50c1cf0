package redis

import (
	"testing"
	"time"

	"github.com/firstmate/firstmate/agent"
)

// Two replicas' views of the model's limits are one: the slots, the
// per-minute budgets and a pause.
func TestModelLimitsAreShared(t *testing.T) {
	s, c := newStore(t, agent.Retention{})
	a := s.ModelLimits()
	b := New(c, Options{Prefix: s.prefix}).ModelLimits()
	ctx := t.Context()

	if ok, err := a.TakeSlot(ctx, "a1", 2, time.Minute); !ok || err != nil {
		t.Fatalf("first slot: %v %v", ok, err)
	}
	if ok, err := b.TakeSlot(ctx, "b1", 2, 300*time.Millisecond); !ok || err != nil {
		t.Fatalf("second slot: %v %v", ok, err)
	}
	if ok, err := a.TakeSlot(ctx, "a2", 2, time.Minute); ok || err != nil {
		t.Fatalf("a third of two slots: %v %v", ok, err)
	}
	// b's slot lapses unrenewed (its replica died); a's, freed, is free.
	time.Sleep(400 * time.Millisecond)
	if err := a.RenewSlots(ctx, []string{"a1", "gone"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	if ok, err := a.TakeSlot(ctx, "a2", 2, time.Minute); !ok || err != nil {
		t.Fatalf("a lapsed slot was not taken back: %v %v", ok, err)
	}
	if err := b.FreeSlot(ctx, "a1"); err != nil {
		t.Fatal(err)
	}
	if ok, err := b.TakeSlot(ctx, "b2", 2, time.Minute); !ok || err != nil {
		t.Fatalf("a freed slot: %v %v", ok, err)
	}
	if n := c.ZCard(ctx, s.prefix+":{llm}:slots").Val(); n != 2 {
		t.Errorf("%d slots held, want 2 (a2, b2); renewing a gone one must not add it", n)
	}

	// One budget of 100 tokens a minute for both.
	if wait, err := a.Allow(ctx, "tokens", 100, 60); wait != 0 || err != nil {
		t.Fatalf("60 of 100: %v %v", wait, err)
	}
	if wait, err := b.Allow(ctx, "tokens", 100, 60); wait <= 0 || err != nil {
		t.Fatalf("60 more of the 40 left: wait %v, %v", wait, err)
	}
	if wait, err := b.Allow(ctx, "tokens", 100, 40); wait != 0 || err != nil {
		t.Fatalf("the 40 left: %v %v", wait, err)
	}

	// A pause one replica was asked for is the other's too, and a shorter
	// one does not cut it.
	until := time.Now().Add(2 * time.Second).Truncate(time.Millisecond)
	if err := a.Pause(ctx, until); err != nil {
		t.Fatal(err)
	}
	if err := b.Pause(ctx, time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if got, err := b.PausedUntil(ctx); err != nil || !got.Equal(until) {
		t.Errorf("paused until %v, %v; want %v", got, err, until)
	}
}
