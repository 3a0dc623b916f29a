"""attachNotes (CONTRACT §13), the pure parts: which targets ask for notes, what one
batch's rows become, and where the notes go in the body."""

from __future__ import annotations

from typing import Any

import msgspec

from cronhooks_common.events import Target
from cronhooks_dispatcher.context_notes import ContextNotes, context_from_rows, key_of
from cronhooks_dispatcher.payload import build_body
from tests.unit.test_payload import REQUEST, TARGET, typed


def target(data: dict[str, Any]) -> Target:
    return msgspec.convert(data, Target)


def test_only_a_target_with_attach_notes_asks_for_notes() -> None:
    # The hot path: a target without attachNotes (an older request, a change webhook's
    # None, or []) needs no query.
    assert key_of(target(TARGET)) is None
    assert key_of(target({**TARGET, "attach_notes": None})) is None
    assert key_of(target({**TARGET, "attach_notes": []})) is None
    assert key_of(target({**TARGET, "attach_notes": ["a/*"], "read_patterns": ["a/x*"]})) == (
        ("a/*",),
        ("a/x*",),
    )
    # (a Target's read_patterns is a list; a null one, which no event holds, still reads none)
    attaching = target({**TARGET, "attach_notes": ["a/*"]})
    unread = msgspec.structs.replace(attaching, read_patterns=None)
    assert key_of(unread) == (("a/*",), ())


def row(path: str, fits: bool) -> dict[str, Any]:
    return {"path": path, "content": path.upper(), "content_hash": "h", "fits": fits}


def test_rows_become_the_notes_that_fit_and_truncated_when_one_did_not() -> None:
    assert context_from_rows([]) == ContextNotes([], truncated=False)
    whole = context_from_rows([row("a", True), row("b", True)])
    assert whole == ContextNotes(
        [{"path": "a", "content": "A", "content_hash": "h"}, {"path": "b", "content": "B", "content_hash": "h"}],
        truncated=False,
    )
    cut = context_from_rows([row("a", True), row("b", False)])
    assert [n["path"] for n in cut.notes] == ["a"] and cut.truncated
    assert context_from_rows([row("huge", False)]) == ContextNotes([], truncated=True)


def test_the_body_carries_context_notes_only_for_webhooks_that_attach() -> None:
    plain = build_body(typed(REQUEST), timestamp=1, api_token=None, api_url=None)
    assert "context_notes" not in plain and "context_truncated" not in plain
    notes = [{"path": "a.md", "content": "A", "content_hash": "h"}]
    body = build_body(
        typed(REQUEST),
        timestamp=1,
        api_token=None,
        api_url=None,
        context=ContextNotes(notes, False),
    )
    assert body["context_notes"] == notes and "context_truncated" not in body
    empty = build_body(
        typed(REQUEST), timestamp=1, api_token=None, api_url=None, context=ContextNotes([], False)
    )
    assert empty["context_notes"] == []  # attachNotes set, nothing matches: an empty list
    cut = build_body(
        typed(REQUEST), timestamp=1, api_token=None, api_url=None, context=ContextNotes(notes, True)
    )
    assert cut["context_truncated"] is True
    assert {k for k in body if k not in plain} == {"context_notes"}
