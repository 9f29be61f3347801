-- Puts back the fleet's runtime state (KEYS[1], log KEYS[2]) that an instance applied at
-- version ARGV[1] of epoch ARGV[2], tip ARGV[4], after the store lost it: only onto an
-- empty hash (so of every instance restoring at once the first wins, and a state another
-- instance made since, a change on the empty store, stands). ARGV[5..] are field, value,
-- field, value. Publishes the version on the channel ARGV[3]; answers the hash's
-- {version, epoch, tip} after.
local cur = tonumber(redis.call('HGET', KEYS[1], '#v') or '0')
if cur > 0 then
  return {cur, redis.call('HGET', KEYS[1], '#e') or '0', redis.call('HGET', KEYS[1], '#t') or '0'}
end
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('HSET', KEYS[1], '#v', ARGV[1], '#e', ARGV[2], '#t', ARGV[4])
for i = 5, #ARGV, 2 do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
end
redis.call('PUBLISH', ARGV[3], ARGV[1])
return {tonumber(ARGV[1]), ARGV[2], ARGV[4]}
