"""Open alerts on the admin web page (CONTRACT §10, §12), in headless Chromium, offline.

A webhook whose agent keeps failing raises an alert after three failed deliveries: the page
shows it above the list, its History button opens that webhook's deliveries, so does an
alert's `admin_url` (`/#webhook-{id}`), and the first success takes the alert off the page.
Screenshot: test-artifacts/web-page-alerts.png."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec

from tests.support.agent import Received
from tests.support.browser import console, problems, shoot, signed_in
from tests.support.flows import create_webhook, finished, trigger
from tests.support.inprocess import window_start
from tests.support.system import System

Later = Callable[[Callable[[], Awaitable[Any]]], Any]


def drive(
    base: str, token: str, failing: int, later: Later, recover: Callable[[], Awaitable[None]]
) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    with signed_in(base, token, offline=True, timeout=25, window=(1400, 900)) as page:
        driver, wait = page.driver, page.wait
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


@pytest.mark.system(start=window_start)
async def test_open_alerts_are_shown_linked_and_cleared(system: System) -> None:
    answers = {"status": 500}

    async def flaky(_: web.Request, __: Received) -> web.StreamResponse:
        return web.Response(status=answers["status"], text="model unavailable")

    failing, _ = await create_webhook(
        system,
        system.admin,
        system.agent.url_for("flaky", flaky),
        maxRetries=0,
        description="digest",
    )
    for _ in range(3):  # CRONHOOKS_ALERT_AFTER defaults to 3
        assert (await finished(system, system.admin, await trigger(system, system.admin, failing)))[
            "status"
        ] == "failed"
    loop = asyncio.get_running_loop()

    async def back_to_ok() -> None:
        answers["status"] = 200
        assert (await finished(system, system.admin, await trigger(system, system.admin, failing)))[
            "status"
        ] == "success"

    def later(work: Callable[[], Awaitable[Any]]) -> Any:
        return asyncio.run_coroutine_threadsafe(work(), loop).result(timeout=30)

    seen = await asyncio.to_thread(
        drive, system.urls["admin-api"], system.admin, failing, later, back_to_ok
    )

    assert f"cron webhook {failing}" in seen["alerts"]
    assert "3 failed in a row" in seen["alerts"] and "failing" in seen["alerts"]
    assert "HTTP 500" in seen["alerts"] or "500" in seen["alerts"]
    assert seen["history_rows"] == 3
    assert f"webhook {failing}" in seen["linked"]
    assert problems(seen["console"]) == []
