#!/usr/bin/env bash
# A newcomer's first build, cold: the README's first example as its own crate (default
# features, then with `redis`), and the same router limited by tower_governor, each built
# from an empty target directory (the registry's download cache stays warm for all three:
# what is measured is compiling, not downloading). Not in CI: run it on a quiet machine.
#
#   scripts/cold-build.sh            # three repetitions, interleaved
#   REPS=1 scripts/cold-build.sh
#   TIMINGS=1 scripts/cold-build.sh  # also keep `cargo build --timings` reports
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
REPS=${REPS:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The README's first example, taken from the README itself.
example() {
    awk '/^```rust$/ {on=1; next} on && /^```$/ {exit} on {print}' "$root/README.md"
}

make_crate() {
    local name=$1 deps=$2 main=$3
    mkdir -p "$work/$name/src"
    printf '[package]\nname = "%s"\nversion = "0.0.0"\nedition = "2024"\npublish = false\n\n[dependencies]\n%s\n\n[workspace]\n' \
        "$name" "$deps" >"$work/$name/Cargo.toml"
    printf '%s\n' "$main" >"$work/$name/src/main.rs"
}

axum_tokio='axum = { version = "0.8", default-features = false, features = ["tokio", "http1"] }
tokio = { version = "1", features = ["rt-multi-thread", "macros", "net"] }'
make_crate ours-default "$axum_tokio
ratekeeper-axum = { path = \"$root/rate-limit-axum\" }" "$(example)"
make_crate ours-redis "$axum_tokio
ratekeeper-axum = { path = \"$root/rate-limit-axum\", features = [\"redis\"] }" "$(example)"
make_crate tower-governor "$axum_tokio
tower_governor = { version = \"0.8\", default-features = false, features = [\"axum\"] }" '
use axum::{Router, routing::get};
use std::net::SocketAddr;
use std::sync::Arc;
use tower_governor::{GovernorLayer, governor::GovernorConfigBuilder};

fn app() -> Router {
    // The bot guard: 1 200 a minute per client IP (20 a second), as the example.
    let guard = Arc::new(GovernorConfigBuilder::default().per_second(20).burst_size(1_200).finish().unwrap());
    let poll = Arc::new(GovernorConfigBuilder::default().per_second(3).burst_size(20).finish().unwrap());
    Router::new()
        .route("/api/poll", get(|| async { "{}" }).route_layer(GovernorLayer::new(poll)))
        .route("/too-many-requests", get(|| async { "Slow down a little." }))
        .route("/healthz", get(|| async { "ok" }))
        .layer(GovernorLayer::new(guard))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let service = app().into_make_service_with_connect_info::<SocketAddr>();
    drop(axum::serve(listener, service));
    Ok(())
}'

# Fetch everything first, so no build waits for a download.
for c in ours-default ours-redis tower-governor; do
    (cd "$work/$c" && cargo fetch -q)
done

printf '%-16s %s\n' crate "seconds (cold cargo build, dev profile), one per repetition"
declare -A times
for rep in $(seq "$REPS"); do
    for c in ours-default ours-redis tower-governor; do
        rm -rf "$work/$c/target"
        start=$(date +%s.%N)
        (cd "$work/$c" && cargo build -q ${TIMINGS:+--timings}) >/dev/null 2>&1
        end=$(date +%s.%N)
        times[$c]="${times[$c]:-} $(printf '%.1f' "$(echo "$end - $start" | bc)")"
        if [ -n "${TIMINGS:-}" ]; then
            cp "$work/$c/target/cargo-timings/cargo-timing.html" "$root/target/cold-build-$c-$rep.html"
        fi
    done
done
for c in ours-default ours-redis tower-governor; do
    printf '%-16s%s\n' "$c" "${times[$c]}"
done
