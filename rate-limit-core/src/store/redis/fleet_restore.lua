-- Puts back the fleet's runtime state (KEYS[1]) that an instance applied at version
-- ARGV[1], after the store lost it: only when the hash's version is older (so of every
-- instance restoring at once, the one that applied the newest state wins, and a state
-- restored already is left alone). ARGV[3..] are field, value, field, value. Publishes the
-- version on the channel ARGV[2]; answers the hash's version after.
local cur = tonumber(redis.call('HGET', KEYS[1], '#v') or '0')
local v = tonumber(ARGV[1])
if cur >= v then
  return cur
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], '#v', ARGV[1])
for i = 3, #ARGV, 2 do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
end
redis.call('PUBLISH', ARGV[2], ARGV[1])
return v
