-- rate-limit: give back what an earlier slot group of a chain charged, when a later
-- group refused (Redis Cluster only: a chain's keys in different slots).
--
-- KEYS[i]  the key of check i: for a fixed or sliding window, the key of the window the
--          charge was made in (a key per window, its count an integer)
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

local at = tonumber(ARGV[1])
local changed = 0
for i = 1, #KEYS do
  local base = 1 + (i - 1) * 4
  local algo, p2, cost = tonumber(ARGV[base + 1]), tonumber(ARGV[base + 3]), tonumber(ARGV[base + 4])
  local raw = redis.pcall('GET', KEYS[i])
  local n = tonumber(raw)
  if (algo == 1 or algo == 2) and n and n % 1 == 0 and cost > 0 then
    -- The window's count, never below zero; its TTL kept.
    redis.call('SET', KEYS[i], string.format('%d', math.max(n - cost, 0)), 'KEEPTTL')
    changed = changed + 1
  elseif type(raw) == 'string' and cost > 0 and algo > 2 then
    local st = numbers(raw)
    local ok = false
    if algo == 3 then
      for j = 1, #st, 2 do
        if st[j] == at then
          st[j + 1] = st[j + 1] - cost
          if st[j + 1] <= 0 then table.remove(st, j + 1); table.remove(st, j) end
          ok = true
          break
        end
      end
    elseif algo == 4 then
      st[1] = math.max(st[1] - cost * p2, 0); ok = true
    end
    if ok then
      redis.call('SET', KEYS[i], encode(st), 'KEEPTTL')
      changed = changed + 1
    end
  end
end
return changed
