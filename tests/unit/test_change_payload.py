"""The `changes` of a change delivery (CONTRACT §11, §15): readPatterns, includeContent,
removals and the 1 MiB content cap, exhaustively on the pure function all builders use."""

from __future__ import annotations

from typing import Any

import pytest

from cronhooks_common.change_payload import (
    MAX_CHANGE_CONTENT_BYTES,
    carries_content,
    change_payload,
    readable,
)

ONE_MIB = 1 << 20


def change(path: str, content: str | None = "x", event: str = "update") -> dict[str, Any]:
    return {
        "path": path,
        "event": event,
        "version": 3,
        "content_hash": None if content is None else f"hash-of-{path}",
        "content": content,
    }


def config(**over: Any) -> dict[str, Any]:
    return {"include_content": True, "read_patterns": ["*"], **over}


def shown(changes: list[dict[str, Any]]) -> list[tuple[str, Any, Any]]:
    return [(c["path"], c.get("content", "-"), c["content_hash"]) for c in changes]


def test_the_cap_is_one_mib() -> None:
    assert MAX_CHANGE_CONTENT_BYTES == 1 << 20 == 1_048_576


def test_entries_are_sorted_by_path_in_code_point_order() -> None:
    out = change_payload(config(), [change("b"), change("a/z"), change("B"), change("é")])
    assert [c["path"] for c in out.changes] == ["B", "a/z", "b", "é"]
    assert out.changes[0] == {
        "path": "B",
        "event": "update",
        "version": 3,
        "content_hash": "hash-of-B",
        "content": "x",
    }
    assert out.content_truncated is False


@pytest.mark.parametrize(
    ("patterns", "path", "allowed"),
    [
        (["pub/*"], "pub/a.md", True),
        (["pub/*"], "pub/deep/a.md", True),  # `*` crosses `/`
        (["pub/*"], "secret/a.md", False),
        (["pub/*"], "pub", False),
        (["*.md"], "a.txt", False),
        (["a/?.md", "[bc]/*"], "c/x", True),
        ([], "anything", False),  # no patterns: nothing
    ],
)
def test_content_and_hash_only_within_read_patterns(
    patterns: list[str], path: str, allowed: bool
) -> None:
    [entry] = change_payload(config(read_patterns=patterns), [change(path)]).changes
    assert readable(config(read_patterns=patterns), path) is allowed
    expected = ("x", f"hash-of-{path}") if allowed else (None, None)
    assert (entry["content"], entry["content_hash"]) == expected
    assert (entry["path"], entry["event"], entry["version"]) == (path, "update", 3)


def test_a_missing_read_patterns_key_allows_nothing() -> None:
    [entry] = change_payload({"include_content": True}, [change("a")]).changes
    assert (entry["content"], entry["content_hash"]) == (None, None)


def test_a_removal_carries_null_content() -> None:
    out = change_payload(config(), [change("a", content=None, event="remove")])
    assert out.changes == [
        {"path": "a", "event": "remove", "version": 3, "content_hash": None, "content": None}
    ]
    assert not carries_content(config(), change("a", event="remove"))


def test_without_include_content_no_entry_has_content() -> None:
    out = change_payload(
        config(include_content=False, read_patterns=["pub/*"]),
        [change("pub/a", "1" * (2 * ONE_MIB)), change("secret/b"), change("c", None, "remove")],
    )
    assert out.changes == [
        {"path": "c", "event": "remove", "version": 3, "content_hash": None},
        {"path": "pub/a", "event": "update", "version": 3, "content_hash": "hash-of-pub/a"},
        {"path": "secret/b", "event": "update", "version": 3, "content_hash": None},
    ]
    assert out.content_truncated is False  # nothing was cut: there was no content to cut


def test_the_cap_is_inclusive_at_exactly_one_mib() -> None:
    half = "a" * (ONE_MIB // 2)
    out = change_payload(config(), [change("a", half), change("b", half), change("c", "")])
    assert shown(out.changes) == [
        ("a", half, "hash-of-a"),
        ("b", half, "hash-of-b"),
        ("c", "", "hash-of-c"),  # nothing more: an empty note still fits
    ]
    assert out.content_truncated is False


def test_one_byte_past_the_cap_cuts_that_change_and_every_later_one() -> None:
    half = "a" * (ONE_MIB // 2)
    out = change_payload(
        config(), [change("a", half), change("b", half + "!"), change("c", "small"), change("d")]
    )
    assert shown(out.changes) == [
        ("a", half, "hash-of-a"),
        ("b", None, "hash-of-b"),  # the hash still names the version
        ("c", None, "hash-of-c"),  # fits on its own, but comes after the cut
        ("d", None, "hash-of-d"),
    ]
    assert out.content_truncated is True


def test_the_cap_counts_utf8_bytes_not_characters() -> None:
    wide = "é" * (ONE_MIB // 2)  # ONE_MIB // 2 characters, 1 ONE_MIB of UTF-8
    out = change_payload(config(), [change("a", wide), change("b", "z")])
    assert shown(out.changes) == [("a", wide, "hash-of-a"), ("b", None, "hash-of-b")]
    assert out.content_truncated is True


def test_a_single_note_over_the_cap_is_cut() -> None:
    out = change_payload(config(), [change("a", "x" * (ONE_MIB + 1))], cap=ONE_MIB)
    assert shown(out.changes) == [("a", None, "hash-of-a")] and out.content_truncated


def test_what_is_not_shown_does_not_count_against_the_cap() -> None:
    big = "s" * ONE_MIB
    out = change_payload(
        config(read_patterns=["pub/*"]),
        [
            change("a-removed", None, "remove"),
            change("b-secret", big),
            change("pub/c", big),
        ],
    )
    assert shown(out.changes) == [
        ("a-removed", None, None),
        ("b-secret", None, None),
        ("pub/c", big, "hash-of-pub/c"),
    ]
    assert out.content_truncated is False


def test_sizes_read_without_content_decide_alike() -> None:
    """A caller that read sizes (and content only where it fits) gets the same payload."""
    half = "h" * (ONE_MIB // 2)
    full = [change("a", half), change("b", half), change("c", "more"), change("d", None, "remove")]
    sized = [
        {**c, "size": None if c["content"] is None else len(c["content"].encode())}
        | ({"content": None} if c["path"] in ("c", "d") else {})
        for c in full
    ]
    assert change_payload(config(), sized) == change_payload(config(), full)
    with pytest.raises(ValueError, match="not read"):
        change_payload(config(), [{**change("a"), "content": None, "size": 1}])


def test_the_dispatcher_says_content_truncated_only_when_something_was_cut() -> None:
    from cronhooks_dispatcher.payload import build_body
    from tests.unit.test_payload import TARGET, typed

    request = {
        "delivery_id": 43,
        "webhook_id": 9,
        "kind": "change",
        "attempt": 1,
        "trigger": "change",
        "depth": 0,
        "changes": [{"path": "a", "event": "update", "version": 1, "content_hash": None}],
        "target": {**TARGET, "instruction": "", "pass_api_key": False},
    }
    whole = build_body(typed(request), timestamp=1, api_token=None, api_url=None)
    cut = build_body(
        typed({**request, "content_truncated": True}), timestamp=1, api_token=None, api_url=None
    )
    assert "content_truncated" not in whole
    assert cut["content_truncated"] is True and cut["changes"] == request["changes"]
