#!/usr/bin/env bash
# The property-based fuzz targets at a large case count (not in CI, which runs proptest's
# default of 256 per target). Usage: scripts/fuzz.sh [cases]   (default 10 000 000)
# Prints each target's time; a failure prints proptest's minimal failing input, which
# becomes a regression test (proptest also records it under proptest-regressions/).
set -euo pipefail
cd "$(dirname "$0")/.."
cases="${1:-10000000}"
export PROPTEST_CASES="$cases"
for target in \
    "-p ratekeeper-tower --test fuzz" \
    "-p ratekeeper-core --test memory fuzz::" \
    "-p ratekeeper-core --all-features --test config_fuzz" ; do
    start=$(date +%s)
    # shellcheck disable=SC2086
    cargo test --release $target -- --test-threads 1
    echo "fuzz: $target: $cases cases each in $(( $(date +%s) - start )) s"
done
