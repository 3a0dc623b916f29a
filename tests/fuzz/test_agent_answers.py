"""Nested and absurd answers from agents (CONTRACT §15, "nothing an agent answers can wedge
anything"): whatever status, body and `Retry-After` come back, the attempt is recorded —
a success, a failure with a reason, or a failure whose retry is scheduled within the hour —
and the delivery never stays pending without an attempt. Real services in-process on the
real database and broker, a real agent on loopback."""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from typing import Any

from aiohttp import web
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cronhooks_common import json_input
from tests.support.agent import Received
from tests.support.destinations import past_any_hold
from tests.support.flows import create_webhook, trigger
from tests.support.graphql import DELIVERY
from tests.support.inprocess import eventually
from tests.support.system import System

FUZZ = settings(
    max_examples=int(os.environ.get("FUZZ_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def nested(levels: int, opener: bytes = b"[", closer: bytes = b"]") -> bytes:
    return opener * levels + closer * levels


deep_value = st.one_of(
    st.integers(1, 2_000).map(nested),
    st.integers(1, 200).map(lambda n: b'{"a":' * n + b"1" + b"}" * n),
    st.sampled_from([nested(63), nested(64), nested(65), nested(30_000)]),
)
absurd_value = st.sampled_from(
    [
        b"1" * 5_000,  # beyond int()'s digit limit
        b"1e999",
        b"-0",
        b"NaN",
        b"Infinity",
        b'"\\ud800"',
        b'"\\u0000"',
        b'"' + "é".encode() * 10_000 + b'"',
        b"[" + b",".join([b"1"] * 20_000) + b"]",
        b'{"": {"": {"": null}}}',
    ]
)
body = st.one_of(
    st.builds(lambda v: b'{"status":"ok","changes":' + v + b"}", deep_value),
    st.builds(lambda v: b'{"status":"ok","x":' + v + b"}", deep_value),
    st.builds(lambda v: b'{"status":"error","message":' + v + b"}", absurd_value | deep_value),
    st.builds(
        lambda v: b'{"status":"ok","changes":[{"path":"fuzz/a","content":' + v + b"}]}",
        absurd_value | deep_value,
    ),
    deep_value,
    absurd_value,
    st.binary(max_size=200),
)
retry_after = st.one_of(
    st.none(),
    st.integers(0, 10**6).map(str),
    st.integers(1, 6_000).map(lambda n: "9" * n),
    st.sampled_from(
        [
            "999999999999999",
            "²",
            "٣",
            "-5",
            "+5",
            " 5 ",
            "1.5",
            "0x10",
            "Mon, 09 Feb 2026 09:05:00 GMT",
            "Fri, 31 Dec 9999 23:59:59 GMT",
            "Mon, 32 Feb 2026 25:61:61 GMT",
            "Thu, 01 Jan 1970 00:00:00 GMT",
            "\t",
        ]
    ),
)
status = st.sampled_from([200, 201, 202, 204, 299, 400, 404, 410, 429, 500, 503, 599])
HOUR = timedelta(hours=1)


@FUZZ
@given(code=status, answer=body, wait=retry_after)
async def test_any_answer_ends_its_attempt_and_any_retry_is_within_the_hour(
    system: System, code: int, answer: bytes, wait: str | None
) -> None:
    headers = {"Retry-After": wait} if wait is not None else {}
    calls = 0

    async def respond(_: web.Request, __: Received) -> web.StreamResponse:
        nonlocal calls
        calls += 1
        if calls > 1:  # the retry: a 429's hold (below) is not renewed for the next example
            return web.Response(status=200)
        return web.Response(status=code, body=answer, headers=headers)

    url = system.agent.url_for(f"a{len(system.agent.routes)}", respond)
    hook, _ = await create_webhook(
        system, system.admin, url, maxRetries=1, writePatterns=["fuzz/*"]
    )
    delivery_id = await trigger(system, system.admin, hook)

    async def recorded() -> dict[str, Any] | None:
        _, got = await system.graphql(system.admin, DELIVERY, {"id": delivery_id})
        d: dict[str, Any] = got["data"]["cronWebhookDelivery"]
        # The delivery's row and its attempts are two reads: a row read just before the
        # outcome was projected can come with attempts read just after. Status and
        # nextAttemptAt are one row: wait until it says how the attempt ended.
        ended = d["status"] != "pending" or d["nextAttemptAt"] is not None
        return d if d["attempts"] and ended else None

    d = await eventually(recorded, timeout=30)
    [attempt] = d["attempts"]
    assert attempt["responseStatus"] == code
    if d["status"] == "pending":  # failed, and the retry is scheduled: within the hour
        assert attempt["errorMessage"], d
        due = datetime.fromisoformat(d["nextAttemptAt"])
        assert system.clock.now() <= due <= system.clock.now() + HOUR, (wait, d)
    elif d["status"] == "failed":
        assert code == 410, d  # 410 Gone ends it at once; any other failure waits for a retry
    else:
        assert d["status"] == "success" and 200 <= code < 300, d
    await past_any_hold(system)  # the next example's delivery goes at once
    if code in (200, 201, 299) and _too_deep(answer):  # 202 reads no body, 204 has none
        # judged before anything else in the body: a failure saying so (CONTRACT §15)
        assert attempt["errorMessage"] == "answer nested deeper than 64 levels", d


def _too_deep(answer: bytes) -> bool:
    try:
        json_input.loads(answer)
    except json_input.TooDeep:
        return True
    except ValueError:
        return False
    return False
