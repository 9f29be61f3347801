-- The fleet's runtime state: one hash (KEYS[1]) whose field "#v" is its version, "#e" its
-- epoch (the history it belongs to, made with the state) and "#t" its tip (the last
-- change's stamp), and the log of its latest changes (KEYS[2], a hash from version to
-- "<tip>\n<the change's text>", the last ARGV[8] kept). One change:
-- the version goes up by one, the entry is set (ARGV[1] "set", ARGV[3] the value),
-- removed ("del") or left as it is ("none": a ban lifted, which the store already holds),
-- and the change (ARGV[5], the codec's text) is logged, in one step, so every reader sees
-- changes in version order. The new version is published on the channel ARGV[4].
--
-- ARGV[6] is the version the changing instance applied: on an empty hash (a restart
-- without persistence) with ARGV[6] > 0 the instance holds a state the store lost, and
-- the answer is {-1, '', ''} with nothing changed (it puts its state back first). ARGV[7]
-- is the change's stamp, and the epoch of a state it starts. Answers {version, epoch, tip}.
local cur = tonumber(redis.call('HGET', KEYS[1], '#v') or '0')
if cur == 0 then
  if tonumber(ARGV[6]) > 0 then
    return {-1, '', ''}
  end
  redis.call('DEL', KEYS[2])
  redis.call('HSET', KEYS[1], '#e', ARGV[7])
end
local e = redis.call('HGET', KEYS[1], '#e') or '0'
local v = redis.call('HINCRBY', KEYS[1], '#v', 1)
if ARGV[1] == 'set' then
  redis.call('HSET', KEYS[1], ARGV[2], ARGV[3])
elseif ARGV[1] == 'del' then
  redis.call('HDEL', KEYS[1], ARGV[2])
end
redis.call('HSET', KEYS[1], '#t', ARGV[7])
redis.call('HSET', KEYS[2], string.format('%d', v), ARGV[7] .. '\n' .. ARGV[5])
redis.call('HDEL', KEYS[2], string.format('%d', v - tonumber(ARGV[8])))
redis.call('PUBLISH', ARGV[4], string.format('%d', v))
return {v, e, ARGV[7]}
