"""What every handler is given besides its event (CONTRACT §15: the event as the store
holds it, and its typed data): the service's parts, built once by the composition root
(app.py), and what the lookup (lookup.py) found with the event. Types only: the parts
are imported for their annotations, so any module may import this one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    import aiohttp
    import asyncpg

    from cronhooks_common.clock import Clock
    from cronhooks_common.tokens import ApiTokens
    from cronhooks_common.webhook_keys import SealedKeys
    from cronhooks_dispatcher.context_notes import ContextNoteLoader
    from cronhooks_dispatcher.deliver import SigningKeys
    from cronhooks_dispatcher.destination_gates import Destinations
    from cronhooks_dispatcher.destination_sync import DestinationSync
    from cronhooks_dispatcher.fire import FireCaller
    from cronhooks_dispatcher.record import RecordWriter


@dataclass(frozen=True, slots=True)
class Deps:
    pool: asyncpg.Pool
    clock: Clock
    writer: RecordWriter  # records outcomes, many per transaction
    http: aiohttp.ClientSession  # one session for every POST: keep-alive reuse
    keys: SigningKeys
    tokens: ApiTokens  # the api_token of webhooks with passApiKey
    api_url: str
    allow_private: bool
    context: ContextNoteLoader  # attachNotes (CONTRACT §13)
    fires: FireCaller  # one-shot triggers (CONTRACT §9)
    gates: Destinations  # destination limits in this process (CONTRACT §17)
    holds: DestinationSync  # ... and with Postgres: overrides, Retry-After holds


class Call(NamedTuple):
    """A handler's context: the parts, and what the lookup found with the event."""

    deps: Deps
    # Its outcome is recorded already: the inbox holds the event, or its stream moved on.
    handled: bool
    # of the stored event's webhook (secret, scheme, key pair, previous secret in its grace:
    # CONTRACT §17); None: none (or deleted)
    sealed_secret: SealedKeys | None


class Fault(NamedTuple):
    """An ending's context: the parts, and why the event could not be handled."""

    deps: Deps
    error: Exception
