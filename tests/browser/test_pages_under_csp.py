"""The admin page and GraphiQL in headless Chromium under their Content-Security-Policy
(CONTRACT §15), with every host but the test server unresolvable: GraphiQL renders its
editor from the vendored files and runs a query, and the console shows no CSP violation
and no error at all."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait

from cronhooks_common.clock import ManualClock
from cronhooks_common.settings import Settings
from tests.browser.test_web_page import CHROMEDRIVER, CHROMIUM
from tests.support.inprocess import admin_token, running
from tests.support.processes import ARTIFACTS


def offline_browser(profile: str) -> webdriver.Chrome:
    """Chromium as test_web_page starts it, offline (no host but 127.0.0.1 resolves, so a
    CDN could not load) and keeping its console."""
    assert Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists(), (
        "the browser test needs Debian's chromium and chromium-driver (.ci/run installs them)"
    )
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1400,1000",
        f"--user-data-dir={profile}",
        "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


def console(driver: webdriver.Chrome) -> list[dict[str, Any]]:
    return driver.get_log("browser")  # type: ignore[no-any-return]


def drive(base: str, token: str) -> dict[str, Any]:
    profile = tempfile.mkdtemp(prefix="cronhooks-chromium-")
    driver = offline_browser(profile)
    wait = WebDriverWait(driver, 30)
    try:
        driver.get(base + "/")
        driver.find_element(By.ID, "token").send_keys(token)
        driver.find_element(By.ID, "login").click()
        wait.until(ec.visibility_of_element_located((By.ID, "new-webhook")))
        page_log = console(driver)
        # Same tab: GraphiQL finds the admin page's token and fills in its header.
        driver.get(base + "/graphql")
        wait.until(
            ec.presence_of_element_located((By.CSS_SELECTOR, ".graphiql-query-editor .CodeMirror"))
        )
        driver.find_element(By.CSS_SELECTOR, ".graphiql-execute-button").click()
        wait.until(
            ec.text_to_be_present_in_element((By.CSS_SELECTOR, ".result-window"), '"cronWebhooks"')
        )
        result = driver.find_element(By.CSS_SELECTOR, ".result-window").text
        ARTIFACTS.mkdir(exist_ok=True)
        driver.save_screenshot(str(ARTIFACTS / "graphiql.png"))
        return {"page_log": page_log, "graphiql_log": console(driver), "result": result}
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def problems(log: list[dict[str, Any]]) -> list[str]:
    """Console entries that are errors or warnings, or that mention the CSP."""
    return [
        entry["message"]
        for entry in log
        if entry["level"] in ("SEVERE", "WARNING") or "Content Security Policy" in entry["message"]
    ]


async def test_graphiql_renders_offline_and_the_console_has_no_csp_violation(
    settings: Settings,
) -> None:
    async with running(settings, ManualClock(datetime.now(UTC)), ("admin-api",)) as r:
        token = await admin_token(settings.database_url)
        seen = await asyncio.to_thread(drive, r.urls["admin-api"], token)
    print("\nadmin page console:", seen["page_log"])
    print("GraphiQL console:", seen["graphiql_log"])
    assert problems(seen["page_log"]) == []
    assert problems(seen["graphiql_log"]) == []
    assert '"cronWebhooks": []' in seen["result"]
