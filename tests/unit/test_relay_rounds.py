from __future__ import annotations

from datetime import UTC, datetime
from uuid import uuid4

from cronhooks_common.events import Event
from cronhooks_common.relay import publish_rounds


def ev(stream: str, version: int) -> Event:
    return Event(uuid4(), "t", stream, version, datetime.now(UTC), {}, uuid4())


def test_each_round_holds_one_event_per_stream_in_version_order() -> None:
    batch = [ev("a", 1), ev("b", 1), ev("a", 2), ev("a", 3), ev("c", 5), ev("b", 2)]
    rounds = publish_rounds(batch)
    assert [[(e.stream, e.version) for e in r] for r in rounds] == [
        [("a", 1), ("b", 1), ("c", 5)],
        [("a", 2), ("b", 2)],
        [("a", 3)],
    ]


def test_versions_are_sorted_even_if_positions_were_not() -> None:
    rounds = publish_rounds([ev("a", 2), ev("a", 1)])
    assert [r[0].version for r in rounds] == [1, 2]
