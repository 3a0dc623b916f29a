"""GraphQL request limits on both GraphQL APIs, over real HTTP (CONTRACT §15): the attacker
requests seen on the old code are refused with QUERY_TOO_COMPLEX before any resolver and
before graphql-core's validation, a small query sent meanwhile is answered at once, and the
nextRuns budget holds when a list multiplies what the document asks for.

On the old code, 100k aliases of `agents { id }` (2.2 MB) took 23.8 s and ~500 MB, and
1,000 aliases of `cronWebhooks { nextRuns(count: 100) }` blocked admin-api for 6.3 s."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import aiohttp
import pytest

from tests.support.graphql_spy import Spy
from tests.support.system import System
from tests.support.token_api import NOW, OPEN_WEBHOOK, mint, open_webhook
from tests.support.token_api import agent_graphql as importer_graphql

SMALL = "{ cronWebhooks { id } }"
# A stall of the event loop shows as a small query answered late; 2 s is far above the
# few tenths a refusal costs and far below the seconds the old code took.
STALL = 2.0


pytestmark = pytest.mark.system(services=("admin-api", "importer"), start=NOW)


@pytest.fixture(autouse=True)
def spy(monkeypatch: pytest.MonkeyPatch) -> Spy:
    """Installed before the services start (autouse: ahead of `system`)."""
    return Spy.install(monkeypatch)


async def post(url: str, token: str, body: bytes | dict[str, Any]) -> tuple[int, Any, float]:
    """Status, JSON answer (or text) and seconds taken."""
    started = time.perf_counter()
    raw = body if isinstance(body, bytes) else None
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            url,
            data=raw,
            json=None if raw is not None else body,
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        ) as resp,
    ):
        text = await resp.text()
        try:
            answer: Any = await resp.json(content_type=None)
        except ValueError:
            answer = text
        return resp.status, answer, time.perf_counter() - started


async def with_small_query(
    r: System, token: str, attack: Any
) -> tuple[tuple[int, Any, float], float]:
    """Send `attack` and, until it is answered, small queries one after the other; the
    attack's answer and the longest a small query took."""
    attacking = asyncio.create_task(attack)
    latencies: list[float] = []
    while not attacking.done():
        status, body, seconds = await post(
            f"{r.urls['admin-api']}/graphql", token, {"query": SMALL}
        )
        assert status == 200 and "errors" not in body, body
        latencies.append(seconds)
    return await attacking, max(latencies)


def aliases(count: int, selection: str) -> str:
    return "{" + " ".join(f"a{i}:{selection}" for i in range(count)) + "}"


def too_complex(answer: Any) -> str:
    [error] = answer["errors"]
    assert error["extensions"]["code"] == "QUERY_TOO_COMPLEX", answer
    assert "data" not in answer or answer["data"] is None
    return str(error["message"])


async def create_webhooks(r: System, token: str, count: int) -> None:
    fields = " ".join(
        f'c{i}: createCronWebhook(input: {{url: "https://agent.example/{i}",'
        f' cronSchedule: "*/5 * * * *"}}) {{ secret }}'
        for i in range(count)
    )
    status, body = await r.graphql(token, "mutation { " + fields + " }")
    assert status == 200 and "errors" not in body, body


