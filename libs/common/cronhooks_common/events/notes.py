"""notes.* and note.* events: imports of note changes and each note's history (CONTRACT §4,
§6, §9). An import is closed by `notes.imported` or `notes.rejected` — on the delivery's
stream for a synchronous answer, on a `push-{uuid}` stream for the token API — and every
applied change is a `note.changed` on the note's own stream (`note-{path}`)."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import msgspec

from cronhooks_common.events.base import UNSET, Payload, Timestamp, UnsetType, filler
from cronhooks_common.events.delivery import ChangeEvent


class AppliedChange(msgspec.Struct, frozen=True, kw_only=True):
    path: str
    content_hash: str | None  # null for a removal
    version: int


class ChangeRefused(msgspec.Struct, frozen=True, kw_only=True):
    path: str
    error: str


class ImportFields(Payload, frozen=True, kw_only=True):
    """Which attempt (a synchronous answer) or which push (the token API) an import closes."""

    delivery_id: int | None
    depth: int
    # a synchronous answer's import
    webhook_id: int | UnsetType = UNSET
    attempt: int | UnsetType = UNSET
    scheduled_for: Timestamp | UnsetType | None = UNSET
    trigger: str | UnsetType | None = UNSET
    # a push through the token API
    writer: str | UnsetType = UNSET
    source: Literal["token", "api_key"] | UnsetType = UNSET
    operation: Literal["push", "commit", "hide"] | UnsetType = UNSET


class NotesImported(ImportFields, frozen=True, kw_only=True):
    TYPE: ClassVar[str] = "notes.imported"
    applied: list[AppliedChange]


class NotesRejected(ImportFields, frozen=True, kw_only=True):
    TYPE: ClassVar[str] = "notes.rejected"
    errors: list[ChangeRefused]


class NoteChanged(Payload, frozen=True, kw_only=True):
    """One applied change of an atomic batch (stream version = note version). A removal
    has content and content_hash null and is a version of its own."""

    TYPE: ClassVar[str] = "note.changed"
    path: str
    event: ChangeEvent
    version: int
    content_hash: str | None
    previous_hash: str | None
    depth: int
    writer: str
    size: int | UnsetType | None = UNSET  # UTF-8 bytes (null on remove)
    content: str | None
    batch_id: str
    skip_webhooks: bool | UnsetType = UNSET  # absent before API keys existed
    # §16.3 (absent before revision 3): `cron:{id}`, `change:{id}`, `api_key:{name}` or
    # `admin:{name}`; and when a delivery wrote it, that delivery's trace
    written_by: str | UnsetType = UNSET
    trace: str | UnsetType = UNSET


@filler(NoteChanged.TYPE)
def _written_before_agent_notes_rev2(data: dict[str, Any]) -> dict[str, Any]:
    """note.changed before the agent note API's revision 2 had no `event`, `content`,
    `batch_id` or `previous_hash`: the first version created the note, later ones
    updated it; such a change is a batch of its own kind ("")."""
    if "event" in data:
        return data
    return {
        "content": None,
        "batch_id": "",
        "previous_hash": None,
        **data,
        "event": "create" if data.get("version") == 1 else "update",
    }
