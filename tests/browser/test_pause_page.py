"""The pause switch on the admin web page (CONTRACT §16.4), in headless Chromium: pause with
a reason and an until (an empty reason shows its error first), see the banner with both
and Resume, resume, and see the banner go. A screenshot goes to
test-artifacts/pause-banner.png."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from pathlib import Path

from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec

from tests.support.browser import artifact, signed_in
from tests.support.flows import events_of
from tests.support.system import System

STATE = "{ deliveryPause { paused since until reason } }"


def pause_and_resume(base: str, token: str, until: datetime, shot: Path) -> dict[str, str]:
    with signed_in(base, token) as page:
        driver, wait = page.driver, page.wait
        wait.until(ec.visibility_of_element_located((By.ID, "pause-panel-summary"))).click()
        form = wait.until(ec.visibility_of_element_located((By.ID, "pause-form")))
        assert not driver.find_element(By.ID, "pause-banner").is_displayed()
        driver.find_element(By.ID, "pause-deliveries").click()
        wait.until(ec.text_to_be_present_in_element((By.ID, "pause-error"), "empty"))
        reason_error = driver.find_element(By.ID, "pause-error").text
        form.find_element(By.NAME, "reason").send_keys("provider outage")
        driver.execute_script(  # a datetime-local's typing depends on the locale
            "arguments[0].value = arguments[1]",
            form.find_element(By.NAME, "until"),
            until.strftime("%Y-%m-%dT%H:%M:%S"),
        )
        driver.find_element(By.ID, "pause-deliveries").click()
        banner = wait.until(ec.visibility_of_element_located((By.ID, "pause-banner")))
        shown = banner.text
        driver.save_screenshot(str(shot))
        driver.find_element(By.ID, "resume-deliveries").click()
        wait.until(ec.invisibility_of_element_located((By.ID, "pause-banner")))
        return {"reason_error": reason_error, "banner": shown}


async def test_pause_shows_a_banner_with_resume_on_the_page(system: System) -> None:
    shot = artifact("pause-banner.png")
    until = (system.clock.now() + timedelta(hours=2)).replace(microsecond=0)
    seen = await asyncio.to_thread(
        pause_and_resume, system.urls["admin-api"], system.admin, until, shot
    )
    assert "reason: must not be empty" in seen["reason_error"]
    banner = seen["banner"]
    assert "Deliveries are paused" in banner and "provider outage" in banner
    assert until.strftime("%Y-%m-%d %H:%M:%S UTC") in banner, banner
    assert system.clock.now().strftime("%Y-%m-%d") in banner  # since
    assert "Resume" in banner
    _, body = await system.graphql(system.admin, STATE)
    assert body["data"]["deliveryPause"]["paused"] is False
    events = await events_of(system.dsn, "deliveries-pause")
    assert [e["type"] for e in events] == ["deliveries.paused", "deliveries.resumed"]
    assert shot.stat().st_size > 10_000
