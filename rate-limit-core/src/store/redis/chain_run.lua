-- rate-limit: the chain script's second half (chain.lua: the first, the calling convention
-- and the algorithms): read the keys, run the chains, write what they charged.

-- A bucket's or a ban's state: numbers as text separated by spaces (one kept as a number,
-- more as a table); anything else counts as no state, which the next write replaces.
local raw = {}
for from = 1, #KEYS, 1000 do     -- MGET in parts: unpack's results must fit Lua's C stack
  local to = min(from + 999, #KEYS)
  local got = redis.call('MGET', unpack(KEYS, from, to))
  for i = from, to do raw[KEYS[i]] = got[i - from + 1] end
end
local state, expiry = {}, {}     -- per key: the state as charged so far (false: none)
local match = string.match

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

-- A check's state (its keys start at KEYS[pos]). Windows keep a key per window, calendar
-- quotas one per period; the steps see {window, count}, {window, count, previous} or
-- {period's end, count, its length}, kept under the check's first key's name; `wkey`: the
-- window's (period's) key, `wread`: its count as read (false: none), `whash`: whether it
-- is a sliding window's hash, `wprev`: the previous window's key when this call makes a
-- sliding window's.
local wkey, wread, whash, wprev = {}, {}, {}, {}
local MOVED = {}   -- the error of a check whose window no key names (by identity)

-- A log's state (log.lua): whether entries left the window and whether its key is to be
-- made anew, for the write.
local lcut, lnew = {}, {}
local function log_load(key, w)
  local st = state[key]
  if st ~= nil then return st end
  if not LIB then LIB = log_lib(now, slack) end
  local used
  used, lcut[key], lnew[key] = LIB.load(key, w)
  st = {used, 0, key}
  state[key] = st
  return st
end

local function load(pos, code, w)
  local algo = code % 16
  if algo == 3 then return log_load(KEYS[pos], w) end
  if algo == 4 or algo == 5 then return current(KEYS[pos]) end
  local id = KEYS[pos]
  local st = state[id]
  if st ~= nil then return st end
  if algo == 6 then
    -- The period TIME falls in: the one ending at the boundary `w`, or the next.
    local lens = (code - 6) / 16
    local b = idiv(lens, 4194304)
    local off, s, e = 0, w - (lens - b * 4194304) * 1000000, w
    if now >= w then off, s, e = 1, w, w + b * 1000000 end
    if now < s or now >= e then error(MOVED) end
    local name = KEYS[pos + off]
    local c = count(raw[name])
    st = {e, c or 0, e - s}
    state[id], wkey[id], wread[id] = st, name, c
    return st
  end
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
    whash[id] = true
  end
  state[id], wkey[id], wread[id] = st, name, c
  return st
end

-- How many keys a check names, by algorithm.
local WIDTH = {2, 3, 1, 1, 1, 2}
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
    if at[key] == number then st = mine[key] else st = load(pos[i], code, w) end
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
                          load(pos[j], c, A[q + 3]), 0, IFFITS)
          end
        end
        if nx then state[key] = nx; expiry[key] = exp end
        return i
      end
    else
      o, nx, exp = step(o6, q, w, st, cost, charge)
    end
    if code > 15 and algo < 5 and o == 0 and charge == IFFITS then
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
                        load(pos[j], c, A[q + 3]), 0, IFFITS)
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
  if type(st) == 'table' and st[3] == key then
    LIB.write(key, st[1], st[2], st[4], at - now, lcut[key], lnew[key])
  elseif wprev[key] then
    -- A sliding window's key made now: its count and the previous window's, whose key goes.
    redis.call('DEL', name)
    redis.call('HSET', name, 'c', format('%d', st[2]), 'p', format('%d', st[3]))
    redis.call('PEXPIRE', name, format('%d', max(ceil((at - now) / 1000), 1) + slack))
    redis.call('DEL', wprev[key])
  elseif name and wread[key] then
    -- A window's count that exists: the difference, its TTL kept.
    local d = format('%d', st[2] - wread[key])
    if st[2] == wread[key] then elseif whash[key] then redis.call('HINCRBY', name, 'c', d)
    else redis.call('INCRBY', name, d) end
  elseif name and whash[key] then
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
