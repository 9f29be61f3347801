-- rate-limit: the common shape, fast: chains in order and all or nothing (mode 0) of fixed
-- windows, sliding windows, sliding logs, token buckets and calendar quotas, no lease asked. The same
-- arguments and answer as chain.lua, and the same decisions (its `fixed`, `sliding`, `log`
-- and `bucket` steps in one function); chain.lua answers every other shape. Few functions
-- and tables a call: in a script each `local function` is a closure made again on every
-- call (log.lua's are made at a call's first log), and each
-- table an allocation the garbage collector pays for (chain.lua spends a third of a
-- one-check call in them, under callgrind).
--
-- KEYS     per check: a fixed window's two (the windows of T' and the next), a sliding
--          window's three (the windows before T', of T' and the next), T' = T - window / 4
--          (whole numbers); a calendar quota's two (its candidate periods, periods.rs); a
--          log's or a bucket's one
-- ARGV[1]  little-endian doubles: slack (ms), the number of chains, T (the instance's
--          estimate of the server's time, us); per chain: mode (0), n, then per check:
--          algorithm (1 fixed, 2 sliding, 3 log, 4 bucket; a calendar quota: 6 + 16 × (a +
--          2^22 × b), its candidates' lengths in s), quota or capacity, window or emission
--          interval (us) or the candidates' boundary (us), cost
-- Returns  as chain.lua: now, chains, then per chain 0, n and six numbers per evaluated
--          check (outcome, limit, remaining, reset, retry, window), or 2, 0 for a chain
--          whose window no key named (it charged nothing)
--
-- A window's count is an integer in its own key, charged first (INCRBY, which answers the
-- count before the charge) and taken back when the chain is refused; a key the charge
-- made gets its expiry (the window's end, the next window's for a sliding window, plus
-- the slack) when the chain is admitted, or is deleted when it is not. A bucket's time is
-- read, and written once at the end of the call (`SET … PX`) when an admitted chain moved
-- it. A log (log.lua: its sorted set) is read as its sum less the entries that left the
-- window, and written once at the end (log.lua's `write`, as chain.lua). At the memory
-- cap the first write is refused before anything is written: the call charges nothing.

local tonumber = tonumber
local fmt = string.format
local unpack = table.unpack or unpack   -- Lua 5.4 (Dragonfly) or 5.1 (Redis, Valkey)
local MIN_RETRY = 1000

local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]   -- the strings coerced: no `tonumber` call
-- `struct`'s formats, up to 200 doubles: a slice of one constant (`string.rep` built each
-- call cost twice what `sub` does).
local D = '<dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd'
local blob = ARGV[1]
local total = #blob / 8
if total % 1 ~= 0 or total < 3 then error('window.lua: the arguments are not doubles') end
local A
if total <= 200 then
  A = {struct.unpack(string.sub(D, 1, total + 1), blob)}
else
  A = {}
  local pos = 1
  for from = 1, total, 200 do
    local n = math.min(200, total - from + 1)
    local got = {struct.unpack(string.sub(D, 1, n + 1), blob, pos)}
    for j = 1, n do A[from + j - 1] = got[j] end
    pos = got[n + 1]
  end
end
local slack, T = A[1], A[3]
local out = {now, A[2]}
local LIB   -- log.lua's functions, made at the call's first log

