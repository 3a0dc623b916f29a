"""Change kinds, patches and no-op writes (CONTRACT §16.1): parsing, resolution against the
locked note, the batch bound over what patches write, and which writes change nothing."""

from __future__ import annotations

import pytest

from cronhooks_importer.patches import Patch, apply_patch, is_noop, kind_problem, patched_size
from cronhooks_importer.resolution import (
    Current,
    conflict,
    noops,
    resolve_patches,
    too_much,
    written_bytes,
)
from cronhooks_importer.rules import (
    CONFLICT,
    CONTENT_REQUIRED,
    INVALID,
    MAX_BATCH_BYTES,
    MAX_NOTE_BYTES,
    TOO_LARGE,
    TWICE,
    Change,
    ChangeError,
    content_hash,
    parse_changes,
)


def everything(_: str) -> bool:
    return True


def parse(raw: object, **kw: str) -> tuple[list[Change], list[ChangeError]]:
    return parse_changes(raw, may_write=everything, **kw)


# --- apply_patch: exactly once ---------------------------------------------------------


def test_a_patch_replaces_the_one_occurrence() -> None:
    assert apply_patch("a.md", "# Title\nold line\n", Patch("old", "new")) == (
        "# Title\nnew line\n",
        None,
    )


def test_a_patch_with_an_empty_replace_deletes_the_occurrence() -> None:
    assert apply_patch("a.md", "keep DROP keep", Patch(" DROP", "")) == ("keep keep", None)


def test_a_patch_on_a_missing_note_is_not_found() -> None:
    assert apply_patch("a.md", None, Patch("x", "y")) == (None, "note not found for patch: a.md")


def test_a_find_string_that_does_not_occur() -> None:
    assert apply_patch("n/b.md", "abc", Patch("zz", "y")) == (
        None,
        "patch find string not found in n/b.md",
    )


@pytest.mark.parametrize(
    ("content", "find", "count"),
    [
        ("x x", "x", 2),
        ("x x x", "x", 3),
        ("aaaa", "aa", 2),  # non-overlapping, counted left to right (str.count)
    ],
    ids=["two", "three", "aaaa-aa"],
)
def test_ambiguous_names_the_count(content: str, find: str, count: int) -> None:
    assert apply_patch("a.md", content, Patch(find, "b")) == (
        None,
        f"patch find string is ambiguous ({count} occurrences) in a.md",
    )


def test_overlapping_occurrences_count_once() -> None:
    # "aaa" holds "aa" twice overlapping, once counted left to right: it applies
    assert apply_patch("a.md", "aaa", Patch("aa", "b")) == ("ba", None)


def test_the_patched_size_is_known_before_the_content_is_read() -> None:
    patch = Patch("é", "abc")  # 2 bytes out, 3 in
    assert patched_size(10, patch) == 11


# --- kinds and fields as received ------------------------------------------------------


@pytest.mark.parametrize("kind", [None, "", "upsert", "write", "patch"])
def test_known_kinds(kind: str | None) -> None:
    assert kind_problem(kind) is None


@pytest.mark.parametrize(
    ("kind", "error"),
    [
        ("delete", 'unknown change kind "delete"'),
        ("Patch", 'unknown change kind "Patch"'),
        (5, "kind must be a string"),
        (["patch"], "kind must be a string"),
        ("k" * 101, 'unknown change kind "' + "k" * 100 + '…"'),
    ],
    ids=["delete", "case", "number", "list", "long"],
)
def test_unknown_kinds(kind: object, error: str) -> None:
    assert kind_problem(kind) == error
    changes, errors = parse([{"kind": kind, "path": "a.md", "content": "x"}])
    assert changes == []
    assert [(e.path, e.error, e.kind) for e in errors] == [("a.md", error, INVALID)]


