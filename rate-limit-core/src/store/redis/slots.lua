-- rate-limit: in-flight slots, leased. One sorted set per principal and limit: members
-- are slot ids, scores the end of their lease (ms, Redis's clock).
--
-- KEYS[1]  the slot set
-- ARGV[1]  1 take, 2 renew, 3 release
-- ARGV[2]  the slot id
-- ARGV[3]  the most in flight
-- ARGV[4]  the lease (ms)
-- take:    {1, in use} or {0, in use, ms until the earliest lease ends}
-- renew:   1, or 0 when the slot is gone (ran out, or released)
-- release: the number of slots removed (0 or 1: never released twice)

local op, id = tonumber(ARGV[1]), ARGV[2]
if op == 3 then
  return redis.call('ZREM', KEYS[1], id)
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[4])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if op == 2 then
  if not redis.call('ZSCORE', KEYS[1], id) then return 0 end
  redis.call('ZADD', KEYS[1], now + ttl, id)
  redis.call('PEXPIRE', KEYS[1], ttl)
  return 1
end
local n = redis.call('ZCARD', KEYS[1])
if n < tonumber(ARGV[3]) then
  redis.call('ZADD', KEYS[1], now + ttl, id)
  -- Every lease ends by now + ttl: the set ends with the last of them.
  redis.call('PEXPIRE', KEYS[1], ttl)
  return {1, n + 1}
end
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return {0, n, math.max(tonumber(first[2]) - now, 0)}
