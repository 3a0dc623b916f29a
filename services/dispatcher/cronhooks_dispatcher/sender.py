"""One HTTP POST to an agent, with a hard cap on what is read back.

One shared aiohttp session (created by the composition root); redirects are never
followed; the body is read in chunks and abandoned past the cap, so a huge or endless
answer costs at most the cap in memory.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

import aiohttp

from cronhooks_common.targets import BlockedAddressError, literal_problem

MAX_RESPONSE_BYTES = 1 << 20  # 1 MiB


@dataclass(frozen=True, slots=True)
class HttpResult:
    status: int | None
    body: bytes
    error: str | None
    duration_ms: int
    retry_after: str | None = None
    too_large: bool = False


async def post(
    session: aiohttp.ClientSession,
    url: str,
    *,
    body: bytes,
    headers: dict[str, str],
    timeout_seconds: float,
    allow_private: bool,
) -> HttpResult:
    """POST `body`; never raises for what the network or the agent does."""
    started = time.monotonic()
    if not allow_private:
        # IP literals never reach the resolver: check them here. Names are checked by the
        # connector's GuardedResolver on the addresses it actually connects to.
        problem = literal_problem(urlsplit(url).hostname or "")
        if problem is not None:
            return HttpResult(None, b"", f"blocked: {problem} (private targets are not allowed)", 0)

    def elapsed() -> int:
        return int((time.monotonic() - started) * 1000)

    try:
        async with asyncio.timeout(timeout_seconds):
            async with session.post(url, data=body, headers=headers, allow_redirects=False) as resp:
                chunks: list[bytes] = []
                size = 0
                async for chunk in resp.content.iter_chunked(64 << 10):
                    size += len(chunk)
                    if size > MAX_RESPONSE_BYTES:
                        return HttpResult(
                            resp.status,
                            b"".join(chunks),
                            "response body over 1 MiB",
                            elapsed(),
                            resp.headers.get("Retry-After"),
                            too_large=True,
                        )
                    chunks.append(chunk)
                return HttpResult(
                    resp.status, b"".join(chunks), None, elapsed(), resp.headers.get("Retry-After")
                )
    except TimeoutError:
        return HttpResult(None, b"", f"timeout after {timeout_seconds:g} s", elapsed())
    except aiohttp.ClientConnectorError as exc:
        if isinstance(exc.os_error, BlockedAddressError):
            return HttpResult(None, b"", str(exc.os_error), elapsed())
        return HttpResult(None, b"", f"connection error: {_describe(exc)}", elapsed())
    except aiohttp.ClientError as exc:
        return HttpResult(None, b"", f"connection error: {_describe(exc)}", elapsed())
    except OSError as exc:
        return HttpResult(None, b"", f"connection error: {exc.strerror or exc}", elapsed())


def _describe(exc: aiohttp.ClientError) -> str:
    text = str(exc) or type(exc).__name__
    return text[:300]