@pytest.mark.parametrize("kind", [None, "", "upsert", "write"])
def test_a_write_of_any_write_kind_is_a_plain_write(kind: str | None) -> None:
    item = {"path": "a.md", "content": "x", "find": "ignored"}
    if kind is not None:
        item["kind"] = kind
    changes, errors = parse([item])
    assert errors == []
    assert changes == [Change("a.md", "x", None)]


def test_a_patch_is_parsed_with_find_and_replace() -> None:
    changes, errors = parse(
        [
            {"kind": "patch", "path": "a.md", "find": "x", "replace": "y"},
            {"kind": "patch", "path": "b.md", "find": "x", "expected_hash": ""},
        ]
    )
    assert errors == []
    assert changes == [
        Change("a.md", None, None, Patch("x", "y")),
        Change("b.md", None, "", Patch("x", "")),  # replace defaults to ""
    ]
    assert not changes[0].removes


@pytest.mark.parametrize("find", [None, "", "absent"])
def test_find_is_required_for_a_patch(find: str | None) -> None:
    item: dict[str, object] = {"kind": "patch", "path": "a.md", "replace": "y"}
    if find != "absent":
        item["find"] = find
    changes, errors = parse([item])
    assert changes == []
    assert [(e.path, e.error, e.kind) for e in errors] == [
        ("a.md", "find is required for a patch", INVALID)
    ]
    assert errors[0].field == "find"


@pytest.mark.parametrize(
    ("item", "error"),
    [
        ({"find": 5}, "find must be a string"),
        ({"find": "a", "replace": 5}, "replace must be a string"),
        ({"find": "a\x00"}, "find must not contain NUL characters"),
        ({"find": "a", "replace": "\ud800"}, "replace is not valid Unicode text (lone surrogate)"),
    ],
    ids=["find-number", "replace-number", "find-nul", "replace-surrogate"],
)
def test_find_and_replace_are_text(item: dict[str, object], error: str) -> None:
    _, errors = parse([{"kind": "patch", "path": "a.md", **item}])
    assert [e.error for e in errors] == [error]


def test_a_path_at_most_once_in_a_batch_also_with_patches() -> None:
    _, errors = parse(
        [
            {"path": "a.md", "content": "x"},
            {"kind": "patch", "path": "a.md", "find": "x", "replace": "y"},
        ]
    )
    assert [(e.path, e.error) for e in errors] == [("a.md", TWICE)]


def test_a_write_without_content_names_the_rule_the_caller_states() -> None:
    assert [e.error for e in parse([{"path": "a.md"}])[1]] == ["content must be a string"]
    _, errors = parse(
        [{"path": "a.md"}, {"path": "b.md", "kind": "patch", "find": "x"}],
        no_content=CONTENT_REQUIRED,
    )
    assert [(e.path, e.error) for e in errors] == [("a.md", CONTENT_REQUIRED)]


def test_every_offending_change_has_its_error() -> None:
    _, errors = parse(
        [
            {"kind": "nope", "path": "a.md"},
            {"kind": "patch", "path": "b.md"},
            {"kind": "patch", "path": "c.md", "find": "ok"},
        ]
    )
    assert [(e.path, e.error) for e in errors] == [
        ("a.md", 'unknown change kind "nope"'),
        ("b.md", "find is required for a patch"),
    ]


def test_a_patch_counts_its_find_and_replace_toward_the_batch() -> None:
    big = "x" * (MAX_NOTE_BYTES + 1)
    _, errors = parse([{"kind": "patch", "path": "a.md", "find": "a", "replace": big}])
    assert [e.kind for e in errors] == [TOO_LARGE]


# --- resolution against the locked notes -----------------------------------------------


H = content_hash("before")


