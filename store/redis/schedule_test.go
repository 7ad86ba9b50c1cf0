package redis

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/agent/schedules"
	"github.com/firstmate/firstmate/internal/testkit/dispatch"
	"github.com/firstmate/firstmate/tools/schedule"
)

// TestScheduleKeys: the schedule keys are kept on purpose (keys.go says
// why), share one slot, and are named as keys.go shows.
func TestScheduleKeys(t *testing.T) {
	s, c := newStore(t, agent.Retention{})
	defer s.Close()
	ctx := t.Context()
	key := agent.SessionKey{Platform: "slack", Team: "T1", Chat: "C1", Thread: "1700.01"}
	for i, due := range []time.Time{time.Now().Add(-time.Second), time.Now().Add(time.Hour)} {
		sch := schedules.Schedule{ID: "s" + string(rune('1'+i)), Key: key, By: agent.User{ID: "U1"}, Kind: schedule.Once, Prompt: "p", Due: due}
		if err := s.AddSchedule(ctx, sch, 10); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := s.ClaimSchedules(ctx, "w", time.Minute, 10); err != nil || len(got) != 1 {
		t.Fatalf("ClaimSchedules = %v, %v", got, err)
	}
	keys := s.scheduleKeys(key)
	want := []string{s.prefix + ":{sched}:due", s.prefix + ":{sched}:data", s.prefix + ":{sched}:firing", s.prefix + ":{sched}:c:slack:T1:C1:"}
	if strings.Join(keys, " ") != strings.Join(want, " ") {
		t.Errorf("keys %q; want %q", keys, want)
	}
	for _, k := range keys {
		if hashTag(k) != "sched" {
			t.Errorf("key %q hashes %q, want sched", k, hashTag(k))
		}
		ttl, err := c.PTTL(ctx, k).Result()
		if err != nil || ttl != -1 {
			t.Errorf("key %q: TTL %v, %v; want a key kept without one", k, ttl, err)
		}
	}
	if n := len(keysOf(t, c, s)); n != len(keys) {
		t.Errorf("%d keys: %q; want %d", n, keysOf(t, c, s), len(keys))
	}
	// A channel whose chat ID holds braces keeps its set in the slot.
	odd := s.key(scheduleChannel, agent.SessionKey{Platform: "x", Chat: "a}b{c"}, "")
	if hashTag(odd) != "sched" {
		t.Errorf("key %q hashes %q", odd, hashTag(odd))
	}
}

// inputModel answers every turn and keeps its inputs.
type inputModel struct {
	mu   sync.Mutex
	seen []string
}

func (m *inputModel) Complete(_ context.Context, req *agent.Request) (*agent.Response, error) {
	m.mu.Lock()
	m.seen = append(m.seen, req.Messages[len(req.Messages)-1].Content)
	m.mu.Unlock()
	return &agent.Response{Message: agent.Message{Role: agent.RoleAssistant, Content: "ok"}}, nil
}

func (m *inputModel) count(s string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, in := range m.seen {
		n += strings.Count(in, s)
	}
	return n
}

// TestScheduleFiresOnceOnTwoReplicas runs two dispatchers, each with its
// own connection, on one Redis: a schedule due is posted once, and so is
// a cron that fell due while both were down. The replicas have names of
// their own: two boots of one name are one replica restarted, the later
// taking the earlier's leases, and running both at once ran a session's
// turn on both.
func TestScheduleFiresOnceOnTwoReplicas(t *testing.T) {
	prefix := testPrefix(t)
	m := &inputModel{}
	var stores []*Store
	for i := range 2 {
		s := New(newClient(t), Options{Prefix: prefix})
		t.Cleanup(func() { s.Close() })
		stores = append(stores, s)
		dispatch.Start(t, dispatch.Config{Store: s, Model: m, Platforms: map[string]agent.Platform{"slack": &answers{}},
			MaxTurns: 2, Owner: agent.Owner(fmt.Sprintf("r%d", i+1), 1), ReadyEvery: 50 * time.Millisecond,
			Scheduler: schedules.New(s, schedules.Config{Every: 5 * time.Millisecond})})
	}
	ctx := t.Context()
	key := agent.SessionKey{Platform: "slack", Team: "T1", Chat: "C1", Thread: "1700.01"}
	for i, prompt := range []string{"first", "second", "third"} {
		sch := schedules.Schedule{ID: "s" + prompt, Key: key, By: agent.User{ID: "U1", Name: "ann"}, Kind: schedule.Once, Prompt: "do the " + prompt,
			Due: time.Now().Add(time.Duration(i) * 20 * time.Millisecond), Created: time.Now()}
		if i == 2 {
			sch.Kind, sch.Cron, sch.TZ, sch.Due = schedule.Cron, "0 9 * * *", "UTC", time.Now().Add(-50*time.Hour)
		}
		if err := stores[i%2].AddSchedule(ctx, sch, 10); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for m.count("do the ") < 3 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	for _, p := range []string{"first", "second", "third"} {
		if n := m.count("do the " + p); n != 1 {
			t.Errorf("%q posted %d times; want once", p, n)
		}
	}
	left, err := stores[0].Schedules(ctx, key)
	if err != nil || len(left) != 1 || left[0].Cron == "" || !left[0].Due.After(time.Now()) || left[0].Owner != "" {
		t.Errorf("left %+v, %v; want the cron, due again", left, err)
	}
}
