-- A prototype, measured by scripts/script-cost.sh (proto): as fixed_get.lua, but charging
-- first (INCRBY) and taking the charge back (DECRBY) when it does not fit: one command
-- fewer for an admission, one more for a refusal.
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local w = tonumber(ARGV[2])
local win = (now - now % w) / w
local key = KEYS[win - tonumber(ARGV[1]) + 1]
if not key then return {-1, win} end
local q, cost = tonumber(ARGV[3]), tonumber(ARGV[4])
local after = redis.call('INCRBY', key, cost)
local ending = (win + 1) * w
if after > q then
  redis.call('DECRBY', key, cost)
  return {1, after - cost, ending - now}
end
if after == cost then
  redis.call('PEXPIREAT', key, (ending - ending % 1000) / 1000 + tonumber(ARGV[5]))
end
return {0, after, ending - now}
