"""The rules of a note path (CONTRACT §5), shared by the importer (which owns the note store)
and admin-api (which reads and writes notes for admins). Pure."""

from __future__ import annotations

MAX_PATH_BYTES = 512


def path_problem(path: str) -> str | None:
    """Why `path` is not a valid note path, or None."""
    if not path:
        return "path is empty"
    try:
        size = len(path.encode())
    except UnicodeEncodeError:
        return "path is not valid Unicode text (lone surrogate)"
    if size > MAX_PATH_BYTES:
        return f"path is longer than {MAX_PATH_BYTES} bytes"
    if any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in path):
        return "path contains NUL or control characters"
    if path.startswith("/"):
        return "path must be relative (no leading /)"
    if "\\" in path:
        return "path must use / as separator (no backslash)"
    for segment in path.split("/"):
        if segment == "":
            return "path has an empty segment (// or a trailing /)"
        if segment == "..":
            return "path must not contain .. segments"
        if segment == ".":
            return "path must not contain . segments"
    return None
