package redis

import goredis "github.com/redis/go-redis/v9"

// Every step that touches more than one key is one of these scripts: Redis
// runs a script atomically, and it costs one round trip. Script.Run sends
// EVALSHA and falls back to EVAL when the server has not cached the script
// (after a restart or failover), which costs one extra round trip once.
//
// The session scripts take KEYS = lease, mailbox, history, outbox, claimed
// (Store.sessionKeys). Times are in milliseconds.

// luaLess compares two strings byte by byte, as Go does. Lua's '<' calls
// strcoll, and Redis sets LC_COLLATE from its environment, so under a
// locale such as en_US.UTF-8 it would skip punctuation ('.' in a Slack ts)
// and disagree with store/local.
const luaLess = `
local function less(a, b)
	local n = math.min(#a, #b)
	for i = 1, n do
		local x, y = string.byte(a, i), string.byte(b, i)
		if x ~= y then
			return x < y
		end
	end
	return #a < #b
end
`

// enqueueScript adds a message to the mailbox unless its ID was seen in
// its chat, in the platform's order: after every entry whose seq is not
// greater (an empty seq is greater than any other), and never before the
// entries the lease holder claimed. Comparing with the last entry first
// keeps the usual case, a message newer than the rest, O(1); an earlier
// one moves the entries it goes before (RPOP then RPUSH), which are few.
//
// KEYS: dedup, mailbox, history, outbox, lease, claimed. ARGV: dedup ttl,
// Inbound JSON, idle ttl, seq. Returns 1 if added, 0 for a duplicate.
var enqueueScript = goredis.NewScript(luaLess + `
local function seqOf(entry)
	local ok, v = pcall(cjson.decode, entry)
	if ok and type(v) == 'table' and type(v.seq) == 'string' then
		return v.seq
	end
	return ''
end
-- goesAfter reports whether an entry with seq s stays after the new one.
local function goesAfter(s, seq)
	return s == '' or less(seq, s)
end

if not redis.call('SET', KEYS[1], '1', 'NX', 'PX', ARGV[1]) then
	return 0
end
local seq = ARGV[4]
local n = redis.call('LLEN', KEYS[2])
local moved = {}
if seq ~= '' and n > 0 and goesAfter(seqOf(redis.call('LINDEX', KEYS[2], -1)), seq) then
	local floor = 0
	if redis.call('EXISTS', KEYS[5]) == 1 then
		floor = math.min(tonumber(redis.call('GET', KEYS[6]) or '0') or 0, n)
	end
	-- Entries floor..n-1 may move; find how many go after the new one.
	local k = 1
	-- Negative indexes: the walk starts at the tail.
	while n - k > floor and goesAfter(seqOf(redis.call('LINDEX', KEYS[2], -k - 1)), seq) do
		k = k + 1
	end
	if n - k >= floor then
		moved = redis.call('RPOP', KEYS[2], k)
	end
end
redis.call('RPUSH', KEYS[2], ARGV[2])
-- RPOP returned the last entry first.
for i = #moved, 1, -1 do
	redis.call('RPUSH', KEYS[2], moved[i])
end
redis.call('PEXPIRE', KEYS[2], ARGV[3])
redis.call('PEXPIRE', KEYS[3], ARGV[3])
redis.call('PEXPIRE', KEYS[4], ARGV[3])
return 1
`)

// ownerBoot is Lua for agent.Owner's format: earlier(holder, owner)
// reports whether holder is an earlier boot of owner's replica, both
// written "REPLICA#BOOT" with BOOT in decimal digits. Boots compare as
// numbers of any length (leading zeros ignored), as store/local does.
const ownerBoot = luaLess + `
local function boot(o)
	local r, b = string.match(o, '^(.+)#(%d+)$')
	if r then
		return r, (string.gsub(b, '^0+', ''))
	end
end
local function earlier(holder, owner)
	local hr, hb = boot(holder)
	local r, b = boot(owner)
	if not hr or not r or hr ~= r then
		return false
	end
	if #hb ~= #b then
		return #hb < #b
	end
	return less(hb, b)
end
`

