"""A delivery's run on the web page (CONTRACT §16.2), in headless Chromium: its state,
start, deadline, end, message, costs and the agent's logs, level-coloured, `data` opened on
a click; the agent's text shown as text (markup in it stays inert under the page's CSP);
runTimeoutSeconds in the edit form. A screenshot goes to test-artifacts/delivery-run.png.

The run's `shared.runs` row is inserted by the test for a delivery the real dispatcher
sent (until the run core lands, no run starts for real): this tests what the page shows."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import asyncpg
from aiohttp import web
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec

from tests.support.agent import Received
from tests.support.browser import artifact, shoot, signed_in
from tests.support.flows import create_webhook, finished, trigger
from tests.support.system import System

HOSTILE = "<img src=x onerror=\"document.title='pwned'\">"


async def accepted(_: web.Request, __: Received) -> web.StreamResponse:
    return web.json_response({"status": "ok", "costs": {"usd": 0.01}}, status=202)


async def insert_run(dsn: str, delivery_id: int, webhook_id: int, started: Any) -> None:
    logs = [
        {
            "ts": None,
            "level": "info",
            "msg": "reading the inbox",
            "data": {"unread": 12, "folders": ["a", "b"]},
        },
        {"ts": None, "level": "warn", "msg": "slow upstream", "data": None},
        {"ts": None, "level": "error", "msg": HOSTILE, "data": {"html": HOSTILE}},
    ]
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(
            "insert into shared.runs (delivery_id, webhook_id, kind, state, started_at, deadline,"
            " finished_at, message, costs, logs, timeout_seconds, stream_version)"
            " values ($1, $2, 'cron', 'TIMED_OUT', $3, $4, $4, $5, $6::jsonb, $7::jsonb, 600, 3)",
            delivery_id,
            webhook_id,
            started,
            started + timedelta(minutes=10),
            "no report before the deadline " + HOSTILE,
            json.dumps([{"unit": "usd", "amount": 0.25}, {"unit": "tokens", "amount": 5186}]),
            json.dumps(
                [
                    {**e, "ts": (started + timedelta(seconds=i)).isoformat()}
                    for i, e in enumerate(logs)
                ]
            ),
        )
    finally:
        await conn.close()


def drive(base: str, token: str, hook: int, delivery: int, shot: Path) -> dict[str, Any]:
    with signed_in(base, token) as page:
        driver, wait = page.driver, page.wait
        row = f'#webhooks tr[data-id="{hook}"]'
        wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, row)))
        driver.find_element(By.CSS_SELECTOR, f"{row} button.show-history").click()
        summary = f'#deliveries tr.delivery[data-id="{delivery}"]'
        wait.until(ec.element_to_be_clickable((By.CSS_SELECTOR, summary))).click()
        run = wait.until(
            ec.visibility_of_element_located((By.CSS_SELECTOR, f"tbody[data-id='{delivery}'] .run"))
        )
        first_data = run.find_element(By.CSS_SELECTOR, "li.level-info details.log-data")
        first_data.find_element(By.TAG_NAME, "summary").click()
        wait.until(lambda _: first_data.get_attribute("open") is not None)
        seen = {
            "state": run.find_element(By.CSS_SELECTOR, ".run-state").text,
            "fields": [f.text for f in run.find_elements(By.CSS_SELECTOR, ".run-field")],
            "costs": run.find_element(By.CSS_SELECTOR, ".attempt-head .costs").text,
            "message": run.find_element(By.CSS_SELECTOR, ".run-message").text,
            "levels": [
                li.get_attribute("class")
                for li in run.find_elements(By.CSS_SELECTOR, "li.log-entry")
            ],
            # a message's own text (its data, when it has any, follows in the same cell)
            "msgs": driver.execute_script(
                "return [...arguments[0].querySelectorAll('.log-msg')]"
                ".map(m => m.firstChild.textContent)",
                run,
            ),
            "data": first_data.find_element(By.TAG_NAME, "pre").text,
            "images": len(run.find_elements(By.TAG_NAME, "img")),
            "title": driver.title,
            "error_colour": run.find_element(
                By.CSS_SELECTOR, "li.level-error .log-level"
            ).value_of_css_property("color"),
        }
        # The attempt above it, the run whole: scrolled so that the run's top is a third down.
        driver.execute_script("arguments[0].scrollIntoView({block: 'start'})", run)
        driver.execute_script("window.scrollBy(0, -300)")
        shoot(driver, shot.name)
        # The edit form shows runTimeoutSeconds.
        driver.find_element(By.CSS_SELECTOR, f"{row} button.edit").click()
        wait.until(
            lambda d: d.find_element(By.NAME, "runTimeoutSeconds").get_attribute("value") == "600"
        )
        # Out of range: the error shows beside the field; in range: saved.
        field = driver.find_element(By.NAME, "runTimeoutSeconds")
        field.clear()
        field.send_keys("59")
        driver.find_element(By.ID, "save").click()
        error = (By.CSS_SELECTOR, '[data-error-for="runTimeoutSeconds"]')
        wait.until(ec.text_to_be_present_in_element(error, "from 60 to 86400"))
        field.clear()
        field.send_keys("7200")
        driver.find_element(By.ID, "save").click()
        wait.until(ec.invisibility_of_element_located((By.ID, "editor")))
        return seen


async def test_the_delivery_view_shows_its_run_with_state_deadline_and_logs(
    system: System,
) -> None:
    hook, _ = await create_webhook(
        system, system.admin, system.agent.url_for("async", accepted), runTimeoutSeconds=600
    )
    delivery = await trigger(system, system.admin, hook)
    await finished(system, system.admin, delivery)
    started = system.clock.now().replace(microsecond=0)
    await insert_run(system.dsn, delivery, hook, started)
    shot = artifact("delivery-run.png")
    seen = await asyncio.to_thread(
        drive, system.urls["admin-api"], system.admin, hook, delivery, shot
    )
    assert seen["state"].lower() == "timed out"
    deadline = (started + timedelta(minutes=10)).strftime("%H:%M:%S")
    fields = seen["fields"]
    assert [f.split()[0] for f in fields] == ["Started", "Deadline", "Ended"], fields
    assert deadline in fields[1] and deadline in fields[2], fields
    assert seen["costs"] == "cost usd 0.25 · tokens 5,186"
    assert seen["message"] == "no report before the deadline " + HOSTILE
    assert seen["levels"] == [
        "log-entry level-info",
        "log-entry level-warn",
        "log-entry level-error",
    ]
    assert seen["msgs"] == ["reading the inbox", "slow upstream", HOSTILE]
    assert json.loads(seen["data"]) == {"unread": 12, "folders": ["a", "b"]}
    # The agent's markup stayed text: no element made of it, no handler ran.
    assert seen["images"] == 0 and seen["title"] == "cronhooks"
    assert seen["error_colour"] == "rgba(185, 28, 28, 1)"  # --bad
    assert shot.exists()
    _, body = await system.graphql(
        system.admin,
        "query($id: Int!) { cronWebhook(id: $id) { runTimeoutSeconds } }",
        {"id": hook},
    )
    assert body["data"]["cronWebhook"]["runTimeoutSeconds"] == 7200
