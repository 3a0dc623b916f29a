"""Which change webhooks a committed note batch fires (CONTRACT §11). Pure.

A batch written at depth `d` fires every live change webhook with `d < maxDepth` for which
at least one change passes its `on*` filter and its patterns (some include pattern, no
exclude pattern); the delivery carries all of the batch's changes that pass, sorted by
path, as cronhooks_common.change_payload shows them. A batch written with a
`skipWebhooks` API key fires none.

10,000 change webhooks must not make matching slow, so webhooks are indexed by the literal
prefix of each include pattern (what comes before the first `*`, `?` or `[`): a path is
only tested against webhooks with a pattern whose prefix starts the path — `len(path) + 1`
dictionary lookups, then fnmatch on those few (Python caches compiled patterns).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from cronhooks_common.change_payload import ChangePayload, change_payload
from cronhooks_common.globs import matches_any

FILTERS = {"create": "on_create", "update": "on_update", "remove": "on_remove"}


def literal_prefix(pattern: str) -> str:
    for i, char in enumerate(pattern):
        if char in "*?[":
            return pattern[:i]
    return pattern


@dataclass(frozen=True, slots=True)
class ChangeWebhook:
    webhook_id: int
    config: dict[str, Any]  # the webhook's configuration as its events carry it

    @property
    def max_depth(self) -> int:
        return int(self.config.get("max_depth", 1))

    def passes(self, change: dict[str, Any]) -> bool:
        c = self.config
        if not c.get(FILTERS.get(change["event"], ""), False):
            return False
        path = change["path"]
        return matches_any(path, c.get("include_patterns") or ()) and not matches_any(
            path, c.get("exclude_patterns") or ()
        )


class ChangeIndex:
    """The live change webhooks, indexed by include-pattern prefix."""

    def __init__(self) -> None:
        self._hooks: dict[int, ChangeWebhook] = {}
        self._by_prefix: dict[str, set[int]] = defaultdict(set)

    def __len__(self) -> int:
        return len(self._hooks)

    def put(self, webhook_id: int, config: dict[str, Any] | None) -> None:
        """Set a webhook's configuration; None (deleted, disabled, paused) removes it."""
        self.remove(webhook_id)
        if config is None or not config.get("enabled", True):
            return
        hook = ChangeWebhook(webhook_id, config)
        self._hooks[webhook_id] = hook
        for pattern in config.get("include_patterns") or ():
            self._by_prefix[literal_prefix(pattern)].add(webhook_id)

    def remove(self, webhook_id: int) -> None:
        old = self._hooks.pop(webhook_id, None)
        if old is None:
            return
        for pattern in old.config.get("include_patterns") or ():
            prefix = literal_prefix(pattern)
            ids = self._by_prefix.get(prefix)
            if ids is not None:
                ids.discard(webhook_id)
                if not ids:
                    del self._by_prefix[prefix]

    def _candidates(self, path: str) -> set[int]:
        found: set[int] = set()
        for end in range(len(path) + 1):
            ids = self._by_prefix.get(path[:end])
            if ids:
                found |= ids
        return found

    def matches(
        self, changes: list[dict[str, Any]], *, depth: int
    ) -> list[tuple[ChangeWebhook, ChangePayload]]:
        """(webhook, its payload's changes) for every webhook the batch fires, by id. What
        each change shows (readPatterns, includeContent, the 1 MiB cap) is
        change_payload's to say, as for every other change delivery."""
        passing: dict[int, list[dict[str, Any]]] = defaultdict(list)
        for change in changes:
            for webhook_id in self._candidates(change["path"]):
                hook = self._hooks[webhook_id]
                if depth < hook.max_depth and hook.passes(change):
                    passing[webhook_id].append(change)
        return [
            (self._hooks[i], change_payload(self._hooks[i].config, passing[i]))
            for i in sorted(passing)
        ]
