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
