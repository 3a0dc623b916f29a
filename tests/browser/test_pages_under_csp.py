"""The admin page and GraphiQL in headless Chromium under their Content-Security-Policy
(CONTRACT §15), with every host but the test server unresolvable: GraphiQL, opened from the
page's link in a new tab, renders its editor from the vendored files and runs a query with
the page's token, and the console shows no CSP violation and no error at all."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec

from tests.support.browser import artifact, console, problems, signed_in
from tests.support.system import System


def drive(base: str, token: str) -> dict[str, Any]:
    with signed_in(base, token, offline=True, timeout=30) as page:
        driver, wait = page.driver, page.wait
        wait.until(ec.visibility_of_element_located((By.ID, "new-webhook")))
        page_log = console(driver)
        # The page's "GraphQL explorer" link opens GraphiQL in a new tab, which finds the
        # page's token (same-origin storage; the URL carries none) and fills in its header.
        before = set(driver.window_handles)
        driver.find_element(By.LINK_TEXT, "GraphQL explorer").click()
        wait.until(lambda d: len(d.window_handles) > len(before))
        [tab] = set(driver.window_handles) - before
        driver.switch_to.window(tab)
        wait.until(lambda d: d.current_url.startswith(base))
        assert driver.current_url == base + "/graphql", driver.current_url
        wait.until(
            ec.presence_of_element_located((By.CSS_SELECTOR, ".graphiql-query-editor .CodeMirror"))
        )
        driver.find_element(By.CSS_SELECTOR, ".graphiql-execute-button").click()
        wait.until(
            ec.text_to_be_present_in_element((By.CSS_SELECTOR, ".result-window"), '"cronWebhooks"')
        )
        result = driver.find_element(By.CSS_SELECTOR, ".result-window").text
        driver.save_screenshot(str(artifact("graphiql.png")))
        return {"page_log": page_log, "graphiql_log": console(driver), "result": result}


@pytest.mark.system(services=("admin-api",))
async def test_graphiql_renders_offline_and_the_console_has_no_csp_violation(
    system: System,
) -> None:
    seen = await asyncio.to_thread(drive, system.urls["admin-api"], system.admin)
    print("\nadmin page console:", seen["page_log"])
    print("GraphiQL console:", seen["graphiql_log"])
    assert problems(seen["page_log"]) == []
    assert problems(seen["graphiql_log"]) == []
    assert '"cronWebhooks": []' in seen["result"]
