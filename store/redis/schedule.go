package redis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/agent/schedules"
	"github.com/firstmate/firstmate/store/internal/storegov"
	"github.com/firstmate/firstmate/store/internal/storejson"
)

// The store keeps schedules in four keys of one slot (see the schedule
// records in keys.go): every step below is one script, so one round trip.
// A firing schedule's score in the due set is its lease's end, so one
// range query finds both the schedules that fell due and those whose
// claimer died. The scripts read the server's clock (TIME): every replica
// goes by the same one.
var _ schedules.Store = (*Store)(nil)

// scheduleKeys returns the keys the schedule scripts take, in the order
// they expect them: the due set, the records, the firing owners and, when
// channel is valid, the channel's set.
func (s *Store) scheduleKeys(channel agent.SessionKey) []string {
	keys := []string{s.key(scheduleDue, noKey, ""), s.key(scheduleData, noKey, ""), s.key(scheduleFiring, noKey, "")}
	if channel.Validate() == nil {
		keys = append(keys, s.key(scheduleChannel, channel, ""))
	}
	return keys
}

// luaNow sets now to the server's time in milliseconds. A script that
// reads the clock and then writes must be replicated by its effects, the
// default since Redis 5 (replicate_commands asks for it before).
const luaNow = `
if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local function ms(n) return string.format('%.0f', n) end
`

// addScheduleScript stores a schedule unless its ID is taken or its
// channel is full. KEYS: due, data, firing, channel. ARGV: id, due (ms),
// JSON, max. Returns 1 if stored, 0 for a full channel, -1 for a taken ID.
var addScheduleScript = goredis.NewScript(`
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 then
	return -1
end
if redis.call('SCARD', KEYS[4]) >= tonumber(ARGV[4]) then
	return 0
end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
redis.call('SADD', KEYS[4], ARGV[1])
return 1
`)

// listSchedulesScript returns a channel's schedules: for each, its JSON,
// its firing owner ("" if pending) and its score. KEYS: due, data, firing,
// channel.
var listSchedulesScript = goredis.NewScript(`
local out = {}
for _, id in ipairs(redis.call('SMEMBERS', KEYS[4])) do
	local data = redis.call('HGET', KEYS[2], id)
	if data then
		table.insert(out, data)
		table.insert(out, redis.call('HGET', KEYS[3], id) or '')
		table.insert(out, redis.call('ZSCORE', KEYS[1], id) or '0')
	end
end
return out
`)

// removeScheduleScript deletes a channel's schedule. KEYS: due, data,
// firing, channel. ARGV: id. Returns its JSON and firing owner, or nil if
// the channel has no such schedule.
var removeScheduleScript = goredis.NewScript(`
if redis.call('SISMEMBER', KEYS[4], ARGV[1]) == 0 then
	return false
end
local data = redis.call('HGET', KEYS[2], ARGV[1])
local owner = redis.call('HGET', KEYS[3], ARGV[1]) or ''
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('SREM', KEYS[4], ARGV[1])
if not data then
	return false
end
return {data, owner}
`)

// claimSchedulesScript claims up to limit schedules whose score (a pending
// one's due time, a firing one's lease end) has come: each gets owner, and
// the lease's end as its score. KEYS: due, data, firing. ARGV: owner, ttl
// (ms), limit. Returns the lease's end and the schedules' JSON.
var claimSchedulesScript = goredis.NewScript(luaNow + `
local lease = now + tonumber(ARGV[2])
local out = {}
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ms(now), 'LIMIT', 0, tonumber(ARGV[3]))) do
	local data = redis.call('HGET', KEYS[2], id)
	if data then
		redis.call('HSET', KEYS[3], id, ARGV[1])
		redis.call('ZADD', KEYS[1], ms(lease), id)
		table.insert(out, data)
	else
		-- Not this version's, or left half-written: nothing to fire.
		redis.call('ZREM', KEYS[1], id)
		redis.call('HDEL', KEYS[3], id)
	end
end
return {ms(lease), out}
`)

// finishScheduleScript ends owner's firing of a schedule: pending again at
// next, with its new JSON, or deleted when next is "". KEYS: due, data,
// firing, channel. ARGV: id, owner, next (ms) or "", JSON. Returns 1 when
// done, 0 if owner does not hold it, -1 if it is gone.
var finishScheduleScript = goredis.NewScript(`
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 0 then
	return -1
end
if redis.call('HGET', KEYS[3], ARGV[1]) ~= ARGV[2] then
	return 0
end
redis.call('HDEL', KEYS[3], ARGV[1])
if ARGV[3] == '' then
	redis.call('HDEL', KEYS[2], ARGV[1])
	redis.call('ZREM', KEYS[1], ARGV[1])
	redis.call('SREM', KEYS[4], ARGV[1])
else
	redis.call('HSET', KEYS[2], ARGV[1], ARGV[4])
	redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
end
return 1
`)

