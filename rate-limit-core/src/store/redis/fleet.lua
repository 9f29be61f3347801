-- The fleet's runtime state: one hash (KEYS[1]) whose field "#v" is its version. One change:
-- the version goes up by one and the entry is set (ARGV[1] "set", ARGV[3] the value) or
-- removed (ARGV[1] "del"), in one step, so every reader sees changes in version order.
-- Answers the new version.
local v = redis.call('HINCRBY', KEYS[1], '#v', 1)
if ARGV[1] == 'set' then
  redis.call('HSET', KEYS[1], ARGV[2], ARGV[3])
else
  redis.call('HDEL', KEYS[1], ARGV[2])
end
return v
