package local

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	"go.etcd.io/bbolt"

	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/agent/schedules"
	"github.com/firstmate/firstmate/store/internal/storegov"
	"github.com/firstmate/firstmate/store/internal/storejson"
)

// The schedules, as the Redis store keeps them (see its schedule records),
// in three buckets. None expires: a schedule holds until it fires for the
// last time or someone removes it, and a channel holds at most its limit.
var (
	// ID → schedules.Schedule JSON, its firing state (Owner, Lease) included.
	bucketSchedules = []byte("schedules")
	// The index ClaimSchedules reads: 8 bytes of Unix ms (a pending
	// schedule's due time, a firing one's lease end) then the ID → empty.
	bucketScheduleDue = []byte("scheddue")
	// channel key → a bucket of the channel's IDs → empty.
	bucketScheduleChannels = []byte("schedchan")
)

var _ schedules.Store = (*Store)(nil)

// dueKey is sch's key in bucketScheduleDue.
func dueKey(sch schedules.Schedule) []byte {
	at := sch.Due
	if sch.Owner != "" {
		at = sch.Lease
	}
	return append(binary.BigEndian.AppendUint64(nil, uint64(at.UnixMilli())), sch.ID...)
}

// getSchedule reads the schedule id; ok is false if there is none.
func getSchedule(tx *bbolt.Tx, id string) (sch schedules.Schedule, ok bool, err error) {
	data := tx.Bucket(bucketSchedules).Get([]byte(id))
	if data == nil {
		return sch, false, nil
	}
	if err := json.Unmarshal(data, &sch); err != nil {
		return sch, false, fmt.Errorf("schedule %s: %w", id, err)
	}
	return sch, true, nil
}

// putSchedule writes sch and its index entry; old, if not nil, is the
// entry it had.
func putSchedule(tx *bbolt.Tx, sch schedules.Schedule, old []byte) error {
	data, err := storejson.Marshal(sch)
	if err != nil {
		return err
	}
	due := tx.Bucket(bucketScheduleDue)
	if old != nil {
		if err := due.Delete(old); err != nil {
			return err
		}
	}
	if err := due.Put(dueKey(sch), []byte{}); err != nil {
		return err
	}
	return tx.Bucket(bucketSchedules).Put([]byte(sch.ID), data)
}

// deleteSchedule deletes sch, its index entry and its place in its
// channel's bucket.
func deleteSchedule(tx *bbolt.Tx, sch schedules.Schedule) error {
	if err := tx.Bucket(bucketScheduleDue).Delete(dueKey(sch)); err != nil {
		return err
	}
	if err := tx.Bucket(bucketSchedules).Delete([]byte(sch.ID)); err != nil {
		return err
	}
	channels := tx.Bucket(bucketScheduleChannels)
	name := []byte(sch.Key.Channel().String())
	cb := channels.Bucket(name)
	if cb == nil {
		return nil
	}
	if err := cb.Delete([]byte(sch.ID)); err != nil {
		return err
	}
	if k, _ := cb.Cursor().First(); k == nil {
		return channels.DeleteBucket(name)
	}
	return nil
}

// AddSchedule implements schedules.Store.
func (s *Store) AddSchedule(ctx context.Context, sch schedules.Schedule, max int) error {
	if err := storegov.CheckSchedule(sch, max); err != nil {
		return err
	}
	return s.update(ctx, "add schedule", func(tx *bbolt.Tx) error {
		if tx.Bucket(bucketSchedules).Get([]byte(sch.ID)) != nil {
			return fmt.Errorf("%w schedule ID %s: taken", agent.ErrInvalid, sch.ID)
		}
		cb, err := tx.Bucket(bucketScheduleChannels).CreateBucketIfNotExists([]byte(sch.Key.Channel().String()))
		if err != nil {
			return err
		}
		if count(cb) >= max {
			return schedules.ErrScheduleLimit
		}
		if err := cb.Put([]byte(sch.ID), []byte{}); err != nil {
			return err
		}
		return putSchedule(tx, sch, nil)
	})
}

