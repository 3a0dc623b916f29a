"""The importer's events keep exactly the keys it wrote as hand-built dicts. The suite's
wire check (tests/conftest.py) sees a key added or changed; a key left out that its class
allows to be absent (UNSET) it cannot see: these pin every key of every event the importer
builds, as the dicts were before the events were typed."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import uuid4

import msgspec

from cronhooks_common.change_payload import ChangePayload
from cronhooks_common.events import (
    DeliveryChangesReceived,
    Event,
    NewEvent,
    NoteChanged,
    Target,
    WebhookConfig,
)
from cronhooks_importer.agent_notes import push_of
from cronhooks_importer.answers import ENDINGS, attempt_of
from cronhooks_importer.callers import Caller
from cronhooks_importer.change_index import ChangeWebhook
from cronhooks_importer.change_step import Match, Note, requested
from cronhooks_importer.imports import verdict
from cronhooks_importer.rules import Change, ChangeError
from cronhooks_importer.store import Applied, Current, note_changed

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)


def _event(new: NewEvent, stream: str = "delivery-7", version: int = 3) -> Event:
    return Event(uuid4(), new.type, stream, version, NOW, new.data, uuid4())


ANSWER = DeliveryChangesReceived(
    delivery_id=7,
    webhook_id=2,
    kind="cron",
    attempt=1,
    scheduled_for="2026-12-06T12:00:00+00:00",
    trigger="schedule",
    missed_count=0,
    changes=[{"path": "a.md", "content": "x"}],
    write_patterns=["*"],
    max_depth=1,
    depth=1,
)
APPLIED = Applied("a.md", "ab" * 32, 4, "update")


def test_a_synchronous_answers_verdict_names_its_attempt() -> None:
    imported = NewEvent.of(verdict(attempt_of(ANSWER), [APPLIED], []))
    assert imported.type == "notes.imported"
    assert imported.data == {
        "delivery_id": 7,
        "webhook_id": 2,
        "attempt": 1,
        "scheduled_for": "2026-12-06T12:00:00+00:00",
        "trigger": "schedule",
        "depth": 1,
        "applied": [{"path": "a.md", "content_hash": "ab" * 32, "version": 4}],
    }
    rejected = NewEvent.of(verdict(attempt_of(ANSWER), [], [ChangeError("b\x00.md", "nope")]))
    assert rejected.type == "notes.rejected"
    assert rejected.data == {
        **{k: v for k, v in imported.data.items() if k != "applied"},
        "errors": [{"path": "b\ufffd.md", "error": "nope"}],
    }


def test_a_manual_attempt_keeps_its_null_slot() -> None:
    answer = msgspec.structs.replace(ANSWER, scheduled_for=None, trigger="manual")
    manual = NewEvent.of(verdict(attempt_of(answer), [], []))
    assert manual.data["scheduled_for"] is None and manual.data["trigger"] == "manual"
    assert manual.data["applied"] == []


def test_a_poison_answer_is_rejected_as_an_internal_error() -> None:
    ended = ENDINGS(_event(NewEvent.of(ANSWER)), RuntimeError("boom"))
    assert ended is not None and ended.type == "notes.rejected"
    assert ended.data == {
        "delivery_id": 7,
        "webhook_id": 2,
        "attempt": 1,
        "scheduled_for": "2026-12-06T12:00:00+00:00",
        "trigger": "schedule",
        "depth": 1,
        "errors": [{"path": "", "error": "internal error: RuntimeError: boom"}],
    }
    other = NewEvent("note.changed", {})
    assert ENDINGS(_event(other), RuntimeError("boom")) is None


def _caller(label: str | None) -> Caller:
    return Caller(
        subject="webhook:2" if label is None else "api_key:5",
        delivery_id=7 if label is None else None,
        depth=1 if label is None else 0,
        max_depth=None,
        read_patterns=(),
        write_patterns=(),
        stage_owner="token:x",
        expires_at=None,
        label=label,
    )


def test_a_pushs_verdict_names_its_writer_and_operation() -> None:
    token = NewEvent.of(verdict(push_of(_caller(None), "push"), [APPLIED], []))
    assert token.data == {
        "delivery_id": 7,
        "writer": "webhook:2 delivery:7",
        "depth": 1,
        "source": "token",
        "operation": "push",
        "applied": [{"path": "a.md", "content_hash": "ab" * 32, "version": 4}],
    }
    key = NewEvent.of(verdict(push_of(_caller("bulk"), "hide"), [], [ChangeError("", "no")]))
    assert key.type == "notes.rejected"
    assert key.data == {
        "delivery_id": None,
        "writer": "api_key:5:bulk",
        "depth": 0,
        "source": "api_key",
        "operation": "hide",
        "errors": [{"path": "", "error": "no"}],
    }


def test_note_changed_has_every_key_for_a_write_and_a_removal() -> None:
    write = note_changed(
        APPLIED, Change("a.md", "héllo", None), Current("cd" * 32, 3, False), 1, "w", "b1", False
    )
    assert NewEvent.of(write).data == {
        "path": "a.md",
        "event": "update",
        "version": 4,
        "content_hash": "ab" * 32,
        "previous_hash": "cd" * 32,
        "depth": 1,
        "writer": "w",
        "size": 6,
        "content": "héllo",
        "batch_id": "b1",
        "skip_webhooks": False,
    }
    removal = note_changed(
        Applied("a.md", None, 5, "remove"), Change("a.md", None, None), None, 0, "w", "b2", True
    )
    assert NewEvent.of(removal).data == {
        "path": "a.md",
        "event": "remove",
        "version": 5,
        "content_hash": None,
        "previous_hash": None,
        "depth": 0,
        "writer": "w",
        "size": None,
        "content": None,
        "batch_id": "b2",
        "skip_webhooks": True,
    }


CONFIG = WebhookConfig(
    url="http://agent.test/hook",
    instruction="index",
    pass_api_key=False,
    timeout_seconds=30,
    max_depth=2,
    max_retries=3,
    enabled=True,
    description="",
    read_patterns=["*"],
    write_patterns=["index.md"],
    include_patterns=["*"],
    exclude_patterns=[],
    on_create=True,
    on_update=True,
    on_remove=True,
    include_content=True,
)


def _match(truncated: bool) -> Match:
    change = NoteChanged(
        path="a.md",
        event="create",
        version=1,
        content_hash="ab" * 32,
        previous_hash=None,
        depth=0,
        writer="w",
        size=1,
        content="x",
        batch_id="b1",
        skip_webhooks=False,
    )
    shown = [
        {
            "path": "a.md",
            "event": "create",
            "version": 1,
            "content_hash": "ab" * 32,
            "content": None if truncated else "x",
        }
    ]
    return Match(
        ChangeWebhook.of(9, CONFIG),
        [Note(_event(NewEvent.of(change), "note-a.md", 1), change)],
        0,
        ChangePayload(shown, truncated),
    )


def test_a_change_delivery_is_requested_with_every_key() -> None:
    data = NewEvent.of(requested(_match(False), 11)).data
    assert data == {
        "delivery_id": 11,
        "webhook_id": 9,
        "kind": "change",
        "attempt": 1,
        "trigger": "change",
        "scheduled_for": None,
        "missed_count": 0,
        "depth": 0,
        "batch_id": "b1",
        "changes": [
            {
                "path": "a.md",
                "event": "create",
                "version": 1,
                "content_hash": "ab" * 32,
                "content": "x",
            }
        ],
        "target": {
            "url": "http://agent.test/hook",
            "instruction": "index",
            "timeout_seconds": 30,
            "pass_api_key": False,
            "read_patterns": ["*"],
            "write_patterns": ["index.md"],
            "max_depth": 2,
            "max_retries": 3,
            "concurrency_policy": None,
            "execution_group": None,
            "attach_notes": None,
        },
    }
    # every key but the zone a cron webhook's costs count in (CONTRACT §16.4): UTC's days;
    # and runTimeoutSeconds and retryDeadlineSeconds (§17), which this configuration
    # (written before them) lacks: 3600 and none
    unset = {"timezone", "run_timeout_seconds", "retry_deadline_seconds"}
    assert set(data["target"]) == set(Target.__struct_fields__) - unset
    cut = NewEvent.of(requested(_match(True), 12)).data
    assert cut["content_truncated"] is True and cut["changes"][0]["content"] is None
