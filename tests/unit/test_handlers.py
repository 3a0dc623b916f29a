"""cronhooks_common.handlers: the table each service routes its events by."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from uuid import uuid4

import msgspec
import pytest

from cronhooks_common.events import (
    AgentCreated,
    AgentDeleted,
    DeliveryFields,
    Event,
    NewEvent,
)
from cronhooks_common.handlers import Handlers


def _event(new: NewEvent) -> Event:
    return Event(
        event_id=new.event_id,
        type=new.type,
        stream="agent-1",
        version=1,
        occurred_at=datetime(2026, 12, 6, tzinfo=UTC),
        data=new.data,
        correlation_id=uuid4(),
    )


async def test_each_event_goes_to_its_handler_with_its_typed_data() -> None:
    seen: list[tuple[str, Any, Any]] = []

    async def on_created(ctx: str, event: Event, payload: AgentCreated) -> None:
        seen.append((ctx, event.type, payload))

    async def on_deleted(ctx: str, event: Event, payload: AgentDeleted) -> None:
        seen.append((ctx, event.type, payload))

    handlers = Handlers[str]({AgentCreated: on_created, AgentDeleted: on_deleted})
    assert handlers.routing_keys == ("agent.created", "agent.deleted")
    created = AgentCreated(agent_id=1, instance_id="i", callback_url="https://a", description="")
    await handlers.handle("ctx", _event(NewEvent.of(created)))
    await handlers.handle("ctx", _event(NewEvent.of(AgentDeleted(agent_id=1))))
    assert seen == [
        ("ctx", "agent.created", created),
        ("ctx", "agent.deleted", AgentDeleted(agent_id=1)),
    ]


async def test_unknown_types_and_misfit_data_are_refused() -> None:
    async def never(ctx: None, event: Event, payload: Any) -> None:
        raise AssertionError("not called")

    handlers = Handlers[None]({AgentDeleted: never})
    with pytest.raises(KeyError):
        await handlers.handle(None, _event(NewEvent("agent.created", {})))
    with pytest.raises(msgspec.ValidationError):
        await handlers.handle(None, _event(NewEvent("agent.deleted", {"agent_id": "x"})))
    assert "agent.deleted" in handlers and "agent.created" not in handlers


def test_only_event_types_can_be_routed() -> None:
    async def never(ctx: None, event: Event, payload: Any) -> None:
        raise AssertionError("not called")

    with pytest.raises(TypeError, match="not an event type"):
        Handlers[None]({DeliveryFields: never})
