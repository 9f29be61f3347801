#!/usr/bin/env bash
# The crates this workspace publishes, one per line, in the workspace's order: every package
# whose manifest does not say `publish = false`. The manifests are the one list; CI and
# scripts/api.sh read it here.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo metadata --no-deps --format-version 1 | python3 -c '
import json, sys
for p in json.load(sys.stdin)["packages"]:
    if p["publish"] is None:
        print(p["name"])'
