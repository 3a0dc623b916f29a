"""What each queue type declares (queues.py): classic exactly as before, quorum with its
type on every queue and what quorum queues refuse refused before the broker sees it."""

from __future__ import annotations

import pytest

from cronhooks_common.queues import QueueSetupError, queue_arguments

DLX = {"x-dead-letter-exchange": "cronhooks.dead-letter", "x-dead-letter-routing-key": "q"}


def test_classic_declares_what_it_always_did() -> None:
    assert queue_arguments("classic", name="q") == {}
    assert queue_arguments("classic", DLX, name="q") == DLX
    # classic allows what quorum does not; the caller's choice passes through
    assert queue_arguments("classic", {"x-max-priority": 5}, name="q", exclusive=True) == {
        "x-max-priority": 5
    }


def test_quorum_names_its_type_and_dead_letters_at_least_once() -> None:
    assert queue_arguments("quorum", name="q.dead") == {"x-queue-type": "quorum"}
    assert queue_arguments("quorum", DLX, name="q") == {
        **DLX,
        "x-queue-type": "quorum",
        "x-dead-letter-strategy": "at-least-once",
        "x-overflow": "reject-publish",
    }


def test_quorum_drops_lazy_mode() -> None:
    # A quorum queue keeps its messages on disk: lazy mode means nothing, and is refused.
    assert queue_arguments("quorum", {"x-queue-mode": "lazy"}, name="q") == {
        "x-queue-type": "quorum"
    }


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"exclusive": True}, "exclusive"),
        ({"auto_delete": True}, "auto-delete"),
        ({"durable": False}, "non-durable"),
        ({"arguments": {"x-max-priority": 10}}, "x-max-priority"),
    ],
)
def test_quorum_refuses_what_quorum_queues_cannot_be(kwargs: dict[str, object], named: str) -> None:
    with pytest.raises(QueueSetupError) as refused:
        queue_arguments("quorum", name="cronhooks.x", **kwargs)  # type: ignore[arg-type]
    message = str(refused.value)
    assert named in message and "cronhooks.x" in message and "CRONHOOKS_QUEUE_TYPE" in message
    assert "\n" not in message


def test_an_unknown_type_is_refused() -> None:
    with pytest.raises(QueueSetupError, match="CRONHOOKS_QUEUE_TYPE"):
        queue_arguments("stream", name="q")
