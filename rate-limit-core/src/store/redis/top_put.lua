-- One instance's heavy hitters for one limit: its report (KEYS[2]) with a TTL of ARGV[3]
-- ms, and its name (ARGV[1]) in the limit's set of reporters (KEYS[1]), scored by when
-- the report lapses; reporters lapsed are dropped, and the set itself lapses when no one
-- reports. Redis's clock, so hosts' clocks do not matter.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[3])
redis.call('SET', KEYS[2], ARGV[2], 'PX', ttl)
redis.call('ZADD', KEYS[1], string.format('%d', now + ttl), ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%d', now))
redis.call('PEXPIRE', KEYS[1], ttl)
return 1