@pytest.mark.parametrize(
    ("expected", "row", "error"),
    [
        (None, Current(H, 2, False), None),
        (H, Current(H, 2, False), None),
        ("a" * 64, Current(H, 2, False), f"expected_hash mismatch (current {H})"),
        ("", Current(H, 2, False), "note already exists (expected_hash is empty)"),
        (H, None, "note not found for patch: a.md"),
        (None, None, "note not found for patch: a.md"),
        (H, Current(H, 3, True), "note not found for patch: a.md"),  # removed
    ],
    ids=[
        "no-hash",
        "hash-ok",
        "hash-mismatch",
        "must-not-exist",
        "missing",
        "missing-no-hash",
        "removed",
    ],
)
def test_a_patch_checks_its_hash_against_the_note_before_the_patch(
    expected: str | None, row: Current | None, error: str | None
) -> None:
    found = conflict(Change("a.md", None, expected, Patch("before", "after")), row)
    assert (found.error if found else None) == error
    assert found is None or found.kind == CONFLICT


def test_patches_resolve_into_writes_of_the_new_content() -> None:
    changes = [
        Change("a.md", None, None, Patch("one", "two")),
        Change("b.md", "plain", None),
    ]
    resolved, errors = resolve_patches(changes, {"a.md": "step one"})
    assert errors == []
    assert resolved == [Change("a.md", "step two", None), Change("b.md", "plain", None)]


def test_every_patch_that_cannot_apply_is_named() -> None:
    changes = [
        Change("a.md", None, None, Patch("x", "y")),
        Change("b.md", None, None, Patch("x", "y")),
        Change("c.md", None, None, Patch("x", "y")),
        Change("d.md", None, None, Patch("x", "y")),
    ]
    resolved, errors = resolve_patches(changes, {"b.md": "none", "c.md": "x-x", "d.md": "x"})
    assert [(e.path, e.error, e.kind) for e in errors] == [
        ("a.md", "note not found for patch: a.md", CONFLICT),
        ("b.md", "patch find string not found in b.md", CONFLICT),
        ("c.md", "patch find string is ambiguous (2 occurrences) in c.md", CONFLICT),
    ]
    assert resolved[-1] == Change("d.md", "y", None)


def test_a_patch_may_not_grow_a_note_past_its_limit() -> None:
    note = "x" * (MAX_NOTE_BYTES - 1) + "!"
    _, errors = resolve_patches([Change("a.md", None, None, Patch("!", "!!"))], {"a.md": note})
    assert [(e.error, e.kind) for e in errors] == [
        (f"content is larger than {MAX_NOTE_BYTES} bytes", TOO_LARGE)
    ]


def test_the_batch_bound_counts_what_patches_would_write() -> None:
    patches = [Change(f"{n}.md", None, None, Patch("a", "b")) for n in range(3)]
    sizes = {f"{n}.md": 800_000 for n in range(3)}
    assert written_bytes(patches, sizes) == 2_400_000
    [error] = too_much(patches, sizes)
    assert (error.kind, error.error) == (
        TOO_LARGE,
        f"at most 2 MiB of content in a batch, not {2_400_000:,} bytes",
    )
    assert too_much(patches[:2], sizes) == []
    # a batch without patches was bounded as received
    assert too_much([Change("a.md", "x" * (MAX_BATCH_BYTES + 1), None)], {}) == []


# --- no-op writes ----------------------------------------------------------------------


def test_a_write_of_the_current_content_is_a_noop() -> None:
    same, other = content_hash("same"), content_hash("other")
    assert is_noop(same, same)
    assert not is_noop(same, other)
    assert not is_noop(same, None)  # a new or removed note is created
    changes = [
        Change("a.md", "same", None),
        Change("b.md", "same", None),
        Change("c.md", "same", None),
        Change("d.md", None, None),  # a removal always changes something
    ]
    hashes = {"a.md": same, "b.md": other, "d.md": same}
    assert noops(changes, hashes) == {"a.md"}


def test_a_patch_that_leaves_the_content_as_it_is_is_a_noop() -> None:
    [resolved], _ = resolve_patches([Change("a.md", None, None, Patch("x", "x"))], {"a.md": "x"})
    assert noops([resolved], {"a.md": content_hash("x")}) == {"a.md"}