-- One check's decision (chain.lua's `fixed`, `sliding` or `bucket`, then `verdict`, in
-- order and all or nothing), written at out[o6 + 1 ..]: a window `win` holding `curr`,
-- after `prev`; or a bucket of capacity q, emission interval w, whose state is `curr` (its
-- theoretical arrival time, 0 for none); or a log whose key is `win`, holding `curr` units
-- of which this call charged `prev`; or a calendar period ending at `win`, `prev` long,
-- holding `curr`. Returns the outcome (0 allowed) and a bucket's or a log's state after it.
local function decide(o6, algo, q, w, win, curr, prev, cost)
  local fits, remaining, reset, retry, after
  if algo == 2 then
    local cap = q * 2
    if curr > cap then curr = cap end
    if prev > cap then prev = cap end
    local e = now - win * w
    fits = cost <= q and curr + cost <= q and prev * (w - e) <= (q - curr - cost) * w
    after = curr
    if fits and cost > 0 then after = curr + cost end
    local x = prev * (w - e)
    local weighted = (x - x % w) / w
    if weighted * w > x then weighted = weighted - 1
    elseif (weighted + 1) * w <= x then weighted = weighted + 1 end
    if x - weighted * w ~= 0 then weighted = weighted + 1 end
    remaining = q - after
    if remaining < 0 then remaining = 0 end
    remaining = remaining - weighted
    if remaining < 0 then remaining = 0 end
    reset = 0
    if after > 0 then reset = (win + 2) * w - now
    elseif prev > 0 then reset = (win + 1) * w - now end
    retry = 0
    if not fits and cost <= q then
      local room = q - cost
      local near = curr <= room and prev > 0
      local y, d = room * w, curr
      if near then y, d = (room - curr) * w, prev elseif d < 1 then d = 1 end
      local m = (y - y % d) / d
      if m * d > y then m = m - 1 elseif (m + 1) * d <= y then m = m + 1 end
      if m > w then m = w end
      if near then
        retry = (w - m) - e
        if retry < 0 then retry = 0 end
      else
        retry = (w - e) + (w - m)
      end
    end
  elseif algo == 3 then
    fits = cost <= q and curr + cost <= q
    after = curr
    if fits and cost > 0 then after = curr + cost end
    remaining = q - after
    if remaining < 0 then remaining = 0 end
    reset, retry = 0, 0
    if after > curr or prev > 0 then reset = w
    elseif curr > 0 then
      local t = LIB.newest(win, w)
      if t then reset = t + w - now end
    end
    if not fits and cost <= q and curr > 0 then retry = LIB.retry(win, q, w, curr, prev, cost) end
  elseif algo == 4 then
    local span = q * w
    local full_at, limit_at = now + span, now + span * 2
    local start = now
    if curr > now then start = curr end
    if start > limit_at then start = limit_at end
    local new_tat = start + cost * w
    fits = cost <= q and new_tat <= full_at
    after = start
    if fits and cost > 0 then after = new_tat end
    if after > limit_at then after = limit_at end
    local left = full_at - after
    if left < 0 then left = 0 end
    remaining = (left - left % w) / w
    if remaining * w > left then remaining = remaining - 1
    elseif (remaining + 1) * w <= left then remaining = remaining + 1 end
    reset, retry, w = after - now, new_tat - full_at, span
    if retry < 0 then retry = 0 end
  else
    local ending
    if algo == 6 then ending, w = win - now, prev else ending = (win + 1) * w - now end
    fits = cost <= q and curr + cost <= q
    after = curr
    if fits and cost > 0 then after = curr + cost end
    reset = 0
    if after > 0 then reset = ending end
    remaining = q - after
    if remaining < 0 then remaining = 0 end
    retry = ending
  end
  local o = 0
  if cost > q then o, retry = 2, 0
  elseif fits then retry = 0
  else
    o = 1
    if retry < MIN_RETRY then retry = MIN_RETRY end
    if reset < retry then reset = retry end
  end
  out[o6 + 1], out[o6 + 2], out[o6 + 3] = o, q, remaining
  out[o6 + 4], out[o6 + 5], out[o6 + 6] = reset, retry, w
  return o, after
end

-- A count or a bucket's time as stored (a sliding window's: the hash field `field`): a
-- whole number, else (no key, corrupt data, another type: `pcall` answers its error as a
-- table) `none`.
local function stored(name, field, none)
  local v
  if field then v = redis.pcall('HGET', name, field) else v = redis.pcall('GET', name) end
  v = tonumber(v)
  if v == nil or v < 0 or v % 1 ~= 0 then return none end
  return v
end

-- Per check of the running chain, seven entries: its window, its key's name, the count (a
-- bucket's time) before it, whether it charged, its key's expiry (a bucket's time after
-- it), the previous window's count, and the previous window's key when this check makes
-- a sliding window's key (else false). Sized for one check: no growth.
local seen = {false, false, false, false, false, false, false}
-- Buckets and logs (made at the first): per key, the time (a log: the units) as this
-- call's admitted chains left it, and the running chain's (valid while `mine[name]` is its
-- number); the keys to write. A log's also: the units this call charged, whether entries
-- left the window, whether its key is to be made anew, its quota and window.
local tats, pend, mine, dirty
local ladded, lcut, lnew, lq, lw

