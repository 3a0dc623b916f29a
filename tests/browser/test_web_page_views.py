"""The admin web page as an admin uses it (CONTRACT §10), in headless Chromium, offline:

- the webhook list refreshes by itself, keeping what is typed in the form and the scroll;
  "Next run" carries the webhook's zone; a row's buttons stay on one line;
- the delivery history says when (time and slot, in the webhook's zone), what (a retried
  Run-now delivery is `manual`, with its retry as an attempt) and why (a failed attempt
  without a response shows its error); its 2-s reload keeps an opened attempt open and
  draws again only what changed;
- each webhook's last 7 days are a chart (the vendored uPlot);
- agents are listed with their armed triggers;
- the console stays clean (no CSP violation, no 404, no script error).

Screenshots go to test-artifacts/web-page-*.png."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from aiohttp import web
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support import expected_conditions as ec

from tests.support.agent import Received
from tests.support.browser import console, problems, shoot, signed_in
from tests.support.flows import (
    create_agent,
    create_webhook,
    finished,
    provision,
    retry_due,
    trigger,
)
from tests.support.inprocess import eventually, window_start
from tests.support.processes import ARTIFACTS
from tests.support.system import System

Later = Callable[[Callable[[], Awaitable[Any]]], Any]


def closed_port() -> int:
    """A loopback port nothing listens on (connections to it are refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rows_of(driver: WebDriver, css: str) -> int:
    return len(driver.find_elements(By.CSS_SELECTOR, css))


def drive(base: str, token: str, ids: dict[str, int], later: Later) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    with signed_in(base, token, offline=True, timeout=25, window=(1400, 900)) as page:
        driver, wait = page.driver, page.wait
        berlin_row = f'#webhooks tr[data-id="{ids["berlin"]}"]'
        wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, berlin_row)))
        wait.until(ec.text_to_be_present_in_element((By.ID, "agents"), "nightly-digest"))
        seen["berlin_row"] = driver.find_element(By.CSS_SELECTOR, berlin_row).text
        seen["agents"] = driver.find_element(By.ID, "agents").text
        # Every row's buttons on one line.
        seen["button_lines"] = driver.execute_script(
            """return [...document.querySelectorAll('#webhooks td.row-actions')]
                 .map(td => new Set([...td.querySelectorAll('button')].map(b => b.offsetTop)).size)"""
        )
        shoot(driver, "web-page-list.png")

        # The list refreshes by itself; the form keeps what is typed, the page its scroll.
        driver.find_element(By.ID, "new-webhook").click()
        form = wait.until(ec.visibility_of_element_located((By.ID, "webhook-form")))
        form.find_element(By.NAME, "url").send_keys("http://typed.example/keep")
        form.find_element(By.NAME, "description").send_keys("half-typed")
        driver.execute_script("window.scrollTo(0, 240)")
        scrolled = driver.execute_script("return window.scrollY")
        listed = rows_of(driver, "#webhooks tbody tr")
        later(lambda: ids["add"]())
        wait.until(lambda d: rows_of(d, "#webhooks tbody tr") == listed + 1)
        seen["kept"] = {
            "url": form.find_element(By.NAME, "url").get_attribute("value"),
            "description": form.find_element(By.NAME, "description").get_attribute("value"),
            "editor_shown": form.is_displayed(),
            "scroll": (scrolled, driver.execute_script("return window.scrollY")),
        }
        driver.find_element(By.ID, "cancel").click()

        # History: the retried manual delivery, opened; a Run now meanwhile adds a row.
        driver.find_element(By.CSS_SELECTOR, f"{berlin_row} button.show-history").click()
        manual_css = f'#deliveries tr.delivery[data-id="{ids["manual"]}"]'
        manual = wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, manual_css)))
        wait.until(lambda d: rows_of(d, "#deliveries tr.delivery") == 2)
        wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "#chart canvas")))
        wait.until(ec.text_to_be_present_in_element((By.ID, "chart-summary"), "deliveries"))
        manual.click()
        details = manual.find_element(By.XPATH, "following-sibling::tr[1]")
        wait.until(ec.visibility_of(details))
        later(lambda: ids["run"]())
        wait.until(lambda d: rows_of(d, '#deliveries tr.delivery[data-status="success"]') == 3)
        try:
            seen["still_open"] = details.is_displayed()  # the very same element: not redrawn
            seen["manual_row"] = manual.text
        except StaleElementReferenceException:
            seen["still_open"] = "redrawn"
        seen["details"] = details.text
        seen["scheduled_row"] = driver.find_element(
            By.CSS_SELECTOR, f'#deliveries tr.delivery[data-id="{ids["scheduled"]}"]'
        ).text
        seen["chart_summary"] = driver.find_element(By.ID, "chart-summary").text
        seen["legend"] = driver.find_element(By.CSS_SELECTOR, "#chart .u-legend").text
        shoot(driver, "web-page-history.png", driver.find_element(By.ID, "history"))

        # A failed attempt without a response says why.
        broken_row = f'#webhooks tr[data-id="{ids["broken"]}"]'
        driver.find_element(By.CSS_SELECTOR, f"{broken_row} button.show-history").click()
        failed = wait.until(
            ec.presence_of_element_located(
                (By.CSS_SELECTOR, '#deliveries tr.delivery[data-status="failed"]')
            )
        )
        failed.click()
        seen["no_response"] = wait.until(
            ec.visibility_of_element_located((By.CSS_SELECTOR, "#deliveries .no-response"))
        ).text
        shoot(driver, "web-page-failed-attempt.png", driver.find_element(By.ID, "history"))

        # A delivery waiting for its retry says when (nextAttemptAt).
        busy_row = f'#webhooks tr[data-id="{ids["busy"]}"]'
        driver.find_element(By.CSS_SELECTOR, f"{busy_row} button.show-history").click()
        waiting = wait.until(
            ec.presence_of_element_located(
                (By.CSS_SELECTOR, f'#deliveries tr.delivery[data-id="{ids["busy_delivery"]}"]')
            )
        )
        waiting.click()
        seen["next_attempt"] = wait.until(
            ec.visibility_of_element_located((By.CSS_SELECTOR, "#deliveries .next-attempt"))
        ).text
        shoot(driver, "web-page-retry-scheduled.png", driver.find_element(By.ID, "history"))
        shoot(driver, "web-page-agents.png", driver.find_element(By.ID, "agents-section"))
        seen["console"] = console(driver)
        return seen