// Schedules implements schedules.Store.
func (s *Store) Schedules(ctx context.Context, channel agent.SessionKey) ([]schedules.Schedule, error) {
	if err := channel.Validate(); err != nil {
		return nil, err
	}
	var out []schedules.Schedule
	err := s.view(ctx, "schedules", func(tx *bbolt.Tx) error {
		cb := tx.Bucket(bucketScheduleChannels).Bucket([]byte(channel.Channel().String()))
		if cb == nil {
			return nil
		}
		return cb.ForEach(func(id, _ []byte) error {
			sch, ok, err := getSchedule(tx, string(id))
			if ok {
				out = append(out, sch)
			}
			return err
		})
	})
	if err != nil {
		return nil, err
	}
	storegov.SortSchedules(out)
	return out, nil
}

// RemoveSchedule implements schedules.Store.
func (s *Store) RemoveSchedule(ctx context.Context, channel agent.SessionKey, id string) (sch schedules.Schedule, err error) {
	if err := channel.Validate(); err != nil {
		return sch, err
	}
	if id == "" {
		return sch, agent.ErrNotFound
	}
	err = s.update(ctx, "remove schedule", func(tx *bbolt.Tx) error {
		cb := tx.Bucket(bucketScheduleChannels).Bucket([]byte(channel.Channel().String()))
		if cb == nil || cb.Get([]byte(id)) == nil {
			return agent.ErrNotFound
		}
		var ok bool
		if sch, ok, err = getSchedule(tx, id); err != nil || !ok {
			return cmpErr(err, agent.ErrNotFound)
		}
		return deleteSchedule(tx, sch)
	})
	return sch, err
}

// cmpErr is err, or other if err is nil.
func cmpErr(err, other error) error {
	if err != nil {
		return err
	}
	return other
}

// ClaimSchedules implements schedules.Store.
func (s *Store) ClaimSchedules(ctx context.Context, owner string, ttl time.Duration, limit int) ([]schedules.Schedule, error) {
	if err := storegov.CheckClaimSchedules(owner, ttl, limit); err != nil {
		return nil, err
	}
	var out []schedules.Schedule
	err := s.update(ctx, "claim schedules", func(tx *bbolt.Tx) error {
		now := time.Now()
		// Milliseconds, as the index (and the Redis store) keeps them.
		lease := time.UnixMilli(now.UnixMilli()).Add(ttl.Truncate(time.Millisecond))
		end := binary.BigEndian.AppendUint64(nil, uint64(now.UnixMilli())+1)
		var keys [][]byte
		c := tx.Bucket(bucketScheduleDue).Cursor()
		for k, _ := c.First(); k != nil && bytes.Compare(k, end) < 0 && len(keys) < limit; k, _ = c.Next() {
			keys = append(keys, bytes.Clone(k)) // keys point into the file's memory map
		}
		for _, k := range keys {
			sch, ok, err := getSchedule(tx, string(k[8:]))
			if err != nil {
				return err
			}
			if !ok {
				if err := tx.Bucket(bucketScheduleDue).Delete(k); err != nil {
					return err
				}
				continue
			}
			sch.Owner, sch.Lease = owner, lease
			if err := putSchedule(tx, sch, k); err != nil {
				return err
			}
			out = append(out, sch)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// FinishSchedule implements schedules.Store.
func (s *Store) FinishSchedule(ctx context.Context, sch schedules.Schedule, owner string, next time.Time) error {
	if err := storegov.CheckFinishSchedule(sch, owner); err != nil {
		return err
	}
	return s.update(ctx, "finish schedule", func(tx *bbolt.Tx) error {
		cur, ok, err := getSchedule(tx, sch.ID)
		switch {
		case err != nil:
			return err
		case !ok:
			return agent.ErrNotFound
		case cur.Owner != owner:
			return agent.ErrLeaseLost
		case next.IsZero():
			return deleteSchedule(tx, cur)
		}
		return putSchedule(tx, storegov.Pending(cur, next), dueKey(cur))
	})
}