// claimScript takes or extends the lease, records how many mailbox
// entries it hands out, and reads the session. An owner also takes the
// lease from an earlier boot of its own replica.
//
// KEYS: the session's (sessionKeys), then the channel's settings. ARGV:
// owner, ttl. Returns false (nil) if another owner holds the lease, else
// {mailbox, history, outbox, settings JSON or false}.
var claimScript = goredis.NewScript(ownerBoot + `
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] and not earlier(holder, ARGV[1]) then
	return false
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
local mbox = redis.call('LRANGE', KEYS[2], 0, -1)
if #mbox > 0 then
	redis.call('SET', KEYS[5], #mbox, 'PX', ARGV[2])
else
	redis.call('DEL', KEYS[5])
end
return {mbox, redis.call('LRANGE', KEYS[3], 0, -1), redis.call('LRANGE', KEYS[4], 0, -1), redis.call('HGET', KEYS[7], 'json')}
`)

// renewScript extends the lease, and the claimed count with it, if owner
// holds it.
//
// KEYS: lease, claimed. ARGV: owner, ttl. Returns 1 if renewed, 0 if not
// held.
var renewScript = goredis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
	redis.call('PEXPIRE', KEYS[2], ARGV[2])
	return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
`)

// commitScript ends a turn: consumes mailbox entries (and as many of the
// claimed count), appends the turn as one list element, trims the history
// to whole turns, adds the outbox entry and refreshes the session's idle
// TTL, and adds the tokens the turn spent to its channel's count.
//
// KEYS: the session's (sessionKeys), then the channel's usage count for
// the day. ARGV: owner, consumed, turn JSON (empty for none), -max turns,
// idle ttl, Outbound JSON (empty for none), commit ID (empty for none),
// tokens spent, the usage count's ttl. Returns 1 if
// committed, 0 if owner does not hold the lease. A commit whose ID is the
// session's last committed one was applied already (its reply was lost and
// it was sent again): it returns 1 and changes nothing.
var commitScript = goredis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
	return 0
end
if ARGV[7] ~= '' then
	if redis.call('GET', KEYS[6]) == ARGV[7] then
		return 1
	end
	redis.call('SET', KEYS[6], ARGV[7], 'PX', ARGV[5])
end
if tonumber(ARGV[8]) > 0 then
	redis.call('INCRBY', KEYS[7], ARGV[8])
	redis.call('PEXPIRE', KEYS[7], ARGV[9])
end
local consumed = tonumber(ARGV[2])
if consumed > 0 then
	redis.call('LTRIM', KEYS[2], consumed, -1)
end
local left = (tonumber(redis.call('GET', KEYS[5]) or '0') or 0) - consumed
if left > 0 then
	redis.call('SET', KEYS[5], left, 'KEEPTTL')
else
	redis.call('DEL', KEYS[5])
end
if ARGV[3] ~= '' then
	redis.call('RPUSH', KEYS[3], ARGV[3])
	redis.call('LTRIM', KEYS[3], ARGV[4], -1)
end
if ARGV[6] ~= '' then
	redis.call('RPUSH', KEYS[4], ARGV[6])
end
redis.call('PEXPIRE', KEYS[2], ARGV[5])
redis.call('PEXPIRE', KEYS[3], ARGV[5])
redis.call('PEXPIRE', KEYS[4], ARGV[5])
return 1
`)

// releaseScript removes the outbox entry that was shown, if any (as
// deliveredScript), then forgets the claimed count and drops the lease
// unless messages are waiting.
//
// ARGV: owner, the shown entry's ID (empty for none). Returns -1 if owner does not
// hold the lease, else the number of pending messages (the lease is kept
// when it is not 0).
var releaseScript = goredis.NewScript(`
if ARGV[2] ~= '' then
	for _, e in ipairs(redis.call('LRANGE', KEYS[4], 0, -1)) do
		local ok, v = pcall(cjson.decode, e)
		if ok and type(v) == 'table' and v.id == ARGV[2] then
			redis.call('LREM', KEYS[4], 1, e)
			break
		end
	end
end
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
	return -1
end
redis.call('DEL', KEYS[5])
local n = redis.call('LLEN', KEYS[2])
if n == 0 then
	redis.call('DEL', KEYS[1])
end
return n
`)

