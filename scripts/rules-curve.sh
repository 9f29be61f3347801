#!/usr/bin/env bash
# How the layer's cost grows with rules: client instructions per allowed request over bare
# axum, 1 to 8 rules on one key, the memory store and a Redis store (a redis-server the
# bench starts; one request at a time, so one uncoalesced EVALSHA per request). Under
# callgrind, not in CI; needs valgrind.
#
# The steady state, not the first pass: each case runs N1 and N2 requests over the same
# 10 000 keys and a request costs (I(N2) - I(N1)) / (N2 - N1), so building the router and
# inserting the keys cancel out; bare axum is measured the same way and subtracted.
#
#   scripts/rules-curve.sh                       # both stores, 1..8 rules (~20 minutes)
#   STORES=memory RULES="1 8" scripts/rules-curve.sh
#   CSV=target/rules.csv SVG=docs/rules-curve.svg scripts/rules-curve.sh
set -euo pipefail
cd "$(dirname "$0")/.."
N1=${N1:-10000}
N2=${N2:-30000}
STORES=${STORES:-memory redis}
RULES=${RULES:-1 2 3 4 5 6 7 8}
CSV=${CSV:-target/rules-curve.csv}
SVG=${SVG:-target/rules-curve.svg}
cargo bench -p ratekeeper-benches --bench layer --no-run >/dev/null 2>&1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# A copy, so a rebuild during the run does not change what is measured.
cp "$(ls -t target/release/deps/layer-* | grep -v '\.d$' | head -1)" "$out/layer"

# Instructions of one run: LAYER_RUN=<case>:<n> under callgrind, the client process only.
run() {
  local env=$1 case=$2 n=$3
  env $env BENCH_HEADERS=ietf LAYER_RUN="$case:$n" valgrind --tool=callgrind \
    --callgrind-out-file="$out/cg" "$out/layer" >/dev/null 2>"$out/log"
  grep -h "Collected" "$out/log" | awk '{print $4}'
}

# Instructions per request in the steady state.
steady() {
  local a b
  a=$(run "$1" "$2" "$N1")
  b=$(run "$1" "$2" "$N2")
  echo $(((b - a) / (N2 - N1)))
}

bare=$(steady "" bare-allowed)
echo "bare axum: $bare instructions per request (steady state)"
echo "store,rules,instructions" >"$CSV"
printf '%-8s %5s %12s %14s\n' store rules 'over bare' 'per extra rule'
for store in $STORES; do
  case=ours-allowed
  [ "$store" = redis ] && case=ours-redis-allowed
  first=
  for rules in $RULES; do
    cost=$(($(steady "BENCH_RULES=$rules" "$case") - bare))
    echo "$store,$rules,$cost" >>"$CSV"
    extra=-
    if [ -z "$first" ]; then
      first=$cost first_rules=$rules
    elif [ "$rules" -gt "$first_rules" ]; then
      extra=$(((cost - first) / (rules - first_rules)))
    fi
    printf '%-8s %5s %12s %14s\n' "$store" "$rules" "$cost" "$extra"
  done
done
echo "csv: $CSV"
LAYER_PLOT="$CSV:$SVG" "$out/layer"
