"""Headless chromium driven by selenium, for the tests that look at the UI in a real browser
(tests/integration/ui/test_browser.py, and the example operators' end-to-end tests).

Importing this module needs neither selenium nor chromium: ``chromium()`` skips the test,
saying why, when one of them is missing, so a module that also holds tests without a
browser can use it. Screenshots are written only when ``SETPOINT_UI_SCREENSHOTS`` names a
directory (docs/images/ui-*.png are taken this way)."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

#: when set, the tests save screenshots of the pages they check here (docs/images/ui-*.png
#: are taken this way: SETPOINT_UI_SCREENSHOTS=docs/images pytest -m slow tests/integration/ui)
SCREENSHOTS = os.environ.get("SETPOINT_UI_SCREENSHOTS")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver") or (
    "/usr/bin/chromedriver" if Path("/usr/bin/chromedriver").exists() else None)
WAIT = 30.0


@contextlib.contextmanager
def chromium(profile: Path, *, window: str = "1280,1000") -> Iterator[Any]:
    """A headless chromium for the block (its profile in ``profile``); the test is skipped,
    with the reason, when selenium, chromium or chromedriver is missing or chromium does
    not start. The browser's console is printed when the block ends."""
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
    if CHROMIUM is None or CHROMEDRIVER is None:
        pytest.skip("chromium and chromedriver are not installed (apt-get install chromium "
                    "chromium-driver)")
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                f"--window-size={window}", "--no-first-run", f"--user-data-dir={profile}"):
        options.add_argument(arg)
    options.accept_insecure_certs = True  # the cluster's own CA signed the server certificate
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    try:
        driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    except WebDriverException as e:
        pytest.skip(f"chromium does not start here: {e.msg}")
    try:
        yield driver
    finally:
        for entry in driver.get_log("browser"):
            print("browser:", entry.get("level"), entry.get("message"))
        driver.quit()


def until(driver: Any, condition: Callable[[Any], Any], what: str) -> Any:
    """Wait (at most WAIT seconds) for ``condition(driver)`` to be truthy; an element that is
    missing or went stale (the page redraws live) means "read again". On timeout, the
    assertion says what was awaited and what the page shows (its error and owner tree)."""
    from selenium.common.exceptions import (
        NoSuchElementException,
        StaleElementReferenceException,
        TimeoutException,
    )
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        return WebDriverWait(driver, WAIT, ignored_exceptions=(
            NoSuchElementException, StaleElementReferenceException)).until(condition)
    except TimeoutException as e:
        error = driver.find_elements(By.ID, "error")
        shown = error[0].text if error else ""
        tree = driver.find_elements(By.ID, "tree")
        raise AssertionError(f"timed out waiting until {what} (error shown: {shown!r}; "
                             f"tree: {tree[0].text if tree else ''!r})") from e


def snapshot(driver: Any, name: str) -> None:
    """Save the page as SETPOINT_UI_SCREENSHOTS/ui-NAME.png, when that is set."""
    if SCREENSHOTS:
        Path(SCREENSHOTS).mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(Path(SCREENSHOTS) / f"ui-{name}.png"))


def sign_in(driver: Any, url: str, token: str) -> None:
    """Open the UI at ``url`` (the server's base URL) in a fresh session and sign in with
    ``token`` through the sign-in form."""
    from selenium.webdriver.common.by import By

    driver.get(url + "/ui/")
    driver.execute_script("sessionStorage.clear()")
    driver.get(url + "/ui/#/")
    field = until(driver, lambda d: d.find_element(By.ID, "token"), "the sign-in form shows")
    field.send_keys(token)
    driver.find_element(By.CSS_SELECTOR, "#signin button[type=submit]").click()
