package storegov

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/agent/schedules"
)

// CheckSchedule checks the arguments of AddSchedule.
func CheckSchedule(s schedules.Schedule, max int) error {
	if err := s.Key.Validate(); err != nil {
		return err
	}
	if err := CheckScheduleID(s.ID); err != nil {
		return err
	}
	if s.Due.IsZero() {
		return fmt.Errorf("%w schedule %s: no due time", agent.ErrInvalid, s.ID)
	}
	if s.Owner != "" || !s.Lease.IsZero() {
		return fmt.Errorf("%w schedule %s: a new schedule is not firing", agent.ErrInvalid, s.ID)
	}
	if max <= 0 {
		return fmt.Errorf("%w schedule limit %d <= 0", agent.ErrInvalid, max)
	}
	return nil
}

// CheckScheduleID refuses an ID a store cannot key by.
func CheckScheduleID(id string) error {
	if id == "" || len(id) > 64 {
		return fmt.Errorf("%w schedule ID %q: want 1 to 64 bytes", agent.ErrInvalid, id)
	}
	return nil
}

// CheckClaimSchedules checks the arguments of ClaimSchedules.
func CheckClaimSchedules(owner string, ttl time.Duration, limit int) error {
	if owner == "" {
		return fmt.Errorf("%w claim schedules: empty owner", agent.ErrInvalid)
	}
	if ttl <= 0 {
		return fmt.Errorf("%w claim schedules: ttl %v <= 0", agent.ErrInvalid, ttl)
	}
	if limit <= 0 {
		return fmt.Errorf("%w claim schedules: limit %d <= 0", agent.ErrInvalid, limit)
	}
	return nil
}

// CheckFinishSchedule checks the arguments of FinishSchedule.
func CheckFinishSchedule(s schedules.Schedule, owner string) error {
	if err := s.Key.Validate(); err != nil {
		return err
	}
	if err := CheckScheduleID(s.ID); err != nil {
		return err
	}
	if owner == "" {
		return fmt.Errorf("%w finish schedule: empty owner", agent.ErrInvalid)
	}
	return nil
}

// Pending is s as a store writes it pending, due at due: without the
// firing state.
func Pending(s schedules.Schedule, due time.Time) schedules.Schedule {
	s.Due, s.Owner, s.Lease = due, "", time.Time{}
	return s
}

// SortSchedules puts a channel's schedules soonest due first, then by ID.
func SortSchedules(all []schedules.Schedule) {
	slices.SortFunc(all, func(a, b schedules.Schedule) int {
		return cmp.Or(a.Due.Compare(b.Due), cmp.Compare(a.ID, b.ID))
	})
}
