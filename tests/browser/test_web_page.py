"""The admin web page in headless Chromium (Debian's chromium + chromium-driver): sign in
with a token, create a webhook (and see a validation error beside its field), press
Run now, see the delivery appear with its attempt. A screenshot goes to test-artifacts/."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec

from tests.support.browser import artifact, signed_in
from tests.support.system import System


def drive(base: str, token: str, agent_url: str, shot: Path) -> dict[str, str]:
    with signed_in(base, token) as page:
        driver, wait = page.driver, page.wait
        form = page.new_webhook_form(agent_url, "61 * * * *")
        form.find_element(By.NAME, "instruction").send_keys("Write the daily digest")
        driver.find_element(By.ID, "save").click()
        error = wait.until(
            ec.text_to_be_present_in_element(
                (By.CSS_SELECTOR, '[data-error-for="cronSchedule"]'), "outside"
            )
        )
        field_error = driver.find_element(By.CSS_SELECTOR, '[data-error-for="cronSchedule"]').text
        cron = form.find_element(By.NAME, "cronSchedule")
        cron.clear()
        cron.send_keys("*/5 * * * *")
        driver.find_element(By.ID, "save").click()
        secret = wait.until(ec.visibility_of_element_located((By.ID, "new-secret"))).text
        row = wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "#webhooks tbody tr")))
        row.find_element(By.CSS_SELECTOR, "button.run-now").click()
        delivered = wait.until(
            ec.presence_of_element_located(
                (By.CSS_SELECTOR, '#deliveries tr.delivery[data-status="success"]')
            )
        )
        delivered.click()  # show the attempt's request and response
        request = wait.until(
            ec.visibility_of_element_located(
                (By.CSS_SELECTOR, "#deliveries tr.attempt-details pre")
            )
        ).text
        driver.save_screenshot(str(shot))
        return {
            "field_error": field_error,
            "secret": secret,
            "request": request,
            "row": delivered.text,
            "error_seen": str(error),
        }


async def test_sign_in_create_run_now_and_see_the_delivery(system: System) -> None:
    agent = system.agent
    shot = artifact("web-page.png")
    seen = await asyncio.to_thread(drive, system.urls["admin-api"], system.admin, agent.url, shot)
    assert "61 is outside 0-59" in seen["field_error"]
    assert seen["secret"].startswith("whsec_")
    assert '"instruction": "Write the daily digest"' in seen["request"]  # shown indented
    assert "success" in seen["row"]
    assert len(agent.received) == 1
    assert shot.stat().st_size > 10_000
    print(f"\nscreenshot: {shot}")


@pytest.mark.parametrize(
    ("path", "content_type"),
    [("/favicon.ico", "image/x-icon"), ("/static/favicon.svg", "image/svg+xml")],
)
@pytest.mark.system(services=("admin-api",))
async def test_the_favicon_is_served(system: System, path: str, content_type: str) -> None:
    """Browsers ask for /favicon.ico whatever a page says; the pages name the SVG."""
    import aiohttp

    async with (
        aiohttp.ClientSession() as session,
        session.get(system.urls["admin-api"] + path) as resp,
    ):
        assert resp.status == 200 and resp.headers["Content-Type"] == content_type
        body = await resp.read()
    assert body.startswith(b"\x00\x00\x01\x00") if path.endswith(".ico") else b"<svg" in body
    assert resp.headers["Content-Security-Policy"].startswith("default-src 'none'")


@pytest.mark.parametrize("path", ["/"])
@pytest.mark.system(services=("admin-api",))
async def test_the_page_is_served_without_a_token(system: System, path: str) -> None:
    import aiohttp

    async with (
        aiohttp.ClientSession() as session,
        session.get(system.urls["admin-api"] + path) as resp,
    ):
        assert resp.status == 200 and "text/html" in resp.headers["Content-Type"]
        assert "<title>cronhooks</title>" in await resp.text()