@pytest.mark.system(start=window_start)  # the next */5 slot is 2.5 minutes away
async def test_the_page_refreshes_keeps_what_is_open_and_says_when_what_and_why(
    system: System,
) -> None:
    calls = {"n": 0}

    async def first_fails(_: web.Request, __: Received) -> web.StreamResponse:
        calls["n"] += 1
        return web.Response(status=500 if calls["n"] == 1 else 200, text="not yet")

    ids = await history_to_show(system, first_fails)
    loop = asyncio.get_running_loop()

    def later(work: Callable[[], Awaitable[Any]]) -> Any:
        return asyncio.run_coroutine_threadsafe(work(), loop).result(timeout=30)

    async def add() -> int:
        return (await create_webhook(system, system.admin, system.agent.url, description="added"))[
            0
        ]

    async def run() -> int:
        return await trigger(system, system.admin, ids["berlin"])

    seen = await asyncio.to_thread(
        drive, system.urls["admin-api"], system.admin, {**ids, "add": add, "run": run}, later
    )
    print("\nscreenshots:", sorted(str(p) for p in ARTIFACTS.glob("web-page-*.png")))

    # List: zone of the next run, buttons on one line, refreshed with the form kept.
    assert "CET" in seen["berlin_row"] and "Europe/Berlin" in seen["berlin_row"]
    assert set(seen["button_lines"]) == {1}
    assert seen["kept"]["url"] == "http://typed.example/keep"
    assert seen["kept"]["description"] == "half-typed" and seen["kept"]["editor_shown"]
    before, after = seen["kept"]["scroll"]
    assert before > 0 and abs(before - after) <= 1
    # History: time, trigger, attempts, slot; the opened attempt survived the reloads.
    assert seen["still_open"] is True
    manual = seen["manual_row"]
    assert "manual" in manual and "retry" not in manual.split("manual")[0]
    assert "2 (1 retry)" in manual and "CET" in manual
    assert "Attempt 1" in seen["details"] and "Attempt 2" in seen["details"]
    assert "HTTP 500" in seen["details"] and "HTTP 200" in seen["details"]
    scheduled = seen["scheduled_row"]
    assert "schedule" in scheduled and scheduled.count("CET") == 2  # time and slot
    # Chart: 3 finished deliveries of the last 7 days, drawn with a legend.
    assert seen["chart_summary"].startswith("3 deliveries: 3 succeeded, 0 failed")
    assert "Europe/Berlin" in seen["chart_summary"]
    assert all(name in seen["legend"] for name in ("Succeeded", "Failed", "p95"))
    # Why the failed attempt has no response.
    assert seen["no_response"].startswith("No response: connection error: Cannot connect")
    # A scheduled retry: when, in the webhook's zone (UTC here), 600 s after the 503.
    assert seen["next_attempt"].startswith("Next attempt at ") and "UTC" in seen["next_attempt"]
    # Agents with their armed triggers.
    assert "digest-agent" in seen["agents"] and "nightly-digest" in seen["agents"]
    assert problems(seen["console"]) == []


