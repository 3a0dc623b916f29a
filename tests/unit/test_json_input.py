"""The one parser of JSON from outside: total, and bounded in nesting (CONTRACT §15)."""

from __future__ import annotations

import pytest

from cronhooks_common.json_input import MAX_NESTING, TooDeep, loads, nesting


def arrays(levels: int) -> bytes:
    return b"[" * levels + b"]" * levels


def objects(levels: int) -> bytes:
    return b'{"a":' * levels + b"1" + b"}" * levels


@pytest.mark.parametrize("make", [arrays, objects])
def test_sixty_four_levels_parse_sixty_five_are_refused(make) -> None:
    assert nesting(loads(make(MAX_NESTING))) == MAX_NESTING
    with pytest.raises(TooDeep, match="nested deeper than 64 levels"):
        loads(make(MAX_NESTING + 1))


@pytest.mark.parametrize("levels", [500, 1_000, 30_000, 200_000])
def test_any_depth_is_refused_by_name_not_by_recursion(levels: int) -> None:
    with pytest.raises(TooDeep) as refused:
        loads(arrays(levels), what="request body")
    assert str(refused.value) == "request body nested deeper than 64 levels"


def test_too_deep_is_a_value_error_so_not_json_handlers_still_refuse_it() -> None:
    with pytest.raises(ValueError):
        loads(arrays(100))


def test_depth_hides_anywhere_in_a_wide_document() -> None:
    deep = b"[" * 70 + b"]" * 70
    wide = b'{"changes": [' + b",".join([b'{"path": "a"}'] * 500 + [deep]) + b"]}"
    with pytest.raises(TooDeep):
        loads(wide)


def test_strings_that_look_like_brackets_do_not_count() -> None:
    assert nesting(loads(b'{"content": "' + b"[" * 1000 + b'"}')) == 1


def test_scalars_and_not_json() -> None:
    assert nesting(loads(b"1")) == 0
    assert loads('"text"') == "text"
    with pytest.raises(ValueError):
        loads(b"{")
    with pytest.raises(ValueError):
        loads(b"\xff\xfe")


@pytest.mark.parametrize("encoding", ["utf-8", "utf-16", "utf-16-le", "utf-32"])
def test_the_bracket_count_that_skips_the_walk_sees_every_encoding(encoding: str) -> None:
    # Fewer than 65 brackets in all cannot nest 65 deep, so the walk is skipped; more
    # are walked. Python's parser takes UTF-16 and UTF-32 too: each bracket still
    # holds its ASCII byte there, so the count bounds the depth in any of them.
    too_deep = arrays(MAX_NESTING + 1).decode()
    with pytest.raises(TooDeep):
        loads(too_deep.encode(encoding))
    with pytest.raises(TooDeep):
        loads(too_deep)
    assert nesting(loads(arrays(MAX_NESTING).decode().encode(encoding))) == MAX_NESTING
