#!/usr/bin/env python3
"""The operator's page in a real browser (headless Chromium through Selenium), outside the
test command: quiz-night with an admin token; one participant floods the poll; the page
shows them at the top of the poll's heavy hitters; the poll's quota is lowered through the
page's form and a participant is refused; the quota is restored through the form and the
participant is let through again. Screenshots go to docs/.

    scripts/admin-walkthrough.sh      # installs Chromium, its driver and Selenium, then runs this
"""

import os
import subprocess
import sys
import time
import urllib.error
import urllib.request

from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOKEN = "walkthrough-token-0123456789abcdef-0123456789"
BIND = os.environ.get("WALK_BIND", "127.0.0.1:3077")
BASE = f"http://{BIND}"


def poll(who):
    req = urllib.request.Request(f"{BASE}/api/games/g1/poll", headers={"x-participant-id": who})
    try:
        with urllib.request.urlopen(req) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def submit(b, button):
    """Clicks a form's button and waits for the page it leads to."""
    old = b.find_element(By.TAG_NAME, "html")
    button.click()
    WebDriverWait(b, 10).until(EC.staleness_of(old))


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        sys.exit(1)


def main():
    env = dict(os.environ, QUIZ_BIND=BIND, QUIZ_ADMIN_TOKEN=TOKEN, QUIZ_ADMIN_INSECURE_COOKIE="1")
    for var in ("REDIS_URL", "REDIS_CLUSTER", "REDIS_SENTINEL"):
        env.pop(var, None)
    server = subprocess.Popen(
        [os.path.join(ROOT, "target/debug/quiz-night")], env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(f"{BASE}/healthz")
                break
            except OSError:
                time.sleep(0.1)
        statuses = [poll("flooder") for _ in range(25)]
        check(statuses.count(200) == 20 and statuses.count(429) == 5,
              f"the flooder: 20 polls answered, 5 refused ({statuses.count(429)} refused)")
        check(all(poll("quiet") == 200 for _ in range(3)), "a quiet participant: 3 polls answered")

        opts = webdriver.ChromeOptions()
        opts.binary_location = "/usr/bin/chromium"
        for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1200,1400"):
            opts.add_argument(a)
        service = webdriver.ChromeService(executable_path="/usr/bin/chromedriver")
        b = webdriver.Chrome(options=opts, service=service)
        try:
            b.get(f"{BASE}/admin")
            b.find_element(By.NAME, "token").send_keys(TOKEN)
            submit(b, b.find_element(By.CSS_SELECTOR, "form button"))
            check("Signed in as" in b.page_source, "signed in through the form (a session cookie)")
            first = b.find_element(By.XPATH, "//h3[text()='poll']/following-sibling::table[1]//td[@class='principal']")
            check(first.text == "p:flooder", f"the poll's heaviest hitter is the flooder ({first.text})")
            os.makedirs(os.path.join(ROOT, "docs"), exist_ok=True)
            b.save_screenshot(os.path.join(ROOT, "docs/admin-page.png"))

            def set_quota(n):
                box = b.find_element(By.CSS_SELECTOR, "input[aria-label='quota of poll']")
                box.clear()
                box.send_keys(str(n))
                submit(b, box.find_element(By.XPATH, "./following-sibling::button"))
                row = b.find_element(By.XPATH, "//tr[td[1][text()='poll']]/td[@class='quota']")
                check(row.text == str(n), f"the page shows the poll's quota at {n}")

            set_quota(2)
            check(poll("quiet") == 429, "the quiet participant (3 used) is refused at quota 2")
            b.save_screenshot(os.path.join(ROOT, "docs/admin-page-lowered.png"))
            set_quota(20)
            check(poll("quiet") == 200, "restored to 20: the quiet participant is answered")
        finally:
            b.quit()
    finally:
        server.kill()
        server.wait()
    print("walk-through done; screenshots in docs/")


if __name__ == "__main__":
    main()