// AddSchedule implements schedules.Store.
func (s *Store) AddSchedule(ctx context.Context, sch schedules.Schedule, max int) error {
	if err := storegov.CheckSchedule(sch, max); err != nil {
		return err
	}
	data, err := storejson.Marshal(sch)
	if err != nil {
		return err
	}
	n, err := addScheduleScript.Run(ctx, s.client, s.scheduleKeys(sch.Key.Channel()), sch.ID, sch.Due.UnixMilli(), data, max).Int()
	if err != nil {
		return fmt.Errorf("redis add schedule: %w", err)
	}
	switch n {
	case 0:
		return schedules.ErrScheduleLimit
	case -1:
		return fmt.Errorf("%w schedule ID %s: taken", agent.ErrInvalid, sch.ID)
	}
	return nil
}

// Schedules implements schedules.Store.
func (s *Store) Schedules(ctx context.Context, channel agent.SessionKey) ([]schedules.Schedule, error) {
	if err := channel.Validate(); err != nil {
		return nil, err
	}
	res, err := listSchedulesScript.Run(ctx, s.client, s.scheduleKeys(channel.Channel())).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("redis schedules: %w", err)
	}
	var out []schedules.Schedule
	for i := 0; i+2 < len(res); i += 3 {
		sch, err := decodeSchedule(res[i], res[i+1], res[i+2])
		if err != nil {
			return nil, fmt.Errorf("redis schedules: %w", err)
		}
		out = append(out, sch)
	}
	storegov.SortSchedules(out)
	return out, nil
}

// RemoveSchedule implements schedules.Store.
func (s *Store) RemoveSchedule(ctx context.Context, channel agent.SessionKey, id string) (schedules.Schedule, error) {
	if err := channel.Validate(); err != nil {
		return schedules.Schedule{}, err
	}
	if id == "" {
		return schedules.Schedule{}, agent.ErrNotFound
	}
	res, err := removeScheduleScript.Run(ctx, s.client, s.scheduleKeys(channel.Channel()), id).StringSlice()
	if errors.Is(err, goredis.Nil) {
		return schedules.Schedule{}, agent.ErrNotFound
	}
	if err != nil {
		return schedules.Schedule{}, fmt.Errorf("redis remove schedule: %w", err)
	}
	if len(res) != 2 {
		return schedules.Schedule{}, fmt.Errorf("redis remove schedule: script returned %d values", len(res))
	}
	sch, err := decodeSchedule(res[0], res[1], "")
	if err != nil {
		return schedules.Schedule{}, fmt.Errorf("redis remove schedule: %w", err)
	}
	return sch, nil
}

// ClaimSchedules implements schedules.Store.
func (s *Store) ClaimSchedules(ctx context.Context, owner string, ttl time.Duration, limit int) ([]schedules.Schedule, error) {
	if err := storegov.CheckClaimSchedules(owner, ttl, limit); err != nil {
		return nil, err
	}
	res, err := claimSchedulesScript.Run(ctx, s.client, s.scheduleKeys(noKey), owner, ms(ttl), limit).Slice()
	if err != nil {
		return nil, fmt.Errorf("redis claim schedules: %w", err)
	}
	if len(res) != 2 {
		return nil, fmt.Errorf("redis claim schedules: script returned %d values", len(res))
	}
	lease, _ := res[0].(string)
	entries, ok := res[1].([]any)
	if !ok {
		return nil, fmt.Errorf("redis claim schedules: unexpected reply %T", res[1])
	}
	var out []schedules.Schedule
	for _, e := range entries {
		data, ok := e.(string)
		if !ok {
			return nil, fmt.Errorf("redis claim schedules: unexpected entry %T", e)
		}
		sch, err := decodeSchedule(data, owner, lease)
		if err != nil {
			return nil, fmt.Errorf("redis claim schedules: %w", err)
		}
		out = append(out, sch)
	}
	return out, nil
}

// FinishSchedule implements schedules.Store.
func (s *Store) FinishSchedule(ctx context.Context, sch schedules.Schedule, owner string, next time.Time) error {
	if err := storegov.CheckFinishSchedule(sch, owner); err != nil {
		return err
	}
	at, data := "", []byte(nil)
	if !next.IsZero() {
		var err error
		if data, err = storejson.Marshal(storegov.Pending(sch, next)); err != nil {
			return err
		}
		at = strconv.FormatInt(next.UnixMilli(), 10)
	}
	n, err := finishScheduleScript.Run(ctx, s.client, s.scheduleKeys(sch.Key.Channel()), sch.ID, owner, at, data).Int()
	if err != nil {
		return fmt.Errorf("redis finish schedule: %w", err)
	}
	switch n {
	case 0:
		return agent.ErrLeaseLost
	case -1:
		return agent.ErrNotFound
	}
	return nil
}

// decodeSchedule reads a stored schedule with its firing state: owner ""
// for a pending one, whose score is its due time, else the owner and its
// lease's end (ms).
func decodeSchedule(data, owner, score string) (schedules.Schedule, error) {
	var sch schedules.Schedule
	if err := json.Unmarshal([]byte(data), &sch); err != nil {
		return sch, fmt.Errorf("schedule: %w", err)
	}
	sch.Owner, sch.Lease = owner, time.Time{}
	if owner != "" && score != "" {
		f, err := strconv.ParseFloat(score, 64)
		if err != nil {
			return sch, fmt.Errorf("schedule %s: score %q: %w", sch.ID, score, err)
		}
		sch.Lease = time.UnixMilli(int64(f))
	}
	return sch, nil
}
