"""Headless Chromium from Debian's packages, driven by Selenium through Debian's chromedriver.

The flags are the ones this machine's notes say work (`/work/.library/env/machines/python.md`, "Known to
work"): as root Chromium needs `--no-sandbox`; without the background-networking flags it keeps trying to reach
Google's hosts, which the closed network refuses; a fresh `--user-data-dir` per run keeps no state between runs.
Both binaries are given by path, so Selenium Manager never tries to download a browser or a driver.

Absent Chromium fails the test with what to install, unless `DISPATCH_BROWSER_TESTS_OPTIONAL=1` says a skip is
acceptable, and never under CI (`CI` set): CI installs Chromium (`.ci/run`) and must run the test.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
OPTIONAL_ENV = "DISPATCH_BROWSER_TESTS_OPTIONAL"
#: the window a person reads the UI in: a common laptop screen (issue 25), smaller than the wide desktop the UI was
#: first checked on; headless Chromium gives the page a 1366x625 viewport in it (the rest is the window's own bars)
WINDOW = (1366, 768)
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    f"--window-size={WINDOW[0]},{WINDOW[1]}",
)
#: seconds a page may take to load before a command fails
PAGE_LOAD_TIMEOUT = 120


def missing() -> list[str]:
    """What the browser test needs and this machine lacks."""
    absent = [str(path) for path in (CHROMIUM, CHROMEDRIVER) if not path.exists()]
    try:
        import selenium  # noqa: F401
    except ImportError:
        absent.append("the Python package selenium (the `test` extra)")
    return absent


def require_browser() -> None:
    """Fail (or, where explicitly allowed outside CI, skip) when Chromium, chromedriver or Selenium is absent."""
    absent = missing()
    if not absent:
        return
    why = (
        f"the browser test needs {', '.join(absent)}: `apt-get install chromium chromium-driver` (Debian) and "
        "`pip install -e '.[test]'`; .ci/run installs them"
    )
    if os.environ.get(OPTIONAL_ENV) == "1" and not os.environ.get("CI"):
        pytest.skip(f"{why} ({OPTIONAL_ENV}=1 allows skipping it)")
    pytest.fail(why)


def start_chromium(profile: Path, driver_log: Path) -> Any:
    """A headless Chromium session with a fresh profile in `profile`; chromedriver logs to `driver_log`."""
    from selenium import webdriver

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    service = webdriver.ChromeService(executable_path=str(CHROMEDRIVER), log_output=str(driver_log))
    driver = webdriver.Chrome(options=options, service=service)
    driver.set_page_load_timeout(PAGE_LOAD_TIMEOUT)
    return driver


def remove_profile(profile: Path) -> None:
    shutil.rmtree(profile, ignore_errors=True)


__all__ = [
    "CHROMEDRIVER",
    "CHROMIUM",
    "FLAGS",
    "OPTIONAL_ENV",
    "WINDOW",
    "missing",
    "remove_profile",
    "require_browser",
    "start_chromium",
]
