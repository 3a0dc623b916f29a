"""CronWebhook.scheduleDescription (CONTRACT §17) over admin GraphQL: the schedule in words,
beside nextRuns, for schedules in DST zones across a shift; it follows an update."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tests.support.flows import create_webhook
from tests.support.graphql import UPDATE_WEBHOOK
from tests.support.system import System

# The day before the EU spring-forward of 2027 (Sunday 28 March, 02:00 → 03:00 CET → CEST).
T0 = datetime(2027, 3, 27, 12, 0, tzinfo=UTC)
READ = """query($id: Int!) { cronWebhook(id: $id) { scheduleDescription nextRuns(count: 3) } }"""

pytestmark = pytest.mark.system(services=("admin-api",), start=T0)


async def read(system: System, webhook_id: int) -> dict[str, object]:
    _, body = await system.graphql(system.admin, READ, {"id": webhook_id})
    assert "errors" not in body, body
    hook: dict[str, object] = body["data"]["cronWebhook"]
    return hook


async def test_the_contract_example_and_a_dst_shift(system: System) -> None:
    weekdays, _ = await create_webhook(
        system,
        system.admin,
        "https://agent.example/hook",
        cronSchedule="0 9 * * 1-5",
        timezone="Europe/Berlin",
    )
    assert await read(system, weekdays) == {
        "scheduleDescription": "At 09:00, Monday through Friday",
        # 09:00 CEST is 07:00 UTC from Monday on (it was 08:00 UTC the Friday before).
        "nextRuns": [
            "2027-03-29T07:00:00.000Z",
            "2027-03-30T07:00:00.000Z",
            "2027-03-31T07:00:00.000Z",
        ],
    }
    # 02:30 does not exist on the 28th: it runs once at 03:00 CEST (01:00 UTC), then 00:30 UTC.
    skipped, _ = await create_webhook(
        system,
        system.admin,
        "https://agent.example/hook",
        cronSchedule="30 2 * * *",
        timezone="Europe/Berlin",
    )
    assert await read(system, skipped) == {
        "scheduleDescription": "At 02:30",
        "nextRuns": [
            "2027-03-28T01:00:00.000Z",
            "2027-03-29T00:30:00.000Z",
            "2027-03-30T00:30:00.000Z",
        ],
    }


async def test_list_macros_and_updates(system: System) -> None:
    hook, _ = await create_webhook(
        system, system.admin, "https://agent.example/a", cronSchedule="@weekly"
    )
    await create_webhook(
        system, system.admin, "https://agent.example/b", cronSchedule="*/30 9,17 * * *"
    )
    _, body = await system.graphql(system.admin, "{ cronWebhooks { id scheduleDescription } }")
    assert [w["scheduleDescription"] for w in body["data"]["cronWebhooks"]] == [
        "At 00:00, only on Sunday",
        "Every 30 minutes, in the hours 09:00–09:59 and 17:00–17:59",
    ]
    _, body = await system.graphql(
        system.admin, UPDATE_WEBHOOK, {"input": {"id": hook, "cronSchedule": "15 8 1 * mon"}}
    )
    assert "errors" not in body, body
    assert (await read(system, hook))["scheduleDescription"] == (
        "At 08:15, on day 1 of the month, or on Monday"
    )
    # A paused webhook has no next runs, but its schedule still reads in words.
    await system.graphql(system.admin, UPDATE_WEBHOOK, {"input": {"id": hook, "enabled": False}})
    assert await read(system, hook) == {
        "scheduleDescription": "At 08:15, on day 1 of the month, or on Monday",
        "nextRuns": [],
    }
