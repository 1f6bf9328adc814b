"""Headless Chromium for tests of the web board (Debian's `chromium` and `chromium-driver`,
driven with selenium). Without them the browser tests skip, unless MEMBENCH_REQUIRE_BROWSER=1
(set by .ci/run, which installs them), where a missing browser is a failure."""

from __future__ import annotations

import os
import shutil

import pytest

CHROMIUM = next(filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))), None)
CHROMEDRIVER = shutil.which("chromedriver")


def chromium_driver():
    """A headless Chromium session that keeps the page's console log (`browser_errors`)."""
    if not (CHROMIUM and CHROMEDRIVER):
        message = "headless Chromium needs the Debian packages chromium and chromium-driver"
        if os.environ.get("MEMBENCH_REQUIRE_BROWSER") == "1":
            pytest.fail(message)
        pytest.skip(message)
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1400,1000", "--allow-file-access-from-files"):
        options.add_argument(argument)
    options.binary_location = CHROMIUM
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


def browser_errors(driver) -> list[dict]:
    """The console entries of level SEVERE (errors, uncaught exceptions, failed loads) since the last call."""
    return [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
