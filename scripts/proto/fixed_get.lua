-- A prototype, measured by scripts/script-cost.sh (proto): one fixed window in a key of
-- its own per window (an integer), Redis's clock picking among the keys the instance
-- declared. KEYS[i] is window ARGV[1] + i - 1; ARGV[2] the window (us), ARGV[3] the quota,
-- ARGV[4] the cost, ARGV[5] the TTL slack (ms). Reads, then charges only what fits.
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local w = tonumber(ARGV[2])
local win = (now - now % w) / w
local key = KEYS[win - tonumber(ARGV[1]) + 1]
if not key then return {-1, win} end
local q, cost = tonumber(ARGV[3]), tonumber(ARGV[4])
local count = tonumber(redis.call('GET', key) or 0)
local ending = (win + 1) * w
if count + cost > q then return {1, count, ending - now} end
local after = redis.call('INCRBY', key, cost)
if after == cost then
  redis.call('PEXPIREAT', key, (ending - ending % 1000) / 1000 + tonumber(ARGV[5]))
end
return {0, after, ending - now}
