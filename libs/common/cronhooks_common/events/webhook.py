"""webhook.* events: a webhook's configuration as it travels (CONTRACT §6, §11, §13).

`webhook.created` and `webhook.updated` carry the whole configuration (never the secret),
so any consumer can keep its own copy by upserting it. `WebhookConfig` is the one list of
a webhook's settings: the read models, the scheduler and the dispatcher take their columns
from it.
"""

from __future__ import annotations

from typing import ClassVar, Literal, TypedDict

import msgspec

from cronhooks_common.events.base import UNSET, Kind, Payload, Timestamp, UnsetType

ConcurrencyPolicy = Literal["ALLOW", "FORBID", "DELAY"]
CatchUpPolicy = Literal["LATEST_ONCE", "SKIP", "ALL"]
SignatureScheme = Literal["HMAC", "ED25519"]


class CostAmount(msgspec.Struct, frozen=True, kw_only=True):
    """An amount of one unit: what an attempt's answer says it cost (CONTRACT §16.1), or a
    webhook's daily limit of it (§16.4). Here, not with the delivery events, because both
    a webhook's configuration and those events carry it."""

    unit: str  # 1-64 characters of [A-Za-z0-9_.:-]
    amount: float  # finite, >= 0 (a limit: > 0)


class CostAmountData(TypedDict):
    """`CostAmount` as JSON."""

    unit: str
    amount: float


class WebhookConfig(msgspec.Struct, frozen=True, kw_only=True):
    """A webhook's settings. Fields of the other kind are UNSET: a cron webhook has a
    schedule, a change webhook (CONTRACT §11) a filter on note changes."""

    url: str
    instruction: str
    pass_api_key: bool
    timeout_seconds: int
    max_depth: int
    max_retries: int
    enabled: bool
    description: str
    read_patterns: list[str]
    write_patterns: list[str]
    # §16.2, both kinds: how long a run (a 202 to a delivery with a token) may go without
    # a report; absent from configurations written before it: 3600
    run_timeout_seconds: int | UnsetType = UNSET
    # §17, both kinds: how webhook-signature is made (v1 HMAC or v1a Ed25519); absent from
    # configurations written before it: HMAC
    signature_scheme: SignatureScheme | UnsetType = UNSET
    # §17, both kinds: a retry that would start later than this many seconds after the
    # delivery was requested is not made (0: no deadline); absent before it: 0
    retry_deadline_seconds: int | UnsetType = UNSET
    # kind cron
    cron_schedule: str | UnsetType = UNSET
    timezone: str | UnsetType = UNSET
    concurrency_policy: ConcurrencyPolicy | UnsetType = UNSET
    catch_up_policy: CatchUpPolicy | UnsetType = UNSET
    misfire_grace_seconds: int | UnsetType = UNSET
    # CONTRACT §13; absent from configurations written before each existed
    execution_group: str | UnsetType = UNSET  # absent: "" (none)
    attach_notes: list[str] | UnsetType = UNSET  # absent: [] (none)
    jitter_seconds: int | UnsetType = UNSET  # absent: 0
    max_deliveries_per_day: int | UnsetType | None = UNSET  # absent or null: no limit
    max_cost_per_day: list[CostAmount] | UnsetType = UNSET  # §16.4; absent: [] (no limit)
    # kind change
    include_patterns: list[str] | UnsetType = UNSET
    exclude_patterns: list[str] | UnsetType = UNSET
    on_create: bool | UnsetType = UNSET
    on_update: bool | UnsetType = UNSET
    on_remove: bool | UnsetType = UNSET
    include_content: bool | UnsetType = UNSET


class ConfigData(TypedDict, total=False):
    """`WebhookConfig` as JSON: the `config` of a `webhook.created`/`updated` event as
    stored, and the copies consumers keep of it. Any key may be absent: the other kind's
    settings, and those added after the configuration was written (see above)."""

    url: str
    instruction: str
    pass_api_key: bool
    timeout_seconds: int
    max_depth: int
    max_retries: int
    enabled: bool
    description: str
    read_patterns: list[str]
    write_patterns: list[str]
    run_timeout_seconds: int
    signature_scheme: SignatureScheme
    retry_deadline_seconds: int
    cron_schedule: str
    timezone: str
    concurrency_policy: ConcurrencyPolicy
    catch_up_policy: CatchUpPolicy
    misfire_grace_seconds: int
    execution_group: str
    attach_notes: list[str]
    jitter_seconds: int
    max_deliveries_per_day: int | None
    max_cost_per_day: list[CostAmountData]
    include_patterns: list[str]
    exclude_patterns: list[str]
    on_create: bool
    on_update: bool
    on_remove: bool
    include_content: bool


class Target(msgspec.Struct, frozen=True, kw_only=True):
    """What the dispatcher needs to send a delivery (never the secret). Every key is
    written; the kind's missing settings are null."""

    url: str
    instruction: str
    timeout_seconds: int
    pass_api_key: bool
    read_patterns: list[str]
    write_patterns: list[str]
    max_depth: int
    max_retries: int
    concurrency_policy: ConcurrencyPolicy | None = None
    execution_group: str | None = None
    attach_notes: list[str] | None = None
    # The zone whose calendar days its costs count in (§16.4): a cron webhook's; absent for
    # change webhooks (UTC) and in requests written before it (UTC too).
    timezone: str | UnsetType = UNSET
    # §16.2: a run this delivery starts times out this long after it started (absent in
    # requests written before it, and when the webhook's configuration lacks it: 3600)
    run_timeout_seconds: int | UnsetType = UNSET
    # §17: the delivery fails rather than retry later than its request time plus this
    # (0, absent in requests written before it, and absent from the configuration: none)
    retry_deadline_seconds: int | UnsetType = UNSET


class WebhookRef(Payload, frozen=True, kw_only=True):
    webhook_id: int
    kind: Kind = "cron"


class WebhookConfigured(WebhookRef, frozen=True, kw_only=True):
    config: WebhookConfig
    changed: list[str]


class WebhookCreated(WebhookConfigured, frozen=True, kw_only=True):
    TYPE: ClassVar[str] = "webhook.created"


class WebhookUpdated(WebhookConfigured, frozen=True, kw_only=True):
    TYPE: ClassVar[str] = "webhook.updated"


class WebhookDeleted(WebhookRef, frozen=True, kw_only=True):
    TYPE: ClassVar[str] = "webhook.deleted"


class WebhookSecretRotated(WebhookRef, frozen=True, kw_only=True):
    """A new secret (and key pair, CONTRACT §17). Never the secret or a key: only how long
    the previous one is still honoured (absent in events written before it: no grace)."""

    TYPE: ClassVar[str] = "webhook.secret_rotated"
    grace_seconds: int | UnsetType = UNSET  # 0: the previous secret stops at once
    previous_expires_at: Timestamp | UnsetType | None = UNSET  # null: none honoured


class WebhookDisabled(WebhookRef, frozen=True, kw_only=True):
    """The platform disabled the webhook (auto-disable after failures, CONTRACT §12)."""

    TYPE: ClassVar[str] = "webhook.disabled"
    reason: str
