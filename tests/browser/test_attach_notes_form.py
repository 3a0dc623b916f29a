"""attachNotes (CONTRACT §13) in the web page's edit form, in headless Chromium: a bad
pattern's error shows beside the field, a good list is saved, and the editor shows it
again when the webhook is opened for editing; a change there is saved too."""

from __future__ import annotations

import asyncio

from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec

from tests.support.browser import signed_in
from tests.support.system import System


def drive(base: str, token: str) -> dict[str, str]:
    with signed_in(base, token) as page:
        driver, wait = page.driver, page.wait
        form = page.new_webhook_form("https://agent.example/hook", "0 9 * * *")
        attach = form.find_element(By.NAME, "attachNotes")
        attach.send_keys("notes/*, ../secret/*")
        driver.find_element(By.ID, "save").click()
        selector = (By.CSS_SELECTOR, '[data-error-for="attachNotes"]')
        wait.until(ec.text_to_be_present_in_element(selector, "secret"))
        field_error = driver.find_element(*selector).text
        attach.clear()
        attach.send_keys("notes/*, plans/*.md")
        driver.find_element(By.ID, "save").click()
        wait.until(ec.visibility_of_element_located((By.ID, "new-secret")))
        row = wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "#webhooks tbody tr")))
        row.find_element(By.CSS_SELECTOR, "button.edit").click()
        wait.until(lambda d: d.find_element(By.NAME, "attachNotes").get_attribute("value") != "")
        shown = driver.find_element(By.NAME, "attachNotes").get_attribute("value") or ""
        edited = driver.find_element(By.NAME, "attachNotes")
        edited.clear()
        edited.send_keys("digests/*")
        driver.find_element(By.ID, "save").click()
        wait.until(ec.invisibility_of_element_located((By.ID, "webhook-form")))
        return {"field_error": field_error, "shown": shown}


async def test_the_edit_form_round_trips_attach_notes(system: System) -> None:
    seen = await asyncio.to_thread(drive, system.urls["admin-api"], system.admin)
    assert "../secret/*" in seen["field_error"]
    assert seen["shown"] == "notes/*, plans/*.md"
    _, body = await system.graphql(system.admin, "{ cronWebhooks { attachNotes } }")
    assert body["data"]["cronWebhooks"] == [{"attachNotes": ["digests/*"]}]
