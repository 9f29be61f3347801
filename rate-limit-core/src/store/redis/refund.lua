-- rate-limit: give back what an earlier slot group of a chain charged, when a later
-- group refused (Redis Cluster only: a chain's keys in different slots).
--
-- KEYS     per check, its key: for a fixed window, the key of the window the charge was
--          made in (an integer); for a sliding window that key and the next window's (each
--          a hash: `c` its count, `p` the previous window's as copied when it was made);
--          for a sliding log, its sorted set (log.lua, which script.rs puts first); for a
--          calendar quota (6), the key of the period the charge was made in (an integer)
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

local changed, k = 0, 0
local LIB   -- log.lua's functions, made at the first log (`take` reads no clock)
for i = 1, (#ARGV - 1) / 4 do
  local base = 1 + (i - 1) * 4
  local algo, p2, cost = tonumber(ARGV[base + 1]), tonumber(ARGV[base + 3]), tonumber(ARGV[base + 4])
  k = k + 1
  local key = KEYS[k]
  local raw = (algo == 1 or algo == 4 or algo == 6) and redis.pcall('GET', key)
  local n = tonumber(raw)
  if algo == 2 then
    -- The count of the window charged, and the copy of it the next window's key holds.
    k = k + 1
    if cost > 0 then changed = changed + take(key, 'c', cost) + take(KEYS[k], 'p', cost) end
  elseif (algo == 1 or algo == 6) and n and n % 1 == 0 and cost > 0 then
    -- The window's (the period's) count, never below zero; its TTL kept.
    redis.call('SET', key, string.format('%d', math.max(n - cost, 0)), 'KEEPTTL')
    changed = changed + 1
  elseif algo == 3 and cost > 0 then
    if not LIB then LIB = log_lib(at, 0) end
    changed = changed + LIB.take(key, at, cost)
  elseif type(raw) == 'string' and cost > 0 and algo == 4 then
    local st = numbers(raw)
    st[1] = math.max(st[1] - cost * p2, 0)
    redis.call('SET', key, encode(st), 'KEEPTTL')
    changed = changed + 1
  end
end
return changed
