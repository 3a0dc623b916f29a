"""`glob_to_regex` against a real PostgreSQL: `path ~ glob_to_regex(pattern)` selects
exactly the paths `fnmatchcase(path, pattern)` selects, for random patterns full of
regex metacharacters, bracket corners, unicode and `/`."""

from __future__ import annotations

import itertools
import re
from fnmatch import fnmatchcase

import asyncpg
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cronhooks_common.globs import glob_to_regex

# Characters PostgreSQL text can hold: no NUL, no lone surrogates.
any_char = st.characters(codec="utf-8", exclude_characters="\x00")
# What makes globs and regexes interesting, drawn often so that they meet.
tricky_char = st.sampled_from([*"*?[]!-^\\/.$+(){}|&~:=ab", "\n", " ", "é", "😀"])
pattern_char = st.one_of(tricky_char, tricky_char, any_char)
# Bracket classes: negated or not, ranges (reversed too), hyphens, `]`, `[:`, closed or not.
bracket = st.builds(
    "".join,
    st.tuples(
        st.just("["),
        st.sampled_from(["", "!"]),
        st.text(st.sampled_from([*"acz-]!^\\[:é😀"]), max_size=6),
        st.sampled_from(["]", "]", ""]),
    ),
)
patterns = st.lists(
    st.one_of(
        pattern_char,
        bracket,
        st.sampled_from(
            ["[]]", "[!]]", "[a-]", "[!a-c]", "[z-a]", "[a-c-e]", "[--/]", "[[:alpha:]]", "**"]
        ),
    ),
    max_size=10,
).map("".join)


@st.composite
def paths_for(draw: st.DrawFn, pattern: str) -> list[str]:
    """Paths to try `pattern` on: strings its regex matches (as Python reads that regex),
    each also nudged by one code point at one place to probe class and range bounds, and
    random strings of the same tricky characters."""
    regex = glob_to_regex(pattern)
    hits: list[str] = []
    if "(?!)" not in regex:  # an empty class: nothing matches, nothing to draw
        matching = st.from_regex(re.compile(regex, re.DOTALL), fullmatch=True, alphabet=any_char)
        hits = draw(st.lists(matching, min_size=1, max_size=6))
    near = [draw(nudged(hit)) for hit in hits if hit]
    return hits + near + draw(st.lists(st.text(pattern_char, max_size=8), max_size=6))


@st.composite
def nudged(draw: st.DrawFn, text: str) -> str:
    at = draw(st.integers(0, len(text) - 1))
    code = ord(text[at]) + draw(st.sampled_from([-1, 1]))
    if not 0 < code <= 0x10FFFF or 0xD800 <= code <= 0xDFFF:
        return text[:at] + text[at + 1 :]  # no neighbour there: drop the character
    return text[:at] + chr(code) + text[at + 1 :]


async def selected(pool: asyncpg.Pool, regex: str, paths: list[str]) -> list[bool]:
    rows = await pool.fetch(
        "select p ~ $2 as hit from unnest($1::text[]) with ordinality as t(p, n) order by n",
        paths,
        regex,
    )
    return [row["hit"] for row in rows]


@settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data(), pattern=patterns)
async def test_postgres_selects_what_fnmatchcase_selects(
    pool: asyncpg.Pool, data: st.DataObject, pattern: str
) -> None:
    paths = data.draw(paths_for(pattern))
    regex = glob_to_regex(pattern)
    assert await selected(pool, regex, paths) == [fnmatchcase(p, pattern) for p in paths], regex


async def test_listing_filters_in_sql(pool: asyncpg.Pool) -> None:
    paths = [
        "notes/a.md",
        "notes/sub/b.md",
        "notes/a.mdx",
        "notes.md",
        "Notes/c.md",
        "x/notes/d.md",
    ]
    cases = {
        "notes/*.md": [True, True, False, False, False, False],
        "*notes/?.md": [True, False, False, False, False, True],
        "[Nn]otes/*": [True, True, True, False, True, False],
        "notes[!/]md": [False, False, False, True, False, False],
        "notes/[]a]*": [True, False, True, False, False, False],
    }
    for pattern, expected in cases.items():
        assert await selected(pool, glob_to_regex(pattern), paths) == expected, pattern
        assert [fnmatchcase(p, pattern) for p in paths] == expected, pattern


async def test_bracket_corners_and_metacharacters(pool: asyncpg.Pool) -> None:
    cases = [
        ("[]]", "]", True),
        ("[]]", "a", False),
        ("[!]]", "]", False),
        ("[!]]", "x", True),
        ("[a-]", "-", True),
        ("[a-]", "b", False),
        ("[", "[", True),
        ("a[b", "a[b", True),
        ("[a-c-e]", "-", True),  # after a range, a hyphen is a member
        ("[a-c-e]", "d", False),
        ("[z-a]", "z", False),
        ("[!z-a]", "\n", True),
        ("[[:alpha:]]", "b", False),  # not a POSIX class: the members [ : a l p h, then ]
        ("[[:alpha:]]", "p]", True),
        ("a.b", "axb", False),
        ("(a|b){2}+$", "(a|b){2}+$", True),
        ("\\d", "\\d", True),
        ("\\d", "7", False),
        ("*", "a/b\nc", True),
        ("?", "😀", True),
        ("é*", "é/x", True),
    ]
    for pattern, path, expected in cases:
        assert fnmatchcase(path, pattern) is expected, (pattern, path)
        assert await selected(pool, glob_to_regex(pattern), [path]) == [expected], (pattern, path)


async def test_every_short_pattern_over_bracket_characters(pool: asyncpg.Pool) -> None:
    """Exhaustive where the corners are: every pattern of up to 4 of `[]!-az\\^` against
    every string of up to 2 characters, in one query."""
    patterns = ["".join(p) for n in range(5) for p in itertools.product("[]!-az\\^", repeat=n)]
    paths = ["".join(p) for n in range(3) for p in itertools.product("]!-ab\\^[z", repeat=n)]
    rows = await pool.fetch(
        """select g.i, p.j, p.path ~ g.regex as hit
           from unnest($1::text[]) with ordinality as g(regex, i),
                unnest($2::text[]) with ordinality as p(path, j)""",
        [glob_to_regex(pattern) for pattern in patterns],
        paths,
    )
    assert len(rows) == len(patterns) * len(paths)
    wrong = [
        (patterns[row["i"] - 1], paths[row["j"] - 1])
        for row in rows
        if row["hit"] != fnmatchcase(paths[row["j"] - 1], patterns[row["i"] - 1])
    ]
    assert wrong == []
