"""Work notices (work.py): a batch's `delivery.requested` events become notices of at most
NOTICE_SIZE, in batch order, and only what the relay writes parses back as a notice."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from uuid import uuid4

import pytest

from cronhooks_common import work
from cronhooks_common.events import Event


def ev(kind: str, n: int) -> Event:
    return Event(uuid4(), kind, f"delivery-{n}", 1, datetime.now(UTC), {}, uuid4())


def test_requests_are_named_in_notices_of_at_most_the_notice_size_in_order() -> None:
    batch = [ev("delivery.requested" if n % 3 else "delivery.succeeded", n) for n in range(300)]
    notices = work.notices(batch)
    assert {key for key, _ in notices} == {"dispatcher"}
    refs = [ref for _, body in notices for ref in work.parse(body)]
    wanted = [e for e in batch if e.type == "delivery.requested"]
    assert refs == [work.Ref(e.event_id, e.stream) for e in wanted]
    assert [len(work.parse(body)) for _, body in notices] == [64, 64, 64, 8]
    assert work.notices([ev("delivery.succeeded", 1)]) == []


def test_the_dispatcher_takes_requests_as_notices_and_nobody_else_does() -> None:
    assert work.carried_to("dispatcher") == {"delivery.requested"}
    assert work.carried_to("scheduler") == frozenset()


AN_ID = "1a253f90-5b0e-4779-9461-dbbea046f53f"  # fixed: the ids name the cases (pytest -n)


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b"[]",
        b'{"events": []}',
        json.dumps({"events": [[AN_ID, "delivery-1"]] * (work.NOTICE_SIZE + 1)}).encode(),
        json.dumps({"events": [[AN_ID]]}).encode(),
        json.dumps({"events": [[AN_ID, 7]]}).encode(),
        json.dumps({"events": [[AN_ID, ""]]}).encode(),
        json.dumps({"events": [[AN_ID, "x" * (work.MAX_STREAM + 1)]]}).encode(),
        json.dumps({"events": [["not-a-uuid", "delivery-1"]]}).encode(),
    ],
)
def test_anything_else_is_refused_with_the_field_named(body: bytes) -> None:
    with pytest.raises(ValueError, match=r"^events: "):
        work.parse(body)
