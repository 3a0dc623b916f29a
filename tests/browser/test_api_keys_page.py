"""API keys on the admin web page (CONTRACT §10), in headless Chromium: create one (a bad
name shows its error first), see the key once, use it on the note API, revoke it, and see
the note API refuse it. A screenshot goes to test-artifacts/api-keys.png."""

from __future__ import annotations

import asyncio
from pathlib import Path

from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec

from tests.support.browser import artifact, signed_in
from tests.support.system import System
from tests.support.token_api import call


def create_and_revoke(base: str, token: str, shot: Path, use_key) -> dict[str, object]:  # type: ignore[no-untyped-def]
    with signed_in(base, token) as page:
        driver, wait = page.driver, page.wait
        form = wait.until(ec.visibility_of_element_located((By.ID, "api-key-form")))
        form.find_element(By.NAME, "name").send_keys("   ")
        driver.find_element(By.ID, "create-api-key").click()
        wait.until(ec.text_to_be_present_in_element((By.ID, "api-key-error"), "empty"))
        name_error = driver.find_element(By.ID, "api-key-error").text
        name = form.find_element(By.NAME, "name")
        name.clear()
        name.send_keys("linter")
        form.find_element(By.NAME, "skipWebhooks").click()
        driver.find_element(By.ID, "create-api-key").click()
        key = wait.until(ec.visibility_of_element_located((By.ID, "new-api-key"))).text
        row = wait.until(
            ec.presence_of_element_located((By.CSS_SELECTOR, '#api-keys tr[data-state="active"]'))
        )
        active_row = row.text
        before = use_key(key)
        driver.save_screenshot(str(shot))
        row.find_element(By.CSS_SELECTOR, "button.revoke").click()
        wait.until(ec.alert_is_present()).accept()
        revoked = wait.until(
            ec.presence_of_element_located((By.CSS_SELECTOR, '#api-keys tr[data-state="revoked"]'))
        )
        return {
            "name_error": name_error,
            "key": key,
            "active_row": active_row,
            "revoked_row": revoked.text,
            "before": before,
            "after": use_key(key),
        }


async def test_create_use_and_revoke_an_api_key_on_the_page(system: System) -> None:
    shot = artifact("api-keys.png")
    loop = asyncio.get_running_loop()

    def use_key(key: str) -> int:
        """The note API's answer to the key (called from the browser's thread)."""
        return asyncio.run_coroutine_threadsafe(_status(system, key), loop).result(timeout=20)

    seen = await asyncio.to_thread(
        create_and_revoke, system.urls["admin-api"], system.admin, shot, use_key
    )
    assert "must not be empty" in str(seen["name_error"])
    assert str(seen["key"]).startswith("chk_")
    assert "linter" in str(seen["active_row"]) and "fire none" in str(seen["active_row"])
    assert "revoked" in str(seen["revoked_row"])
    assert (seen["before"], seen["after"]) == (200, 401)
    assert shot.stat().st_size > 10_000


async def _status(r: System, key: str) -> int:
    status, _ = await call(r, "GET", "/api/notes?pattern=*", headers={"X-API-Key": key})
    return status
