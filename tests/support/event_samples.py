"""Recording what the services write, shape by shape, for tests/unit/test_event_types.py.

With `CRONHOOKS_EVENT_CORPUS=<file>` set, every event a test's database holds at teardown
is appended to <file> (tests/conftest.py); `python -m tests.support.event_samples <file>`
then keeps one sample of each shape (the keys, nested, with their JSON types) of each type
in tests/unit/data/event_samples.jsonl, long strings cut. The samples committed there were
recorded at the commit before the typed events, so they pin what the services wrote then.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from cronhooks_common.events import Event

SAMPLES = Path(__file__).resolve().parents[1] / "unit" / "data" / "event_samples.jsonl"


def shape(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: shape(v) for k, v in sorted(value.items())}
    if isinstance(value, list):
        shapes: list[Any] = []
        for v in value:
            if shape(v) not in shapes:
                shapes.append(shape(v))
        return shapes
    return type(value).__name__


def record(event: Event) -> None:
    path = os.environ.get("CRONHOOKS_EVENT_CORPUS")
    if not path:
        return
    line = {"type": event.type, "schema_version": event.schema_version, "data": event.data}
    with open(path, "a") as corpus:
        corpus.write(json.dumps(line, sort_keys=True, ensure_ascii=False) + "\n")


def _cut(value: Any) -> Any:
    if isinstance(value, str):
        return value[:200]
    if isinstance(value, dict):
        return {k: _cut(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_cut(v) for v in value]
    return value


def keep_one_per_shape(corpus: Path, samples: Path = SAMPLES) -> int:
    seen: dict[tuple[str, str], dict[str, Any]] = {}
    for line in corpus.read_text().splitlines():
        event = json.loads(line)
        key = (event["type"], json.dumps(shape(event["data"]), sort_keys=True))
        seen.setdefault(key, {**event, "data": _cut(event["data"])})
    samples.write_text(
        "".join(
            json.dumps(seen[k], sort_keys=True, ensure_ascii=False) + "\n" for k in sorted(seen)
        )
    )
    return len(seen)


if __name__ == "__main__":
    print(keep_one_per_shape(Path(sys.argv[1])), "shapes")
