-- rate-limit: a sliding log kept as a sorted set, for window.lua, chain.lua and refund.lua
-- (script.rs puts this file first in each): a member `t:c` scored `t` per charge of c units at the
-- server's time t (one call's charges of one log are one entry), and `#` scored minus the
-- sum of the entries' units. A check reads the sum and the entries that left the window,
-- not the whole log; the oldest and newest entries only when a decision needs them.
--
-- `log_lib(now, slack)` makes the functions at a call's first log: a script makes each
-- closure again on every call, and most calls hold no log. Few upvalues (the library's
-- names are looked up where used): each one a closure holds costs its making.
local function log_lib(now, slack)

  -- A member's units (0 for one not of this form).
  local function units(member)
    local colon = string.find(member, ':', 1, true)
    return colon and tonumber(string.sub(member, colon + 1)) or 0
  end

  -- Entry `t:c` where one so named is already (another charge of c units at t): the two as
  -- one, `t:2c` (and so on while that name is taken too).
  local function merge(key, t, c)
    while true do
      redis.call('ZREM', key, string.format('%s:%d', t, c))
      c = c * 2
      if redis.call('ZADD', key, 'NX', t, string.format('%s:%d', t, c)) == 1 then return end
    end
  end

  -- The units in the window of `w` µs, whether entries left it (the write removes them),
  -- and whether the key is not such a set (it counts as none; the write replaces it).
  local function load(key, w)
    local sum = redis.pcall('ZSCORE', key, '#')
    sum = type(sum) == 'string' and tonumber(sum)
    if not sum or sum > 0 or sum % 1 ~= 0 then return 0, false, true end
    local used = -sum
    local gone = redis.call('ZRANGE', key, 1, string.format('%d', now - w), 'BYSCORE')
    for j = 1, #gone do used = used - units(gone[j]) end
    if used < 0 then used = 0 end
    return used, #gone > 0, false
  end

  -- When enough of the oldest entries have left the window for `cost` to fit under `q`,
  -- this call's `added` units leaving last (0: never).
  local function retry(key, q, w, used, added, cost)
    local left, from = used, 0
    local above = string.format('(%d', now - w)
    while true do
      local page = redis.pcall('ZRANGE', key, above, '+inf', 'BYSCORE', 'LIMIT', from, 64,
                               'WITHSCORES')
      if type(page) ~= 'table' or page.err then page = {} end   -- not a set: no entries
      for j = 1, #page, 2 do
        left = left - units(page[j])
        if left < 0 then left = 0 end
        if left + cost <= q then
          local t = tonumber(page[j + 1])
          if t > now then t = now end
          return t + w - now
        end
      end
      if #page < 128 then break end
      from = from + 64
    end
    left = left - added
    if left < 0 then left = 0 end
    if added > 0 and left + cost <= q then return w end
    return 0
  end

  -- The newest entry still in the window (false: none).
  local function newest(key, w)
    local top = redis.pcall('ZRANGE', key, -1, -1, 'WITHSCORES')
    local t = type(top) == 'table' and top[1] ~= '#' and tonumber(top[2])
    if t and t > now - w then
      if t > now then t = now end
      return t
    end
    return false
  end

  -- A call's charge of `added` units, `used` in the window after it (the quota `q`): the
  -- entries that left go (`cut`), a key that was no such set is replaced (`new`), past
  -- the quota the oldest entries no decision can need go too, this call's units join as
  -- one entry and the sum follows; the key lives the window plus the slack.
  local function write(key, used, added, q, w, cut, new)
    if new then redis.call('DEL', key) end
    if cut then redis.call('ZREMRANGEBYSCORE', key, 1, string.format('%d', now - w)) end
    local done = used <= q
    while not done do
      local page = redis.call('ZRANGE', key, 1, '+inf', 'BYSCORE', 'LIMIT', 0, 32)
      local prune = {}
      for j = 1, #page do
        local c = units(page[j])
        if used - c <= q then done = true break end
        used = used - c
        prune[#prune + 1] = page[j]
      end
      if #prune > 0 then redis.call('ZREM', key, (table.unpack or unpack)(prune)) end
      if #page < 32 then done = true end
    end
    local t = string.format('%d', now)
    local made = redis.call('ZADD', key, string.format('%d', -used), '#', t, string.format('%s:%d', t, added))
    -- Fewer made: a call in this same microsecond charged as many units.
    if made < (new and 2 or 1) then merge(key, t, added) end
    redis.call('PEXPIRE', key, string.format('%d', math.max(math.ceil(w / 1000), 1) + slack))
  end

  -- Gives back `cost` units charged at `at` (µs) to the entries of that time and the sum;
  -- 1 if any were there, else 0 (a key that is no such set is left alone).
  local function take(key, at, cost)
    local sum = redis.pcall('ZSCORE', key, '#')
    if type(sum) ~= 'string' then return 0 end
    local t = string.format('%d', at)
    local taken = 0
    for _, member in ipairs(redis.call('ZRANGE', key, t, t, 'BYSCORE')) do
      local c = units(member)
      if c > 0 and taken < cost then
        local take = math.min(c, cost - taken)
        taken = taken + take
        redis.call('ZREM', key, member)
        local left = c - take
        if left > 0 and redis.call('ZADD', key, 'NX', t, string.format('%s:%d', t, left)) == 0 then
          merge(key, t, left)
        end
      end
    end
    if taken == 0 then return 0 end
    redis.call('ZADD', key, 'XX', string.format('%d', math.min(tonumber(sum) + taken, 0)), '#')
    return 1
  end

  return {load = load, retry = retry, newest = newest, write = write, take = take}
end
