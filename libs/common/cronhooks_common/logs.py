"""Structured logging: one JSON object (or one readable line) per event, on stderr.

Every line carries the service name and whatever ids are bound in the context
(`webhook_id`, `delivery_id`, `event_id`, `correlation_id`) via structlog contextvars.
Records of the standard `logging` module (aio-pika, asyncpg, aiohttp) go the same way.
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

import orjson
import structlog


def configure_logging(service: str, fmt: str = "json", level: int = logging.INFO) -> None:
    """Configure structlog and stdlib logging once, at process start."""
    shared: list[structlog.types.Processor] = [
        structlog.contextvars.merge_contextvars,
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
