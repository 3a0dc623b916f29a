"""The one alert of a chain that reached CRONHOOKS_MAX_CHAIN_DELIVERIES (CONTRACT §11,
§12), raised by the change matcher in the transaction that skipped the chain's first
delivery over the limit (chain_limit.py), so it is raised exactly once per chain.

Alerts are per webhook (§12's `Alert.webhookId`): this one names the webhook whose
delivery was the first skipped, and carries the chain's `trace`. Its id comes from the
dispatcher's alert sequence and, with CRONHOOKS_ALERT_WEBHOOK_URL set, it leaves a row in
the dispatcher's alert sink queue, so it is numbered, listed and POSTed as every other
alert. Nothing resolves it: the chain is over, there is no recovery to wait for.
"""

from __future__ import annotations

from datetime import datetime

import asyncpg
import structlog

from cronhooks_common import eventstore
from cronhooks_common.events import AlertRaised, Causation, NewEvent, alert_stream
from cronhooks_importer import queries
from cronhooks_importer.chain_limit import ChainPolicy, chain_error
from cronhooks_importer.change_index import ChangeWebhook

log = structlog.get_logger(__name__)


async def raise_chain_alert(
    conn: asyncpg.Connection,
    policy: ChainPolicy,
    hook: ChangeWebhook,
    trace: str,
    causation: Causation,
    now: datetime,
) -> AlertRaised:
    alert_id = await queries.next_alert_id(conn)
    raised = AlertRaised(
        alert_id=alert_id,
        webhook_id=hook.webhook_id,
        kind="change",
        url=hook.config.url,
        description=hook.config.description,
        consecutive_failures=0,
        last_error=chain_error(trace, policy.limit),
        disabled=False,
        trace=trace,
    )
    [appended] = await eventstore.append(
        conn,
        alert_stream(alert_id),
        [NewEvent.of(raised)],
        expected_version=0,
        causation=causation,
        occurred_at=now,
    )
    if policy.post_alerts:
        await queries.queue_alert_post(conn, appended.event_id, alert_id, now)
    log.warning("chain_alert_raised", alert_id=alert_id, webhook_id=hook.webhook_id, trace=trace)
    return raised
