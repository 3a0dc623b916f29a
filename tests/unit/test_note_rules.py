"""Every rule a batch of note changes must pass (CONTRACT §5), with passing and failing cases."""

from __future__ import annotations

import base64
import hashlib

import pytest

from cronhooks_common.globs import matches_any as allowed
from cronhooks_common.globs import pattern_problem
from cronhooks_importer.rules import (
    CONFLICT,
    FORBIDDEN,
    INVALID,
    MAX_NOTE_BYTES,
    TOO_LARGE,
    allowed_by,
    content_hash,
    normalize_hash,
    parse_changes,
    parse_removals,
    path_problem,
)

H = "a" * 64


@pytest.mark.parametrize(
    "path",
    ["a", "digests/2026-02-09.md", "a/b/c.txt", "ünïcode/路径.md", "x" * 512, "a..b/c", ".hidden"],
)
def test_valid_paths(path: str) -> None:
    assert path_problem(path) is None


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("", "empty"),
        ("../x", ".."),
        ("a/../b", ".."),
        ("..", ".."),
        ("/abs", "leading /"),
        ("a/./b", ". segments"),
        ("./a", ". segments"),
        ("a//b", "empty segment"),
        ("a/", "empty segment"),
        ("a\u0000b", "control"),
        ("a\nb", "control"),
        ("a\x7fb", "control"),
        ("a\\b", "backslash"),
        ("x" * 513, "512 bytes"),
        ("é" * 257, "512 bytes"),  # 514 bytes in UTF-8
    ],
)
def test_invalid_paths(path: str, reason: str) -> None:
    problem = path_problem(path)
    assert problem is not None and reason in problem


def test_globs_cover_the_whole_path_and_star_crosses_slashes() -> None:
    assert allowed("digests/2026/02/09.md", ["digests/*"])
    assert allowed("anything/at/all", ["*"])
    assert not allowed("notes/a.md", ["digests/*"])
    assert not allowed("a", [])  # no patterns, no writes
    assert allowed("a.md", ["*.md"]) and not allowed("a.md.txt", ["*.md"])
    assert allowed("log-7.txt", ["log-[0-9].txt"]) and not allowed("log-x.txt", ["log-[0-9].txt"])


