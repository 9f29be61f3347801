-- rate-limit: check one or more chains of limits, each atomically and all-or-nothing on
-- its own, in one call. A line-for-line port of rate-limit-core's algorithms
-- (src/algorithm/*.rs); keep the two in step. window.lua answers the common shape faster.
-- This file and chain_run.lua are one script (script.rs joins them).
--
-- KEYS     per check, chain after chain (on a Cluster: one chain, one slot): a fixed
--          window's two keys (the windows of T' = T - window / 4 and the next), a sliding
--          window's three (also the one before T'), a calendar quota's two (the periods
--          of T less a quarter period and the next: periods.rs), any other check's one
-- ARGV[1]  every number, as little-endian doubles in one string (script.rs: why): TTL
--          slack (ms), the number of chains, T (the instance's estimate of the server's
--          time, us, which named the windows' keys: TIME picks among them); per chain:
--          mode (0 in order, all or nothing; 1 charge every limit; 2 overdraw; 3 count
--          attempts: charge in order up to and including the first refusal), n, then per
--          check: algorithm (1 fixed, 2 sliding, 3 log, 4 bucket) + 16 × the units a
--          lease asks for beyond the cost (mode 0 only), quota or capacity, window or
--          emission interval (us), cost; or for a ban: 5 + 16 × the refusals one refusal
--          counts, after, within (us), the ban (us); or for a calendar quota: 6 + 16 × (a +
--          2^22 × b), a and b the two periods' lengths (s), quota, their boundary (us), cost
-- Returns  now (us), chains, then per chain 0, n and per evaluated check: outcome (0
--          allowed, 1 denied, 2 never fits; allowed with a lease: 4 × units granted),
--          limit, remaining, reset, retry, window (us); or 1, 0 for a chain that failed,
--          2, 0 for one whose window no key named (neither charged), as doubles
--
-- Chains see each other's charges in order; each key is read once (MGET) and written once
-- per call. No `#!lua` line (Redis 6.2 cannot compile one); without it Redis still refuses
-- the first write at the memory cap before anything is written, and this script reads
-- everything, then writes. Costs arrive capped at 2^52: every number stays below 2^53.

local floor, min, max, ceil = math.floor, math.min, math.max, math.ceil
local tonumber = tonumber
local unpack = table.unpack or unpack   -- Lua 5.4 (Dragonfly) or 5.1 (Redis, Valkey)
local IFFITS, ALWAYS, OVERDRAW = 0, 1, 2
local MIN_RETRY = 1000

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
-- The arguments, 200 at a time (`unpack`'s results must fit Lua's C stack).
local A, blob, byte = {}, ARGV[1], 1
local total = #blob / 8
if total % 1 ~= 0 or total < 3 then error('chain.lua: the arguments are not doubles') end
for from = 1, total, 200 do
  local n = min(200, total - from + 1)
  local got = {struct.unpack('<' .. string.rep('d', n), blob, byte)}
  for j = 1, n do A[from + j - 1] = got[j] end
  byte = got[n + 1]
end
local slack, T = A[1], A[3]
local out = {now, A[2]}

-- Whole-number division below 2^53: `%` (an opcode, where `floor` is a C call), corrected.
local function idiv(a, b)
  local q = (a - a % b) / b
  if q * b > a then q = q - 1 elseif (q + 1) * b <= a then q = q + 1 end
  return q
end

local function applies(charge, fits, cost, quota)
  if cost <= 0 then return false end
  return (charge == IFFITS and fits) or (charge == ALWAYS and cost <= quota) or charge == OVERDRAW
end

-- Writes a decision's six numbers at out[at + 1 .. at + 6].
local function verdict(at, charge, fits, cost, quota, remaining, reset, window, retry)
  local o = 0
  if cost > quota and charge ~= OVERDRAW then o, retry = 2, 0
  elseif fits then retry = 0
  else
    o = 1
    if retry < MIN_RETRY then retry = MIN_RETRY end
    if reset < retry then reset = retry end
  end
  out[at + 1], out[at + 2], out[at + 3] = o, quota, remaining
  out[at + 4], out[at + 5], out[at + 6] = reset, retry, window
  return o
end

-- Each algorithm: writes its decision at `at`, returns the outcome and, when it charged,
-- the new state and when it expires. A window's state is its window's (`windows`).
-- A count in a window or period `len` long that ends in `ending` us: the outcome, and the
-- count after the check when it charged.
local function counted(at, q, len, ending, count, cost, charge)
  local fits = cost <= q and count + cost <= q
  local charged = applies(charge, fits, cost, q)
  local after = count
  if charged then
    after = count + cost
    if after > q * 2 then after = q * 2 end
  end
  local reset, left = 0, q - after
  if after > 0 then reset = ending end
  if left < 0 then left = 0 end
  local o = verdict(at, charge, fits, cost, q, left, reset, len, ending)
  if charged then return o, after end
  return o
end

local function fixed(at, q, w, st, cost, charge)
  local o, after = counted(at, q, w, (st[1] + 1) * w - now, st[2], cost, charge)
  if after then return o, {st[1], after}, (st[1] + 1) * w end
  return o
end

-- A calendar quota's period: `st` is {its end, its count, its length} (load: which period).
local function period(at, q, _, st, cost, charge)
  local o, after = counted(at, q, st[3], st[1] - now, st[2], cost, charge)
  if after then return o, {st[1], after, st[3]}, st[1] end
  return o
end

local function sliding(at, q, w, st, cost, charge)
  local window, cap = st[1], q * 2
  local curr, prev = min(st[2], cap), min(st[3], cap)
  local e = now - window * w
  local fits = cost <= q and curr + cost <= q and prev * (w - e) <= (q - curr - cost) * w
  local charged = applies(charge, fits, cost, q)
  local after = curr
  if charged then after = min(curr + cost, cap) end
  local x = prev * (w - e)
  local weighted = idiv(x, w)
  if x - weighted * w ~= 0 then weighted = weighted + 1 end
  local remaining = max(max(q - after, 0) - weighted, 0)
  local reset = 0
  if after > 0 then reset = (window + 2) * w - now
  elseif prev > 0 then reset = (window + 1) * w - now end
  local retry = 0
  if not fits and cost <= q then
    local room = q - cost
    if curr <= room and prev > 0 then
      local m = min(idiv((room - curr) * w, prev), w)
      retry = max((w - m) - e, 0)
    else
      local m = min(idiv(room * w, max(curr, 1)), w)
      retry = (w - e) + (w - m)
    end
  end
  local o = verdict(at, charge, fits, cost, q, remaining, reset, w, retry)
  if charged then return o, {window, after, prev}, (window + 2) * w end
  return o
end

local function bucket(at, capacity, interval, st, cost, charge)
  local span = capacity * interval
  local full_at = now + span
  local limit_at = now + span * 2
  local start = now
  if type(st) == 'number' and st > now then start = min(st, limit_at) end
  local new_tat = start + cost * interval
  local fits = cost <= capacity and new_tat <= full_at
  local charged = applies(charge, fits, cost, capacity)
  local after = start
  if charged then after = min(new_tat, limit_at) end
  local remaining = idiv(max(full_at - after, 0), interval)
  local o = verdict(at, charge, fits, cost, capacity, remaining, after - now, span,
                    max(new_tat - full_at, 0))
  if charged then return o, after, after end
  return o
end

-- A sliding log (log.lua: its sorted set and functions, `LIB` once the call's first log
-- is loaded). `st`: {used, units charged by this call, key, quota}.
local find, sub, format = string.find, string.sub, string.format
local LIB
local function log(at, q, w, st, cost, charge)
  local used, added, key = st[1], st[2], st[3]
  local fits = cost <= q and used + cost <= q
  local charged = applies(charge, fits, cost, q)
  local retry = 0
  if not fits and cost <= q and used > 0 then retry = LIB.retry(key, q, w, used, added, cost) end
  local after, reset = used, 0
  if charged then
    after, reset = used + cost, w
  elseif added > 0 then
    reset = w
  elseif used > 0 then
    local t = LIB.newest(key, w)
    if t then reset = t + w - now end
  end
  local o = verdict(at, charge, fits, cost, q, max(q - after, 0), reset, w, retry)
  if charged then return o, {after, added + cost, key, q}, now + w end
  return o
end

local steps = {fixed, sliding, log, bucket, false, period}

-- A ban (src/algorithm/ban.rs): its state is `until` (µs), then (timestamp, count) per
-- refusal counted; `after` refusals within `within` ban for `ban` µs.
local function ban_state(st)
  if type(st) == 'number' then return st, {} end
  local ev = {}
  if type(st) == 'table' and #st % 2 == 1 then
    for j = 2, #st, 2 do ev[#ev + 1] = {min(st[j], now), st[j + 1]} end
    return st[1], ev
  end
  return 0, ev
end

local function ban_gate(at, after, within, ban, st)
  local till, ev = ban_state(st)
  till = min(till, now + ban)   -- never longer than the ban (a corrupt or foreign state)
  if till > now then
    local left = till - now
    out[at + 1], out[at + 2], out[at + 3] = 1, after, 0
    out[at + 4], out[at + 5], out[at + 6] = max(left, MIN_RETRY), max(left, MIN_RETRY), ban
    return 1
  end
  local counted, last = 0, nil
  for _, e in ipairs(ev) do
    if e[1] + within > now then counted = counted + e[2]; last = e[1] end
  end
  local reset = 0
  if last then reset = last + within - now end
  out[at + 1], out[at + 2], out[at + 3] = 0, after, max(after - counted, 0)
  out[at + 4], out[at + 5], out[at + 6] = reset, 0, within
  return 0
end

-- Counts n refusals: the new state and when it expires, or nil while banned.
local function ban_count(after, within, ban, st, n)
  local till, ev = ban_state(st)
  till = min(till, now + ban)
  if till > now or n <= 0 then return nil end
  local live, counted = {}, 0
  for _, e in ipairs(ev) do
    if e[1] + within > now then live[#live + 1] = e; counted = counted + e[2] end
  end
  local last = live[#live]
  if last and last[1] == now then last[2] = last[2] + n else live[#live + 1] = {now, n} end
  counted = counted + n
  if counted >= after then return now + ban, now + ban end
  local flat = {till}
  for _, e in ipairs(live) do flat[#flat + 1] = e[1]; flat[#flat + 1] = e[2] end
  return flat, max(now + within, till)
end
