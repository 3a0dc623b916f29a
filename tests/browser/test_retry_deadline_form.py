"""retryDeadlineSeconds in the web page's edit form (CONTRACT §10, §17), in headless
Chromium: beside the retry settings, 0 for a new webhook, a value out of range refused
beside the field, one in range saved and shown again when the form is opened anew."""

from __future__ import annotations

import asyncio

from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec

from tests.support.browser import signed_in
from tests.support.system import System

READ = "query($id: Int!) { cronWebhook(id: $id) { retryDeadlineSeconds } }"
FIELD = (By.NAME, "retryDeadlineSeconds")
ERROR = (By.CSS_SELECTOR, '[data-error-for="retryDeadlineSeconds"]')


def drive(base: str, token: str, agent_url: str) -> dict[str, str]:
    with signed_in(base, token) as page:
        driver, wait = page.driver, page.wait
        form = page.new_webhook_form(agent_url, "*/5 * * * *")
        field = form.find_element(*FIELD)
        default = field.get_attribute("value") or ""
        field.clear()
        field.send_keys("59")
        driver.find_element(By.ID, "save").click()
        wait.until(ec.text_to_be_present_in_element(ERROR, "from 60 to 604800"))
        refused = driver.find_element(*ERROR).text
        field.clear()
        field.send_keys("900")
        driver.find_element(By.ID, "save").click()
        wait.until(ec.visibility_of_element_located((By.ID, "new-secret")))
        row = wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "#webhooks tbody tr")))
        row.find_element(By.CSS_SELECTOR, "button.edit").click()
        wait.until(lambda d: d.find_element(*FIELD).get_attribute("value") == "900")
        return {"default": default, "refused": refused}


async def test_the_edit_form_sets_and_shows_the_retry_deadline(system: System) -> None:
    seen = await asyncio.to_thread(drive, system.urls["admin-api"], system.admin, system.agent.url)
    assert seen["default"] == "0"
    assert "must be 0 (no deadline) or from 60 to 604800" in seen["refused"]
    _, body = await system.graphql(system.admin, "{ cronWebhooks { id } }")
    [hook] = body["data"]["cronWebhooks"]
    _, body = await system.graphql(system.admin, READ, {"id": hook["id"]})
    assert body["data"]["cronWebhook"] == {"retryDeadlineSeconds": 900}