async def history_to_show(
    system: System,
    first_fails: Callable[[web.Request, Received], Awaitable[web.StreamResponse]],
) -> dict[str, int]:
    """A Berlin webhook with a retried Run-now delivery and a scheduled one, a webhook
    whose target refuses connections, and an agent with an armed trigger."""
    berlin, _ = await create_webhook(
        system,
        system.admin,
        system.agent.url_for("berlin", first_fails),
        cronSchedule="*/5 * * * *",
        timezone="Europe/Berlin",
        maxRetries=1,
        description="Daily digest",
    )
    manual = await trigger(system, system.admin, berlin)
    await eventually(lambda: retry_due(system.dsn, manual))
    system.clock.advance(timedelta(seconds=10))
    assert (await finished(system, system.admin, manual))["status"] == "success"
    _, body = await system.graphql(system.admin, f"{{ cronWebhook(id: {berlin}) {{ nextRunAt }} }}")
    system.clock.set(datetime.fromisoformat(body["data"]["cronWebhook"]["nextRunAt"]))

    async def scheduled_delivery() -> int | None:
        _, body = await system.graphql(
            system.admin,
            f"{{ cronWebhookDeliveries(cronWebhookId: {berlin}) {{ id trigger status }} }}",
        )
        done = [
            d
            for d in body["data"]["cronWebhookDeliveries"]
            if d["trigger"] == "SCHEDULE" and d["status"] == "success"
        ]
        return done[0]["id"] if done else None

    scheduled = await eventually(scheduled_delivery, timeout=20)
    broken, _ = await create_webhook(
        system, system.admin, f"http://127.0.0.1:{closed_port()}/gone", description="nobody listens"
    )
    assert (await finished(system, system.admin, await trigger(system, system.admin, broken)))[
        "status"
    ] == "failed"

    async def unavailable(_: web.Request, __: Received) -> web.StreamResponse:
        return web.Response(status=503, text="busy", headers={"Retry-After": "600"})

    # Its 503 + Retry-After holds its destination for 600 s (destination limits): named
    # `localhost`, it is another destination than the other webhooks' 127.0.0.1, which the
    # page's later "Run now" still reaches at once.
    busy, _ = await create_webhook(
        system,
        system.admin,
        system.agent.url_for("busy", unavailable).replace("127.0.0.1", "localhost"),
        maxRetries=2,
        description="busy agent",
    )
    busy_delivery = await trigger(system, system.admin, busy)
    await eventually(lambda: retry_due(system.dsn, busy_delivery))

    access, _ = await create_agent(
        system, system.admin, system.agent.url, "digest-agent", description="demo"
    )
    await provision(
        system,
        access,
        job_id="nightly-digest",
        fire_at=(system.clock.now() + timedelta(hours=6)).isoformat(),
        agent_callback_url=system.agent.url,
    )
    return {
        "berlin": berlin,
        "manual": manual,
        "scheduled": scheduled,
        "broken": broken,
        "busy": busy,
        "busy_delivery": busy_delivery,
    }
