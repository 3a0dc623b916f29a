"""The rules of a note path (CONTRACT §5) and of a glob over paths (§8: patterns are
checked like paths), shared by the importer (which owns the note store) and admin-api.
Pure."""

from __future__ import annotations

MAX_PATH_BYTES = 512


def relative_text_problem(text: str) -> str | None:
    """What paths and patterns share: non-empty UTF-8 of at most 512 bytes, no NUL or
    control character, relative, no `..` segment. The reason reads after a subject."""
    if not text:
        return "is empty"
    try:
        size = len(text.encode())
    except UnicodeEncodeError:
        return "is not valid Unicode text (lone surrogate)"
    if size > MAX_PATH_BYTES:
        return f"is longer than {MAX_PATH_BYTES} bytes"
    if any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in text):
        return "contains NUL or control characters"
    if text.startswith("/"):
        return "must be relative (no leading /)"
    if ".." in text.split("/"):
        return "must not contain .. segments"
    return None


def path_problem(path: str) -> str | None:
    """Why `path` is not a valid note path, or None."""
    problem = relative_text_problem(path)
    if problem is None and "\\" in path:
        problem = "must use / as separator (no backslash)"
    for segment in path.split("/") if problem is None else ():
        if segment == "":
            problem = "has an empty segment (// or a trailing /)"
            break
        if segment == ".":
            problem = "must not contain . segments"
            break
    return None if problem is None else f"path {problem}"
