"""HTTP request limits of every service (CONTRACT §15, "Request limits").

Bodies: each endpoint reads its body with `read_body(request, limit)`, which reads at most
limit + 1 bytes whatever the request says (a chunked body has no Content-Length), so an
oversized body is refused (413) without being held in memory, and a body that does not
arrive within CLIENT_TIMEOUT_SECONDS is refused (408). aiohttp's `client_max_size` only
guards `request.read()`/`post()`, and applies one size to the whole app.

Headers: aiohttp closes a connection whose next request has not arrived within its
`keepalive_timeout`, counted from the connection's start or from the previous response —
that is the header timeout, so `make_runner` sets it to CLIENT_TIMEOUT_SECONDS (aiohttp's
default is an hour). aiohttp just closes; `_SlowClientHandler` first answers 408 when part
of a request was received, as the client is then waiting for an answer.

CLIENT_TIMEOUT_SECONDS is read when a runner is made and when a body is read, so tests
lower it for an in-process server rather than waiting 30 s.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from aiohttp import web
from aiohttp.web_protocol import RequestHandler

GRAPHQL_BODY_BYTES = 1 << 20  # admin-api POST /graphql
AGENT_CRON_BODY_BYTES = 64 << 10  # admin-api POST /api/agent-cron/*
TOKEN_API_BODY_BYTES = 2 << 20  # importer POST /api/notes, /graphql and /api/runs/current*
TEST_WEBHOOK_BODY_BYTES = 4 << 20  # admin-api /debug/test_webhook (dev mode): any delivery
CLIENT_TIMEOUT_SECONDS = 30.0


class BodyRefused(Exception):
    """The body was not read: too large, or too slow. Each endpoint words the answer."""

    status: int
    code: str

    def http_error(self, body: Any) -> web.HTTPException:
        """The answer to raise from a handler, with `body` as JSON. The connection is
        closed after it: the rest of the body was never read."""
        error = self._exception(text=json.dumps(body), content_type="application/json")
        error.force_close()
        return error

    def _exception(self, **kwargs: Any) -> web.HTTPException:
        raise NotImplementedError


class BodyTooLarge(BodyRefused):
    status = 413
    code = "PAYLOAD_TOO_LARGE"

    def __init__(self, limit: int) -> None:
        super().__init__(f"request body is larger than {limit} bytes")
        self.limit = limit

    def _exception(self, **kwargs: Any) -> web.HTTPException:
        return web.HTTPRequestEntityTooLarge(self.limit, **kwargs)


class BodyTimeout(BodyRefused):
    status = 408
    code = "REQUEST_TIMEOUT"

    def __init__(self, seconds: float) -> None:
        super().__init__(f"request body not received within {seconds:g} s")

    def _exception(self, **kwargs: Any) -> web.HTTPException:
        return web.HTTPRequestTimeout(**kwargs)


async def read_body(request: web.Request, limit: int) -> bytes:
    """The whole body, at most `limit` bytes, received within CLIENT_TIMEOUT_SECONDS;
    BodyTooLarge or BodyTimeout otherwise."""
    if request.content_length is not None and request.content_length > limit:
        raise BodyTooLarge(limit)  # said so up front: nothing to read
    seconds = CLIENT_TIMEOUT_SECONDS
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(seconds):
            while chunk := await request.content.read(limit + 1 - size):
                chunks.append(chunk)
                size += len(chunk)
                if size > limit:
                    raise BodyTooLarge(limit)
    except TimeoutError:
        raise BodyTimeout(seconds) from None
    return b"".join(chunks)


_TIMEOUT_BODY = json.dumps(
    {"error": "request headers not received in time", "code": "REQUEST_TIMEOUT"}
).encode()
_TIMEOUT_RESPONSE = (
    b"HTTP/1.1 408 Request Timeout\r\n"
    b"Content-Type: application/json\r\n"
    b"Content-Length: " + str(len(_TIMEOUT_BODY)).encode() + b"\r\n"
    b"Connection: close\r\n\r\n" + _TIMEOUT_BODY
)


class _SlowClientHandler(RequestHandler):
    """aiohttp's connection handler, answering 408 before it closes a connection that sent
    part of a request and not the rest of its headers within the keep-alive timeout."""

    _partial = False  # bytes of a request arrived and it is not complete yet

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        # A pending waiter means no request is being handled: what arrived, if anything,
        # was the start of the next request's headers and did not complete them.
        waiter = self._waiter
        self._partial = bool(data) and waiter is not None and not waiter.done()

    def _process_keepalive(self) -> None:
        # The conditions under which aiohttp (3.14) closes the connection here.
        waiter = self._waiter
        closing = (
            not self._force_close
            and self._keepalive
            and self._loop.time() >= self._next_keepalive_close_time
            and waiter is not None
            and not waiter.done()
        )
        if closing and self._partial and self.transport is not None:
            self.transport.write(_TIMEOUT_RESPONSE)  # flushed before the close
        super()._process_keepalive()


class _SlowClientServer(web.Server):
    def __call__(self) -> RequestHandler:
        return _SlowClientHandler(self, loop=self._loop, **self._kwargs)


class _Runner(web.AppRunner):
    async def _make_server(self) -> web.Server:
        made = await super()._make_server()
        # The same server, but making _SlowClientHandler connections.
        return _SlowClientServer(
            made.request_handler,
            request_factory=made.request_factory,
            handler_cancellation=made.handler_cancellation,
            loop=asyncio.get_running_loop(),
            **made._kwargs,
        )


def make_runner(app: web.Application, **kwargs: Any) -> web.AppRunner:
    """The runner of every service's HTTP server (`cronhooks run` and in-process tests)."""
    return _Runner(app, access_log=None, keepalive_timeout=CLIENT_TIMEOUT_SECONDS, **kwargs)
