"""agent.* and api_key.* events: the credentials admins hand out (never the token or key
itself, which is shown once)."""

from __future__ import annotations

from typing import ClassVar

from cronhooks_common.events.base import Payload


class AgentRef(Payload, frozen=True, kw_only=True):
    agent_id: int


class AgentCreated(AgentRef, frozen=True, kw_only=True):
    TYPE: ClassVar[str] = "agent.created"
    instance_id: str
    callback_url: str
    description: str


class AgentTokenRotated(AgentRef, frozen=True, kw_only=True):
    TYPE: ClassVar[str] = "agent.token_rotated"


class AgentDeleted(AgentRef, frozen=True, kw_only=True):
    TYPE: ClassVar[str] = "agent.deleted"


class ApiKeyRef(Payload, frozen=True, kw_only=True):
    api_key_id: int


class ApiKeyCreated(ApiKeyRef, frozen=True, kw_only=True):
    """A key for direct note edits at depth 0."""

    TYPE: ClassVar[str] = "api_key.created"
    name: str
    skip_webhooks: bool


class ApiKeyRevoked(ApiKeyRef, frozen=True, kw_only=True):
    TYPE: ClassVar[str] = "api_key.revoked"
