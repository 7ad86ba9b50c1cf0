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

// The pairing scripts take KEYS = codes, subjects, expiry (Store.pairKeys)
// and ARGV[1] = now (Unix ms). Each first drops the requests that expired
// by now, from all three keys.
const pairSweep = `
local now = tonumber(ARGV[1])
local dead = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now)
for _, code in ipairs(dead) do
	local v = redis.call('HGET', KEYS[1], code)
	if v then
		local subject = cjson.decode(v).subject
		if redis.call('HGET', KEYS[2], subject) == code then
			redis.call('HDEL', KEYS[2], subject)
		end
		redis.call('HDEL', KEYS[1], code)
	end
end
if #dead > 0 then
	redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
end
`

// pairScript records a request unless its subject has one.
//
// ARGV: now, subject, code, request JSON, expiry (Unix ms), ttl (ms from
// now to the expiry, measured by the caller's clock, so that the keys'
// TTL does not depend on the two clocks agreeing). Returns {1, JSON} for a
// new request, {0, JSON of the stored one} if the subject has one, {2, ""}
// if the code belongs to another subject's request.
var pairScript = goredis.NewScript(pairSweep + `
local existing = redis.call('HGET', KEYS[2], ARGV[2])
if existing then
	local v = redis.call('HGET', KEYS[1], existing)
	if v then
		return {0, v}
	end
end
if redis.call('HEXISTS', KEYS[1], ARGV[3]) == 1 then
	return {2, ''}
end
redis.call('HSET', KEYS[1], ARGV[3], ARGV[4])
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
redis.call('ZADD', KEYS[3], ARGV[5], ARGV[3])
local ttl = tonumber(ARGV[6])
for i = 1, 3 do
	local cur = redis.call('PTTL', KEYS[i])
	if cur >= 0 and cur < ttl or cur == -1 then
		redis.call('PEXPIRE', KEYS[i], ttl)
	end
end
return {1, ARGV[4]}
`)

// takePairingScript removes the request with a code and returns it.
//
// ARGV: now, code. Returns the request's JSON, or false (nil) if there is
// none or it expired.
var takePairingScript = goredis.NewScript(pairSweep + `
local v = redis.call('HGET', KEYS[1], ARGV[2])
if not v then
	return false
end
local subject = cjson.decode(v).subject
if redis.call('HGET', KEYS[2], subject) == ARGV[2] then
	redis.call('HDEL', KEYS[2], subject)
end
redis.call('HDEL', KEYS[1], ARGV[2])
redis.call('ZREM', KEYS[3], ARGV[2])
return v
`)

// putApprovalScript stores a new approval.
//
// KEYS: approval. ARGV: request JSON, ttl. Returns 1 if stored, 0 if an
// approval with that ID exists.
var putApprovalScript = goredis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then
	return 0
end
redis.call('HSET', KEYS[1], 'state', 'pending', 'json', ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
`)

// decideApprovalScript decides a pending approval: a compare-and-set on
// its state, which is a field of its own so that the script compares
// strings instead of decoding JSON. The key keeps its TTL.
//
// KEYS: approval. ARGV: new state, decision JSON. Returns false (nil) if
// there is no such approval, else {1 if this call decided it else 0,
// request JSON, decision JSON}.
var decideApprovalScript = goredis.NewScript(`
local state = redis.call('HGET', KEYS[1], 'state')
if not state then
	return false
end
if state == 'pending' then
	redis.call('HSET', KEYS[1], 'state', ARGV[1], 'decision', ARGV[2])
	return {1, redis.call('HGET', KEYS[1], 'json'), ARGV[2]}
end
return {0, redis.call('HGET', KEYS[1], 'json'), redis.call('HGET', KEYS[1], 'decision') or ''}
`)
