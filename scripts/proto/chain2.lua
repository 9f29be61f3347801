-- A prototype, measured by scripts/script-cost.sh (protochain FILE): a chain of two fixed
-- windows (a user, then an address), all or nothing, each in a key per window. KEYS[1],
-- KEYS[2]: the user's window ARGV[1] and the next; KEYS[3], KEYS[4]: the address's;
-- ARGV[2] the window (us), ARGV[3] the TTL slack (ms), ARGV[4], ARGV[5] the quotas, ARGV[6]
-- the cost. Charges both, and takes both back when either does not fit.
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local w = tonumber(ARGV[2])
local win = (now - now % w) / w
local off = win - tonumber(ARGV[1])
if off < 0 or off > 1 then return {-1, win} end
local ending = (win + 1) * w
local cost = tonumber(ARGV[6])
local a, b = KEYS[1 + off], KEYS[3 + off]
local na = redis.call('INCRBY', a, cost)
local nb = redis.call('INCRBY', b, cost)
if na > tonumber(ARGV[4]) or nb > tonumber(ARGV[5]) then
  redis.call('DECRBY', a, cost)
  redis.call('DECRBY', b, cost)
  return {1, na - cost, nb - cost, ending - now}
end
local expire = (ending - ending % 1000) / 1000 + tonumber(ARGV[3])
if na == cost then redis.call('PEXPIREAT', a, expire) end
if nb == cost then redis.call('PEXPIREAT', b, expire) end
return {0, na, nb, ending - now}
