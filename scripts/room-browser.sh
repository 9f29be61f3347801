#!/usr/bin/env bash
# One player of the room in headless Chromium (not in CI): installs Chromium, its driver and
# Selenium where missing, builds quiz-night, and runs scripts/room-browser.py: the player's
# page on one quiz-night instance, its socket on another, both on one redis-server; the
# socket instance is killed, then started again, and the page's switch to polling and back
# is timed.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/chromium.sh
cargo build -q --release -p ratekeeper-examples --bin quiz-night
python3 scripts/room-browser.py
