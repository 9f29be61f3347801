#!/usr/bin/env bash
# The operator's page in headless Chromium (not in CI): installs Chromium, its driver and
# Selenium where missing, builds quiz-night, and runs scripts/admin-walkthrough.py, which
# saves docs/admin-page.png and docs/admin-page-lowered.png.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
    apt-get update -q && apt-get install -y -q chromium chromium-driver
fi
python3 -c 'import selenium' 2>/dev/null || pip3 install -q selenium ||
    pip3 install -q --break-system-packages selenium
cargo build -q -p ratekeeper-examples --bin quiz-night
python3 scripts/admin-walkthrough.py
