"""One player of the room in headless Chromium: quiz-night's /play page served by one
instance, its answer socket by another (both on one redis-server); the socket instance is
killed (SIGKILL: every socket dropped, connections refused) and started again. Prints how
long the page took to fall back to polling and to return to the socket, and the polls the
server admitted for it meanwhile."""

import os
import signal
import socket
import subprocess
import tempfile
import time

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.common.by import By


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(cond, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.05)
    return False


def listening(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
        return True
    except OSError:
        return False


def quiz(port, redis_port):
    env = dict(os.environ, QUIZ_BIND=f"127.0.0.1:{port}", REDIS_URL=f"redis://127.0.0.1:{redis_port}/")
    for var in ("REDIS_CLUSTER", "REDIS_SENTINEL", "QUIZ_ADMIN_TOKEN"):
        env.pop(var, None)
    p = subprocess.Popen(["target/release/quiz-night"], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert wait_for(lambda: listening(port), 10), "quiz-night did not start"
    return p


def main():
    redis_port, http_port, ws_port = free_port(), free_port(), free_port()
    data = tempfile.mkdtemp()
    redis = subprocess.Popen(["redis-server", "--port", str(redis_port), "--save", "", "--dir", data],
                             stdout=subprocess.DEVNULL)
    assert wait_for(lambda: listening(redis_port), 10)
    page_server = quiz(http_port, redis_port)
    socket_server = quiz(ws_port, redis_port)
    opts = Options()
    opts.add_argument("--headless=new")
    opts.add_argument("--no-sandbox")
    driver = webdriver.Chrome(options=opts)
    try:
        driver.get(f"http://127.0.0.1:{http_port}/play?game=g1&participant=browser"
                   f"&ws=ws://127.0.0.1:{ws_port}")
        mode = lambda: driver.find_element(By.ID, "mode").text
        polls = lambda: int(driver.find_element(By.ID, "polls").text)
        assert wait_for(lambda: mode() == "socket", 10), f"never on the socket: {mode()}"
        print("on the socket")
        time.sleep(2)
        t0 = time.monotonic()
        socket_server.send_signal(signal.SIGKILL)
        socket_server.wait()
        assert wait_for(lambda: mode() == "polling", 10), f"never fell back: {mode()}"
        fell = time.monotonic() - t0
        assert wait_for(lambda: polls() >= 1, 5), "no poll admitted"
        print(f"fell back to polling {fell:.2f} s after the socket server was killed")
        time.sleep(25)
        during = polls()
        t1 = time.monotonic()
        socket_server = quiz(ws_port, redis_port)
        assert wait_for(lambda: mode() == "socket", 15), f"never returned: {mode()}"
        back = time.monotonic() - t1
        print(f"polls admitted during the outage (25 s, every 10 s): {during}")
        print(f"back on the socket {back:.2f} s after the socket server was listening again")
        state = driver.find_element(By.ID, "state").text
        assert '"game":"g1"' in state, state
    finally:
        driver.quit()
        for p in (page_server, socket_server, redis):
            p.kill()


if __name__ == "__main__":
    main()
