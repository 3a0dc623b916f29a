"""The `changes` of a change delivery's body (CONTRACT §11, §15). Pure.

One function for every path that builds a change delivery — the importer's change matcher,
admin-api's `triggerChangeWebhook` and `replayDeliveries` — so they cannot disagree on
what a payload may show:

- `includeContent` false: no entry has a `content` key.
- a `remove` has `content: null` (a removal has no content).
- a path the webhook's `readPatterns` do not allow has `content: null` and
  `content_hash: null`: the payload never shows what the delivery's own token (minted with
  those patterns) could not read, not even a fingerprint of it.
- at most `MAX_CHANGE_CONTENT_BYTES` of content (UTF-8) in all: changes are taken by path,
  and once one's content would take the total past the cap, it and every later change
  carry `content: null` (their hashes stay: each names the version it stands for) and the
  body says `content_truncated`. Cutting at the first that does not fit, not skipping to
  smaller ones after it, keeps "what was left out" one suffix an agent can read itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, NotRequired, TypedDict

from cronhooks_common.events.delivery import ChangeEvent
from cronhooks_common.globs import matches_any

MAX_CHANGE_CONTENT_BYTES = 1 << 20  # 1 MiB


class ChangeEntry(TypedDict):
    """One change as a `delivery.requested` carries it (`ChangeSent` as JSON)."""

    path: str
    event: ChangeEvent
    version: int
    content_hash: str | None  # null: a path the webhook may not read
    content: NotRequired[str | None]  # only with includeContent; null: none, or not shown


class ChangeRequestFields(TypedDict):
    changes: list[ChangeEntry]
    content_truncated: NotRequired[Literal[True]]  # only when the cap cut


@dataclass(frozen=True, slots=True)
class ChangePayload:
    changes: list[ChangeEntry]  # the body's `changes`, by path
    content_truncated: bool  # the cap left some content out

    def request_fields(self) -> ChangeRequestFields:
        """What the payload adds to a `delivery.requested` (the dispatcher copies both into
        the body): `changes`, and `content_truncated: true` only when the cap cut."""
        fields: ChangeRequestFields = {"changes": self.changes}
        if self.content_truncated:
            fields["content_truncated"] = True
        return fields


def readable(config: Mapping[str, Any], path: str) -> bool:
    """Whether the webhook's `readPatterns` allow `path` (no patterns: nothing)."""
    return matches_any(path, tuple(config.get("read_patterns") or ()))


def carries_content(config: Mapping[str, Any], change: Mapping[str, Any]) -> bool:
    """Whether `change` may show content at all (before the cap): includeContent, not a
    removal, and a path the webhook may read. Callers that read content from a database
    use it to read only what may be shown."""
    return (
        bool(config.get("include_content", True))
        and change["event"] != "remove"
        and readable(config, change["path"])
    )


def change_payload(
    config: Mapping[str, Any],
    changes: Iterable[Mapping[str, Any]],
    *,
    cap: int = MAX_CHANGE_CONTENT_BYTES,
) -> ChangePayload:
    """The body's `changes` for a change webhook's `config` (as its events carry it).

    Each change has `path`, `event`, `version`, `content_hash` and `content` (str or
    None). A caller that reads notes from a database may give `size` (the content's UTF-8
    bytes, None for none) and read the content only of the changes that fit, in path order
    (see admin-api's change_notes.py): a change whose content is shown must have it."""
    with_content = bool(config.get("include_content", True))
    entries: list[ChangeEntry] = []
    total, truncated = 0, False
    for change in sorted(changes, key=lambda c: str(c["path"])):
        entry: ChangeEntry = {
            "path": change["path"],
            "event": change["event"],
            "version": change["version"],
            "content_hash": (
                change.get("content_hash") if readable(config, change["path"]) else None
            ),
        }
        if with_content:
            entry["content"] = None
            size = _size(change) if carries_content(config, change) else None
            if size is not None:
                if truncated or total + size > cap:
                    truncated = True
                else:
                    total += size
                    entry["content"] = _content(change)
        entries.append(entry)
    return ChangePayload(entries, truncated)


def _size(change: Mapping[str, Any]) -> int | None:
    if "size" in change:
        return None if change["size"] is None else int(change["size"])
    content = change.get("content")
    return None if content is None else len(content.encode())


def _content(change: Mapping[str, Any]) -> str:
    content = change.get("content")
    if content is None:  # a caller that gave `size` did not read what fits
        raise ValueError(f"{change['path']}: its content fits in the payload but was not read")
    return str(content)
