"""The event codec on the hot path: typed events as msgspec Structs or as dataclasses.

Issue 38 made every event's data a frozen class. Each delivery builds its events' data
(producer), writes it as JSON (the store), and decodes what it hears (consumer) a few
times; this measures those steps for `delivery.requested`, the event every slot makes,
with the two candidates — msgspec Structs (chosen) and standard frozen dataclasses with
orjson — next to the plain dicts of before. CPU only, no I/O: microseconds per event,
best of five runs.
"""

from __future__ import annotations

import dataclasses
import timeit
from collections.abc import Callable
from typing import Any

import msgspec
import orjson

from cronhooks_common.events import DeliveryRequested, Target

TARGET: dict[str, Any] = {
    "url": "https://agent.example/hooks/cron",
    "instruction": "Summarise yesterday's notes into digests/daily.md",
    "timeout_seconds": 30,
    "pass_api_key": True,
    "read_patterns": ["**"],
    "write_patterns": ["digests/*"],
    "max_depth": 1,
    "max_retries": 3,
    "concurrency_policy": "ALLOW",
    "execution_group": "",
    "attach_notes": [],
}
DATA: dict[str, Any] = {
    "delivery_id": 123456,
    "webhook_id": 77,
    "kind": "cron",
    "attempt": 1,
    "scheduled_for": "2026-12-06T09:00:00+00:00",
    "trigger": "schedule",
    "missed_count": 0,
    "target": TARGET,
    "next_run_at": "2026-12-07T09:00:00+00:00",
}


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class _TargetDC:
    url: str
    instruction: str
    timeout_seconds: int
    pass_api_key: bool
    read_patterns: list[str]
    write_patterns: list[str]
    max_depth: int
    max_retries: int
    concurrency_policy: str | None = None
    execution_group: str | None = None
    attach_notes: list[str] | None = None


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class _RequestedDC:
    """The dataclass candidate (absent fields would need a sentinel and a custom encoder;
    None stands in here, which flatters it)."""

    delivery_id: int
    webhook_id: int
    kind: str
    attempt: int
    scheduled_for: str | None
    trigger: str
    missed_count: int
    target: _TargetDC
    next_run_at: str | None = None

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> _RequestedDC:
        return cls(**{**data, "target": _TargetDC(**data["target"])})


def _cases() -> dict[str, dict[str, Callable[[], object]]]:
    struct = DeliveryRequested(**{**DATA, "target": Target(**TARGET)})  # type: ignore[arg-type]
    dc = _RequestedDC.from_data(DATA)
    raw = orjson.dumps(DATA)
    decoder = msgspec.json.Decoder(DeliveryRequested)
    return {
        "build the event": {
            "dict": lambda: {**DATA, "target": dict(TARGET)},
            "msgspec Struct": lambda: DeliveryRequested(
                **{**DATA, "target": Target(**TARGET)}  # type: ignore[arg-type]
            ),
            "dataclass": lambda: _RequestedDC.from_data(DATA),
        },
        "data -> JSON (store, publish)": {
            "dict": lambda: orjson.dumps(DATA),
            "msgspec Struct": lambda: orjson.dumps(struct.to_data()),
            "dataclass": lambda: orjson.dumps(dc),
        },
        "JSON -> typed data (consume)": {
            "dict": lambda: orjson.loads(raw),
            "msgspec Struct": lambda: msgspec.convert(orjson.loads(raw), DeliveryRequested),
            "dataclass": lambda: _RequestedDC.from_data(orjson.loads(raw)),
        },
        "JSON -> typed data, one pass": {
            "dict": lambda: orjson.loads(raw),
            "msgspec Struct": lambda: decoder.decode(raw),
            "dataclass": lambda: _RequestedDC.from_data(orjson.loads(raw)),
        },
    }


def measure(number: int = 50_000) -> list[tuple[str, dict[str, float]]]:
    """µs per call of each step for each candidate."""
    rows = []
    for step, candidates in _cases().items():
        rows.append(
            (
                step,
                {
                    name: min(timeit.repeat(fn, number=number, repeat=5)) / number * 1e6
                    for name, fn in candidates.items()
                },
            )
        )
    return rows


async def codec() -> list[tuple[str, str]]:
    rows = measure()
    names = list(rows[0][1])
    lines = [
        "| step | " + " | ".join(f"{n} µs" for n in names) + " |",
        "|---" * (len(names) + 1) + "|",
    ]
    lines += [f"| {step} | " + " | ".join(f"{v[n]:.2f}" for n in names) + " |" for step, v in rows]
    return [("Event codec: delivery.requested (µs per event, best of 5)", "\n".join(lines))]
