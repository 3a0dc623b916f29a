"""Structured logging: one JSON object (or one readable line) per event, on stderr.

Every line carries the service name and whatever ids are bound in the context
(`webhook_id`, `delivery_id`, `event_id`, `correlation_id`) via structlog contextvars.
Records of the standard `logging` module (aio-pika, asyncpg, aiohttp) go the same way.
"""

from __future__ import annotations

import logging
import sys

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
    structlog.configure(
        processors=[
            *shared,
            structlog.processors.StackInfoRenderer(),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
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


def _add_service(service: str) -> structlog.types.Processor:
    def add(_: object, __: str, event_dict: structlog.types.EventDict) -> structlog.types.EventDict:
        event_dict.setdefault("service", service)
        return event_dict

    return add
