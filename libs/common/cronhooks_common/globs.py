"""Shell-style globs over note paths (`*` also matches `/`), their rules, and an
index-friendly prefix."""

from __future__ import annotations

from fnmatch import fnmatchcase

MAX_PATTERN_BYTES = 512


def matches_any(path: str, patterns: list[str] | tuple[str, ...]) -> bool:
    """True if any pattern matches the whole path; no patterns match nothing."""
    return any(fnmatchcase(path, pattern) for pattern in patterns)


def pattern_problem(pattern: str) -> str | None:
    """Why `pattern` cannot be a read/write/list pattern, or None (CONTRACT §8: patterns are
    checked like paths — relative, no `..` segment, no NUL or control character, at most
    512 bytes). Shared by webhook inputs, the token API and the agent GraphQL API."""
    if not pattern:
        return "must not be empty"
    try:
        size = len(pattern.encode())
    except UnicodeEncodeError:
        return "must be valid Unicode text (no lone surrogates)"
    if size > MAX_PATTERN_BYTES:
        return f"must be at most {MAX_PATTERN_BYTES} bytes"
    if any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in pattern):
        return "must not contain NUL or control characters"
    if pattern.startswith("/"):
        return "must be relative (no leading /)"
    if ".." in pattern.split("/"):
        return "must not contain a .. segment"
    if pattern.count("[") != pattern.count("]"):
        return "has unbalanced brackets"
    return None


def like_prefix(pattern: str) -> str:
    """A SQL LIKE pattern (default escape `\\`) that every path matching `pattern` matches:
    its literal prefix, then `%`. Lets the database narrow by index before fnmatch."""
    prefix = []
    for char in pattern:
        if char in "*?[":
            break
        prefix.append(char.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_"))
    return "".join(prefix) + "%"