async def test_the_attacker_requests_are_refused_before_resolvers_and_validation(
    system: System, spy: Spy
) -> None:
    url = f"{system.urls['admin-api']}/graphql"
    await create_webhooks(system, system.admin, 4)
    spy.reset()
    timings: dict[str, float] = {}

    # 100k aliases of agents { id }, as sent (2.2 MB): over the 1 MiB body limit now.
    original = aliases(100_000, " agents { id } ")
    (status, _, timings["100k aliases, 2.2 MB"]), small = await with_small_query(
        system, system.admin, post(url, system.admin, {"query": original})
    )
    assert status == 413 and len(original) > 2_000_000
    timings["slowest small query meanwhile (1)"] = small

    # The same attack packed under 1 MiB (55k aliases): stopped by the parser's token cap.
    packed = aliases(55_000, "agents{id}")
    assert len(packed) < 1 << 20
    (status, body, timings["55k aliases, 0.9 MB"]), small = await with_small_query(
        system, system.admin, post(url, system.admin, {"query": packed})
    )
    assert status == 400 and "20,000 tokens" in too_complex(body)
    timings["slowest small query meanwhile (2)"] = small

    # 1,000 aliases of cronWebhooks { nextRuns(count: 100) } (50 KB), 4 webhooks.
    next_runs = aliases(1000, "cronWebhooks{nextRuns(count:100)}")
    (status, body, timings["1,000 × nextRuns(100), 50 KB"]), small = await with_small_query(
        system, system.admin, post(url, system.admin, {"query": next_runs})
    )
    assert status == 400 and "10,000 nextRuns values" in too_complex(body)
    timings["slowest small query meanwhile (3)"] = small

    # Under the token cap, over the fields: 2,001 fields and aliases.
    status, body, timings["2,001 fields"] = await post(
        url, system.admin, {"query": aliases(1000, "agents{id}").replace("}", "} extra", 1)}
    )
    assert status == 400 and "2,000 fields and aliases" in too_complex(body)

    status, body, timings["16 levels"] = await post(
        url, system.admin, {"query": "{" + "a{" * 15 + "b" + "}" * 16}
    )
    assert status == 400 and "15 levels" in too_complex(body)

    print("\n" + "\n".join(f"{name}: {seconds:.3f} s" for name, seconds in timings.items()))
    # Only the small queries ran (their cronWebhooks and ids) and were validated.
    assert set(spy.resolved) == {"cronWebhooks", "id"}, set(spy.resolved)
    assert spy.validations <= 3  # the small query once, then from the cache
    assert all(seconds < STALL for name, seconds in timings.items() if "small" in name)


async def test_lists_cannot_multiply_next_runs_past_the_budget(system: System, spy: Spy) -> None:
    url = f"{system.urls['admin-api']}/graphql"
    started = time.perf_counter()
    await create_webhooks(system, system.admin, 500)
    print(f"\n500 webhooks created in {time.perf_counter() - started:.1f} s")

    # 500 × 20 = 10,000 values: within the budget.
    status, body, allowed = await post(
        url, system.admin, {"query": "{ cronWebhooks { nextRuns(count: 20) } }"}
    )
    assert status == 200 and "errors" not in body, body
    assert sum(len(w["nextRuns"]) for w in body["data"]["cronWebhooks"]) == 10_000

    # 500 × 100: the static check sees 100; the resolvers stop at 10,000 in all.
    spy.reset()
    (status, body, refused), small = await with_small_query(
        system,
        system.admin,
        post(url, system.admin, {"query": "{ cronWebhooks { id nextRuns(count: 100) } }"}),
    )
    print(
        f"10,000 values allowed in {allowed:.3f} s; 50,000 refused in {refused:.3f} s;"
        f" slowest small query meanwhile {small:.3f} s"
    )
    assert status == 400
    assert too_complex(body) == "the request asks for more than 10,000 nextRuns values in all"
    assert spy.resolved.count("nextRuns") == 500  # each charged; 100 computed, the rest refused
    assert small < STALL


async def test_the_importer_graphql_api_has_the_same_limits(system: System, spy: Spy) -> None:
    assert await open_webhook(system, system.admin) == OPEN_WEBHOOK
    token = mint(system.settings)
    spy.reset()
    for query, limit in (
        (aliases(1001, "notePaths{path}"), "2,000 fields and aliases"),
        ("{" + "a{" * 15 + "b" + "}" * 16, "15 levels"),
        (aliases(55_000, "note{path}"), "20,000 tokens"),
    ):
        status, body = await importer_graphql(system, token, query)
        assert status == 400 and limit in too_complex(body), body
    assert spy.resolved == [] and spy.validations == 0
    status, body = await importer_graphql(system, token, "{ notePaths { path } }")
    assert status == 200 and body == {"data": {"notePaths": []}}
