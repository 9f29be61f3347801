# Sourced by the scripts that drive headless Chromium (not in CI): installs Chromium, its
# driver and Selenium where missing.
if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
    apt-get update -q && apt-get install -y -q chromium chromium-driver
fi
python3 -c 'import selenium' 2>/dev/null || pip3 install -q selenium ||
    pip3 install -q --break-system-packages selenium
# Selenium Manager sends usage statistics unless told not to.
export SE_AVOID_STATS=true
