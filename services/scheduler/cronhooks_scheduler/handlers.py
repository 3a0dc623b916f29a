"""What the scheduler hears, and which handler takes it: one table (`HANDLERS`).

Each handler runs in the consumer's transaction with the event's typed data; the
scheduler's queue is bound to exactly the table's keys (app.py).
"""

from __future__ import annotations

import asyncpg

from cronhooks_common.events import (
    DeliveryAttemptFailed,
    TriggerArmed,
    TriggerAttemptFailed,
    TriggerCancelled,
    WebhookCreated,
    WebhookDeleted,
    WebhookDisabled,
    WebhookUpdated,
)
from cronhooks_common.handlers import Handlers
from cronhooks_scheduler import retries, timers, triggers

HANDLERS = Handlers[asyncpg.Connection](
    {
        # a webhook's copy and its cron timer (timers.py)
        WebhookCreated: timers.on_webhook_configured,
        WebhookUpdated: timers.on_webhook_configured,
        WebhookDisabled: timers.on_webhook_disabled,
        WebhookDeleted: timers.on_webhook_deleted,
        # a failed attempt's retry timer (retries.py)
        DeliveryAttemptFailed: retries.on_attempt_failed,
        # one-shot triggers of agents and their fires' retries (triggers.py)
        TriggerArmed: triggers.on_armed,
        TriggerCancelled: triggers.on_cancelled,
        TriggerAttemptFailed: triggers.on_attempt_failed,
    }
)
