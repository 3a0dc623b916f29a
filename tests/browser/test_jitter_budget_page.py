"""jitterSeconds and maxDeliveriesPerDay in the web page's edit form (CONTRACT §10, §13), in
headless Chromium: a bad jitter shows its error beside the field, a webhook is created with
both, the edit form shows them, clearing the budget saves null. A screenshot goes to
test-artifacts/jitter-budget.png."""

from __future__ import annotations

import asyncio
from pathlib import Path

from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec

from tests.support.browser import artifact, signed_in
from tests.support.system import System

READ = "query($id: Int!) { cronWebhook(id: $id) { jitterSeconds maxDeliveriesPerDay } }"


def drive(base: str, token: str, agent_url: str, shot: Path) -> dict[str, str]:
    with signed_in(base, token) as page:
        driver, wait = page.driver, page.wait
        form = page.new_webhook_form(agent_url, "*/5 * * * *")
        jitter = form.find_element(By.NAME, "jitterSeconds")
        jitter.clear()
        jitter.send_keys("4000")
        form.find_element(By.NAME, "maxDeliveriesPerDay").send_keys("12")
        driver.find_element(By.ID, "save").click()
        wait.until(
            ec.text_to_be_present_in_element(
                (By.CSS_SELECTOR, '[data-error-for="jitterSeconds"]'), "3600"
            )
        )
        field_error = driver.find_element(By.CSS_SELECTOR, '[data-error-for="jitterSeconds"]').text
        jitter.clear()
        jitter.send_keys("45")
        driver.find_element(By.ID, "save").click()
        wait.until(ec.visibility_of_element_located((By.ID, "new-secret")))
        row = wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "#webhooks tbody tr")))
        row.find_element(By.CSS_SELECTOR, "button.edit").click()
        wait.until(
            lambda d: d.find_element(By.NAME, "maxDeliveriesPerDay").get_attribute("value") == "12"
        )
        shown = {
            name: form.find_element(By.NAME, name).get_attribute("value") or ""
            for name in ("jitterSeconds", "maxDeliveriesPerDay")
        }
        driver.save_screenshot(str(shot))
        form.find_element(By.NAME, "maxDeliveriesPerDay").clear()  # no limit
        driver.find_element(By.ID, "save").click()
        wait.until(ec.invisibility_of_element_located((By.ID, "editor")))
        return {"field_error": field_error, **shown}


async def test_the_edit_form_sets_shows_and_clears_jitter_and_budget(system: System) -> None:
    shot = artifact("jitter-budget.png")
    seen = await asyncio.to_thread(
        drive, system.urls["admin-api"], system.admin, system.agent.url, shot
    )
    _, body = await system.graphql(system.admin, "{ cronWebhooks { id } }")
    [hook] = body["data"]["cronWebhooks"]
    _, body = await system.graphql(system.admin, READ, {"id": hook["id"]})
    assert "from 0 to 3600" in seen["field_error"]
    assert (seen["jitterSeconds"], seen["maxDeliveriesPerDay"]) == ("45", "12")
    assert body["data"]["cronWebhook"] == {"jitterSeconds": 45, "maxDeliveriesPerDay": None}
    assert shot.stat().st_size > 10_000
