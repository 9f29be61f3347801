-- rate-limit: check one or more chains of limits, each atomically and all-or-nothing on
-- its own, in one call. A line-for-line port of rate-limit-core's algorithms
-- (src/algorithm/*.rs); keep the two in step. window.lua answers the common shape faster.
--
-- KEYS     per check, chain after chain (on a Cluster: one chain, one slot): a fixed
--          window's two keys (the windows of T' = T - window / 4 and the next), a sliding
--          window's three (also the one before T'), any other check's one
-- ARGV[1]  every number, as little-endian doubles in one string (script.rs: why): TTL
--          slack (ms), the number of chains, T (the instance's estimate of the server's
--          time, us, which named the windows' keys: TIME picks among them); per chain:
--          mode (0 in order, all or nothing; 1 charge every limit; 2 overdraw; 3 count
--          attempts: charge in order up to and including the first refusal), n, then per
--          check: algorithm (1 fixed, 2 sliding, 3 log, 4 bucket) + 16 × the units a
--          lease asks for beyond the cost (mode 0 only), quota or capacity, window or
--          emission interval (us), cost; or for a ban: 5 + 16 × the refusals one refusal
--          counts, after, within (us), the ban (us)
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
local function fixed(at, q, w, st, cost, charge)
  local window, count = st[1], st[2]
  local ending = (window + 1) * w - now
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
  local o = verdict(at, charge, fits, cost, q, left, reset, w, ending)
  if charged then return o, {window, after}, (window + 1) * w end
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

local function log(at, q, w, st, cost, charge)
  local entries, used = {}, 0
  if type(st) == 'table' and #st % 2 == 0 then
    for j = 1, #st, 2 do
      local t, c = min(st[j], now), st[j + 1]
      if t + w > now then
        entries[#entries + 1] = {t, c}
        used = used + c
      end
    end
  end
  local fits = cost <= q and used + cost <= q
  local charged = applies(charge, fits, cost, q)
  local retry = 0
  if not fits and cost <= q then
    local left = used
    for _, en in ipairs(entries) do
      left = max(left - en[2], 0)
      if left + cost <= q then retry = en[1] + w - now break end
    end
  end
  local after = used
  if charged then
    after = used + cost
    local last = entries[#entries]
    if last and last[1] == now then last[2] = last[2] + cost
    else entries[#entries + 1] = {now, cost} end
    -- Keep only the entries that can still change a decision.
    local total = after
    while #entries > 0 and total - entries[1][2] > q do
      total = total - entries[1][2]
      table.remove(entries, 1)
    end
  end
  local reset = 0
  if #entries > 0 then reset = entries[#entries][1] + w - now end
  local o = verdict(at, charge, fits, cost, q, max(q - after, 0), reset, w, retry)
  if charged then
    local flat = {}
    for _, en in ipairs(entries) do flat[#flat + 1] = en[1]; flat[#flat + 1] = en[2] end
    return o, flat, entries[#entries][1] + w
  end
  return o
end

local steps = {fixed, sliding, log, bucket}

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

-- A log's, a bucket's or a ban's state: numbers as text separated by spaces (one kept as a
-- number, more as a table); anything else counts as no state, which the next write replaces.
local raw = {}
for from = 1, #KEYS, 1000 do     -- MGET in parts: unpack's results must fit Lua's C stack
  local to = min(from + 999, #KEYS)
  local got = redis.call('MGET', unpack(KEYS, from, to))
  for i = from, to do raw[KEYS[i]] = got[i - from + 1] end
end
local state, expiry = {}, {}     -- per key: the state as charged so far (false: none)
local find, sub, format, match = string.find, string.sub, string.format, string.match

local function parse(s)
  local kind = type(s)
  if kind ~= 'string' then
    if kind == 'table' or kind == 'number' then return s end   -- parsed before
    return false
  end
  local space = find(s, ' ', 1, true)
  if not space then
    local v = tonumber(s)
    if v == nil or v < 0 or v % 1 ~= 0 then return false end
    return v
  end
  -- Split at each space with a plain `find` (a pattern costs twice); an empty token (two
  -- spaces, a leading or trailing one) is not a number: no state.
  local st, n, from = {}, 0, 1
  while true do
    local v = tonumber(sub(s, from, (space or 0) - 1))
    if v == nil or v < 0 or v % 1 ~= 0 then return false end
    n = n + 1
    st[n] = v
    if not space then return st end
    from = space + 1
    space = find(s, ' ', from, true)
  end
end

-- Integers as text: `%d` (exact below 2^53) costs about half what `%.0f` does.
local function encode(s)
  if type(s) == 'number' then return format('%d', s) end
  local parts = {}
  for j = 1, #s do parts[j] = format('%d', s[j]) end
  return table.concat(parts, ' ')
end

-- A key's state as the chains so far left it; the first read parses the stored text.
local function current(key)
  local st = state[key]
  if st == nil then
    st = parse(raw[key])
    state[key] = st
  end
  return st
end

local function count(s) local v = parse(s) return type(v) == 'number' and v end -- or false

-- A check's state (its keys start at KEYS[pos]). Windows keep a key per window; the steps
-- see {window, count} or {window, count, previous}, kept under the check's first key's
-- name; `wkey`: the window's key, `wread`: its count as read (false: none), `wprev`: the
-- previous window's key when this call makes a sliding window's.
local wkey, wread, wprev = {}, {}, {}
local MOVED = {}   -- the error of a check whose window no key names (by identity)
local function load(pos, algo, w)
  if algo > 2 then return current(KEYS[pos]) end
  local id = KEYS[pos]
  local st = state[id]
  if st ~= nil then return st end
  local win = idiv(now, w)
  local off = win - idiv(T - (w - w % 4) / 4, w)
  if off < 0 or off > 1 then error(MOVED) end
  local name = KEYS[pos + off + algo - 1]
  local c = count(raw[name])
  st = {win, c or 0}
  if algo == 2 then
    -- A hash (window.lua: why): `c` the count, `p` the previous window's, else in its key.
    c = count(redis.pcall('HGET', name, 'c'))
    local p = count(redis.pcall('HGET', name, 'p'))
    if not p then
      wprev[id] = KEYS[pos + off]
      p = count(redis.pcall('HGET', KEYS[pos + off], 'c'))
    end
    st = {win, c or 0, p or 0}
  end
  state[id], wkey[id], wread[id] = st, name, c
  return st
end

-- How many keys a check names, by algorithm.
local WIDTH = {2, 3, 1, 1, 1}
-- The position of each check's first key in the running chain (set by `all`).
local pos = {}

local pend = {}                 -- one chain's charges: key, state, expiry per check
-- A key's state as the running chain left it, valid while `at[key]` is that chain's number.
local at, mine, number = {}, {}, 0

-- A refusal by check r: each ban before it of the same principal (hash tag) counts it.
local function count_bans(a, r)
  local tag = match(KEYS[pos[r]], '{([^}]*)}')
  for j = 1, r - 1 do
    local p = a + (j - 1) * 4
    local code = A[p + 1]
    local key = KEYS[pos[j]]
    if code % 16 == 5 and match(key, '{([^}]*)}') == tag then
      local nx, exp = ban_count(A[p + 2], A[p + 3], A[p + 4], current(key), (code - 5) / 16)
      if nx then state[key] = nx; expiry[key] = exp end
    end
  end
end

-- One chain: its checks' keys start at KEYS[pos[i]], their numbers at A[a + 1 ..]; writes
-- after out[head], returns how many checks it evaluated, keeps its charges if it passes.
local function chain(head, mode, n, a)
  local charge = IFFITS
  if mode == 1 or mode == 3 then charge = ALWAYS elseif mode == 2 then charge = OVERDRAW end
  local base = head + 2
  local evaluated = n
  number = number + 1
  for i = 1, n do
    local key = KEYS[pos[i]]
    local p = a + (i - 1) * 4
    local code, o6 = A[p + 1], base + (i - 1) * 6
    local algo = code % 16
    local step, q, w, cost = steps[algo], A[p + 2], A[p + 3],
                             A[p + 4]
    -- The state as this chain left it, else as the chains before it left it.
    local st
    if at[key] == number then st = mine[key] else st = load(pos[i], algo, w) end
    local o, nx, exp
    if algo == 5 then
      -- A ban's gate; a charge (overdraw) counts its refusals first.
      if charge == OVERDRAW then nx, exp = ban_count(q, w, cost, st, (code - 5) / 16) end
      o = ban_gate(o6, q, w, cost, nx or st)
      if o ~= 0 then
        -- Banned: nothing is charged, whatever the mode.
        for j = 1, i - 1 do
          local q = a + (j - 1) * 4
          local c = A[q + 1]
          if c % 16 == 5 then
            ban_gate(base + (j - 1) * 6, A[q + 2], A[q + 3],
                     A[q + 4], current(KEYS[pos[j]]))
          else
            steps[c % 16](base + (j - 1) * 6, A[q + 2], A[q + 3],
                          load(pos[j], c % 16, A[q + 3]), 0, IFFITS)
          end
        end
        if nx then state[key] = nx; expiry[key] = exp end
        return i
      end
    else
      o, nx, exp = step(o6, q, w, st, cost, charge)
    end
    if code > 15 and algo ~= 5 and o == 0 and charge == IFFITS then
      -- A lease: also take up to `extra` units, at most a quarter of what is left after
      -- the cost. What is left says they fit; the outcome carries the grant (4 × units).
      local g = min((code - algo) / 16, floor(out[o6 + 3] / 4))
      if g > 0 then
        local o2, nx2, exp2 = step(o6, q, w, st, cost + g, charge)
        if o2 == 0 then o, nx, exp = 0, nx2, exp2; out[o6 + 1] = g * 4
        else step(o6, q, w, st, cost, charge) end
      end
    end
    if nx then at[key], mine[key] = number, nx end
    pend[3 * i - 2], pend[3 * i - 1], pend[3 * i] = key, nx or false, exp
    if o ~= 0 and mode == 0 then
      -- Nothing is charged: the limits before the refusal report their state as it stays.
      for j = 1, i - 1 do
        local q = a + (j - 1) * 4
        local c = A[q + 1]
        if c % 16 ~= 5 then
          steps[c % 16](base + (j - 1) * 6, A[q + 2], A[q + 3],
                        load(pos[j], c % 16, A[q + 3]), 0, IFFITS)
        end
      end
      count_bans(a, i)
      return i
    end
    -- Counting attempts: charged up to here, the refusal included; nothing after it.
    if o ~= 0 and mode == 3 then evaluated = i break end
  end
  for i = 1, evaluated do
    local key, nx = pend[3 * i - 2], pend[3 * i - 1]
    if nx then state[key] = nx; expiry[key] = pend[3 * i] end
  end
  if mode ~= 2 then
    for i = 1, evaluated do
      if out[base + (i - 1) * 6 + 1] % 4 ~= 0 then count_bans(a, i) break end
    end
  end
  return evaluated
end

-- Every chain in turn. With `guard`, each under its own pcall: a chain with bad arguments
-- fails alone (1, 0), one whose window no key named too (2, 0), charging nothing.
local function all(guard)
  local k, a = 0, 3
  for _ = 1, out[2] do
    local mode, n = A[a + 1], A[a + 2]
    for i = 1, n do
      pos[i] = k + 1
      k = k + (WIDTH[(A[a + 3 + (i - 1) * 4] or 0) % 16] or 1)
    end
    local head = #out
    out[head + 1], out[head + 2] = 0, 0
    if guard then
      local ok, evaluated = pcall(chain, head, mode, n, a + 2)
      if ok then out[head + 2] = evaluated
      else
        for j = #out, head + 2, -1 do out[j] = nil end
        out[head + 1], out[head + 2] = 1, 0
        if evaluated == MOVED then out[head + 1] = 2 end
      end
    else
      out[head + 2] = chain(head, mode, n, a + 2)
    end
    -- Drop what a refusal left past the evaluated checks.
    for j = #out, head + 2 + out[head + 2] * 6 + 1, -1 do out[j] = nil end
    a = a + 2 + n * 4
  end
end

-- One pcall for the whole call (Redis 7's costs about a bucket's check); nothing is written
-- until the end, so after an error everything is done again with a pcall per chain.
if not pcall(all, false) then
  for j = #out, 3, -1 do out[j] = nil end
  state, expiry = {}, {}
  all(true)
end

for key, at in pairs(expiry) do
  local st, name = state[key], wkey[key]
  if wprev[key] then
    -- A sliding window's key made now: its count and the previous window's, whose key goes.
    redis.call('DEL', name)
    redis.call('HSET', name, 'c', format('%d', st[2]), 'p', format('%d', st[3]))
    redis.call('PEXPIRE', name, format('%d', max(ceil((at - now) / 1000), 1) + slack))
    redis.call('DEL', wprev[key])
  elseif name and wread[key] then
    -- A window's count that exists: the difference, its TTL kept.
    local d = format('%d', st[2] - wread[key])
    if st[2] == wread[key] then elseif #st == 3 then redis.call('HINCRBY', name, 'c', d)
    else redis.call('INCRBY', name, d) end
  elseif name and #st == 3 then
    redis.call('HSET', name, 'c', format('%d', st[2]))
  elseif name then
    redis.call('SET', name, format('%d', st[2]), 'PX', max(ceil((at - now) / 1000), 1) + slack)
  else
    redis.call('SET', key, encode(st), 'PX', max(ceil((at - now) / 1000), 1) + slack)
  end
end

-- The answer: little-endian doubles in one string (script.rs: why), 200 per C call.
if #out <= 200 then return struct.pack('<' .. string.rep('d', #out), unpack(out)) end
local parts = {}
for i = 1, #out, 200 do
  local j = math.min(i + 199, #out)
  parts[#parts + 1] = struct.pack('<' .. string.rep('d', j - i + 1), unpack(out, i, j))
end
return table.concat(parts)
