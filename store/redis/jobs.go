package redis

import (
	"context"
	"fmt"

	goredis "github.com/redis/go-redis/v9"

	"github.com/firstmate/firstmate/store/internal/storegov"
	"github.com/firstmate/firstmate/store/internal/storejson"
	"github.com/firstmate/firstmate/tools"
)

// The store is the shell's job board: a space's jobs are one hash (see the
// jobs record), so every call below is one round trip.
var _ tools.JobBoard = (*Store)(nil)

// NextJobID implements tools.JobBoard.
func (s *Store) NextJobID(ctx context.Context, space string) (int, error) {
	if err := tools.CheckJobSpace(space); err != nil {
		return 0, err
	}
	k := s.key(jobs, noKey, space)
	var incr *goredis.IntCmd
	_, err := s.client.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		incr = p.HIncrBy(ctx, k, "next", 1)
		p.PExpire(ctx, k, tools.JobKeep)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("redis next job: %w", err)
	}
	return int(incr.Val()), nil
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
	k := s.key(jobs, noKey, space)
	_, err = s.client.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		p.HSet(ctx, k, storegov.JobField(j.ID), data)
		p.PExpire(ctx, k, tools.JobKeep)
		return nil
	})
	if err != nil {
		return fmt.Errorf("redis put job: %w", err)
	}
	return nil
}

// Jobs implements tools.JobBoard.
func (s *Store) Jobs(ctx context.Context, space string) ([]tools.Job, error) {
	if err := tools.CheckJobSpace(space); err != nil {
		return nil, err
	}
	h, err := s.client.HGetAll(ctx, s.key(jobs, noKey, space)).Result()
	if err != nil {
		return nil, fmt.Errorf("redis jobs: %w", err)
	}
	return storegov.DecodeJobs(h)
}

// AskStop implements tools.JobBoard.
func (s *Store) AskStop(ctx context.Context, space string, id int, by string) error {
	if err := tools.CheckJobSpace(space); err != nil {
		return err
	}
	n, err := askStopScript.Run(ctx, s.client, []string{s.key(jobs, noKey, space)},
		storegov.JobField(id), storegov.StopField(id), by, ms(tools.JobKeep)).Int()
	if err != nil {
		return fmt.Errorf("redis ask stop: %w", err)
	}
	if n == 0 {
		return tools.ErrNoJob
	}
	return nil
}

// DropJob implements tools.JobBoard.
func (s *Store) DropJob(ctx context.Context, space string, id int) error {
	if err := tools.CheckJobSpace(space); err != nil {
		return err
	}
	if err := s.client.HDel(ctx, s.key(jobs, noKey, space), storegov.JobField(id), storegov.StopField(id)).Err(); err != nil {
		return fmt.Errorf("redis drop job: %w", err)
	}
	return nil
}
