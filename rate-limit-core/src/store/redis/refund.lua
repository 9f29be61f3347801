-- rate-limit: give back what an earlier slot group of a chain charged, when a later
-- group refused (Redis Cluster only: a chain's keys in different slots).
--
-- KEYS     per check, its key: for a fixed window, the key of the window the charge was
--          made in (an integer); for a sliding window that key and the next window's (each
--          a hash: `c` its count, `p` the previous window's as copied when it was made);
--          for a sliding log, its sorted set (chain.lua: an entry `t:c` per charge, `#` the
--          sum, negated)
-- ARGV[1]  the server time (us) at which the charge was made
-- ARGV[2 + 4(i-1) ..]  per check: algorithm, quota or capacity, window or interval, cost
-- Keeps each key's TTL. Returns the number of keys changed.

local function idiv(a, b)
  local q = math.floor(a / b)
  if q * b > a then q = q - 1 elseif (q + 1) * b <= a then q = q + 1 end
  return q
end

local function numbers(raw)
  local st = {}
  for token in string.gmatch(raw, '%S+') do st[#st + 1] = tonumber(token) end
  return st
end

local function encode(st)
  local parts = {}
  for j, v in ipairs(st) do parts[j] = string.format('%.0f', v) end
  return table.concat(parts, ' ')
end

-- A sliding window's hash field, never below zero (a key or field that is not there, or
-- not a count, is left alone).
local function take(key, field, cost)
  local n = tonumber(redis.pcall('HGET', key, field))
  if n and n % 1 == 0 then
    redis.call('HSET', key, field, string.format('%d', math.max(n - cost, 0)))
    return 1
  end
  return 0
end

local at = tonumber(ARGV[1])

-- A sliding log's entries charged at `at`, less `cost` units (an entry left with none goes),
-- and its sum with them; a key that is not such a set, or has no such entry, is left alone.
local function log_take(key, cost)
  local sum = redis.pcall('ZSCORE', key, '#')
  if type(sum) ~= 'string' then return 0 end
  local t = string.format('%d', at)
  local taken = 0
  for _, member in ipairs(redis.call('ZRANGE', key, t, t, 'BYSCORE')) do
    local c = tonumber(string.match(member, ':(%d+)$'))
    if c and taken < cost then
      local take = math.min(c, cost - taken)
      taken = taken + take
      redis.call('ZREM', key, member)
      local left = c - take
      -- An entry of what stays (one already so named: the two as one).
      while left > 0 do
        local m = string.format('%s:%d', t, left)
        if redis.call('ZADD', key, 'NX', t, m) == 1 then break end
        redis.call('ZREM', key, m)
        left = left * 2
      end
    end
  end
  if taken == 0 then return 0 end
  redis.call('ZADD', key, 'XX', string.format('%d', math.min(tonumber(sum) + taken, 0)), '#')
  return 1
end

local changed, k = 0, 0
for i = 1, (#ARGV - 1) / 4 do
  local base = 1 + (i - 1) * 4
  local algo, p2, cost = tonumber(ARGV[base + 1]), tonumber(ARGV[base + 3]), tonumber(ARGV[base + 4])
  k = k + 1
  local key = KEYS[k]
  local raw = (algo == 1 or algo == 4) and redis.pcall('GET', key)
  local n = tonumber(raw)
  if algo == 2 then
    -- The count of the window charged, and the copy of it the next window's key holds.
    k = k + 1
    if cost > 0 then changed = changed + take(key, 'c', cost) + take(KEYS[k], 'p', cost) end
  elseif algo == 1 and n and n % 1 == 0 and cost > 0 then
    -- The window's count, never below zero; its TTL kept.
    redis.call('SET', key, string.format('%d', math.max(n - cost, 0)), 'KEEPTTL')
    changed = changed + 1
  elseif algo == 3 and cost > 0 then
    changed = changed + log_take(key, cost)
  elseif type(raw) == 'string' and cost > 0 and algo == 4 then
    local st = numbers(raw)
    st[1] = math.max(st[1] - cost * p2, 0)
    redis.call('SET', key, encode(st), 'KEEPTTL')
    changed = changed + 1
  end
end
return changed
