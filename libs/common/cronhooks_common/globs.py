"""Shell-style globs over note paths (`*` also matches `/`), their rules, and an
index-friendly prefix."""

from __future__ import annotations

from fnmatch import fnmatchcase

from cronhooks_common.paths import relative_text_problem


def matches_any(path: str, patterns: list[str] | tuple[str, ...]) -> bool:
    """True if any pattern matches the whole path; no patterns match nothing."""
    return any(fnmatchcase(path, pattern) for pattern in patterns)


def pattern_problem(pattern: str) -> str | None:
    """Why `pattern` cannot be a read/write/list pattern, or None (CONTRACT §8: patterns are
    checked like paths — relative, no `..` segment, no NUL or control character, at most
    512 bytes). Shared by webhook inputs, the token API and the agent GraphQL API."""
    problem = relative_text_problem(pattern)
    if problem is None and pattern.count("[") != pattern.count("]"):
        problem = "has unbalanced brackets"
    return problem


def like_prefix(pattern: str) -> str:
    """A SQL LIKE pattern (default escape `\\`) that every path matching `pattern` matches:
    its literal prefix, then `%`. Lets the database narrow by index before fnmatch."""
    prefix = []
    for char in pattern:
        if char in "*?[":
            break
        prefix.append(char.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_"))
    return "".join(prefix) + "%"


def glob_to_regex(pattern: str) -> str:
    """A PostgreSQL regular expression (ARE, for the case-sensitive `~`) matching exactly
    the strings `fnmatchcase(string, pattern)` matches, so listings can filter in SQL.

    `*` is `.*` (it crosses `/`), `?` is `.`, a bracket class is parsed the way fnmatch
    parses it (including its odd corners: `[]]`, `[!]]`, `[a-]`, reversed ranges dropped,
    an unclosed `[` literal), and everything else is an escaped literal. A PostgreSQL
    regex without flags lets `.` and `[^…]` match a newline, as fnmatch's DOTALL does,
    and its ranges compare code points, as Python's do.

    Use it as a parameter (`where path like $1 and path ~ $2`, with `like_prefix` for the
    index). The class rules follow fnmatch.translate of Python 3.11; the tests compare
    with the running fnmatch (and with PostgreSQL), so a change there would show.
    """
    pieces: list[str] = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "*":
            if not pieces or pieces[-1] != ".*":  # `**` means what `*` means
                pieces.append(".*")
        elif char == "?":
            pieces.append(".")
        elif char == "[" and (end := _class_end(pattern, i + 1)) is not None:
            pieces.append(_class_regex(pattern[i + 1 : end]))
            i = end
        else:
            pieces.append(_regex_char(char))
        i += 1
    return "^" + "".join(pieces) + "$"


def _class_end(pattern: str, start: int) -> int | None:
    """Index of the `]` closing a class whose body starts at `start`, or None (then the
    `[` is a literal). As in fnmatch, a `]` first in the body (after `!`) is a member."""
    end = start
    if end < len(pattern) and pattern[end] == "!":
        end += 1
    if end < len(pattern) and pattern[end] == "]":
        end += 1
    end = pattern.find("]", end)
    return None if end < 0 else end


def _class_regex(body: str) -> str:
    """A bracket class, read the way fnmatch.translate reads it. fnmatch decides whether
    the class is negated only after it dropped reversed ranges, so `[\\-[!]` (the range
    `\\-[` dropped, leaving `!`) is any character, as in fnmatch."""
    chunks = _range_chunks(body)
    negated = chunks[0].startswith("!")
    if negated:
        chunks[0] = chunks[0][1:]
        if not chunks[0] and len(chunks) > 1:
            # The class now opens with the hyphen that joined chunk 0 to chunk 1, and
            # the regex fnmatch builds reads a leading hyphen as a member.
            chunks[:2] = ["-" + chunks[1]]
    members = _members(chunks)
    if not members:
        # fnmatch: an empty set never matches, a negated empty set is any character.
        return "." if negated else "(?!)"
    items = "".join(
        _regex_char(low) if low == high else f"{_regex_char(low)}-{_regex_char(high)}"
        for low, high in members
    )
    return f"[{'^' if negated else ''}{items}]"


def _range_chunks(body: str) -> list[str]:
    """fnmatch.translate's cut of a class body at its range hyphens: the last character
    of one chunk and the first of the next bound a range. Reversed ranges are dropped
    (with both bounds), as fnmatch drops them."""
    chunks: list[str] = []
    # A hyphen first in the class (after a `!`) is a member, not a range.
    start, k = 0, 2 if body.startswith("!") else 1
    while (k := body.find("-", k)) >= 0:
        chunks.append(body[start:k])
        start, k = k + 1, k + 3  # a hyphen right after a range is a member again
    if body[start:]:
        chunks.append(body[start:])
    else:
        chunks[-1] += "-"  # a trailing hyphen is a member
    for k in range(len(chunks) - 1, 0, -1):
        if chunks[k - 1][-1] > chunks[k][0]:
            chunks[k - 1] = chunks[k - 1][:-1] + chunks[k][1:]
            del chunks[k]
    return chunks


def _members(chunks: list[str]) -> list[tuple[str, str]]:
    """The (low, high) ranges of a class from its chunks; a lone character is (c, c)."""
    members: list[tuple[str, str]] = []
    for index, chunk in enumerate(chunks):
        first, last = 0, len(chunk)
        if index > 0:  # its first character ends the range the chunk before begins
            members.append((chunks[index - 1][-1], chunk[0]))
            first = 1
        if index < len(chunks) - 1:  # its last character begins a range
            last -= 1
        members.extend((char, char) for char in chunk[first:last])
    return members


def _regex_char(char: str) -> str:
    """`char` as a literal in a PostgreSQL ARE, inside or outside brackets. Letters and
    digits stay bare (a backslash before one is an escape such as `\\d`, `\\y`); other
    printable ASCII gets a backslash; ASCII controls and space a `\\u` escape."""
    if not char.isascii() or char.isalnum():
        return char
    if char.isprintable() and char != " ":
        return "\\" + char
    return f"\\u{ord(char):04x}"
