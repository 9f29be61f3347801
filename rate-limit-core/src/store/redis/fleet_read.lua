-- What a reader of the fleet's state (KEYS[1], log KEYS[2]) at epoch ARGV[1], version
-- ARGV[2], tip ARGV[3] needs, in one step: {version, epoch, tip, 'since', {log lines after
-- ARGV[2]}} when the state is of the reader's epoch, the log holds the reader's own change
-- at its version (or the reader holds nothing yet: every history starts there) and every
-- change since; else {version, epoch, tip, 'whole', HGETALL}. With ARGV[2] = -1, the mark
-- alone: {version, epoch, tip, 'mark', {}}. Reads only.
local v = tonumber(redis.call('HGET', KEYS[1], '#v') or '0')
local e = redis.call('HGET', KEYS[1], '#e') or '0'
local t = redis.call('HGET', KEYS[1], '#t') or '0'
local after = tonumber(ARGV[2])
if after < 0 or (v == after and e == ARGV[1] and t == ARGV[3]) then
  return {v, e, t, 'mark', {}}
end
if v > 0 and (e == ARGV[1] or after == 0) and v >= after then
  local on_it = after == 0
  if not on_it then
    local base = redis.call('HGET', KEYS[2], string.format('%d', after))
    on_it = base ~= false and string.sub(base, 1, #ARGV[3] + 1) == ARGV[3] .. '\n'
  end
  local changes = on_it and {} or nil
  for i = after + 1, on_it and v or after do
    local c = redis.call('HGET', KEYS[2], string.format('%d', i))
    if not c then
      changes = nil
      break
    end
    changes[#changes + 1] = c
  end
  if changes then
    return {v, e, t, 'since', changes}
  end
end
return {v, e, t, 'whole', redis.call('HGETALL', KEYS[1])}
