"""Open alerts on the admin web page (CONTRACT §10, §12), in headless Chromium, offline.

A webhook whose agent keeps failing raises an alert after three failed deliveries: the page
shows it above the list, its History button opens that webhook's deliveries, so does an
alert's `admin_url` (`/#webhook-{id}`), and the first success takes the alert off the page.
Screenshot: test-artifacts/web-page-alerts.png."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait

from cronhooks_common.clock import ManualClock
from cronhooks_common.settings import Settings
from tests.browser.test_pages_under_csp import console, offline_browser, problems
from tests.browser.test_web_page_views import shoot
from tests.support.agent import Agent, Received
from tests.support.flows import create_webhook, finished, trigger
from tests.support.inprocess import admin_token, running, window_start

Later = Callable[[Callable[[], Awaitable[Any]]], Any]


def drive(
    base: str, token: str, failing: int, later: Later, recover: Callable[[], Awaitable[None]]
) -> dict[str, Any]:
    profile = tempfile.mkdtemp(prefix="cronhooks-chromium-")
    driver = offline_browser(profile)
    wait = WebDriverWait(driver, 25)
    seen: dict[str, Any] = {}
    try:
        driver.set_window_size(1400, 900)
        driver.get(base + "/")
        driver.find_element(By.ID, "token").send_keys(token)
        driver.find_element(By.ID, "login").click()
        row = "#alerts tr[data-id] button.show-history"
        wait.until(ec.visibility_of_element_located((By.CSS_SELECTOR, row)))
        seen["alerts"] = driver.find_element(By.ID, "alerts").text
        shoot(driver, "web-page-alerts.png")
        driver.find_element(By.CSS_SELECTOR, row).click()
        wait.until(ec.text_to_be_present_in_element((By.ID, "history-title"), f"webhook {failing}"))
        wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#deliveries tr.delivery")) == 3)
        seen["history_rows"] = len(driver.find_elements(By.CSS_SELECTOR, "#deliveries tr.delivery"))

        # An alert's admin_url, opened afresh (the tab keeps its token): that history.
        driver.get("about:blank")
        driver.get(f"{base}/#webhook-{failing}")
        wait.until(ec.text_to_be_present_in_element((By.ID, "history-title"), f"webhook {failing}"))
        seen["linked"] = driver.find_element(By.ID, "history-title").text

        later(recover)
        wait.until(ec.invisibility_of_element_located((By.ID, "alerts-section")))
        seen["console"] = console(driver)
        return seen
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


async def test_open_alerts_are_shown_linked_and_cleared(settings: Settings) -> None:
    clock = ManualClock(window_start())
    agent = await Agent().start()
    answers = {"status": 500}

    async def flaky(_: web.Request, __: Received) -> web.StreamResponse:
        return web.Response(status=answers["status"], text="model unavailable")

    try:
        async with running(settings, clock) as r:
            token = await admin_token(settings.database_url)
            failing, _ = await create_webhook(
                r, token, agent.url_for("flaky", flaky), maxRetries=0, description="digest"
            )
            for _ in range(3):  # CRONHOOKS_ALERT_AFTER defaults to 3
                assert (await finished(r, token, await trigger(r, token, failing)))[
                    "status"
                ] == "failed"
            loop = asyncio.get_running_loop()

            async def back_to_ok() -> None:
                answers["status"] = 200
                assert (await finished(r, token, await trigger(r, token, failing)))[
                    "status"
                ] == "success"

            def later(work: Callable[[], Awaitable[Any]]) -> Any:
                return asyncio.run_coroutine_threadsafe(work(), loop).result(timeout=30)

            seen = await asyncio.to_thread(
                drive, r.urls["admin-api"], token, failing, later, back_to_ok
            )
    finally:
        await agent.stop()

    assert f"cron webhook {failing}" in seen["alerts"]
    assert "3 failed in a row" in seen["alerts"] and "failing" in seen["alerts"]
    assert "HTTP 500" in seen["alerts"] or "500" in seen["alerts"]
    assert seen["history_rows"] == 3
    assert f"webhook {failing}" in seen["linked"]
    assert problems(seen["console"]) == []
