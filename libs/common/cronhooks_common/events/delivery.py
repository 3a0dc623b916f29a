"""delivery.* events: one delivery's history on its own stream `delivery-{id}` (CONTRACT §4,
§6, §13). A request, the attempts' outcomes, and (DELAY, execution groups) its wait."""

from __future__ import annotations

from typing import Any, ClassVar, Literal, TypedDict

import msgspec

from cronhooks_common.events.base import UNSET, Kind, Payload, Timestamp, Trigger, UnsetType
from cronhooks_common.events.webhook import CostAmount, Target

ChangeEvent = Literal["create", "update", "remove"]
SkipReason = Literal[
    "missed",
    "concurrency",
    "still_running",
    "deleted",
    "disabled",
    "budget",
    "cost_budget",
    "chain_limit",
    "paused",
]


class DeliveryFieldsData(TypedDict):
    """`DeliveryFields` as keyword arguments for the next event of a delivery."""

    delivery_id: int
    webhook_id: int
    kind: Kind
    attempt: int
    scheduled_for: Timestamp | None
    trigger: Trigger
    missed_count: int


class DeliveryFields(Payload, frozen=True, kw_only=True):
    """What every delivery.* event carries."""

    delivery_id: int
    webhook_id: int
    kind: Kind = "cron"  # absent before change webhooks existed
    attempt: int
    scheduled_for: Timestamp | None = None  # the slot; null for manual and change deliveries
    trigger: Trigger
    missed_count: int = 0  # absent before catch-up counted

    def fields(self) -> DeliveryFieldsData:
        """These fields alone, for the next event of the delivery."""
        return {
            "delivery_id": self.delivery_id,
            "webhook_id": self.webhook_id,
            "kind": self.kind,
            "attempt": self.attempt,
            "scheduled_for": self.scheduled_for,
            "trigger": self.trigger,
            "missed_count": self.missed_count,
        }


class ChangeSent(msgspec.Struct, frozen=True, kw_only=True):
    """One note change a change delivery tells its agent about (CONTRACT §11)."""

    path: str
    event: ChangeEvent
    version: int
    content_hash: str | None
    content: str | UnsetType | None = UNSET  # only with includeContent


class AgentLog(msgspec.Struct, frozen=True, kw_only=True):
    """One entry of an agent's log in its answer (CONTRACT §16.1), or a `warn` of ours
    naming what of its costs and logs was dropped."""

    ts: Timestamp | None  # RFC 3339, as UTC ISO 8601; null when the agent gave none
    level: str
    msg: str
    data: Any = None  # any JSON, as the agent gave it


class RequestFields(DeliveryFields, frozen=True, kw_only=True):
    """A request to send an attempt, as requested or (after a wait) released."""

    target: Target
    next_run_at: Timestamp | UnsetType | None = UNSET
    previous_error: str | UnsetType = UNSET  # retries: what failed last time
    jitter_offset_ms: int | UnsetType = UNSET  # a jittered slot's send offset (§13)
    replay_of: int | UnsetType = UNSET  # replayDeliveries: the delivery sent again
    # kind change (§11): the note batch, its depth, the changes the webhook passes
    depth: int | UnsetType = UNSET
    batch_id: str | UnsetType = UNSET
    changes: list[ChangeSent] | UnsetType = UNSET
    content_truncated: Literal[True] | UnsetType = UNSET  # only when the 1 MiB cap cut (§15)
    # §16.3: only a delivery caused by another's write carries them (a root is its own
    # trace, `{kind}:{id}`, and has no parent): roots' events stay as they were.
    trace: str | UnsetType = UNSET
    parent: str | UnsetType = UNSET
    # §17: when the delivery was first requested, where its retry deadline counts from. A
    # first request lacks it (its own occurred_at says it); its release and retries carry it.
    requested_at: Timestamp | UnsetType = UNSET


class DeliveryRequested(RequestFields, frozen=True, kw_only=True):
    TYPE: ClassVar[str] = "delivery.requested"


