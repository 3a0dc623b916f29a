"""The chain limit on the running services (CONTRACT §11 revision 3): one root causes at
most CRONHOOKS_MAX_CHAIN_DELIVERIES deliveries in its trace, itself included; the rest of
the chain's change deliveries are skipped with `chain_limit`, and one alert is raised."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.test_change_webhooks import answer_anew, quiet
from tests.support.flows import create_change_webhook, push_notes
from tests.support.inprocess import eventually
from tests.support.system import System

LIMIT = 5
CHAIN = """query($trace: String!) {
  deliveryChain(trace: $trace) { id cronWebhookId trace parent status error }
}"""
ALERTS = "{ alerts { id webhookId kind consecutiveFailures lastError disabled resolvedAt } }"


async def alerts(system: System, count: int) -> list[dict[str, Any]]:
    async def listed() -> list[dict[str, Any]] | None:
        _, body = await system.graphql(system.admin, ALERTS)
        found: list[dict[str, Any]] = body["data"]["alerts"]
        return found if len(found) >= count else None

    return await eventually(listed)  # type: ignore[no-any-return]


async def chain_with_errors(system: System, trace: str, count: int) -> list[dict[str, Any]]:
    async def listed() -> list[dict[str, Any]] | None:
        _, body = await system.graphql(system.admin, CHAIN, {"trace": trace})
        found: list[dict[str, Any]] = body["data"]["deliveryChain"]
        return found if len(found) == count else None

    return await eventually(listed)  # type: ignore[no-any-return]


@pytest.mark.system(settings={"max_chain_deliveries": LIMIT})
async def test_a_chain_stops_at_the_limit_with_one_alert_and_a_new_root_starts_afresh(
    system: System,
) -> None:
    # a.md fires the writer of b.md; b.md fires two writers of a.md: the chain doubles
    # every other step, far below maxDepth, so only the breadth limit ends it
    to_b = system.agent.url_for("to_b", answer_anew("b.md", "bee"))
    to_a = system.agent.url_for("to_a", answer_anew("a.md", "ay"))
    also_a = system.agent.url_for("also_a", answer_anew("a.md", "ay too"))
    deep = {"maxDepth": 50, "writePatterns": ["*"]}
    first, _ = await create_change_webhook(
        system, system.admin, to_b, includePatterns=["a.md"], **deep
    )
    await create_change_webhook(system, system.admin, to_a, includePatterns=["b.md"], **deep)
    await create_change_webhook(system, system.admin, also_a, includePatterns=["b.md"], **deep)

    await push_notes(system, system.admin, ("a.md", "start"))  # an admin's write: a root
    await system.agent.wait_for(LIMIT)
    assert await quiet(system.agent, 3.0) == LIMIT
    [root] = [got for got in system.agent.received if "parent" not in got.body]
    trace = root.body["trace"]
    assert trace == f"change:{root.body['id']}" and root.body["webhook_id"] == first
    assert {got.body["trace"] for got in system.agent.received} == {trace}

    # root (1) → 2 → 2 (5 in all) → 4 asked for, all over the limit
    listed = await chain_with_errors(system, trace, LIMIT + 4)
    skipped = [d for d in listed if d["status"] == "skipped"]
    assert len(skipped) == 4 and len(listed) - len(skipped) == LIMIT
    assert all(d["error"] == "chain_limit" and d["parent"] for d in skipped)
    assert {d["trace"] for d in listed} == {trace}

    [alert] = await alerts(system, 1)
    assert alert["kind"] == "change" and alert["resolvedAt"] is None
    assert alert["consecutiveFailures"] == 0 and not alert["disabled"]
    assert trace in alert["lastError"] and "chain_limit" in alert["lastError"]
    assert alert["webhookId"] == skipped[0]["cronWebhookId"]  # the first skipped delivery's

    # a new root is not held back by the old chain
    await push_notes(system, system.admin, ("a.md", "again"))
    await system.agent.wait_for(2 * LIMIT)
    assert await quiet(system.agent, 3.0) == 2 * LIMIT
    assert len(await alerts(system, 2)) == 2  # the new chain reached the limit too: its own
