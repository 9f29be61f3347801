#!lua
-- rate-limit: check a chain of limits atomically. A line-for-line port of
-- rate-limit-core's algorithms (src/algorithm/*.rs); keep the two in step.
--
-- KEYS[i]  the key of check i (all in one hash slot)
-- ARGV[1]  mode: 0 in order, all or nothing; 1 charge every limit; 2 overdraw;
--           3 count attempts: charge in order up to and including the first refusal
-- ARGV[2]  TTL slack in milliseconds
-- ARGV[3 + 4(i-1) ..]  per check: algorithm (1 fixed, 2 sliding, 3 log, 4 bucket),
--                      quota or capacity, window or emission interval (us), cost
-- Returns {now_us, n, then per evaluated check: outcome (0 allowed, 1 denied,
--          2 never fits), limit, remaining, reset_us, retry_us, window_us}
--
-- Time is the server's (TIME), in microseconds; every number stays below 2^53.

local IFFITS, ALWAYS, OVERDRAW = 0, 1, 2
local CAP = 4503599627370496          -- 2^52: costs stop here
local MIN_RETRY = 1000

local function idiv(a, b)
  local q = math.floor(a / b)
  if q * b > a then q = q - 1 elseif (q + 1) * b <= a then q = q + 1 end
  return q
end

local function applies(charge, fits, cost, quota)
  if cost <= 0 then return false end
  if charge == IFFITS then return fits end
  if charge == ALWAYS then return cost <= quota end
  return true
end

local function verdict(charge, fits, cost, quota, remaining, reset, window, retry)
  if cost > quota and charge ~= OVERDRAW then
    return {2, quota, remaining, reset, 0, window}
  elseif fits then
    return {0, quota, remaining, reset, 0, window}
  end
  retry = math.max(retry, MIN_RETRY)
  return {1, quota, remaining, math.max(reset, retry), retry, window}
end

local function fixed(q, w, st, now, cost, charge)
  local window = idiv(now, w)
  local count = 0
  if st and st[1] >= window then count = st[2] end
  local ending = (window + 1) * w - now
  local fits = cost <= q and count + cost <= q
  local charged = applies(charge, fits, cost, q)
  local after = count
  if charged then after = math.min(count + cost, q * 2) end
  local reset = 0
  if after > 0 then reset = ending end
  local d = verdict(charge, fits, cost, q, math.max(q - after, 0), reset, w, ending)
  if charged then return d, {window, after}, (window + 1) * w end
  return d
end

local function sliding(q, w, st, now, cost, charge)
  local window = idiv(now, w)
  local cap = q * 2
  local curr, prev = 0, 0
  if st then
    local sc, sp = math.min(st[2], cap), math.min(st[3], cap)
    if st[1] >= window then curr, prev = sc, sp
    elseif st[1] + 1 == window then curr, prev = 0, sc end
  end
  local e = now - window * w
  local fits = cost <= q and curr + cost <= q and prev * (w - e) <= (q - curr - cost) * w
  local charged = applies(charge, fits, cost, q)
  local after = curr
  if charged then after = math.min(curr + cost, cap) end
  local x = prev * (w - e)
  local weighted = idiv(x, w)
  if x - weighted * w ~= 0 then weighted = weighted + 1 end
  local remaining = math.max(math.max(q - after, 0) - weighted, 0)
  local reset = 0
  if after > 0 then reset = (window + 2) * w - now
  elseif prev > 0 then reset = (window + 1) * w - now end
  local retry = 0
  if not fits and cost <= q then
    local room = q - cost
    if curr <= room and prev > 0 then
      local m = math.min(idiv((room - curr) * w, prev), w)
      retry = math.max((w - m) - e, 0)
    else
      local m = math.min(idiv(room * w, math.max(curr, 1)), w)
      retry = (w - e) + (w - m)
    end
  end
  local d = verdict(charge, fits, cost, q, remaining, reset, w, retry)
  if charged then return d, {window, after, prev}, (window + 2) * w end
  return d
end

