"""The admin web page in headless Chromium (Debian's chromium and chromium-driver), for the
browser tests: a browser on a profile of its own, signed in with a token."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait

from tests.support.processes import ARTIFACTS

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1400,1000",
)


def browser(profile: str, *, offline: bool = False) -> webdriver.Chrome:
    """Chromium on `profile`. Offline: no host but 127.0.0.1 resolves (so a CDN could not
    load), and the console is kept (driver.get_log("browser"))."""
    assert Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists(), (
        "the browser test needs Debian's chromium and chromium-driver (.ci/run installs them)"
    )
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    extra = (
        ["--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"]
        if offline
        else ["--disable-quic"]
    )
    for flag in (*FLAGS, f"--user-data-dir={profile}", *extra):
        options.add_argument(flag)
    if offline:
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


@dataclass
class Page:
    driver: webdriver.Chrome
    wait: WebDriverWait  # type: ignore[type-arg]

    def new_webhook_form(self, url: str, cron_schedule: str) -> WebElement:
        """The form of a new cron webhook, opened, its URL and schedule typed in."""
        self.wait.until(ec.visibility_of_element_located((By.ID, "new-webhook"))).click()
        form = self.wait.until(ec.visibility_of_element_located((By.ID, "webhook-form")))
        form.find_element(By.NAME, "url").send_keys(url)
        form.find_element(By.NAME, "cronSchedule").send_keys(cron_schedule)
        return form

    def click(self, css: str) -> None:
        """Click the element `css` finds, finding it again if the page redrew it between the
        find and the click (the webhook list redraws when a delivery's news arrives)."""

        def clicked(driver: WebDriver) -> bool:
            try:
                driver.find_element(By.CSS_SELECTOR, css).click()
            except StaleElementReferenceException:
                return False
            return True

        self.wait.until(clicked)


@contextmanager
def signed_in(
    base: str,
    token: str,
    *,
    offline: bool = False,
    timeout: float = 20,
    window: tuple[int, int] | None = None,
) -> Iterator[Page]:
    """The admin page at `base`, signed in with `token`, in a browser of its own (closed,
    and its profile removed, when the block ends); `wait` waits up to `timeout` seconds."""
    profile = tempfile.mkdtemp(prefix="cronhooks-chromium-")
    driver = browser(profile, offline=offline)
    try:
        if window is not None:
            driver.set_window_size(*window)
        driver.get(base + "/")
        driver.find_element(By.ID, "token").send_keys(token)
        driver.find_element(By.ID, "login").click()
        yield Page(driver, WebDriverWait(driver, timeout))
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def artifact(name: str) -> Path:
    """Where a test keeps a file for the record (test-artifacts/NAME)."""
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS / name


def shoot(driver: WebDriver, name: str, element: Any = None) -> Path:
    """A screenshot to test-artifacts/NAME, `element` scrolled to the top first."""
    path = artifact(name)
    if element is not None:
        driver.execute_script("arguments[0].scrollIntoView({block: 'start'})", element)
    driver.save_screenshot(str(path))
    return path


def console(driver: WebDriver) -> list[dict[str, Any]]:
    """The browser's console so far (an offline browser keeps it)."""
    return driver.get_log("browser")  # type: ignore[no-any-return]


def problems(log: list[dict[str, Any]]) -> list[str]:
    """Console entries that are errors or warnings, or that mention the CSP."""
    return [
        entry["message"]
        for entry in log
        if entry["level"] in ("SEVERE", "WARNING") or "Content Security Policy" in entry["message"]
    ]
