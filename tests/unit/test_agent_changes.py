"""The SDK's reading of a change-webhook delivery (CONTRACT §11)."""

from __future__ import annotations

import pytest

from cronhooks_agent import ChangeDelivery, SyncAnswer

BODY = {
    "version": 1,
    "id": 43,
    "webhook_id": 9,
    "kind": "change",
    "timestamp": 1738000000,
    "trigger": "change",
    "attempt": 1,
    "depth": 0,
    "instruction": "Check spelling",
    "changes": [
        {
            "path": "blog/a.md",
            "event": "update",
            "version": 5,
            "content_hash": "ab" * 32,
            "content": "# A",
        },
        {
            "path": "blog/b.md",
            "event": "remove",
            "version": 3,
            "content_hash": None,
            "content": None,
        },
    ],
    "response_schema": {},
}


def test_a_change_delivery_reads_as_its_changes() -> None:
    d = ChangeDelivery.from_body(BODY)
    assert (d.id, d.webhook_id, d.depth, d.trigger, d.instruction) == (
        43,
        9,
        0,
        "change",
        "Check spelling",
    )
    assert [c.path for c in d.changes] == ["blog/a.md", "blog/b.md"]
    assert d.changes[1].removed and d.api_token is None and d.previous_error is None


def test_an_edit_is_conditional_on_the_version_the_delivery_saw() -> None:
    update, removal = ChangeDelivery.from_body(BODY).changes
    answer = SyncAnswer()
    answer.changes.append(update.edit("# A, checked"))
    assert answer.to_json()["changes"] == [
        {"path": "blog/a.md", "content": "# A, checked", "expected_hash": "ab" * 32}
    ]
    with pytest.raises(ValueError, match="removed"):
        removal.edit("back")


@pytest.mark.parametrize(
    "body",
    [
        {**BODY, "kind": "cron"},
        {k: v for k, v in BODY.items() if k != "kind"},
        {**BODY, "changes": [{"path": "x"}]},
        {**BODY, "depth": "deep"},
    ],
)
def test_anything_else_is_refused(body: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        ChangeDelivery.from_body(body)


def test_a_sync_answer_can_carry_a_patch() -> None:
    answer = SyncAnswer().create("new.md", "x").patch("old.md", "draft", "final")
    answer.patch("h.md", "a", expected_hash="b" * 64)
    assert answer.to_json()["changes"][1:] == [
        {"kind": "patch", "path": "old.md", "find": "draft", "replace": "final"},
        {"kind": "patch", "path": "h.md", "find": "a", "replace": "", "expected_hash": "b" * 64},
    ]
    with pytest.raises(ValueError, match="find is required"):
        SyncAnswer().patch("x.md", "").to_json()


def test_a_change_delivery_exposes_its_trace_and_parent() -> None:
    """CONTRACT §16.3: a root has its own trace and no parent; a caused one has both."""
    root = ChangeDelivery.from_body({**BODY, "trace": "change:43"})
    assert (root.trace, root.parent) == ("change:43", None)
    caused = ChangeDelivery.from_body({**BODY, "trace": "cron:42", "parent": "cron:42"})
    assert (caused.trace, caused.parent) == ("cron:42", "cron:42")
