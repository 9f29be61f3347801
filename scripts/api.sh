#!/usr/bin/env bash
# The record of each published crate's public API (`api/<crate>.txt`), from rustdoc's JSON
# output read by scripts/api-record.py.
#
#     scripts/api.sh           # write the records (commit them with the change)
#     scripts/api.sh --check   # fail, with the difference, if a record is not the crates'
#
# The JSON output is unstable in rustdoc: RUSTC_BOOTSTRAP lets this stable toolchain give
# it, as the docs build does for `doc_cfg`. Every feature is on, so an item a feature adds
# is in the record.
set -euo pipefail
cd "$(dirname "$0")/.."
check=${1:-}
mapfile -t crates < <(bash scripts/published.sh)
mkdir -p api
status=0
# One build for every crate: its features resolved as the docs build resolves them (CI runs
# that first), so no dependency is checked again; a build per crate resolved each crate's
# features apart and checked the dependency tree four times (131 s of a CI run).
RUSTC_BOOTSTRAP=1 RUSTDOCFLAGS="--cfg docsrs -Z unstable-options --output-format json" \
    cargo doc -q --no-deps --all-features "${crates[@]/#/--package=}"
for crate in "${crates[@]}"; do
    fresh=$(python3 scripts/api-record.py "${CARGO_TARGET_DIR:-target}/doc/${crate//-/_}.json")
    # One path per item: a type at the root and in a module is two names for one thing.
    if ! head -1 <<<"$fresh" | grep -q ', 0 items at more than one path$'; then
        echo "api: $crate has items at two paths:" >&2
        grep -F '(also at' <<<"$fresh" >&2
        status=1
    fi
    if [ "$check" = "--check" ]; then
        if ! diff -u "api/$crate.txt" - <<<"$fresh" >&2; then
            echo "api: $crate's public API is not api/$crate.txt: if the change is meant," \
                "run scripts/api.sh, commit the record and say it in CHANGELOG.md" >&2
            status=1
        fi
    else
        printf '%s\n' "$fresh" >"api/$crate.txt"
        head -1 "api/$crate.txt"
    fi
done
exit $status
