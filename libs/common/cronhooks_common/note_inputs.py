"""The note mutations' inputs (CONTRACT §8: `pushNotes`, `hideNotes`) as Ariadne hands them
to a resolver: the importer's agent API, which writes, and admin-api's, which forwards the
admin's to it. Both schemas declare them alike; keys snake_case (convert_names_case), an
optional field left out is absent. The writer's rules judge every value."""

from __future__ import annotations

from typing import NotRequired, TypedDict


class PushNoteInput(TypedDict):
    path: str
    content: NotRequired[str | None]  # required unless kind is "patch" (CONTRACT §16.1)
    expected_hash: NotRequired[str | None]  # absent or null: write unconditionally
    kind: NotRequired[str | None]  # absent, "", "upsert", "write" or "patch"
    find: NotRequired[str | None]  # patch: the text to replace, once in the note
    replace: NotRequired[str | None]  # patch: what replaces it (absent or null: "")


class PushNotesInput(TypedDict):
    updates: list[PushNoteInput]
    skip_commit: NotRequired[bool | None]  # stage instead of writing


class HideNotesInput(TypedDict):
    paths: list[str]