def test_content_hash_is_lowercase_hex_sha256_of_utf8() -> None:
    assert content_hash("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert content_hash("ü") == content_hash("ü") and len(content_hash("x")) == 64


def test_a_good_batch_passes() -> None:
    changes, errors = parse_changes(
        [
            {"path": "d/a.md", "content": "A", "expected_hash": ""},
            {"path": "d/b.md", "content": "B", "expected_hash": H},
            {"path": "d/c.md", "content": "C"},
        ],
        may_write=allowed_by(["d/*"]),
    )
    assert errors == []
    assert [c.expected_hash for c in changes] == ["", H, None]


def test_paths_are_normalised_to_nfc_once() -> None:
    decomposed = "cafe\u0301.md"
    [change], _ = parse_changes([{"path": decomposed, "content": ""}], may_write=allowed_by(["*"]))
    assert change.path == "caf\u00e9.md"


def test_one_error_per_offending_change_and_kinds() -> None:
    raw = [
        {"path": "d/ok.md", "content": "fine"},
        {"path": "../x", "content": "x"},
        {"path": "other/a.md", "content": "x"},
        {"path": "d/big.md", "content": "x" * (MAX_NOTE_BYTES + 1)},
        {"path": "d/h.md", "content": "x", "expected_hash": "nothex"},
        {"path": "d/ok.md", "content": "again"},
        {"content": "no path"},
        "not an object",
        {"path": "d/n.md", "content": 5},
    ]
    _, errors = parse_changes(raw, may_write=allowed_by(["d/*"]))
    kinds = [(e.path, e.kind) for e in errors]
    assert kinds == [
        ("../x", INVALID),
        ("other/a.md", FORBIDDEN),
        ("d/big.md", TOO_LARGE),
        ("d/h.md", INVALID),
        ("d/ok.md", INVALID),
        ("#6", INVALID),
        ("#7", INVALID),
        ("d/n.md", INVALID),
    ]
    assert "twice" in errors[4].error


def test_exactly_one_mib_is_allowed() -> None:
    _, errors = parse_changes(
        [{"path": "a", "content": "x" * MAX_NOTE_BYTES}], may_write=allowed_by(["*"])
    )
    assert errors == []


def test_malformed_batches() -> None:
    assert (
        parse_changes({"path": "a"}, may_write=allowed_by(["*"]))[1][0].error == "changes must be an array"
    )
    _, errors = parse_changes([{"path": "a", "content": ""}] * 1001, may_write=allowed_by(["*"]))
    assert errors[0].kind == TOO_LARGE
    assert CONFLICT == "conflict"


def test_text_postgres_cannot_hold_is_refused_by_name() -> None:
    _, errors = parse_changes(
        [
            {"path": "a", "content": "bad\x00byte"},
            {"path": "b", "content": "\ud800"},
            {"path": "\udfff", "content": "x"},
        ],
        may_write=allowed_by(["*"]),
    )
    assert [e.error for e in errors] == [
        "content must not contain NUL characters",
        "content is not valid Unicode text (lone surrogate)",
        "path is not valid Unicode text (lone surrogate)",
    ]


DIGEST = hashlib.sha256(b"# Post\n").digest()


@pytest.mark.parametrize(
    "given",
    [
        DIGEST.hex(),
        base64.urlsafe_b64encode(DIGEST).decode(),  # trip2g: base64.URLEncoding, padded
        base64.urlsafe_b64encode(DIGEST).decode().rstrip("="),  # unpadded
    ],
)
def test_expected_hash_as_hex_or_base64url_names_the_same_digest(given: str) -> None:
    assert normalize_hash(given) == DIGEST.hex()
    [change], errors = parse_changes(
        [{"path": "a.md", "content": "x", "expected_hash": given}], may_write=allowed_by(["*"])
    )
    assert errors == [] and change.expected_hash == DIGEST.hex()


@pytest.mark.parametrize(
    "given",
    [
        DIGEST.hex().upper(),  # contentHash is shown lowercase; uppercase is not accepted
        DIGEST.hex()[:63],
        base64.b64encode(DIGEST).decode(),  # standard base64 ("+" and "/"), not base64url
        base64.urlsafe_b64encode(DIGEST[:31]).decode(),  # not 32 bytes
        base64.urlsafe_b64encode(DIGEST).decode() + "==",
        "sha256:" + DIGEST.hex(),
        "nothex",
    ],
)
def test_any_other_expected_hash_is_a_named_error(given: str) -> None:
    _, errors = parse_changes(
        [{"path": "a.md", "content": "x", "expected_hash": given}], may_write=allowed_by(["*"])
    )
    [error] = errors
    assert error.path == "a.md" and "expected_hash" in error.error and error.kind == INVALID


def test_removals_are_checked_like_writes() -> None:
    changes, errors = parse_removals(
        [
            {"path": "d/a.md"},
            {"path": "d/b.md", "expected_hash": DIGEST.hex()},
            {"path": "other/c.md"},
            {"path": "../x"},
            {"path": "d/a.md"},
            {"path": "d/e.md", "expected_hash": ""},
            {"nopath": 1},
        ],
        may_write=allowed_by(["d/*"]),
    )
    assert [(c.path, c.content, c.expected_hash) for c in changes] == [
        ("d/a.md", None, None),
        ("d/b.md", None, DIGEST.hex()),
    ]
    assert [(e.path, e.kind) for e in errors] == [
        ("other/c.md", FORBIDDEN),
        ("../x", INVALID),
        ("d/a.md", INVALID),
        ("d/e.md", INVALID),
        ("#6", INVALID),
    ]


@pytest.mark.parametrize("pattern", ["*", "digests/*", "a/**/b", "x[0-9].md", "é/*", "a..b/*"])
def test_valid_patterns(pattern: str) -> None:
    assert pattern_problem(pattern) is None


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        ("", "empty"),
        ("../*", ".."),
        ("x/../*", ".."),
        ("..", ".."),
        ("/abs/*", "relative"),
        ("a\x00*", "NUL"),
        ("a\n*", "control"),
        ("\ud800*", "Unicode"),
        ("x" * 513, "512 bytes"),
        ("log-[0-9.md", "brackets"),
    ],
)
def test_invalid_patterns_are_named(pattern: str, reason: str) -> None:
    problem = pattern_problem(pattern)
    assert problem is not None and reason in problem
