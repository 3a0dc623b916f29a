"""The command side: validate → append events (+ the command's own state) in one
transaction → answer. Commands load what they decide from the aggregate's own stream,
never from a read model, and project their events inline (store.py), so a query right
after a mutation sees them.

By area: webhooks.py (both kinds; validation.py, idempotency.py, daily_budget.py),
deliveries.py (Run now, triggerChangeWebhook, replays: manual.py, replay.py,
change_notes.py), pause.py (the pause switch), destinations.py (destination limits),
agents.py and triggers.py (agent-cron), api_keys.py, note_writes.py (forwarded to the
importer); their SQL in queries.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import asyncpg

from cronhooks_admin.commands.agents import Agents
from cronhooks_admin.commands.api_keys import ApiKeys
from cronhooks_admin.commands.deliveries import DeliveryCommands
from cronhooks_admin.commands.destinations import DestinationCommands
from cronhooks_admin.commands.pause import PauseCommands
from cronhooks_admin.commands.triggers import Triggers
from cronhooks_admin.commands.webhooks import WebhookCommands
from cronhooks_common.clock import Clock
from cronhooks_common.crypto import SecretBox


@dataclass
class Commands:
    """Every command of admin-api, by area, over one pool and clock."""

    pool: asyncpg.Pool
    clock: Clock
    secrets: SecretBox
    default_timezone: str
    allow_private: bool = False
    allow_insecure: bool = False
    webhooks: WebhookCommands = field(init=False)
    deliveries: DeliveryCommands = field(init=False)
    agents: Agents = field(init=False)
    triggers: Triggers = field(init=False)
    api_keys: ApiKeys = field(init=False)
    pause: PauseCommands = field(init=False)
    destinations: DestinationCommands = field(init=False)

    def __post_init__(self) -> None:
        self.webhooks = WebhookCommands(
            self.pool,
            self.clock,
            self.secrets,
            self.default_timezone,
            self.allow_private,
            self.allow_insecure,
        )
        self.deliveries = DeliveryCommands(self.pool, self.clock)
        self.agents = Agents(self.pool, self.clock, self.allow_private)
        self.triggers = Triggers(self.pool, self.clock, self.allow_private)
        self.api_keys = ApiKeys(self.pool, self.clock)
        self.pause = PauseCommands(self.pool, self.clock)
        self.destinations = DestinationCommands(self.pool, self.clock)
