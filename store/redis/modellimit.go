package redis

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/go-redis/redis_rate/v10"
	goredis "github.com/redis/go-redis/v9"

	"github.com/firstmate/firstmate/agent/modellimit"
)

// ModelLimits are the model endpoint's limits, shared by every replica on
// this Redis: request slots in a sorted set (scored by when each lapses),
// per-minute budgets by github.com/go-redis/redis_rate (GCRA), and a pause
// a server asked for.
type ModelLimits struct {
	client goredis.UniversalClient
	rate   *redis_rate.Limiter
	prefix string
}

var _ modellimit.Shared = (*ModelLimits)(nil)

// ModelLimits returns the shared model limits of this store's prefix.
func (s *Store) ModelLimits() *ModelLimits {
	return &ModelLimits{client: s.client, rate: redis_rate.NewLimiter(s.client), prefix: s.prefix + ":{llm}"}
}

// takeSlotScript drops the slots that lapsed and takes one if fewer than
// ARGV[1] are held. Time is the server's, so that replicas whose clocks
// differ agree.
var takeSlotScript = goredis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[3])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]) * 2)
return 1`)

// renewSlotsScript extends the slots named that are still held.
var renewSlotsScript = goredis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
for i = 2, #ARGV do
  redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[1]), ARGV[i])
end
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[1]) * 2)
return 1`)

// pauseScript moves the pause later, never earlier.
var pauseScript = goredis.NewScript(`
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
if tonumber(ARGV[1]) > cur then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', tonumber(ARGV[2]))
end
return 1`)

func (m *ModelLimits) TakeSlot(ctx context.Context, id string, max int, ttl time.Duration) (bool, error) {
	n, err := takeSlotScript.Run(ctx, m.client, []string{m.prefix + ":slots"}, max, ttl.Milliseconds(), id).Int()
	if err != nil {
		return false, fmt.Errorf("redis model slot: %w", err)
	}
	return n == 1, nil
}

func (m *ModelLimits) RenewSlots(ctx context.Context, ids []string, ttl time.Duration) error {
	args := make([]any, 0, len(ids)+1)
	args = append(args, ttl.Milliseconds())
	for _, id := range ids {
		args = append(args, id)
	}
	if err := renewSlotsScript.Run(ctx, m.client, []string{m.prefix + ":slots"}, args...).Err(); err != nil {
		return fmt.Errorf("redis model slots renew: %w", err)
	}
	return nil
}

func (m *ModelLimits) FreeSlot(ctx context.Context, id string) error {
	if err := m.client.ZRem(ctx, m.prefix+":slots", id).Err(); err != nil {
		return fmt.Errorf("redis model slot free: %w", err)
	}
	return nil
}

func (m *ModelLimits) Allow(ctx context.Context, name string, perMinute, n int) (time.Duration, error) {
	res, err := m.rate.AllowN(ctx, m.prefix+":rate:"+name, redis_rate.PerMinute(perMinute), n)
	if err != nil {
		return 0, fmt.Errorf("redis model %s a minute: %w", name, err)
	}
	if res.Allowed >= n {
		return 0, nil
	}
	return max(res.RetryAfter, time.Millisecond), nil
}

func (m *ModelLimits) Pause(ctx context.Context, until time.Time) error {
	d := time.Until(until)
	if d <= 0 {
		return nil
	}
	if err := pauseScript.Run(ctx, m.client, []string{m.prefix + ":pause"}, until.UnixMilli(), d.Milliseconds()+1).Err(); err != nil {
		return fmt.Errorf("redis model pause: %w", err)
	}
	return nil
}

func (m *ModelLimits) PausedUntil(ctx context.Context) (time.Time, error) {
	v, err := m.client.Get(ctx, m.prefix+":pause").Result()
	if err == goredis.Nil {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("redis model pause: %w", err)
	}
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("redis model pause %q: %w", v, err)
	}
	return time.UnixMilli(ms), nil
}
