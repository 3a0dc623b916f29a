"""Shell-style globs over note paths (`*` also matches `/`), with an index-friendly prefix."""

from __future__ import annotations

from fnmatch import fnmatchcase


def matches_any(path: str, patterns: list[str] | tuple[str, ...]) -> bool:
    """True if any pattern matches the whole path; no patterns match nothing."""
    return any(fnmatchcase(path, pattern) for pattern in patterns)


def like_prefix(pattern: str) -> str:
    """A SQL LIKE pattern (default escape `\\`) that every path matching `pattern` matches:
    its literal prefix, then `%`. Lets the database narrow by index before fnmatch."""
    prefix = []
    for char in pattern:
        if char in "*?[":
            break
        prefix.append(char.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_"))
    return "".join(prefix) + "%"
