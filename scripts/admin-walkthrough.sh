#!/usr/bin/env bash
# The operator's page in headless Chromium (not in CI): installs Chromium, its driver and
# Selenium where missing, builds quiz-night, and runs scripts/admin-walkthrough.py, which
# saves docs/admin-page.png and docs/admin-page-lowered.png.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/chromium.sh
cargo build -q -p ratekeeper-examples --bin quiz-night
python3 scripts/admin-walkthrough.py
