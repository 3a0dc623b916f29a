"""glob_to_regex, pure: the regex text for typical and odd globs, and the same matches
as fnmatchcase when Python reads the regex (tests/integration/test_glob_regex.py runs
it on PostgreSQL, the engine it is written for)."""

from __future__ import annotations

import itertools
import re
from fnmatch import fnmatchcase

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cronhooks_common.globs import glob_to_regex


@pytest.mark.parametrize(
    ("pattern", "regex"),
    [
        ("notes/*.md", r"^notes\/.*\.md$"),
        ("a**b", "^a.*b$"),  # `**` is `*`
        ("?.txt", r"^.\.txt$"),
        ("", "^$"),
        ("[]]", r"^[\]]$"),  # a `]` first in a class is a member
        ("[!]]", r"^[^\]]$"),
        ("[a-]", r"^[a\-]$"),  # a trailing hyphen is a member
        ("[!-a]", r"^[^\-a]$"),  # so is a leading one
        ("x[a-c-e]y", r"^x[a-c\-e]y$"),  # and one right after a range
        ("[", r"^\[$"),  # an unclosed `[` is literal
        ("a[b", r"^a\[b$"),
        ("[z-a]", "^(?!)$"),  # fnmatch drops a reversed range: an empty class
        ("[!z-a]", "^.$"),  # negated empty class: any character
        ("[\\-[!]]", r"^.\]$"),  # `\-[` dropped leaves `!`: any character, as in fnmatch
        ("[[:alpha:]]", r"^[\[\:alpha\:]\]$"),  # no POSIX classes in fnmatch
        ("(a|b){2}+$^", r"^\(a\|b\)\{2\}\+\$\^$"),
        ("\\d", r"^\\d$"),  # a backslash is a literal, never an escape
        ("é/😀", r"^é\/😀$"),
        ("a b\n", r"^a\u0020b\u000a$"),
    ],
)
def test_regex_text(pattern: str, regex: str) -> None:
    assert glob_to_regex(pattern) == regex


def python_reads_the_same(pattern: str, path: str) -> bool:
    # Without flags PostgreSQL's `.` and `[^…]` match a newline: DOTALL in Python.
    return bool(re.fullmatch(glob_to_regex(pattern), path, re.DOTALL)) == fnmatchcase(path, pattern)


def test_every_short_pattern_over_bracket_characters() -> None:
    paths = ["".join(p) for n in range(3) for p in itertools.product("]!-ab\\^[z", repeat=n)]
    wrong = [
        (pattern, path)
        for n in range(5)
        for pattern in map("".join, itertools.product("[]!-az\\^", repeat=n))
        for path in paths
        if not python_reads_the_same(pattern, path)
    ]
    assert wrong == []


chars = st.one_of(st.sampled_from([*"*?[]!-^\\/.$+(){}|ab", "\n", "é"]), st.characters())


@given(pattern=st.text(chars, max_size=12), paths=st.lists(st.text(chars, max_size=8)))
def test_random_globs_match_what_fnmatchcase_matches(pattern: str, paths: list[str]) -> None:
    for path in [*paths, pattern]:
        assert python_reads_the_same(pattern, path), (pattern, path)
