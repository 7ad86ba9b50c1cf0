package local

import (
	"context"
	"encoding/binary"
	"time"

	"go.etcd.io/bbolt"

	"github.com/firstmate/firstmate/store/internal/storegov"
	"github.com/firstmate/firstmate/store/internal/storejson"
	"github.com/firstmate/firstmate/tools"
)

// bucketJobs holds the shell's job board: space → a bucket of "next" (the
// last ID handed out, a uint64), "expires" (tools.JobKeep after the last
// change), and the fields the Redis store keeps in its hash
// (storegov.JobField and StopField). A space past its expiry reads as
// empty and starts over at its next change, as the Redis hash would.
var bucketJobs = []byte("jobs")

var (
	keyNext        = []byte("next")
	keySpaceExpiry = []byte("expires")
)

var _ tools.JobBoard = (*Store)(nil)

// jobSpace returns space's bucket for a change, emptied first if it
// expired, with its expiry pushed back.
func jobSpace(tx *bbolt.Tx, space string, now time.Time) (*bbolt.Bucket, error) {
	jobs := tx.Bucket(bucketJobs)
	if b := jobs.Bucket([]byte(space)); b != nil && !now.Before(decodeTime(b.Get(keySpaceExpiry))) {
		if err := jobs.DeleteBucket([]byte(space)); err != nil {
			return nil, err
		}
	}
	b, err := jobs.CreateBucketIfNotExists([]byte(space))
	if err != nil {
		return nil, err
	}
	return b, b.Put(keySpaceExpiry, encodeTime(now.Add(tools.JobKeep)))
}

// NextJobID implements tools.JobBoard.
func (s *Store) NextJobID(ctx context.Context, space string) (id int, err error) {
	if err := tools.CheckJobSpace(space); err != nil {
		return 0, err
	}
	err = s.update(ctx, "next job", func(tx *bbolt.Tx) error {
		b, err := jobSpace(tx, space, time.Now())
		if err != nil {
			return err
		}
		var n uint64
		if v := b.Get(keyNext); len(v) == 8 {
			n = binary.BigEndian.Uint64(v)
		}
		n++
		id = int(n)
		return b.Put(keyNext, binary.BigEndian.AppendUint64(nil, n))
	})
	return id, err
}

// PutJob implements tools.JobBoard.
func (s *Store) PutJob(ctx context.Context, space string, j tools.Job) error {
	if err := tools.CheckJobSpace(space); err != nil {
		return err
	}
	data, err := storejson.Marshal(j)
	if err != nil {
		return err
	}
	return s.update(ctx, "put job", func(tx *bbolt.Tx) error {
		b, err := jobSpace(tx, space, time.Now())
		if err != nil {
			return err
		}
		return b.Put([]byte(storegov.JobField(j.ID)), data)
	})
}

// Jobs implements tools.JobBoard.
func (s *Store) Jobs(ctx context.Context, space string) ([]tools.Job, error) {
	if err := tools.CheckJobSpace(space); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	board := map[string]string{}
	err := s.db.View(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketJobs).Bucket([]byte(space))
		if b == nil || !time.Now().Before(decodeTime(b.Get(keySpaceExpiry))) {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			board[string(k)] = string(v)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return storegov.DecodeJobs(board)
}

// AskStop implements tools.JobBoard.
func (s *Store) AskStop(ctx context.Context, space string, id int, by string) error {
	if err := tools.CheckJobSpace(space); err != nil {
		return err
	}
	return s.update(ctx, "ask stop", func(tx *bbolt.Tx) error {
		now := time.Now()
		if b := tx.Bucket(bucketJobs).Bucket([]byte(space)); b == nil || !now.Before(decodeTime(b.Get(keySpaceExpiry))) ||
			b.Get([]byte(storegov.JobField(id))) == nil {
			return tools.ErrNoJob
		}
		b, err := jobSpace(tx, space, now)
		if err != nil {
			return err
		}
		return b.Put([]byte(storegov.StopField(id)), []byte(by))
	})
}

// DropJob implements tools.JobBoard.
func (s *Store) DropJob(ctx context.Context, space string, id int) error {
	if err := tools.CheckJobSpace(space); err != nil {
		return err
	}
	return s.update(ctx, "drop job", func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketJobs).Bucket([]byte(space))
		if b == nil {
			return nil
		}
		if err := b.Delete([]byte(storegov.JobField(id))); err != nil {
			return err
		}
		return b.Delete([]byte(storegov.StopField(id)))
	})
}
