#!/usr/bin/env bash
# A flood of 2.1 M fresh keys against the release quiz-night (in-memory store), then the
# limits it must not have reset (not in CI). Usage: scripts/key-flood.sh [keys]
# Prints the rate and the server's RSS before and after; exits 1 if a limit was reset.
set -euo pipefail
cd "$(dirname "$0")/.."
FLOOD_KEYS="${1:-2100000}" cargo bench -p ratekeeper-benches --bench key_flood