// deliveredScript removes the outbox entry with an ID.
//
// KEYS: outbox. ARGV: ID. Returns 1 if removed, 0 if there was none.
var deliveredScript = goredis.NewScript(`
for _, e in ipairs(redis.call('LRANGE', KEYS[1], 0, -1)) do
	local ok, v = pcall(cjson.decode, e)
	if ok and type(v) == 'table' and v.id == ARGV[1] then
		redis.call('LREM', KEYS[1], 1, e)
		return 1
	end
end
return 0
`)

// The ready scripts take KEYS = ready, readyTouch, readySeq
// (Store.readyKeys).

// touchScript puts a session in the ready set (keeping its place if it is
// there) and gives it a new touch number.
//
// ARGV: SessionKey.String. Returns the touch number.
var touchScript = goredis.NewScript(`
local n = redis.call('INCR', KEYS[3])
redis.call('ZADD', KEYS[1], 'NX', n, ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], n)
return n
`)

// readyPageScript reads a page of the ready set, longest waiting first,
// with each member's touch number.
//
// ARGV: first index, last index. Returns {members, touch numbers}; a
// missing touch number is false (nil).
var readyPageScript = goredis.NewScript(`
local m = redis.call('ZRANGE', KEYS[1], ARGV[1], ARGV[2])
if #m == 0 then
	return {{}, {}}
end
return {m, redis.call('HMGET', KEYS[2], unpack(m))}
`)

// sweepScript removes members of the ready set that were found empty,
// each only if it was not touched since (its touch number is the one read
// before the session was looked at).
//
// ARGV: member, touch number ("" if it had none), member, ... Returns how
// many were removed.
var sweepScript = goredis.NewScript(`
local removed = 0
for i = 1, #ARGV, 2 do
	if (redis.call('HGET', KEYS[2], ARGV[i]) or '') == ARGV[i + 1] then
		removed = removed + redis.call('ZREM', KEYS[1], ARGV[i])
		redis.call('HDEL', KEYS[2], ARGV[i])
	end
end
return removed
`)

// tryLeaseScript takes a free named lease or extends owner's.
//
// KEYS: named. ARGV: owner, ttl. Returns 1 if owner holds it, else 0.
var tryLeaseScript = goredis.NewScript(`
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then
	return 0
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
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

// abandonScript drops a lease if owner holds it, whatever the mailbox
// holds, and with it the claimed count of a session's lease. DropLease
// uses it for a named lease, with one key.
//
// KEYS: lease, claimed (optional). ARGV: owner. Returns 1 if dropped, 0 if
// owner did not hold it (a script must return something: nil reads as an
// error in go-redis).
var abandonScript = goredis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
	if KEYS[2] then
		redis.call('DEL', KEYS[2])
	end
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

// countMessageScript counts a message toward its author's count in the
// window, unless it was counted before. PEXPIRE NX gives the count its TTL
// at its first message and keeps it after.
//
// KEYS: msgSeen, msgCount (one slot: the author's). ARGV: the mark's ttl,
// the window's length. Returns {the count, 1 if this call counted the
// message else 0}.
var countMessageScript = goredis.NewScript(`
if not redis.call('SET', KEYS[1], '1', 'NX', 'PX', ARGV[1]) then
	return {tonumber(redis.call('GET', KEYS[2]) or '0'), 0}
end
local n = redis.call('INCR', KEYS[2])
redis.call('PEXPIRE', KEYS[2], ARGV[2], 'NX')
return {n, 1}
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

// askStopScript leaves a request that a job stop, if the board holds it.
//
// KEYS: jobs. ARGV: job field, stop field, who asks, keep ttl. Returns 1 if
// the request was left, 0 if there is no such job.
var askStopScript = goredis.NewScript(`
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
	return 0
end
redis.call('HSET', KEYS[1], ARGV[2], ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return 1
`)
