"""The chain limit's counting and skip decision (CONTRACT §11 revision 3): the root is a
chain's delivery number 1, every change delivery asked for takes the next number, and
exactly the first one over the limit raises the chain's alert."""

from __future__ import annotations

from cronhooks_common.events import DeliveryRequested, DeliverySkipped, Target
from cronhooks_importer.chain_limit import Place, added, places, skipped


def test_roots_are_not_counted_and_chains_are_counted_apart() -> None:
    assert added([None, "cron:1", "change:7", "cron:1", None]) == [("change:7", 1), ("cron:1", 2)]
    assert added([None]) == []


def test_a_chain_first_seen_starts_after_its_root() -> None:
    # the upsert of a new chain with 2 deliveries answers 1 (root) + 2
    got = places(["cron:1", "cron:1"], {"cron:1": 3}, limit=5)
    assert [p.number for p in got if p] == [2, 3]
    assert all(p and p.allowed for p in got)


def test_the_deliveries_past_the_limit_are_skipped_and_one_raises_the_alert() -> None:
    # a step asks for 4 in a chain that had 4 (root included), limit 5: 5 goes, 6..8 do not
    got = places(["change:9"] * 4, {"change:9": 8}, limit=5)
    assert [(p.number, p.allowed, p.raises_alert) for p in got if p] == [
        (5, True, False),
        (6, False, True),
        (7, False, False),
        (8, False, False),
    ]


def test_later_steps_never_raise_a_second_alert() -> None:
    got = places(["change:9", None], {"change:9": 12}, limit=5)
    assert got[1] is None
    assert got[0] == Place(12, 5)
    assert not got[0].allowed and not got[0].raises_alert


def test_chains_interleaved_in_one_step_keep_their_own_numbers() -> None:
    got = places(["a", "b", "a", "b"], {"a": 3, "b": 6}, limit=5)
    assert [p.number for p in got if p] == [2, 5, 3, 6]
    assert [p.allowed for p in got if p] == [True, True, True, False]


def test_a_limit_of_one_lets_the_root_alone_through() -> None:
    [p] = places(["cron:1"], {"cron:1": 2}, limit=1)
    assert p is not None and not p.allowed and p.raises_alert


def test_the_skip_keeps_the_request_s_place_in_its_chain() -> None:
    request = DeliveryRequested(
        delivery_id=44,
        webhook_id=9,
        kind="change",
        attempt=1,
        trigger="change",
        scheduled_for=None,
        depth=3,
        trace="cron:1",
        parent="change:43",
        target=Target(
            url="http://agent/",
            instruction="",
            timeout_seconds=60,
            pass_api_key=False,
            read_patterns=["*"],
            write_patterns=["*"],
            max_depth=10,
            max_retries=0,
        ),
    )
    skip = skipped(request, 5)
    assert isinstance(skip, DeliverySkipped)
    assert (skip.delivery_id, skip.webhook_id, skip.kind, skip.trigger) == (
        44,
        9,
        "change",
        "change",
    )
    assert (skip.reason, skip.skipped_count, skip.max_chain_deliveries) == ("chain_limit", 1, 5)
    assert (skip.trace, skip.parent) == ("cron:1", "change:43")
