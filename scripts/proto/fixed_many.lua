-- A prototype, measured by scripts/script-cost.sh (protomany FILE CHAINS): CHAINS
-- one-check fixed windows a call, each in a key per window (an integer), one TIME for all.
-- KEYS[2i-1], KEYS[2i]: chain i's window ARGV[1] and the next; ARGV[2] the window (us),
-- ARGV[3] the TTL slack (ms), then per chain its quota and cost. Charges first, takes a
-- refusal back. Answers per chain the count after (negative: refused, the count before).
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local w = tonumber(ARGV[2])
local win = (now - now % w) / w
local off = win - tonumber(ARGV[1])
if off < 0 or off > 1 then return {-1, win} end
local ending = (win + 1) * w
local expire = (ending - ending % 1000) / 1000 + tonumber(ARGV[3])
local out = {}
for i = 1, #KEYS / 2 do
  local key = KEYS[2 * i - 1 + off]
  local q, cost = tonumber(ARGV[2 + 2 * i]), tonumber(ARGV[3 + 2 * i])
  local after = redis.call('INCRBY', key, cost)
  if after > q then
    redis.call('DECRBY', key, cost)
    out[i] = cost - after
  else
    if after == cost then redis.call('PEXPIREAT', key, expire) end
    out[i] = after
  end
end
out[#out + 1] = ending - now
return out
