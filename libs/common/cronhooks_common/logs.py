"""Structured logging: one JSON object (or one readable line) per event, on stderr.

Every line carries the service name and whatever ids are bound in the context with
`bound(...)` (`webhook_id`, `delivery_id`, `event_id`, `correlation_id`). Records of the
standard `logging` module (aio-pika, asyncpg, aiohttp) go the same way.
"""

from __future__ import annotations

import json
import logging
import sys
import uuid
from collections.abc import Mapping
from contextvars import ContextVar, Token
from types import TracebackType
from typing import Any

import orjson
import structlog


def configure_logging(service: str, fmt: str = "json", level: int = logging.INFO) -> None:
    """Configure structlog and stdlib logging once, at process start."""
    shared: list[structlog.types.Processor] = [
        _merge_bound,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        _add_service(service),
    ]
    renderer: structlog.types.Processor = (
        structlog.processors.JSONRenderer()
        if fmt == "json"
        else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    )
    # The service's own lines (one per delivery on the hot path) are encoded by orjson
    # and written as bytes; the standard library's records keep the text renderer.
    own_renderer, factory = (
        (structlog.processors.JSONRenderer(serializer=_json_bytes), _bytes_to_stderr)
        if fmt == "json"
        else (renderer, structlog.PrintLoggerFactory(file=sys.stderr))
    )
    structlog.configure(
        processors=[
            *shared,
            structlog.processors.StackInfoRenderer(),
            structlog.processors.format_exc_info,
            own_renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=factory,
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=shared,
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.format_exc_info,
                renderer,
            ],
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING)


# The fields bound by the `bound` blocks around the running code, outermost first.
_BOUND: ContextVar[tuple[Mapping[str, object], ...]] = ContextVar("cronhooks_log", default=())


class bound:  # lower case: used like a function, `with bound(delivery_id=...)`
    """Within the block (and the tasks started in it), every log line carries `fields`;
    an inner block's field wins over an outer one's of the same name.

    A consumer binds the ids of every message it handles, and most of them log nothing:
    binding is one ContextVar set, and the values are turned into text only when a line
    is written. (structlog's `bound_contextvars` sets a variable per field, through a
    generator context manager, with the ids already formatted: ~5 times the cost.)"""

    __slots__ = ("_fields", "_token")

    def __init__(self, **fields: object) -> None:
        self._fields = fields
        self._token: Token[tuple[Mapping[str, object], ...]] | None = None

    def __enter__(self) -> None:
        self._token = _BOUND.set((*_BOUND.get(), self._fields))

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        assert self._token is not None
        _BOUND.reset(self._token)


def _merge_bound(
    _: object, __: str, event_dict: structlog.types.EventDict
) -> structlog.types.EventDict:
    # A line's own keyword wins over a bound field, as with structlog's contextvars.
    for fields in reversed(_BOUND.get()):
        for key, value in fields.items():
            event_dict.setdefault(key, str(value) if isinstance(value, uuid.UUID) else value)
    return event_dict


def _json_bytes(value: Any, **kw: Any) -> bytes:
    try:
        return orjson.dumps(value, default=kw.get("default"))
    except TypeError:  # what orjson refuses (a lone surrogate, a huge int): escaped instead
        return json.dumps(value, **kw).encode()


def _bytes_to_stderr(*_: Any) -> structlog.BytesLogger:
    return structlog.BytesLogger(sys.stderr.buffer)


def _add_service(service: str) -> structlog.types.Processor:
    def add(_: object, __: str, event_dict: structlog.types.EventDict) -> structlog.types.EventDict:
        event_dict.setdefault("service", service)
        return event_dict

    return add
