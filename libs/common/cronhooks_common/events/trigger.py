"""trigger.* events: agent-cron one-shot triggers (CONTRACT §7-§8). Arming and cancelling
live on the job's stream `job-{agent}-{job}`; each fire has a stream of its own
(`fire-{uuid}`): requested, attempts failed, fired."""

from __future__ import annotations

from typing import ClassVar, Literal

from cronhooks_common.events.base import UNSET, Payload, Timestamp, UnsetType


class TriggerFields(Payload, frozen=True, kw_only=True):
    agent_id: int
    job_id: str
    schedule_id: str


class TriggerCancelled(TriggerFields, frozen=True, kw_only=True):
    TYPE: ClassVar[str] = "trigger.cancelled"
    generation: int


class ArmedFields(TriggerFields, frozen=True, kw_only=True):
    instance_id: str
    fire_at: Timestamp  # normalised: what the scheduler parses
    # as the agent provisioned it, echoed by the callback; absent before CONTRACT rev. 2
    fire_at_text: str | UnsetType = UNSET
    callback_url: str
    generation: int


class TriggerArmed(ArmedFields, frozen=True, kw_only=True):
    TYPE: ClassVar[str] = "trigger.armed"
    dedup_key: str | None


class FireFields(ArmedFields, frozen=True, kw_only=True):
    """One fire of an armed trigger, and which attempt."""

    fire_id: str
    attempt: int
    first_attempt_at: Timestamp


class TriggerRequested(FireFields, frozen=True, kw_only=True):
    """Due: the dispatcher calls the agent back."""

    TYPE: ClassVar[str] = "trigger.requested"


class TriggerAttemptFailed(FireFields, frozen=True, kw_only=True):
    """Another attempt follows at `retry_at`."""

    TYPE: ClassVar[str] = "trigger.attempt_failed"
    status: int | None
    error: str
    duration_ms: int | None
    retry_at: Timestamp
    next_attempt: int


class TriggerFired(FireFields, frozen=True, kw_only=True):
    """Final."""

    TYPE: ClassVar[str] = "trigger.fired"
    outcome: Literal["delivered", "failed"]
    status: int | None
    error: str | None
    duration_ms: int | UnsetType | None = UNSET