local k, a = 0, 3
for c = 1, A[2] do
  local n = A[a + 2]
  local head = #out
  out[head + 1], out[head + 2] = 0, n
  local refused, moved, reached = 0, false, 0
  local kk = k
  for i = 1, n do
    local p = a + 2 + (i - 1) * 4
    local algo, q, w, cost = A[p + 1], A[p + 2], A[p + 3], A[p + 4]
    local s6 = (i - 1) * 7
    local code = algo
    if algo > 15 then algo = algo % 16 end   -- a calendar quota: its lengths above
    local o, after
    if algo == 3 then
      local name = KEYS[kk + 1]
      kk = kk + 1
      if not tats then tats, pend, mine, dirty = {}, {}, {}, {} end
      if not ladded then ladded, lcut, lnew, lq, lw = {}, {}, {}, {}, {} end
      local used = tats[name]
      if used == nil then
        if not LIB then LIB = log_lib(now, slack) end
        used, lcut[name], lnew[name] = LIB.load(name, w)
        tats[name], ladded[name] = used, 0
      end
      local mineat = used
      if mine[name] == c then mineat = pend[name] end
      local added = ladded[name] + mineat - used
      o, after = decide(head + 2 + (i - 1) * 6, 3, q, w, name, mineat, added, cost)
      seen[s6 + 1], seen[s6 + 2], seen[s6 + 3], seen[s6 + 4] = name, name, mineat, false
      seen[s6 + 5], seen[s6 + 6], seen[s6 + 7] = after, added, false
      if o == 0 and cost > 0 and after ~= mineat then mine[name], pend[name] = c, after end
      lq[name], lw[name] = q, w
    elseif algo == 4 then
      local name = KEYS[kk + 1]
      kk = kk + 1
      if not tats then tats, pend, mine, dirty = {}, {}, {}, {} end
      local curr = tats[name]
      if curr == nil then curr = stored(name, nil, 0); tats[name] = curr end
      local mineat = curr
      if mine[name] == c then mineat = pend[name] end
      o, after = decide(head + 2 + (i - 1) * 6, 4, q, w, 0, mineat, 0, cost)
      seen[s6 + 1], seen[s6 + 2], seen[s6 + 3], seen[s6 + 4] = 0, name, curr, false
      seen[s6 + 5], seen[s6 + 6], seen[s6 + 7] = after, 0, false
      if o == 0 and cost > 0 and after ~= mineat then mine[name], pend[name] = c, after end
    else
      local win, off, plen
      if algo == 6 then
        -- The period TIME falls in: the one ending at the boundary `w`, or the next; `prev`
        -- carries its length, `win` its end.
        local lens = (code - 6) / 16
        local b = (lens - lens % 4194304) / 4194304
        local s, e = w - (lens - b * 4194304) * 1000000, w
        off = 0
        if now >= w then off, s, e = 1, w, w + b * 1000000 end
        if now < s or now >= e then moved = true break end
        win, plen = e, e - s
      else
        -- Whole-number division below 2^53 (as chain.lua's idiv): `%`, then its rounding
        -- fixed.
        win = (now - now % w) / w
        if win * w > now then win = win - 1 elseif (win + 1) * w <= now then win = win + 1 end
        local at = T - (w - w % 4) / 4
        local first = (at - at % w) / w
        if first * w > at then first = first - 1 elseif (first + 1) * w <= at then first = first + 1 end
        off = win - first
        if off < 0 or off > 1 then moved = true break end
      end
      local name, prevname, prev, life = nil, false, 0, nil
      if algo == 6 then
        name = KEYS[kk + 1 + off]
        kk, life, prev = kk + 2, win, plen
      elseif algo == 2 then
        -- A hash: `c` the window's count, `p` the previous window's, copied when the key
        -- was made (the previous window's key is deleted then). No `p`: this check makes
        -- the key, and reads the previous window's count from its key.
        name = KEYS[kk + 2 + off]
        prev = stored(name, 'p', false)
        if not prev then
          prevname = KEYS[kk + 1 + off]
          prev = stored(prevname, 'c', 0)
        end
        kk, life = kk + 3, (win + 2) * w
      else
        name = KEYS[kk + 1 + off]
        kk, life = kk + 2, (win + 1) * w
      end
      -- Charged first: INCRBY answers the count before it too (the chains before this
      -- one included); a refusal takes it back. A cost that never fits, or none, reads.
      local curr, charged, hash = 0, false, algo == 2
      if cost > 0 and cost <= q then
        local units = '1'   -- the usual cost, written without a `format` call
        if cost ~= 1 then units = fmt('%d', cost) end
        local r
        if not hash then r = redis.pcall('INCRBY', name, units)
        else r = redis.pcall('HINCRBY', name, 'c', units) end
        if type(r) == 'number' and r >= cost then
          curr = r - cost
        elseif type(r) == 'table' and string.find(r.err or '', 'OOM', 1, true) then
          -- At the memory cap the first write is refused, so nothing was written: raised
          -- again by `call`, as Redis words it for every script.
          if not hash then redis.call('INCRBY', name, units)
          else redis.call('HINCRBY', name, 'c', units) end
        elseif not hash then
          -- Not a count (corrupt data, another type): no state; written whole.
          redis.call('SET', name, units, 'PX', math.max(math.ceil((life - now) / 1000), 1) + slack)
        else
          redis.call('DEL', name)
          redis.call('HSET', name, 'c', units)
          if not prevname then prevname, prev = KEYS[kk - 2 + off], 0 end
        end
        charged = true
      elseif not hash then
        curr = stored(name, nil, 0)
      else
        curr = stored(name, 'c', 0)
      end
      seen[s6 + 1], seen[s6 + 2], seen[s6 + 3], seen[s6 + 4] = win, name, curr, charged
      seen[s6 + 5], seen[s6 + 6], seen[s6 + 7] = life, prev, prevname
      o = decide(head + 2 + (i - 1) * 6, algo, q, w, win, curr, prev, cost)
    end
    reached = i
    if o ~= 0 then
      refused = i
      break
    end
  end
  if moved then
    for j = #out, head + 1, -1 do out[j] = nil end
    out[head + 1], out[head + 2] = 2, 0
  elseif refused > 0 then
    -- Nothing is charged: the checks before the refusal report their state as it stays;
    -- nothing after the refusal is kept.
    for i = 1, refused - 1 do
      local p, s6 = a + 2 + (i - 1) * 4, (i - 1) * 7
      decide(head + 2 + (i - 1) * 6, A[p + 1] % 16, A[p + 2], A[p + 3], seen[s6 + 1],
             seen[s6 + 3], seen[s6 + 6], 0)
    end
    for j = #out, head + 2 + refused * 6 + 1, -1 do out[j] = nil end
    out[head + 2] = refused
  else
    for i = 1, n do
      local s6 = (i - 1) * 7
      local algo = A[a + 2 + (i - 1) * 4 + 1] % 16
      if algo == 4 or algo == 3 then
        -- A bucket's new time, a log's units, written once at the end of the call.
        local name = seen[s6 + 2]
        if mine[name] == c then
          if algo == 3 then ladded[name] = ladded[name] + pend[name] - tats[name] end
          tats[name], dirty[name] = pend[name], algo
        end
      elseif seen[s6 + 4] and (seen[s6 + 7] or (seen[s6 + 3] == 0 and algo ~= 2)) then
        -- A key this admitted chain made gets its expiry (the window's or the period's end,
        -- plus slack); a sliding window's, the previous window's count, whose key then goes.
        local name = seen[s6 + 2]
        if seen[s6 + 7] then
          redis.call('HSET', name, 'p', fmt('%d', seen[s6 + 6]))
          redis.call('DEL', seen[s6 + 7])
        end
        redis.call('PEXPIRE', name,
                   fmt('%d', math.max(math.ceil((seen[s6 + 5] - now) / 1000), 1) + slack))
      end
    end
    reached = 0
  end
  -- Refused or moved: every charge this chain made is taken back, the last first; a key it
  -- made (nothing counted before) is deleted.
  for i = reached, 1, -1 do
    local s6, algo = (i - 1) * 7, A[a + 3 + (i - 1) * 4] % 16
    if seen[s6 + 4] then
      local name, back = seen[s6 + 2], fmt('%d', -A[a + 2 + (i - 1) * 4 + 4])
      if seen[s6 + 7] or (algo ~= 2 and seen[s6 + 3] == 0) then redis.call('DEL', name)
      elseif algo == 2 then redis.call('HINCRBY', name, 'c', back)
      else redis.call('INCRBY', name, back) end
    end
  end
  -- The next chain's keys: after every key of this one, reached or not.
  for i = 1, n do
    local algo = A[a + 2 + (i - 1) * 4 + 1] % 16
    if algo == 2 then k = k + 3 elseif algo == 1 or algo == 6 then k = k + 2 else k = k + 1 end
  end
  a = a + 2 + n * 4
end

-- The buckets' new times, with their expiry (the time, plus the slack); the logs' charges.
if dirty then
  for name, algo in pairs(dirty) do
    local tat = tats[name]
    if algo == 4 then
      redis.call('SET', name, fmt('%d', tat), 'PX', math.max(math.ceil((tat - now) / 1000), 1) + slack)
    else
      LIB.write(name, tat, ladded[name], lq[name], lw[name], lcut[name], lnew[name])
    end
  end
end

if #out <= 200 then return struct.pack(string.sub(D, 1, #out + 1), unpack(out)) end
local parts = {}
for i = 1, #out, 200 do
  local j = math.min(i + 199, #out)
  parts[#parts + 1] = struct.pack(string.sub(D, 1, j - i + 2), unpack(out, i, j))
end
return table.concat(parts)
