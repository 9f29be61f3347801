#!/usr/bin/env bash
# Floods quiz-night's answer socket from clients nobody here wrote, and prints the close
# code each one read: Node's `ws` (8.23.1) and Python's `websockets` (17.4), installed
# pinned into a scratch folder. Each client sends N answers at once (25, 100, 1 000), ten
# times each; the connection's ceiling (20 a second) closes it, and the client should read
# 1008 (policy violation), not 1006 (the connection reset under its close frame). Outside
# the test command: it needs npm and pip, and takes about a minute.
#
#   scripts/ws-clients.sh            # builds and starts quiz-night on a free port
set -euo pipefail
cd "$(dirname "$0")/.."
scratch=$(mktemp -d)
trap 'kill "${quiz:-}" 2>/dev/null || true; rm -rf "$scratch"' EXIT

(cd "$scratch" && npm install --silent --no-audit --no-fund ws@8.23.1 >/dev/null)
python3 -m venv "$scratch/py" && "$scratch/py/bin/pip" install -q websockets==17.4

cargo build -q --release -p ratekeeper-examples --bin quiz-night
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
QUIZ_BIND=127.0.0.1:$port target/release/quiz-night >"$scratch/quiz.log" 2>&1 &
quiz=$!
until grep -q "listening on" "$scratch/quiz.log"; do sleep 0.1; done
url="ws://127.0.0.1:$port/api/games/g1/ws?participant="

cat >"$scratch/flood.js" <<'JS'
const WebSocket = require('ws');
const [url, n, runs] = [process.argv[2], +process.argv[3], +process.argv[4]];
const codes = {};
(async () => {
  for (let r = 0; r < runs; r++) {
    const code = await new Promise((done) => {
      const ws = new WebSocket(`${url}node-${n}-${r}`);
      ws.on('open', () => { for (let i = 0; i < n; i++) ws.send(`answer ${i}`); });
      ws.on('error', () => {});
      ws.on('close', (code) => done(code));
    });
    codes[code] = (codes[code] || 0) + 1;
  }
  console.log(`node ws 8.23.1, ${n} messages: close codes ${JSON.stringify(codes)}`);
})();
JS
cat >"$scratch/flood.py" <<'PY'
import asyncio, collections, sys
import websockets

async def one(url, n):
    async with websockets.connect(url) as ws:
        try:
            for i in range(n):
                await ws.send(f"answer {i}")
            async for _ in ws:
                pass
        except websockets.ConnectionClosed:
            pass
        return ws.close_code

async def main(url, n, runs):
    codes = collections.Counter()
    for r in range(runs):
        codes[await one(f"{url}py-{n}-{r}", n)] += 1
    print(f"python websockets {websockets.__version__}, {n} messages: close codes {dict(codes)}")

asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
PY
for n in 25 100 1000; do
    (cd "$scratch" && node flood.js "$url" "$n" 10)
    "$scratch/py/bin/python" "$scratch/flood.py" "$url" "$n" 10
done