local function bucket(capacity, interval, st, now, cost, charge)
  local span = capacity * interval
  local full_at = now + span
  local limit_at = now + span * 2
  local start = now
  if st and st[1] > now then start = math.min(st[1], limit_at) end
  local new_tat = start + cost * interval
  local fits = cost <= capacity and new_tat <= full_at
  local charged = applies(charge, fits, cost, capacity)
  local after = start
  if charged then after = math.min(new_tat, limit_at) end
  local remaining = idiv(math.max(full_at - after, 0), interval)
  local d = verdict(charge, fits, cost, capacity, remaining, after - now, span,
                    math.max(new_tat - full_at, 0))
  if charged then return d, {after}, after end
  return d
end

local function log(q, w, st, now, cost, charge)
  local entries, used = {}, 0
  if st then
    for j = 1, #st, 2 do
      local t, c = math.min(st[j], now), st[j + 1]
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
      left = math.max(left - en[2], 0)
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
  local d = verdict(charge, fits, cost, q, math.max(q - after, 0), reset, w, retry)
  if charged then
    local flat = {}
    for _, en in ipairs(entries) do flat[#flat + 1] = en[1]; flat[#flat + 1] = en[2] end
    return d, flat, entries[#entries][1] + w
  end
  return d
end

local steps = {fixed, sliding, log, bucket}
local arity = {2, 3, -1, 1}

-- A stored state: numbers separated by spaces. Anything else (corrupt data, another
-- type) counts as no state; the next write replaces it.
local function read(key, algo)
  local raw = redis.pcall('GET', key)
  if type(raw) ~= 'string' then return false end
  local want = arity[algo]
  if want == 1 then
    -- One number (the token bucket): tonumber alone, no tokenizer (same rules).
    local v = tonumber(raw)
    if v == nil or v < 0 or v ~= math.floor(v) then return false end
    return {v}
  end
  local st = {}
  for token in string.gmatch(raw, '%S+') do
    local v = tonumber(token)
    if v == nil or v < 0 or v ~= math.floor(v) then return false end
    st[#st + 1] = v
  end
  if (want > 0 and #st ~= want) or (want < 0 and #st % 2 ~= 0) then return false end
  return st
end

local function encode(st)
  local parts = {}
  for j, v in ipairs(st) do parts[j] = string.format('%.0f', v) end
  return table.concat(parts, ' ')
end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local mode = tonumber(ARGV[1])
local slack = tonumber(ARGV[2])
local charge = IFFITS
if mode == 1 or mode == 3 then charge = ALWAYS elseif mode == 2 then charge = OVERDRAW end

local n = #KEYS
local stored, pending, expiry, params, out = {}, {}, {}, {}, {}
local denied_at = nil
for i = 1, n do
  local key = KEYS[i]
  local base = 2 + (i - 1) * 4
  local algo = tonumber(ARGV[base + 1])
  local p1, p2 = tonumber(ARGV[base + 2]), tonumber(ARGV[base + 3])
  local cost = math.min(tonumber(ARGV[base + 4]), CAP)
  params[i] = {algo, p1, p2}
  if stored[key] == nil then stored[key] = read(key, algo) end
  local st = pending[key]
  if st == nil then st = stored[key] end
  local d, nx, exp = steps[algo](p1, p2, st, now, cost, charge)
  out[i] = d
  if nx then pending[key] = nx; expiry[key] = exp end
  if d[1] ~= 0 and mode == 0 then denied_at = i break end
  -- Counting attempts: charged up to here, the refusal included; nothing after it.
  if d[1] ~= 0 and mode == 3 then break end
end

if denied_at then
  -- Nothing is charged: the limits before the refusal report their state as it stays.
  for j = 1, denied_at - 1 do
    local p = params[j]
    out[j] = steps[p[1]](p[2], p[3], stored[KEYS[j]], now, 0, IFFITS)
  end
else
  for key, st in pairs(pending) do
    local ttl = math.max(math.ceil((expiry[key] - now) / 1000), 1) + slack
    redis.call('SET', key, encode(st), 'PX', ttl)
  end
end

local result = {now, #out}
for _, d in ipairs(out) do
  for _, v in ipairs(d) do result[#result + 1] = v end
end
return result
