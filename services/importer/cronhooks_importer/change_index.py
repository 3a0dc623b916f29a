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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from cronhooks_common.change_payload import ChangePayload, change_payload
from cronhooks_common.events import NoteChanged, Target, WebhookConfig
from cronhooks_common.globs import matches_any
from cronhooks_common.webhooks import target_of


def literal_prefix(pattern: str) -> str:
    for i, char in enumerate(pattern):
        if char in "*?[":
            return pattern[:i]
    return pattern


@dataclass(frozen=True, slots=True)
class ChangeWebhook:
    webhook_id: int
    config: WebhookConfig
    # The configuration as its events carry it: what change_payload reads.
    carried: Mapping[str, Any]

    @classmethod
    def of(cls, webhook_id: int, config: WebhookConfig) -> ChangeWebhook:
        return cls(webhook_id, config, msgspec.to_builtins(config))

    @property
    def max_depth(self) -> int:
        return self.config.max_depth

    @property
    def target(self) -> Target:
        """What its deliveries carry for the dispatcher to send them."""
        return target_of(self.config)

    def fires_on(self, event: str) -> bool:
        c = self.config  # a filter absent from the configuration (UNSET) is off
        return bool({"create": c.on_create, "update": c.on_update, "remove": c.on_remove}[event])

    def passes(self, change: NoteChanged) -> bool:
        if not self.fires_on(change.event):
            return False
        c = self.config
        return matches_any(change.path, c.include_patterns or ()) and not matches_any(
            change.path, c.exclude_patterns or ()
        )


class ChangeIndex:
    """The live change webhooks, indexed by include-pattern prefix."""

    def __init__(self) -> None:
        self._hooks: dict[int, ChangeWebhook] = {}
        self._by_prefix: dict[str, set[int]] = defaultdict(set)

    def __len__(self) -> int:
        return len(self._hooks)

    def put(self, webhook_id: int, config: WebhookConfig | None) -> None:
        """Set a webhook's configuration; None (deleted) or disabled removes it."""
        self.remove(webhook_id)
        if config is None or not config.enabled:
            return
        hook = ChangeWebhook.of(webhook_id, config)
        self._hooks[webhook_id] = hook
        for pattern in config.include_patterns or ():
            self._by_prefix[literal_prefix(pattern)].add(webhook_id)

    def remove(self, webhook_id: int) -> None:
        old = self._hooks.pop(webhook_id, None)
        if old is None:
            return
        for pattern in old.config.include_patterns or ():
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
        self, changes: Sequence[NoteChanged], *, depth: int
    ) -> list[tuple[ChangeWebhook, ChangePayload]]:
        """(webhook, its payload's changes) for every webhook the batch fires, by id. What
        each change shows (readPatterns, includeContent, the 1 MiB cap) is
        change_payload's to say, as for every other change delivery."""
        passing: dict[int, list[NoteChanged]] = defaultdict(list)
        for change in changes:
            for webhook_id in self._candidates(change.path):
                hook = self._hooks[webhook_id]
                if depth < hook.max_depth and hook.passes(change):
                    passing[webhook_id].append(change)
        return [
            (
                self._hooks[i],
                change_payload(self._hooks[i].carried, [c.to_data() for c in passing[i]]),
            )
            for i in sorted(passing)
        ]
