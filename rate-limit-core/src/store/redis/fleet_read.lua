-- What a reader of the fleet's state (KEYS[1], log KEYS[2]) at epoch ARGV[1], version
-- ARGV[2] needs, in one step: {version, epoch, 'since', {changes after ARGV[2]}} when the
-- state is of the reader's epoch (or the reader holds nothing yet: every history starts
-- there) and the log still holds every change since; else
-- {version, epoch, 'whole', HGETALL}. With ARGV[2] = -1, the mark alone:
-- {version, epoch, 'mark', {}}. Reads only.
local v = tonumber(redis.call('HGET', KEYS[1], '#v') or '0')
local e = redis.call('HGET', KEYS[1], '#e') or '0'
local after = tonumber(ARGV[2])
if after < 0 then
  return {v, e, 'mark', {}}
end
if v > 0 and (e == ARGV[1] or after == 0) and v >= after then
  local changes = {}
  for i = after + 1, v do
    local c = redis.call('HGET', KEYS[2], string.format('%d', i))
    if not c then
      changes = nil
      break
    end
    changes[#changes + 1] = c
  end
  if changes then
    return {v, e, 'since', changes}
  end
end
return {v, e, 'whole', redis.call('HGETALL', KEYS[1])}
