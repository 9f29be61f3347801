//! Each algorithm's minimal form on Redis: the floor ours is measured against, one script
//! per algorithm, the same redis crate. Keys carry the user in a hash tag, as ours do.

use std::time::{SystemTime, UNIX_EPOCH};

/// A fixed window: `INCR`, and `EXPIRE` on the first.
pub const FIXED: &str = "local n = redis.call('INCR', KEYS[1]) \
    if n == 1 then redis.call('EXPIRE', KEYS[1], ARGV[2]) end \
    if n > tonumber(ARGV[1]) then return 0 end return 1";

/// The minimal all-or-nothing chain of two fixed windows.
pub const FIXED_CHAIN: &str = "local a = tonumber(redis.call('GET', KEYS[1]) or '0') \
    local b = tonumber(redis.call('GET', KEYS[2]) or '0') \
    if a >= tonumber(ARGV[1]) or b >= tonumber(ARGV[2]) then return 0 end \
    if redis.call('INCR', KEYS[1]) == 1 then redis.call('EXPIRE', KEYS[1], ARGV[3]) end \
    if redis.call('INCR', KEYS[2]) == 1 then redis.call('EXPIRE', KEYS[2], ARGV[3]) end \
    return 1";

/// A sliding window as two counters: this window's (`KEYS[1]`) and the last one's
/// (`KEYS[2]`), the last weighted by what of it still overlaps (`ARGV[2]`, 0 to 1). The
/// client names the windows by its clock.
pub const SLIDING: &str = "local c = tonumber(redis.call('GET', KEYS[1]) or '0') \
    local p = tonumber(redis.call('GET', KEYS[2]) or '0') \
    if c + p * tonumber(ARGV[2]) >= tonumber(ARGV[1]) then return 0 end \
    if redis.call('INCR', KEYS[1]) == 1 then redis.call('EXPIRE', KEYS[1], ARGV[3]) end \
    return 1";

/// A sliding log as a sorted set of the admitted requests' times (µs): drop what left
/// the window, count, add. `ARGV[3]` is a member unique to the request.
pub const LOG: &str = "local t = redis.call('TIME') \
    local now = t[1] * 1000000 + t[2] \
    redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[2])) \
    if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then return 0 end \
    redis.call('ZADD', KEYS[1], now, ARGV[3]) \
    redis.call('PEXPIRE', KEYS[1], math.floor(tonumber(ARGV[2]) / 1000) + 1000) \
    return 1";

/// A token bucket as GCRA in one value, the theoretical arrival time (µs): `ARGV[1]` the
/// emission interval, `ARGV[2]` the burst's tolerance (µs).
pub const BUCKET: &str = "local t = redis.call('TIME') \
    local now = t[1] * 1000000 + t[2] \
    local tat = tonumber(redis.call('GET', KEYS[1]) or '0') \
    if tat < now then tat = now end \
    local tol = tonumber(ARGV[2]) \
    if tat - now > tol then return 0 end \
    tat = tat + tonumber(ARGV[1]) \
    redis.call('SET', KEYS[1], string.format('%d', tat), 'PX', math.floor((tat - now) / 1000) + 1000) \
    return 1";

/// The two windows' numbers now, by this process's clock, and how much of the last one
/// still overlaps the sliding window (0 to 1).
pub fn windows(window_secs: u64) -> (u64, u64, f64) {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64();
    let w = window_secs as f64;
    let cur = (now / w).floor();
    let weight = 1.0 - (now - cur * w) / w;
    (cur as u64, cur as u64 - 1, weight)
}
