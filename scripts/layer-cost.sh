#!/usr/bin/env bash
# The layer's instructions per request over bare axum, under callgrind (not in CI):
# allowed and refused, 1/2/4/8 rules, the IETF pair and the default headers, with
# tower_governor and a no-op layer measured in the same run. Needs valgrind.
#
#   scripts/layer-cost.sh            # every row (~10 minutes)
#   N=5000 scripts/layer-cost.sh     # fewer requests per case
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-20000}
cargo bench -p ratekeeper-benches --bench layer --no-run >/dev/null 2>&1
BIN=$(ls -t target/release/deps/layer-* | grep -v '\.d$' | head -1)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# Instructions of one case: LAYER_RUN=<case>:N under callgrind, whole program.
run() {
  local env=$1 case=$2
  env $env LAYER_RUN="$case:$N" valgrind --tool=callgrind --callgrind-out-file="$out/cg" \
    "$BIN" >/dev/null 2>"$out/log"
  grep -h "Collected" "$out/log" | awk '{print $4}'
}

per_request() { echo $(( ($1 - $2) / N )); }

bare_allowed=$(run "" bare-allowed)
bare_refused=$(run "" bare-refused)
echo "instructions per request over bare axum ($N requests a case)"
printf '%-34s %9s %9s\n' case allowed refused
for peer in noop-layer governor; do
  a=$(run "" "$peer-allowed"); r=$(run "" "$peer-refused")
  printf '%-34s %9s %9s\n' "$peer" "$(per_request "$a" "$bare_allowed")" "$(per_request "$r" "$bare_refused")"
done
for headers in ietf default; do
  for rules in 1 2 4 8; do
    env="BENCH_RULES=$rules"
    [ "$headers" = ietf ] && env="$env BENCH_HEADERS=ietf"
    a=$(run "$env" ours-allowed); r=$(run "$env" ours-refused)
    printf '%-34s %9s %9s\n' "ours, $headers headers, $rules rule(s)" \
      "$(per_request "$a" "$bare_allowed")" "$(per_request "$r" "$bare_refused")"
  done
done
