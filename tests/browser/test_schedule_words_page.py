"""Schedules in words on the admin web page (CONTRACT §17), in headless Chromium: the list
shows each cron webhook's schedule in words; a webhook's history shows them too, with its
next runs in its zone and in UTC, the run after a DST shift marked. The services' clock is
set to the day before Europe's spring-forward of 2027. Screenshot:
test-artifacts/schedule-words.png (the list:
schedule-words-list.png)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec

from tests.support.browser import console, problems, shoot, signed_in
from tests.support.flows import create_webhook
from tests.support.system import System

# Friday 26 March 2027; Berlin moves from CET (UTC+1) to CEST (UTC+2) on Sunday the 28th.
T0 = datetime(2027, 3, 26, 12, 0, tzinfo=UTC)

pytestmark = pytest.mark.system(services=("admin-api",), start=T0)


def look(base: str, token: str, berlin: int) -> dict[str, Any]:
    with signed_in(base, token, offline=True) as page:
        driver, wait = page.driver, page.wait
        row = wait.until(
            ec.presence_of_element_located((By.CSS_SELECTOR, f'#webhooks tr[data-id="{berlin}"]'))
        )
        wait.until(lambda _: "At 02:30" in row.text)
        listed = {
            tr.get_attribute("data-id"): tr.find_element(By.CSS_SELECTOR, ".schedule-words").text
            for tr in driver.find_elements(By.CSS_SELECTOR, '#webhooks tr[data-kind="cron"]')
        }
        shoot(driver, "schedule-words-list.png", driver.find_element(By.ID, "webhooks-section"))
        row.find_element(By.CSS_SELECTOR, "button.show-history").click()
        box = wait.until(ec.visibility_of_element_located((By.ID, "schedule")))
        wait.until(lambda _: len(box.find_elements(By.CSS_SELECTOR, "tr.run")) == 6)
        runs = [
            [td.text for td in tr.find_elements(By.TAG_NAME, "td")]
            for tr in box.find_elements(By.CSS_SELECTOR, "tr.run")
        ]
        marked = [
            tr.find_element(By.CSS_SELECTOR, ".dst-marker").text
            for tr in box.find_elements(By.CSS_SELECTOR, "tr.dst-shift")
        ]
        words = box.find_element(By.CSS_SELECTOR, ".schedule-words").text
        driver.execute_script("window.scrollTo(0, 0)")
        shoot(driver, "schedule-words.png", driver.find_element(By.ID, "history"))
        return {
            "listed": listed,
            "runs": runs,
            "marked": marked,
            "words": words,
            "problems": problems(console(driver)),
        }


async def test_schedule_in_words_and_next_runs_across_a_dst_shift(system: System) -> None:
    berlin, _ = await create_webhook(
        system,
        system.admin,
        "https://agent.example/digest",
        cronSchedule="30 2 * * *",
        timezone="Europe/Berlin",
    )
    weekdays, _ = await create_webhook(
        system,
        system.admin,
        "https://agent.example/report",
        cronSchedule="0 9 * * 1-5",
        timezone="America/New_York",
    )
    seen = await asyncio.to_thread(look, system.urls["admin-api"], system.admin, berlin)

    assert seen["listed"] == {
        str(berlin): "At 02:30",
        str(weekdays): "At 09:00, Monday through Friday",
    }
    assert seen["words"] == "At 02:30"
    # zone time, offset, UTC time, marker: 02:30 does not exist on the 28th, so that run is
    # at 03:00 CEST (cron(8)), and it is the first at UTC+2.
    assert [r[:3] for r in seen["runs"]] == [
        ["2027-03-27 02:30 CET", "UTC+1", "2027-03-27 01:30 UTC"],
        ["2027-03-28 03:00 CEST", "UTC+2", "2027-03-28 01:00 UTC"],
        ["2027-03-29 02:30 CEST", "UTC+2", "2027-03-29 00:30 UTC"],
        ["2027-03-30 02:30 CEST", "UTC+2", "2027-03-30 00:30 UTC"],
        ["2027-03-31 02:30 CEST", "UTC+2", "2027-03-31 00:30 UTC"],
        ["2027-04-01 02:30 CEST", "UTC+2", "2027-04-01 00:30 UTC"],
    ]
    assert [r[3] for r in seen["runs"]] == ["", "DST: UTC+1 → UTC+2", "", "", "", ""]
    assert seen["marked"] == ["DST: UTC+1 → UTC+2"]
    assert seen["problems"] == []
