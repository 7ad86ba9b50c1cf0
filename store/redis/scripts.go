package redis

import goredis "github.com/redis/go-redis/v9"

// Every step that touches more than one key is one of these scripts: Redis
// runs a script atomically, and it costs one round trip. Script.Run sends
// EVALSHA and falls back to EVAL when the server has not cached the script
// (after a restart or failover), which costs one extra round trip once.
//
// The session scripts take KEYS = lease, mailbox, history (Store.sessionKeys).
// Times are in milliseconds.

// enqueueScript appends a message unless its ID was seen in its chat.
//
// KEYS: dedup, mailbox, history. ARGV: dedup ttl, Inbound JSON, idle ttl.
// Returns 1 if appended, 0 for a duplicate.
var enqueueScript = goredis.NewScript(`
if not redis.call('SET', KEYS[1], '1', 'NX', 'PX', ARGV[1]) then
	return 0
end
redis.call('RPUSH', KEYS[2], ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
redis.call('PEXPIRE', KEYS[3], ARGV[3])
return 1
`)

// claimScript takes or extends the lease and reads the session.
//
// ARGV: owner, ttl. Returns false (nil) if another owner holds the lease,
// else {mailbox, history}.
var claimScript = goredis.NewScript(`
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then
	return false
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return {redis.call('LRANGE', KEYS[2], 0, -1), redis.call('LRANGE', KEYS[3], 0, -1)}
`)

// renewScript extends the lease if owner holds it.
//
// KEYS: lease. ARGV: owner, ttl. Returns 1 if renewed, 0 if not held.
var renewScript = goredis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
	return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
`)

// commitScript ends a turn: consumes mailbox entries, appends the turn as
// one list element, trims the history to whole turns and refreshes the
// session's idle TTL.
//
// ARGV: owner, consumed, turn JSON (empty for none), -max turns, idle ttl.
// Returns 1 if committed, 0 if owner does not hold the lease.
var commitScript = goredis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
	return 0
end
if ARGV[2] ~= '0' then
	redis.call('LTRIM', KEYS[2], ARGV[2], -1)
end
if ARGV[3] ~= '' then
	redis.call('RPUSH', KEYS[3], ARGV[3])
	redis.call('LTRIM', KEYS[3], ARGV[4], -1)
end
redis.call('PEXPIRE', KEYS[2], ARGV[5])
redis.call('PEXPIRE', KEYS[3], ARGV[5])
return 1
`)

// releaseScript drops the lease unless messages are waiting.
//
// ARGV: owner. Returns -1 if owner does not hold the lease, else the number
// of pending messages (the lease is kept when it is not 0).
var releaseScript = goredis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
	return -1
end
local n = redis.call('LLEN', KEYS[2])
if n == 0 then
	redis.call('DEL', KEYS[1])
end
return n
`)

// setSettingsScript writes a channel's settings if the version matches.
// The version is a hash field of its own so the script compares two strings
// instead of decoding JSON.
//
// KEYS: settings. ARGV: expected version, new version, settings JSON.
// Returns 1 if written, 0 on a version conflict.
var setSettingsScript = goredis.NewScript(`
if (redis.call('HGET', KEYS[1], 'version') or '0') ~= ARGV[1] then
	return 0
end
redis.call('HSET', KEYS[1], 'version', ARGV[2], 'json', ARGV[3])
return 1
`)

// abandonScript drops the lease if owner holds it, whatever the mailbox
// holds.
//
// KEYS: lease. ARGV: owner. Returns 1 if dropped, 0 if owner did not hold
// it (a script must return something: nil reads as an error in go-redis).
var abandonScript = goredis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
	return redis.call('DEL', KEYS[1])
end
return 0
`)
