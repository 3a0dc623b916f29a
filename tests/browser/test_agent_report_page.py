"""What agents report and which run started which, on the admin web page (CONTRACT §10,
§16.1, §16.3), in headless Chromium, offline, with real agents on loopback:

- an opened delivery shows its summed costs, and each attempt its costs and the agent's
  logs: coloured by level, hostile text shown as text, `data` expandable, a long log in a
  box that scrolls;
- beside the success chart, the costs per day: one small chart per unit;
- a delivery's chain: its trace, its parent and what it caused, each a link that opens that
  delivery in its own webhook's history (cron → change → change, and back).

Screenshots: test-artifacts/agent-logs.png, cost-chart.png, delivery-chain.png."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from aiohttp import web
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support import expected_conditions as ec

from tests.support.agent import Received
from tests.support.browser import console, problems, shoot, signed_in
from tests.support.flows import create_change_webhook, create_webhook, finished, trigger
from tests.support.inprocess import eventually
from tests.support.system import System
from tests.support.token_api import call

HOSTILE = "<img src=x onerror=alert(1)>"
FILLER = 150  # debug entries after the interesting ones: a log long enough to scroll
CHAIN = """query($trace: String!) { deliveryChain(trace: $trace) { id parent } }"""


def two_days_ago() -> datetime:
    return datetime.now(UTC).replace(microsecond=0) - timedelta(days=2)


def agent_logs(now: datetime) -> list[dict[str, Any]]:
    at = now.isoformat()
    return [
        {"ts": at, "level": "info", "msg": "digest started"},
        {"ts": at, "level": "debug", "msg": "read 3 notes", "data": ["a.md", "b.md", "c.md"]},
        {"ts": at, "level": "warn", "msg": "slow model", "data": {"latency_ms": 8123}},
        {
            "ts": at,
            "level": "error",
            "msg": "tool call failed",
            "data": {"tool": {"name": "search", "args": {"q": "cron", "tags": ["x", "y"]}}},
        },
        {"ts": at, "level": "notice", "msg": HOSTILE},
        *({"level": "debug", "msg": f"step {i}"} for i in range(FILLER)),
    ]


def day_label(now: datetime) -> str:
    """time.js dayLabel of the day `now` is on in Berlin ("Mon 7 Dec")."""
    return f"{now.astimezone(ZoneInfo('Europe/Berlin')):%a %-d %b}"


def texts(driver: WebDriver, css: str) -> list[str]:
    return [e.text for e in driver.find_elements(By.CSS_SELECTOR, css)]


def drive(base: str, token: str, ids: dict[str, int]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    with signed_in(base, token, offline=True, timeout=25, window=(1400, 1000)) as page:
        driver, wait = page.driver, page.wait
        cron_row = f'#webhooks tr[data-id="{ids["cron"]}"]'
        wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, cron_row)))
        driver.find_element(By.CSS_SELECTOR, f"{cron_row} button.show-history").click()

        # Costs per day beside the success chart: one chart per unit.
        wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#cost-chart canvas")) == 2)
        wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "#chart canvas")))
        seen["cost_units"] = texts(driver, "#cost-chart .cost-unit-head")
        # The cursor over the last day's bar: the head says that day's amount.
        over = driver.find_element(By.CSS_SELECTOR, '#cost-chart [data-unit="usd"] .u-over')
        ActionChains(driver).move_to_element_with_offset(
            over, over.size["width"] // 2 - 8, 0
        ).perform()
        seen["hovered"] = driver.find_element(
            By.CSS_SELECTOR, '#cost-chart [data-unit="usd"] .cost-value'
        ).text
        ActionChains(driver).move_to_element(driver.find_element(By.ID, "history-title")).perform()
        seen["charts_side_by_side"] = driver.execute_script(
            "const [a, b] = document.querySelectorAll('.charts > .chart-box');"
            "return a.getBoundingClientRect().top === b.getBoundingClientRect().top"
        )
        shoot(driver, "cost-chart.png", driver.find_element(By.ID, "history"))

        # The root delivery, opened: its costs, its attempt's costs and logs.
        root_css = f'#deliveries tr.delivery[data-id="{ids["root"]}"]'
        wait.until(ec.element_to_be_clickable((By.CSS_SELECTOR, root_css))).click()
        details = f'#deliveries tbody[data-id="{ids["root"]}"] tr.attempt-details'
        wait.until(ec.visibility_of_element_located((By.CSS_SELECTOR, f"{details} .log-list")))
        seen["delivery_costs"] = driver.find_element(
            By.CSS_SELECTOR, f"{details} > td > .costs"
        ).text
        seen["attempt_costs"] = driver.find_element(
            By.CSS_SELECTOR, f"{details} .attempt-head .costs"
        ).text
        entries = f"{details} li.log-entry"
        seen["levels"] = driver.execute_script(
            "return [...document.querySelectorAll(arguments[0])].slice(0, 6)"
            ".map(li => [li.className, li.querySelector('.log-level').textContent,"
            " getComputedStyle(li.querySelector('.log-msg')).color])",
            entries,
        )
        seen["entries"] = len(driver.find_elements(By.CSS_SELECTOR, entries))
        seen["hostile"] = driver.execute_script(
            "const li = [...document.querySelectorAll(arguments[0])].find(li =>"
            " li.querySelector('.log-level').textContent === 'notice');"
            "return [li.querySelector('.log-msg').textContent, li.querySelectorAll('img').length]",
            entries,
        )
        seen["scrolls"] = driver.execute_script(
            "const box = document.querySelector(arguments[0]);"
            "return [box.scrollHeight, box.clientHeight]",
            f"{details} ol.log-list",
        )
        error_data = driver.find_element(By.CSS_SELECTOR, f"{entries}.level-error details.log-data")
        error_data.find_element(By.TAG_NAME, "summary").click()
        seen["data"] = wait.until(
            ec.visibility_of(error_data.find_element(By.TAG_NAME, "pre"))
        ).text
        shoot(driver, "agent-logs.png", driver.find_element(By.CSS_SELECTOR, details))

        # The chain: the root caused the first change delivery; open it (another webhook).
        chain = f"{details} .chain"
        child = f'{chain} .chain-children button.chain-link[data-id="{ids["one"]}"]'
        wait.until(ec.element_to_be_clickable((By.CSS_SELECTOR, child)))
        seen["root_chain"] = driver.find_element(By.CSS_SELECTOR, chain).text
        driver.find_element(By.CSS_SELECTOR, child).click()
        one = f'#deliveries tbody[data-id="{ids["one"]}"] tr.attempt-details'
        wait.until(ec.visibility_of_element_located((By.CSS_SELECTOR, f"{one} .chain")))
        wait.until(
            ec.text_to_be_present_in_element((By.ID, "history-title"), f"webhook {ids['change']}")
        )
        two_link = f'{one} .chain-children button.chain-link[data-id="{ids["two"]}"]'
        wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, two_link)))
        seen["one_chain"] = driver.find_element(By.CSS_SELECTOR, f"{one} .chain").text
        seen["change_costs"] = driver.find_element(By.ID, "cost-chart").text
        shoot(
            driver,
            "delivery-chain.png",
            driver.find_element(By.CSS_SELECTOR, f'#deliveries tbody[data-id="{ids["one"]}"]'),
        )
        # Down to its child (same webhook), then up to the root (the cron webhook again).
        driver.find_element(By.CSS_SELECTOR, two_link).click()
        two = f'#deliveries tbody[data-id="{ids["two"]}"] tr.attempt-details'
        parent_link = f'{two} .chain-parent button.chain-link[data-id="{ids["one"]}"]'
        wait.until(ec.visibility_of_element_located((By.CSS_SELECTOR, parent_link)))
        seen["two_chain"] = driver.find_element(By.CSS_SELECTOR, f"{two} .chain").text
        all_link = f'{two} .chain-all button.chain-link[data-id="{ids["root"]}"]'
        driver.find_element(By.CSS_SELECTOR, all_link).click()
        wait.until(
            ec.text_to_be_present_in_element((By.ID, "history-title"), f"webhook {ids['cron']}")
        )
        wait.until(ec.visibility_of_element_located((By.CSS_SELECTOR, f"{details} .chain")))
        seen["back"] = driver.find_element(By.CSS_SELECTOR, f"{details} .chain").text
        seen["console"] = console(driver)
        return seen


async def chained(system: System, trace: str, count: int) -> list[dict[str, Any]]:
    async def listed() -> list[dict[str, Any]] | None:
        _, body = await system.graphql(system.admin, CHAIN, {"trace": trace})
        found: list[dict[str, Any]] = body["data"]["deliveryChain"]
        return found if len(found) == count else None

    return await eventually(listed, timeout=20)  # type: ignore[no-any-return]


@pytest.mark.system(start=two_days_ago)
async def test_costs_logs_and_the_chain_of_a_delivery(system: System) -> None:
    runs = {"n": 0}

    async def digest(_: web.Request, __: Received) -> web.StreamResponse:
        runs["n"] += 1
        n = runs["n"]
        return web.json_response(
            {
                "status": "ok",
                "changes": [{"path": "a.md", "content": f"digest {n}"}],
                "costs": {"tokens": 5186 * n, "usd": 0.004 * n, "bad unit!": 1},
                "logs": agent_logs(system.clock.now()),
            }
        )

    async def follower(_: web.Request, got: Received) -> web.StreamResponse:
        if got.body["changes"][0]["path"] == "a.md":  # writes once, through its token
            status, _ = await call(
                system,
                "POST",
                "/api/notes",
                token=got.body["api_token"],
                body={"changes": [{"path": "b.md", "content": f"after {got.body['id']}"}]},
            )
            assert status == 200
        return web.json_response({"status": "ok"})

    cron, _ = await create_webhook(
        system,
        system.admin,
        system.agent.url_for("digest", digest),
        writePatterns=["a.md"],
        timezone="Europe/Berlin",
        description="digest with costs",
    )
    change, _ = await create_change_webhook(
        system,
        system.admin,
        system.agent.url_for("follower", follower),
        includePatterns=["a.md", "b.md"],
        maxDepth=3,
        passApiKey=True,
        writePatterns=["b.md"],
    )
    # Costs on three days (two days ago, yesterday, today), each run's chain done before the
    # clock moves on; the last one's is shown.
    for day in range(3):
        if day:
            system.clock.advance(timedelta(days=1))
        root = await trigger(system, system.admin, cron)
        first, one, two = await chained(system, f"cron:{root}", 3)
        for d in (first, one, two):
            assert (await finished(system, system.admin, d["id"]))["status"] == "success"
    assert (first["id"], one["parent"], two["parent"]) == (
        root,
        f"cron:{root}",
        f"change:{one['id']}",
    )
    ids = {"cron": cron, "change": change, "root": root, "one": one["id"], "two": two["id"]}

    seen = await asyncio.to_thread(drive, system.urls["admin-api"], system.admin, ids)

    # Cost chart: a chart per unit (sorted), each with its 3-day total; beside the success chart.
    assert [u.split()[0] for u in seen["cost_units"]] == ["tokens", "usd"]
    assert "31,116 in 7 days" in seen["cost_units"][0]  # 5186 × (1 + 2 + 3)
    assert "0.024 in 7 days" in seen["cost_units"][1]
    assert seen["charts_side_by_side"] is True
    assert seen["hovered"].endswith(" on " + day_label(system.clock.now()))
    # The delivery's and its attempt's costs (the bad unit dropped).
    assert seen["delivery_costs"] == "Costs of this delivery: tokens 15,558 · usd 0.012"
    assert seen["attempt_costs"] == "cost tokens 15,558 · usd 0.012"
    # Logs: in order, by level; the hostile message as text; data expandable; a long log scrolls.
    classes = [(c.split()[-1], level) for c, level, _ in seen["levels"]]
    assert classes[:5] == [
        ("level-info", "info"),
        ("level-debug", "debug"),
        ("level-warn", "warn"),
        ("level-error", "error"),
        ("level-other", "notice"),
    ]
    colour = {c.split()[-1]: rgb for c, _, rgb in seen["levels"]}
    assert colour["level-error"] == "rgb(185, 28, 28)"
    assert colour["level-warn"] == "rgb(146, 64, 14)"
    assert colour["level-info"] == colour["level-other"] == "rgb(29, 36, 51)"
    assert colour["level-debug"] == "rgb(156, 163, 175)"
    assert seen["entries"] == 5 + FILLER + 1  # our warn entry names the dropped unit
    assert seen["hostile"] == [HOSTILE, 0]
    assert '"args": {' in seen["data"] and '"tags": [' in seen["data"]
    height, shown = seen["scrolls"]
    assert height > 3 * shown and shown < 400
    # The chain, root → change one → change two, and back to the root.
    assert f"trace cron:{root}" in seen["root_chain"]
    assert "Parent: none" in seen["root_chain"] and f"change:{ids['one']}" in seen["root_chain"]
    assert f"parent cron:{root}" in seen["one_chain"]
    assert f"Parent: cron:{root}" in seen["one_chain"]
    assert f"Caused: change:{ids['two']}" in seen["one_chain"]
    assert f"Parent: change:{ids['one']}" in seen["two_chain"]
    assert "Whole chain, in request order (3 deliveries)" in seen["two_chain"]
    assert f"cron:{root}" in seen["back"] and "(this delivery)" in seen["back"]
    assert "No costs reported in the last 7 days." in seen["change_costs"]
    assert problems(seen["console"]) == []
