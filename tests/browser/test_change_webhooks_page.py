"""Change webhooks on the admin web page (CONTRACT §10, §11), in headless Chromium: create
one (a bad pattern shows its error beside the field first), see it listed with the cron
webhooks, see the delivery a note write caused in its history, run it by hand with a
chosen note, pause it. A screenshot goes to test-artifacts/change-webhooks.png."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec

from tests.support.browser import artifact, signed_in
from tests.support.flows import create_webhook
from tests.support.graphql import PUSH_NOTES
from tests.support.system import System


def drive(
    base: str, token: str, agent_url: str, shot: Path, write: Callable[[str], None]
) -> dict[str, str]:
    with signed_in(base, token) as page:
        driver, wait = page.driver, page.wait
        wait.until(ec.visibility_of_element_located((By.ID, "new-change-webhook"))).click()
        form = wait.until(ec.visibility_of_element_located((By.ID, "webhook-form")))
        assert not form.find_element(By.NAME, "cronSchedule").is_displayed()
        form.find_element(By.NAME, "url").send_keys(agent_url)
        form.find_element(By.NAME, "includePatterns").send_keys("/blog/*")
        driver.find_element(By.ID, "save").click()
        wait.until(
            ec.text_to_be_present_in_element(
                (By.CSS_SELECTOR, '[data-error-for="includePatterns"]'), "relative"
            )
        )
        field_error = driver.find_element(
            By.CSS_SELECTOR, '[data-error-for="includePatterns"]'
        ).text
        patterns = form.find_element(By.NAME, "includePatterns")
        patterns.clear()
        patterns.send_keys("blog/*")
        form.find_element(By.NAME, "onRemove").click()  # not on removals
        driver.find_element(By.ID, "save").click()
        secret = wait.until(ec.visibility_of_element_located((By.ID, "new-secret"))).text
        row = wait.until(
            ec.presence_of_element_located((By.CSS_SELECTOR, '#webhooks tr[data-kind="change"]'))
        )
        listed = row.text
        write("blog/post.md")
        page.click('#webhooks tr[data-kind="change"] button.show-history')
        delivered = wait.until(
            ec.presence_of_element_located(
                (By.CSS_SELECTOR, '#deliveries tr.delivery[data-status="success"]')
            )
        )
        first = delivered.text
        driver.find_element(By.ID, "history-run").click()
        prompt = wait.until(ec.alert_is_present())
        prompt.send_keys("blog/post.md")
        prompt.accept()
        wait.until(
            lambda d: (
                len(
                    d.find_elements(
                        By.CSS_SELECTOR, '#deliveries tr.delivery[data-status="success"]'
                    )
                )
                == 2
            )
        )
        manual = driver.find_elements(By.CSS_SELECTOR, "#deliveries tr.delivery")[0].text
        driver.save_screenshot(str(shot))
        page.click('#webhooks tr[data-kind="change"] button.toggle')
        wait.until(
            ec.text_to_be_present_in_element(
                (By.CSS_SELECTOR, '#webhooks tr[data-kind="change"]'), "paused"
            )
        )
        return {
            "field_error": field_error,
            "secret": secret,
            "listed": listed,
            "first": first,
            "manual": manual,
            "rows": driver.find_element(By.CSS_SELECTOR, "#webhooks tbody").text,
        }


async def test_create_see_run_and_pause_a_change_webhook(system: System) -> None:
    agent = system.agent
    await create_webhook(system, system.admin, agent.url_for("cron", lambda *_: _ok()))
    loop = asyncio.get_running_loop()

    def write(path: str) -> None:
        """A note write by the admin (from the browser's thread)."""
        update = {"path": path, "content": "# Post"}
        asyncio.run_coroutine_threadsafe(
            system.graphql(system.admin, PUSH_NOTES, {"input": {"updates": [update]}}), loop
        ).result(timeout=20)

    shot = artifact("change-webhooks.png")
    seen = await asyncio.to_thread(
        drive, system.urls["admin-api"], system.admin, agent.url, shot, write
    )
    assert "relative" in seen["field_error"]
    assert seen["secret"].startswith("whsec_")
    assert "on change of blog/*" in seen["listed"]
    assert "cron" not in seen["listed"] and "0 0 1 1 *" in seen["rows"]  # both kinds listed
    assert "success" in seen["first"] and "change" in seen["first"]
    assert "manual" in seen["manual"]
    assert "paused" in seen["rows"]
    bodies = [got.body for got in agent.at("hook")]
    assert [b["trigger"] for b in bodies] == ["change", "manual"]
    assert all(b["changes"][0]["path"] == "blog/post.md" for b in bodies)
    assert shot.stat().st_size > 10_000


async def _ok():  # type: ignore[no-untyped-def]
    from aiohttp import web

    return web.json_response({"status": "ok"})
