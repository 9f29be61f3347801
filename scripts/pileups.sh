#!/usr/bin/env bash
# Twenty pile-ups of held sign-in attempts against the release quiz-night under ulimit -n 1024
# (not in CI). Prints each pile-up's figures and the server's RSS; exits 1 without a plateau.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo bench -p ratekeeper-benches --bench pileups
