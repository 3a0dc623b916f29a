"""A change-webhook delivery (CONTRACT §11), read from its JSON body.

delivery = ChangeDelivery.from_body(await request.json())
for change in delivery.changes:           # sorted by path
    if change.content is not None:        # None on remove, or without includeContent
        ...change.edit(new_content)...    # a Change for SyncAnswer, only if unchanged
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cronhooks_agent.answers import Change


@dataclass(frozen=True, slots=True)
class NoteChange:
    path: str
    event: str  # create | update | remove
    version: int
    content_hash: str | None  # None on remove
    content: str | None  # None on remove, and when the webhook has includeContent: false

    @property
    def removed(self) -> bool:
        return self.event == "remove"

    def edit(self, content: str) -> Change:
        """Write `content` over this version of the note: refused (409, nothing written)
        if someone changed the note since this delivery was requested."""
        if self.content_hash is None:
            raise ValueError(f"{self.path} was removed: create it with expected_hash ''")
        return Change(self.path, content, self.content_hash)


@dataclass(frozen=True, slots=True)
class ChangeDelivery:
    id: int
    webhook_id: int
    attempt: int
    trigger: str  # change | manual | retry
    depth: int  # the batch's depth; what the agent writes lands at depth + 1
    instruction: str
    changes: tuple[NoteChange, ...]
    previous_error: str | None = None  # on retries
    api_token: str | None = None  # with passApiKey
    api_url: str | None = None
    # CONTRACT §16.3: the chain's root ("{kind}:{id}": this delivery's own name when it is
    # the root; None from a platform before revision 3) and, when notes another delivery
    # wrote caused this one, that delivery
    trace: str | None = None
    parent: str | None = None

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> ChangeDelivery:
        """The delivery of a verified body; `ValueError` if it is not a change delivery."""
        if body.get("kind") != "change":
            raise ValueError(f"not a change delivery (kind {body.get('kind')!r})")
        try:
            changes = tuple(
                NoteChange(
                    path=str(c["path"]),
                    event=str(c["event"]),
                    version=int(c["version"]),
                    content_hash=c.get("content_hash"),
                    content=c.get("content"),
                )
                for c in body["changes"]
            )
            return cls(
                id=int(body["id"]),
                webhook_id=int(body["webhook_id"]),
                attempt=int(body["attempt"]),
                trigger=str(body["trigger"]),
                depth=int(body["depth"]),
                instruction=str(body.get("instruction", "")),
                changes=changes,
                previous_error=body.get("previous_error"),
                api_token=body.get("api_token"),
                api_url=body.get("api_url"),
                trace=body.get("trace"),
                parent=body.get("parent"),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"malformed change delivery: {exc!r}") from None
