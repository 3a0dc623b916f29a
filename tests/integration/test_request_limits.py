"""HTTP request limits (CONTRACT §15) on every endpoint that reads a body, over raw sockets
where the client has to misbehave: bodies over the endpoint's limit → 413, with or
without Content-Length (a chunked stream is refused without being read to its end);
headers or a body not received in time → 408. The timeout is lowered to 1 s here (it is
30 s in service); the same server setup runs `cronhooks run`."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import pytest

from cronhooks_common import http_limits
from cronhooks_common.http_limits import (
    AGENT_CRON_BODY_BYTES,
    GRAPHQL_BODY_BYTES,
    TOKEN_API_BODY_BYTES,
)
from tests.support.flows import create_agent
from tests.support.system import System
from tests.support.token_api import NOW, OPEN_WEBHOOK, mint

TIMEOUT = 1.0


@dataclass(frozen=True)
class Endpoint:
    service: str
    path: str
    token: str
    limit: int
    body: dict[str, Any]  # a small valid-enough body, padded to size in the tests
    graphql: bool  # answers errors as {"errors": [{"extensions": {"code"}}]}

    def __str__(self) -> str:
        return f"{self.service} POST {self.path}"


pytestmark = pytest.mark.system(services=("admin-api", "importer"), start=NOW, open_webhook=True)


@pytest.fixture(autouse=True)
def short_client_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    """Set before the services start (autouse: ahead of `system`)."""
    monkeypatch.setattr(http_limits, "CLIENT_TIMEOUT_SECONDS", TIMEOUT)


@pytest.fixture
async def endpoints(system: System) -> list[Endpoint]:
    """Every endpoint that reads a body, with a token it takes."""
    agent, _ = await create_agent(system, system.admin, "http://127.0.0.1:9/agent", "limits")
    api = mint(system.settings)
    query = {"query": "{ __typename }"}
    return [
        Endpoint("admin-api", "/graphql", system.admin, GRAPHQL_BODY_BYTES, query, True),
        Endpoint(
            "admin-api",
            "/api/agent-cron/cancel",
            agent,
            AGENT_CRON_BODY_BYTES,
            {"job_id": "j"},
            False,
        ),
        Endpoint("importer", "/api/notes", api, TOKEN_API_BODY_BYTES, {"changes": []}, False),
        Endpoint("importer", "/graphql", api, TOKEN_API_BODY_BYTES, query, True),
    ]


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


async def connect(
    system: System, service: str
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    url = urlsplit(system.urls[service])
    return await asyncio.open_connection(url.hostname, url.port)


def head(endpoint: Endpoint, *extra: str) -> bytes:
    lines = [
        f"POST {endpoint.path} HTTP/1.1",
        "Host: 127.0.0.1",
        f"Authorization: Bearer {endpoint.token}",
        "Content-Type: application/json",
        *extra,
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


async def answer(reader: asyncio.StreamReader, within: float = 10.0) -> Answer:
    async with asyncio.timeout(within):
        status_line, *header_lines = (await reader.readuntil(b"\r\n\r\n")).decode().split("\r\n")
        headers = {
            name.lower(): value.strip()
            for name, _, value in (line.partition(":") for line in header_lines if line)
        }
        body = await reader.readexactly(int(headers.get("content-length", "0")))
    return Answer(int(status_line.split()[1]), headers, body)


def padded(body: dict[str, Any], size: int) -> bytes:
    """`body` as JSON, padded with spaces to exactly `size` bytes (still valid JSON)."""
    raw = json.dumps(body).encode()
    return raw + b" " * (size - len(raw))


def chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


async def send(system: System, endpoint: Endpoint, raw: bytes) -> Answer:
    reader, writer = await connect(system, endpoint.service)
    try:
        writer.write(raw)
        await writer.drain()
        return await answer(reader)
    finally:
        writer.close()


def assert_refused(endpoint: Endpoint, got: Answer, status: int, code: str) -> None:
    assert got.status == status, (str(endpoint), got)
    assert got.headers.get("connection", "").lower() == "close", (str(endpoint), got.headers)
    if endpoint.graphql:
        assert got.json()["errors"][0]["extensions"]["code"] == code
    else:
        assert "error" in got.json()


async def test_bodies_up_to_the_limit_pass_and_one_byte_more_is_413(
    system: System, endpoints: list[Endpoint]
) -> None:
    for endpoint in endpoints:
        exact = padded(endpoint.body, endpoint.limit)
        got = await send(system, endpoint, head(endpoint, f"Content-Length: {len(exact)}") + exact)
        assert got.status == 200, (str(endpoint), got)

        over = padded(endpoint.body, endpoint.limit + 1)
        got = await send(system, endpoint, head(endpoint, f"Content-Length: {len(over)}") + over)
        assert_refused(endpoint, got, 413, "PAYLOAD_TOO_LARGE")

        # Chunked, so no Content-Length to go by: the bytes are counted as they come.
        chunks = b"".join(chunk(over[i : i + 50_000]) for i in range(0, len(over), 50_000))
        got = await send(
            system, endpoint, head(endpoint, "Transfer-Encoding: chunked") + chunks + b"0\r\n\r\n"
        )
        assert_refused(endpoint, got, 413, "PAYLOAD_TOO_LARGE")


async def endless_chunks(writer: asyncio.StreamWriter, endpoint: Endpoint, sent: list[int]) -> None:
    writer.write(head(endpoint, "Transfer-Encoding: chunked"))
    while True:
        writer.write(chunk(b" " * 65_536))
        sent[0] += 65_536
        await writer.drain()


async def test_an_endless_chunked_body_is_refused_without_reading_to_its_end(
    system: System, endpoints: list[Endpoint]
) -> None:
    for endpoint in endpoints:
        reader, writer = await connect(system, endpoint.service)
        sent = [0]
        streaming = asyncio.create_task(endless_chunks(writer, endpoint, sent))
        try:
            got = await answer(reader)
        finally:
            streaming.cancel()
            await asyncio.gather(streaming, return_exceptions=True)
            writer.close()
        print(f"\n{endpoint}: 413 after {sent[0]:,} bytes sent (limit {endpoint.limit:,})")
        assert_refused(endpoint, got, 413, "PAYLOAD_TOO_LARGE")


async def test_headers_not_received_in_time_are_answered_408_and_closed(
    system: System,
) -> None:
    for service in ("admin-api", "importer"):
        reader, writer = await connect(system, service)
        started = time.perf_counter()
        writer.write(b"POST /graphql HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # and no more
        got = await answer(reader)
        closed = await asyncio.wait_for(reader.read(), 5)
        elapsed = time.perf_counter() - started
        writer.close()
        print(f"\n{service}: partial headers answered {got.status} after {elapsed:.2f} s")
        assert got.status == 408 and closed == b""
        assert TIMEOUT * 0.9 <= elapsed < TIMEOUT + 3


async def test_an_idle_connection_is_closed_without_an_answer(
    system: System,
) -> None:
    reader, writer = await connect(system, "admin-api")
    started = time.perf_counter()
    assert await asyncio.wait_for(reader.read(), 5) == b""  # nothing was asked: no 408
    writer.close()
    assert TIMEOUT * 0.9 <= time.perf_counter() - started < TIMEOUT + 3


async def test_a_body_not_received_in_time_is_408_on_every_endpoint(
    system: System, endpoints: list[Endpoint]
) -> None:
    for endpoint in endpoints:
        for framing, first in (
            ("Content-Length: 100", b'{"query": '),
            ("Transfer-Encoding: chunked", chunk(b'{"query": ')),
        ):
            reader, writer = await connect(system, endpoint.service)
            started = time.perf_counter()
            writer.write(head(endpoint, framing) + first)  # then the client stalls
            got = await answer(reader)
            elapsed = time.perf_counter() - started
            writer.close()
            assert_refused(endpoint, got, 408, "REQUEST_TIMEOUT")
            assert TIMEOUT * 0.9 <= elapsed < TIMEOUT + 3, (str(endpoint), framing, elapsed)


async def test_a_slow_client_does_not_hold_up_the_others(
    system: System, endpoints: list[Endpoint]
) -> None:
    graphql = endpoints[0]
    reader, writer = await connect(system, graphql.service)
    writer.write(head(graphql, "Content-Length: 100") + b"{")  # stalls
    started = time.perf_counter()
    status, body = await system.graphql(graphql.token, "{ cronWebhooks { id } }")
    assert status == 200 and body["data"]["cronWebhooks"] == [{"id": OPEN_WEBHOOK}]
    assert time.perf_counter() - started < TIMEOUT  # answered while the other still waits
    assert (await answer(reader)).status == 408
    writer.close()
