"""Debian's headless Chromium, driven through /usr/bin/chromedriver with Selenium.

Nothing here downloads a browser or a driver: both are the system's (``.ci/run``
installs the ``chromium`` and ``chromium-driver`` packages when they are missing),
and Selenium is handed their paths, so it never looks for its own.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
FLAGS = [
    "--headless",
    "--no-sandbox",  # as root
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1200,720",
]

# textual-serve keeps its xterm.js Terminal in a closure. Before any script of the
# page runs, catch the first object assigned to a `.terminal` property (its
# Terminal), so a test reads the screen from xterm's own buffer, as text.
_CATCH_TERMINAL = """
window.__terminals = [];
Object.defineProperty(Object.prototype, 'terminal', {
  configurable: true,
  set(value) {
    window.__terminals.push(value);
    Object.defineProperty(this, 'terminal',
      {value, writable: true, configurable: true, enumerable: true});
  },
});
"""
_SCREEN_TEXT = """
const terminal = (window.__terminals || []).find(t => t && t.buffer && t.buffer.active);
if (!terminal) return null;
const buffer = terminal.buffer.active, lines = [];
for (let i = 0; i < terminal.rows; i++) {
  const line = buffer.getLine(buffer.viewportY + i);
  lines.push(line ? line.translateToString(true) : '');
}
return lines.join('\\n');
"""


def require_chromium() -> None:
    missing = [path for path in (CHROMIUM, CHROMEDRIVER) if not shutil.which(path)]
    if not missing:
        return
    message = f"{', '.join(missing)} missing: apt-get install -y chromium chromium-driver"
    if os.environ.get("CI"):
        pytest.fail(message)  # CI installs them (.ci/run): a skip there would hide a gap
    pytest.skip(message)


class Browser:
    def __init__(self, driver: Any) -> None:
        self.driver = driver
        self.closed = False

    def close(self) -> None:
        """Close the browser, and with it the tab and its websocket."""
        if not self.closed:
            self.closed = True
            self.driver.quit()

    def open(self, url: str) -> None:
        self.driver.get(url)

    def page_text(self) -> str:
        return str(self.driver.execute_script("return document.body.innerText"))

    def screen(self) -> str:
        """The terminal's screen as text, one line per row ('' before it exists)."""
        return str(self.driver.execute_script(_SCREEN_TEXT) or "")

    def wait_for_screen(self, check: Callable[[str], Any], timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        while True:
            text = self.screen()
            if check(text):
                return text
            if time.monotonic() > deadline:
                raise AssertionError(f"the screen never showed what {check} wanted:\n{text}")
            time.sleep(0.2)

    def focus(self) -> None:
        """Give the page's terminal the focus, as tabbing into it does."""
        self.driver.execute_script("document.querySelector('.xterm-helper-textarea').focus()")

    def press(self, *keys: str) -> None:
        """Type into xterm.js, as a user does: its hidden textarea holds the focus."""
        from selenium.webdriver.common.by import By

        self.driver.find_element(By.CSS_SELECTOR, ".xterm-helper-textarea").send_keys(*keys)

    def screenshot(self) -> bytes:
        return bytes(self.driver.get_screenshot_as_png())


@contextmanager
def chromium() -> Iterator[Browser]:
    require_chromium()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    with tempfile.TemporaryDirectory(prefix="flowdrop-chromium-") as profile:
        options.add_argument(f"--user-data-dir={profile}")
        driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
        browser = Browser(driver)
        try:
            driver.execute_cdp_cmd(
                "Page.addScriptToEvaluateOnNewDocument", {"source": _CATCH_TERMINAL}
            )
            yield browser
        finally:
            if not browser.closed:
                driver.quit()
