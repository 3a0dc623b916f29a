"""The one batch rule every way into the note store passes (CONTRACT §5, §15): a push, a
staged push, a commit of what was staged, a removal, an agent's answer. A path at most once
(only its second and later changes are refused), a note at most 1 MiB, the writer's
patterns, at most 1,000 changes and 2 MiB in all; beyond a bound, the bound alone."""

from __future__ import annotations

from typing import Any

import pytest

from cronhooks_importer.rules import (
    FORBIDDEN,
    INVALID,
    MAX_BATCH_BYTES,
    MAX_BATCH_CHANGES,
    MAX_NOTE_BYTES,
    TOO_LARGE,
    TWICE,
    Change,
    ChangeError,
    allowed_by,
    batch_limits,
    check_batch,
    parse_changes,
    parse_removals,
)

EVERY = allowed_by(["*"])


def test_the_bounds_are_named_in_their_errors() -> None:
    assert batch_limits(MAX_BATCH_CHANGES, MAX_BATCH_BYTES) == []
    assert batch_limits(3000, MAX_BATCH_BYTES + 1) == [
        ChangeError("", "at most 1,000 changes in a batch, not 3,000", TOO_LARGE),
        ChangeError("", "at most 2 MiB of content in a batch, not 2,097,153 bytes", TOO_LARGE),
    ]


def test_only_the_second_and_later_changes_to_a_path_are_refused() -> None:
    raw: list[dict[str, Any]] = [{"path": "a", "content": str(n)} for n in range(3)]
    _, errors = parse_changes([*raw, {"path": "b", "content": "b"}], may_write=EVERY)
    assert errors == [ChangeError("a", TWICE), ChangeError("a", TWICE)]
    _, errors = parse_removals([{"path": "a"}, {"path": "a"}, {"path": "b"}], may_write=EVERY)
    assert errors == [ChangeError("a", TWICE)]


def test_a_path_is_twice_even_when_its_first_change_is_refused_for_another_reason() -> None:
    _, errors = parse_changes(
        [
            {"path": "a", "content": "x" * (MAX_NOTE_BYTES + 1)},
            {"path": "a", "content": "small"},
            {"path": "out/b", "content": "b"},
            {"path": "out/b", "content": "b"},
            {"path": "c", "content": 5},
            {"path": "c", "content": "c"},
        ],
        may_write=allowed_by(["a", "c"]),
    )
    assert [(e.path, e.kind, e.error == TWICE) for e in errors] == [
        ("a", TOO_LARGE, False),
        ("a", INVALID, True),
        ("out/b", FORBIDDEN, False),
        ("out/b", INVALID, True),
        ("c", INVALID, False),
        ("c", INVALID, True),
    ]


def test_a_commit_is_checked_as_the_batch_it_is_now() -> None:
    """What was staged by several pushes, each within the rules, is one batch at commit."""
    staged = [Change(f"s/{i}", "x", None) for i in range(MAX_BATCH_CHANGES)]
    assert check_batch(staged, may_write=EVERY) == []
    [error] = check_batch([*staged, Change("s/more", "x", None)], may_write=EVERY)
    assert error.kind == TOO_LARGE and "1,000 changes" in error.error

    big = [Change(f"m/{i}", "x" * MAX_NOTE_BYTES, None) for i in range(2)]
    assert check_batch(big, may_write=EVERY) == []
    [error] = check_batch([*big, Change("m/2", "!", None)], may_write=EVERY)
    assert error.kind == TOO_LARGE and "2 MiB" in error.error

    # The patterns of now: the same error a push gives, one per offending path.
    changes = [Change("w2/a", "A", None), Change("z/b", "B", None), Change("w2/c", "C", "")]
    errors = check_batch(changes, may_write=allowed_by(["z/*"]))
    assert errors == [
        ChangeError("w2/a", "path is outside the write patterns", FORBIDDEN),
        ChangeError("w2/c", "path is outside the write patterns", FORBIDDEN),
    ]
    _, pushed = parse_changes([{"path": "w2/a", "content": "A"}], may_write=allowed_by(["z/*"]))
    assert pushed == errors[:1]
    assert check_batch([Change("a", "1", None), Change("a", "2", None)], may_write=EVERY) == [
        ChangeError("a", TWICE)
    ]


@pytest.mark.parametrize("parse", [parse_changes, parse_removals])
def test_more_than_1000_changes_are_refused_before_any_is_parsed(parse: Any) -> None:
    raw = [{"path": "a", "content": ""}] * (MAX_BATCH_CHANGES + 1)
    assert parse(raw, may_write=EVERY) == (
        [],
        [ChangeError("", "at most 1,000 changes in a batch, not 1,001", TOO_LARGE)],
    )
