"""Event type names and stream names (CONTRACT §6).

Event names are past tense and double as RabbitMQ routing keys; each has its class in
this package (`payload_class`). Stream names say whose history an event belongs to.
"""

from __future__ import annotations

from enum import StrEnum


class EventType(StrEnum):
    WEBHOOK_CREATED = "webhook.created"
    WEBHOOK_UPDATED = "webhook.updated"
    WEBHOOK_DELETED = "webhook.deleted"
    WEBHOOK_SECRET_ROTATED = "webhook.secret_rotated"
    WEBHOOK_DISABLED = "webhook.disabled"
    DELIVERY_REQUESTED = "delivery.requested"
    DELIVERY_SUCCEEDED = "delivery.succeeded"
    DELIVERY_FAILED = "delivery.failed"  # final: no attempt left
    DELIVERY_ATTEMPT_FAILED = "delivery.attempt_failed"  # a retry follows at `retry_at`
    DELIVERY_SKIPPED = "delivery.skipped"
    DELIVERY_CHANGES_RECEIVED = "delivery.changes_received"
    DELIVERY_QUEUED = "delivery.queued"  # waits for its webhook (DELAY) or execution group
    DELIVERY_RELEASED = "delivery.released"  # a queued delivery may go: the dispatcher sends it
    NOTES_IMPORTED = "notes.imported"
    NOTES_REJECTED = "notes.rejected"
    NOTE_CHANGED = "note.changed"
    TRIGGER_ARMED = "trigger.armed"
    TRIGGER_CANCELLED = "trigger.cancelled"
    TRIGGER_REQUESTED = "trigger.requested"  # due: the dispatcher calls the agent back
    TRIGGER_ATTEMPT_FAILED = "trigger.attempt_failed"  # another attempt at `retry_at`
    TRIGGER_FIRED = "trigger.fired"  # final, with `outcome`: delivered | failed
    AGENT_CREATED = "agent.created"
    AGENT_TOKEN_ROTATED = "agent.token_rotated"
    AGENT_DELETED = "agent.deleted"
    API_KEY_CREATED = "api_key.created"
    API_KEY_REVOKED = "api_key.revoked"
    ALERT_RAISED = "alert.raised"  # a webhook keeps failing, or was auto-disabled (§12)
    ALERT_RESOLVED = "alert.resolved"  # it recovered, was re-enabled or deleted
    RUN_STARTED = "run.started"  # a 202 to a delivery with a token (§16.2)
    RUN_FINISHED = "run.finished"  # reported, or its deadline passed
    DELIVERIES_PAUSED = "deliveries.paused"  # the pause switch (§16.4): on, or replaced
    DELIVERIES_RESUMED = "deliveries.resumed"  # off: by an admin or when `until` came
    DESTINATION_LIMIT_SET = "destination.limit_set"  # an override set or removed (§17)


# `kind` on every webhook.* and delivery.* event (CONTRACT §6) and in the request body (§11):
# cron webhooks fire on slots, change webhooks on note batches. One id space for both.
CRON = "cron"
CHANGE = "change"


# The pause switch's one stream (CONTRACT §16.4).
PAUSE_STREAM = "deliveries-pause"


def destination_stream(destination: str) -> str:
    """The limit history of a destination (`scheme://host:port`, CONTRACT §17)."""
    return f"destination-{destination}"


def webhook_stream(webhook_id: int) -> str:
    return f"webhook-{webhook_id}"


def delivery_stream(delivery_id: int) -> str:
    return f"delivery-{delivery_id}"


def note_stream(path: str) -> str:
    return f"note-{path}"


def agent_stream(agent_id: int) -> str:
    return f"agent-{agent_id}"


def api_key_stream(api_key_id: int) -> str:
    return f"api_key-{api_key_id}"


def alert_stream(alert_id: int) -> str:
    return f"alert-{alert_id}"


def job_stream(agent_id: int, job_id: str) -> str:
    """Arm/cancel history of one agent job; each fire has a stream of its own."""
    return f"job-{agent_id}-{job_id}"
