"""Bad input is logged as what it is (issue 15, point 6): one `warning` line naming the
field and the reason, no traceback — for a bad cron from the form, a second delete and a
refused note push — while the services run as processes writing JSON lines."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import aiohttp
import pytest

from cronhooks_common.settings import Settings
from tests.e2e.test_no_secrets_in_logs import log_sizes, logged_since
from tests.support.graphql import CREATE_API_KEY, CREATE_WEBHOOK
from tests.support.processes import cluster

pytestmark = pytest.mark.e2e


def lines_of(text: str) -> list[dict[str, Any]]:
    """The JSON lines the services logged; anything else (a bare traceback) fails."""
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def refusals(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [line for line in lines if line["level"] not in ("info", "debug")]


async def test_bad_input_is_one_warning_line_with_field_and_reason(settings: Settings) -> None:
    settings = dataclasses.replace(settings, log_format="json")
    async with cluster(settings) as c:
        admin = await c.admin_token("logs")
        created = await c.graphql(
            admin,
            CREATE_WEBHOOK,
            {"input": {"url": "http://127.0.0.1:9/hook", "cronSchedule": "0 9 * * *"}},
        )
        assert "data" in created, created
        hook_id = created["data"]["createCronWebhook"]["cronWebhook"]["id"]
        key = await c.graphql(admin, CREATE_API_KEY, {"input": {"name": "logs"}})
        api_key = key["data"]["createApiKey"]["key"]
        delete = f"mutation {{ deleteCronWebhook(id: {hook_id}) {{ __typename }} }}"
        assert "errors" not in await c.graphql(admin, delete)

        async def refused(act: Any) -> list[dict[str, Any]]:
            sizes = log_sizes()
            await act()  # each line is flushed as it is logged, before the answer leaves
            return refusals(lines_of(logged_since(sizes)))

        async def bad_cron() -> None:
            answer = await c.graphql(
                admin,
                CREATE_WEBHOOK,
                {"input": {"url": "http://127.0.0.1:9/x", "cronSchedule": "61 * * * *"}},
            )
            assert answer["errors"][0]["extensions"]["field"] == "cronSchedule"

        async def second_delete() -> None:
            answer = await c.graphql(admin, delete)
            assert answer["errors"][0]["extensions"]["code"] == "NOT_FOUND"

        async def bad_note_push() -> None:
            async with (
                aiohttp.ClientSession() as session,
                session.post(
                    f"{c.url('importer')}/api/notes",
                    headers={"X-API-Key": api_key},
                    json={"changes": [{"path": "../outside.md", "content": "x"}]},
                ) as resp,
            ):
                assert resp.status == 400

        [cron] = await refused(bad_cron)
        assert (cron["level"], cron["event"], cron["service"]) == (
            "warning",
            "graphql_error",
            "admin-api",
        )
        assert cron["field"] == "cronSchedule" and "61 is outside 0-59" in cron["reason"]

        [again] = await refused(second_delete)
        assert (again["level"], again["code"], again["field"]) == ("warning", "NOT_FOUND", "id")
        assert again["reason"] == f"webhook {hook_id} not found"

        [push] = await refused(bad_note_push)
        assert (push["level"], push["event"], push["service"]) == (
            "warning",
            "notes_refused",
            "importer",
        )
        assert push["field"] == "path" and push["reason"] == "path must not contain .. segments"

        for line in (cron, again, push):
            assert "exception" not in line and "exc_info" not in line and "stack" not in line
