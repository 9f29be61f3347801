-- rate-limit: one AIMD pacer shared by every worker (src/pacer.rs has the same steps, for
-- the memory store; keep the two in step).
--
-- KEYS[1]  the pacer's state: "rate next paused last_decrease cap" (calls/s; times in us;
--          cap: the most the remote side said it allows, 0 when it said nothing; a state
--          of four numbers, from before cap, reads as cap 0)
-- KEYS[2]  the workers that called lately: a sorted set of ids scored by when they lapse (ms)
-- ARGV[1]  1 acquire, 2 a rejection, 3 told (the remote side said what it allows)
-- ARGV[2]  successes reported since this worker's last call (each adds its share of a step)
-- ARGV[3]  for a rejection: the remote side's Retry-After; told: a pause (us; 0: none);
--          acquire: how far ahead a slot may be reserved (us; 0: only now)
-- ARGV[4]  this worker's id;  ARGV[5] how long a worker stays counted (ms)
-- ARGV[6]  how long the state outlives its last call (ms)
-- ARGV[7..9]  initial, min, max rate (millionths of a call per second)
-- ARGV[10] the additive step (millionths of a call per second); ARGV[11] the decrease
--          factor (millionths); ARGV[12] the period (us)
-- ARGV[13] told: the most the remote side allows (millionths of a call per second; 0: not
--          said)
-- Returns {go (1: a slot taken), wait (us: until the slot taken, or until the next free one
-- when none was), the rate (text), workers}

local floor, ceil, min, max = math.floor, math.ceil, math.min, math.max
local E6 = 1000000
local MAX_PAUSE = 3600 * E6      -- a Retry-After beyond an hour is honoured as an hour
local t = redis.call('TIME')
local now = tonumber(t[1]) * E6 + tonumber(t[2])
local op, successes, retry = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local reg, remember = tonumber(ARGV[5]), tonumber(ARGV[6])
local initial, lo, hi = tonumber(ARGV[7]) / E6, tonumber(ARGV[8]) / E6, tonumber(ARGV[9]) / E6
local inc, dec, period = tonumber(ARGV[10]) / E6, tonumber(ARGV[11]) / E6, tonumber(ARGV[12])
local told = (tonumber(ARGV[13]) or 0) / E6

local rate, nxt, paused, last, cap = initial, 0, 0, 0, 0
local raw = redis.call('GET', KEYS[1])
if raw then
  local v = {}
  for token in string.gmatch(raw, '%S+') do v[#v + 1] = tonumber(token) end
  -- Anything else (corrupt, another layout) counts as no state.
  if (#v == 4 or #v == 5) and v[1] and v[2] and v[3] and v[4] and v[1] > 0 then
    rate, nxt, paused, last = v[1], v[2], v[3], v[4]
    if v[5] and v[5] > 0 then cap = v[5] end
  end
end
local top = hi
if cap > 0 then top = max(min(cap, hi), lo) end
-- The interval the last slot taken was spaced by.
local before = max(ceil(E6 / rate), 1)
rate = min(max(rate, lo), top)
-- A corrupt or foreign state never stalls the workers: the next slot and a pause are at
-- most an hour away (the longest reservation too).
nxt = min(nxt, now + MAX_PAUSE)
paused = min(paused, now + MAX_PAUSE)

local now_ms = floor(now / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now_ms)
redis.call('ZADD', KEYS[2], now_ms + reg, ARGV[4])
redis.call('PEXPIRE', KEYS[2], reg)
local workers = redis.call('ZCARD', KEYS[2])

-- A period of successes adds one step: each adds its share at the rate it was made.
for _ = 1, min(successes, 100000) do
  rate = min(rate + inc / max(rate * period / E6, 1), top)
end

local go, wait = 0, 0
if op == 2 then
  -- One overload shows as several rejections: at most one decrease per period.
  if last == 0 or now - last >= period then
    rate = max(rate * dec, lo)
    last = now
  end
  if retry > 0 then paused = max(paused, now + min(retry, MAX_PAUSE)) end
elseif op == 3 then
  if told > 0 then
    cap = min(max(told, lo), hi)
    -- Up to what it allows, unless it refused within the period.
    if last == 0 or now - last >= period then rate = cap else rate = min(rate, cap) end
  end
  if retry > 0 then paused = max(paused, now + min(retry, MAX_PAUSE)) end
end
-- Slots already taken keep their times; the next free one is one interval of the rate now
-- after the last taken (a rate told higher takes effect from the next slot).
if nxt > now then nxt = min(nxt - before + max(ceil(E6 / rate), 1), now + MAX_PAUSE) end
if op == 1 then
  -- The next free slot, taken when it is close enough: callers are served in the order
  -- they asked, each told its own slot.
  local slot = max(now, nxt, paused)
  wait = slot - now
  if wait <= min(retry, MAX_PAUSE) then
    go = 1
    nxt = slot + max(ceil(E6 / rate), 1)
  end
end

local text = string.format('%.17g', rate)
redis.call('SET', KEYS[1],
           string.format('%s %.0f %.0f %.0f %.17g', text, nxt, paused, last, cap),
           'PX', remember)
return {go, wait, text, workers}
