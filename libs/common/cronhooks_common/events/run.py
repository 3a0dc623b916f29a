"""run.* events: the run a `202` answer to a delivery with an `api_token` starts (CONTRACT
§16.2), on the delivery's stream after its `delivery.succeeded`: `run.started`, then one
`run.finished` (the agent's report, or its deadline passing).

The run's live state (deadline moved by heartbeats, the logs reported so far) is the row
of `shared.runs` written in the transaction that appends each event; the events say what
other services need to know: that the delivery is still running (its lanes stay held),
and how it ended (health, alerts, costs)."""

from __future__ import annotations

from typing import ClassVar, Literal

from cronhooks_common.events.base import UNSET, Kind, Payload, Timestamp, UnsetType
from cronhooks_common.events.webhook import CostAmount

RunState = Literal["RUNNING", "SUCCEEDED", "FAILED", "TIMED_OUT"]
RUN_TIMEOUT_SECONDS = 3600  # runTimeoutSeconds when a webhook's configuration lacks it
MAX_RUN_SECONDS = 24 * 3600  # heartbeats never move a deadline past started_at + this


class RunFields(Payload, frozen=True, kw_only=True):
    """What both run events carry (§16.2: `{delivery_id, webhook_id, kind, state, costs}`)."""

    delivery_id: int
    webhook_id: int
    kind: Kind
    state: RunState
    costs: list[CostAmount]  # run.started: []; run.finished: what the report said it cost
    started_at: Timestamp
    trace: str | UnsetType = UNSET  # §16.3: the delivery's trace when it is not a root


class RunStarted(RunFields, frozen=True, kw_only=True):
    TYPE: ClassVar[str] = "run.started"
    deadline: Timestamp  # started_at + runTimeoutSeconds
    attempt: int  # the attempt whose 202 started it


class RunFinished(RunFields, frozen=True, kw_only=True):
    TYPE: ClassVar[str] = "run.finished"
    finished_at: Timestamp  # TIMED_OUT: the deadline
    message: str | None  # the report's message (TIMED_OUT: why)
    deadline: Timestamp  # the last deadline (heartbeats move it)
    cause: Literal["report", "timeout"] = "report"
