#!/usr/bin/env bash
# The room: 100 phones behind one IP fall back from quiz-night's answer socket to polling
# at once, and return; on the memory store and a real redis-server. Prints the figures
# RELIABILITY.md quotes. About three minutes; not part of the test command.
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo bench -p ratekeeper-benches --bench room
