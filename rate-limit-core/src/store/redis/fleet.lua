-- The fleet's runtime state: one hash (KEYS[1]) whose field "#v" is its version. One change:
-- the version goes up by one and the entry is set (ARGV[1] "set", ARGV[3] the value),
-- removed (ARGV[1] "del"), or left as it is (ARGV[1] "event": a ban lifted, which the
-- store already holds), in one step, so every reader sees changes in version order. The
-- new version is published on the channel ARGV[4], with the event ARGV[5] when there is
-- one, so subscribers read the state now rather than at their next period.
--
-- ARGV[6] is the version the changing instance applied: a hash older than that lost
-- changes (a restart without persistence, a failover to a replica that never had them),
-- and a change on top of it would hide them. Answers -1 then, changing nothing (the
-- instance restores the state first); else the new version.
local cur = tonumber(redis.call('HGET', KEYS[1], '#v') or '0')
if cur < tonumber(ARGV[6]) then
  return -1
end
local v = redis.call('HINCRBY', KEYS[1], '#v', 1)
if ARGV[1] == 'set' then
  redis.call('HSET', KEYS[1], ARGV[2], ARGV[3])
elseif ARGV[1] == 'del' then
  redis.call('HDEL', KEYS[1], ARGV[2])
end
local message = string.format('%d', v)
if ARGV[5] ~= '' then
  message = message .. ' ' .. ARGV[5]
end
redis.call('PUBLISH', ARGV[4], message)
return v
