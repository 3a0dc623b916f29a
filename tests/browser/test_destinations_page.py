"""Destinations on the admin web page (CONTRACT §17), in headless Chromium, offline: a
destination held by an agent's 503 with Retry-After, the delivery waiting for it and a
limit override are listed; the hold and the wait leave the page when the hold ends.
Screenshot: test-artifacts/web-page-destinations.png."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from aiohttp import web
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec

from tests.support.agent import Received
from tests.support.browser import console, problems, shoot, signed_in
from tests.support.flows import create_webhook, fetchval, finished, trigger
from tests.support.inprocess import eventually
from tests.support.system import System


def drive(base: str, token: str, end_hold: Callable[[], Any]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    with signed_in(base, token, offline=True, window=(1400, 900)) as page:
        driver, wait = page.driver, page.wait
        section = wait.until(ec.visibility_of_element_located((By.ID, "destinations-section")))
        wait.until(ec.visibility_of_element_located((By.CSS_SELECTOR, "tr.destination-hold")))
        wait.until(ec.visibility_of_element_located((By.CSS_SELECTOR, "tr.destination-waiting")))
        seen["holds"] = driver.find_element(By.ID, "destination-holds").text
        seen["waiting"] = driver.find_element(By.ID, "destination-waiting").text
        seen["limits"] = driver.find_element(By.ID, "destination-limits").text
        shoot(driver, "web-page-destinations.png", section)
        end_hold()
        driver.find_element(By.ID, "refresh").click()
        wait.until(ec.invisibility_of_element_located((By.CSS_SELECTOR, "tr.destination-hold")))
        wait.until(ec.invisibility_of_element_located((By.CSS_SELECTOR, "tr.destination-waiting")))
        seen["limits_after"] = driver.find_element(By.ID, "destination-limits").text
        seen["console"] = console(driver)
    return seen


async def test_held_and_limited_destinations_are_listed(system: System) -> None:
    answers = 0

    async def busy(_: web.Request, __: Received) -> web.StreamResponse:
        nonlocal answers
        answers += 1
        if answers == 1:
            return web.Response(status=503, headers={"Retry-After": "600"})
        return web.json_response({"status": "ok"})

    url = system.agent.url_for("busy", busy)
    _, body = await system.graphql(
        system.admin,
        'mutation { setDestinationLimit(destination: "https://api.example.com/x",'
        " maxConcurrent: 5, maxPerSecond: 2.5) { destination } }",
    )
    assert "errors" not in body, body
    hook, _ = await create_webhook(system, system.admin, url, maxRetries=0)
    await trigger(system, system.admin, hook)
    await system.agent.wait_for(1, name="busy")
    waits = await trigger(system, system.admin, hook)  # held: it waits for its turn

    # Half a minute on, its dispatcher tells it holds it for long, as it would in real time
    # long before the watchdog's deadline; the page's clock step then ends the hold.
    async def waiting() -> bool:
        return await fetchval(system.dsn, "select count(*) from shared.destination_waiting") == 1

    await eventually(waiting)
    system.clock.advance(timedelta(seconds=30))

    async def told() -> bool:
        query = "select count(*) from shared.destination_waiting where $1 = any(long_waits)"
        return await fetchval(system.dsn, query, waits) == 1

    await eventually(told)

    loop = asyncio.get_running_loop()

    def end_hold() -> None:  # on the loop the clock's sleepers wait on
        loop.call_soon_threadsafe(system.clock.advance, timedelta(seconds=571))

    seen = await asyncio.to_thread(drive, system.urls["admin-api"], system.admin, end_hold)
    held = f"http://127.0.0.1:{system.agent.port}"
    assert held in seen["holds"] and "held" in seen["holds"] and "until" in seen["holds"]
    assert held in seen["waiting"] and "1 delivery waits for its turn" in seen["waiting"]
    assert "https://api.example.com:443" in seen["limits"]
    assert "5 at once, 2.5 per second" in seen["limits"]
    assert "https://api.example.com:443" in seen["limits_after"]
    assert problems(seen["console"]) == []
    assert (await finished(system, system.admin, waits))["status"] == "success"
