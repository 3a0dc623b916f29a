"""signatureScheme in the web page's edit form (CONTRACT §10, §17), in headless Chromium: a
webhook created with ED25519, the edit form shows its scheme and its public key (never a
secret), and switching back to HMAC is saved. A screenshot goes to
test-artifacts/signature-scheme.png."""

from __future__ import annotations

import asyncio
from pathlib import Path

from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import Select

from tests.support.browser import artifact, signed_in
from tests.support.system import System

READ = "query($id: Int!) { cronWebhook(id: $id) { signatureScheme publicKey } }"


def drive(base: str, token: str, agent_url: str, shot: Path) -> dict[str, str]:
    with signed_in(base, token) as page:
        driver, wait = page.driver, page.wait
        form = page.new_webhook_form(agent_url, "*/5 * * * *")
        Select(form.find_element(By.NAME, "signatureScheme")).select_by_value("ED25519")
        driver.find_element(By.ID, "save").click()
        wait.until(ec.visibility_of_element_located((By.ID, "new-secret")))
        secret = driver.find_element(By.ID, "new-secret").text
        row = wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "#webhooks tbody tr")))
        row.find_element(By.CSS_SELECTOR, "button.edit").click()
        key = wait.until(ec.visibility_of_element_located((By.ID, "public-key"))).text
        scheme = form.find_element(By.NAME, "signatureScheme").get_attribute("value") or ""
        editor = driver.find_element(By.ID, "editor").text
        driver.save_screenshot(str(shot))
        Select(form.find_element(By.NAME, "signatureScheme")).select_by_value("HMAC")
        driver.find_element(By.ID, "save").click()
        wait.until(ec.invisibility_of_element_located((By.ID, "editor")))
        return {"scheme": scheme, "key": key, "secret": secret, "editor": editor}


async def test_the_edit_form_sets_and_shows_the_signature_scheme(system: System) -> None:
    shot = artifact("signature-scheme.png")
    seen = await asyncio.to_thread(
        drive, system.urls["admin-api"], system.admin, system.agent.url, shot
    )
    _, body = await system.graphql(system.admin, "{ cronWebhooks { id } }")
    [hook] = body["data"]["cronWebhooks"]
    _, body = await system.graphql(system.admin, READ, {"id": hook["id"]})
    assert seen["scheme"] == "ED25519" and seen["key"].startswith("whpk_")
    assert seen["secret"].startswith("whsec_") and seen["secret"] not in seen["editor"]
    assert body["data"]["cronWebhook"] == {"signatureScheme": "HMAC", "publicKey": None}
    assert shot.stat().st_size > 10_000