class DeliveryReleased(RequestFields, frozen=True, kw_only=True):
    """A queued delivery's turn (§13): the request with the webhook's target at release."""

    TYPE: ClassVar[str] = "delivery.released"
    queued_ms: int
    execution_group: str | UnsetType = UNSET  # the group it holds until it ends


class DeliveryQueued(DeliveryFields, frozen=True, kw_only=True):
    TYPE: ClassVar[str] = "delivery.queued"
    waits_for: Literal["webhook", "group"]
    execution_group: str | UnsetType = UNSET


class DeliveryOutcome(DeliveryFields, frozen=True, kw_only=True):
    """How an attempt ended."""

    status: Literal["success", "failed"]
    response_status: int | None
    duration_ms: int | None
    error: str | None
    started_at: Timestamp | UnsetType = UNSET  # absent: no request was sent
    request_body: str | UnsetType = UNSET  # as sent, api_token redacted, first 64 KiB
    request_body_truncated: Literal[True] | UnsetType = UNSET  # only when cut (§15)
    response_body: str | UnsetType | None = UNSET  # the first 64 KiB
    # What a JSON answer reported (§16.1), whatever its status: only when there is some.
    costs: list[CostAmount] | UnsetType = UNSET
    agent_logs: list[AgentLog] | UnsetType = UNSET


class DeliverySucceeded(DeliveryOutcome, frozen=True, kw_only=True):
    TYPE: ClassVar[str] = "delivery.succeeded"


class DeliveryFailed(DeliveryOutcome, frozen=True, kw_only=True):
    """Final: no attempt left, or (§17) its retry would start past its deadline."""

    TYPE: ClassVar[str] = "delivery.failed"
    # only when the delivery's `error` is not the attempt's own (`retry deadline passed`):
    # what the attempt itself failed with, for its log
    attempt_error: str | UnsetType = UNSET


class DeliveryAttemptFailed(DeliveryOutcome, frozen=True, kw_only=True):
    """Another attempt follows at `retry_at`."""

    TYPE: ClassVar[str] = "delivery.attempt_failed"
    retry_at: Timestamp
    next_attempt: int
    # §17: the delivery's request time, for the retry to carry (absent before it)
    requested_at: Timestamp | UnsetType = UNSET


class DeliverySkipped(DeliveryFields, frozen=True, kw_only=True):
    TYPE: ClassVar[str] = "delivery.skipped"
    # A slot the scheduler skips (missed, over budget) never carried it; the dispatcher's
    # skips of requested deliveries do.
    missed_count: int | UnsetType = UNSET  # type: ignore[assignment]
    status: Literal["skipped"] = "skipped"
    reason: SkipReason
    skipped_count: int
    policy: str | UnsetType = UNSET
    first_skipped: Timestamp | UnsetType = UNSET  # reason missed
    next_run_at: Timestamp | UnsetType | None = UNSET
    max_deliveries_per_day: int | UnsetType = UNSET  # reason budget
    day: str | UnsetType = UNSET  # reasons budget, cost_budget: the day in the webhook's zone
    # reason cost_budget (§16.4): the limit reached (the first of maxCostPerDay's that was)
    cost_limit: CostAmount | UnsetType = UNSET
    # reason chain_limit (§11): CRONHOOKS_MAX_CHAIN_DELIVERIES as it was, and the skipped
    # change delivery's place in its chain (§16.3), as its request would have said
    max_chain_deliveries: int | UnsetType = UNSET
    trace: str | UnsetType = UNSET
    parent: str | UnsetType = UNSET


class DeliveryChangesReceived(DeliveryFields, frozen=True, kw_only=True):
    """An answer carried note changes: the attempt waits for the importer's verdict."""

    TYPE: ClassVar[str] = "delivery.changes_received"
    changes: list[Any]  # as answered: the importer's rules judge every part of them
    write_patterns: list[str]
    max_depth: int
    depth: int
    trace: str | UnsetType = UNSET  # §16.3: the delivery's trace, absent for a root
