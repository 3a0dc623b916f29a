"""Validate a webhook's settings and the other admin input before anything is stored or
changed. Pure.

Each check raises `InputError(field, reason)` naming the GraphQL input field, which the
API answers as BAD_USER_INPUT with `extensions.field`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, TypedDict, cast
from urllib.parse import urlsplit

from cronhooks_admin.commands.cost_limits import check_cost_limits
from cronhooks_admin.errors import InputError
from cronhooks_common.cron import CronError, CronSchedule, parse_zone
from cronhooks_common.events import CHANGE, CRON, MAX_RUN_SECONDS, ConfigData
from cronhooks_common.events.webhook import CatchUpPolicy, ConcurrencyPolicy
from cronhooks_common.globs import pattern_problem
from cronhooks_common.jitter import MAX_JITTER_SECONDS
from cronhooks_common.paths import path_problem
from cronhooks_common.signing import secret_problem
from cronhooks_common.targets import literal_problem
from cronhooks_common.webhook_keys import MAX_GRACE_SECONDS, SCHEMES
from cronhooks_common.webhooks import config_fields

MAX_URL = 2048
MAX_INSTRUCTION = 64 << 10
MAX_DESCRIPTION = 4096
MAX_PATTERNS = 100
MAX_IDEMPOTENCY_KEY = 200


def camel(name: str) -> str:
    """The GraphQL name of a snake_case input field (errors name what the client sent)."""
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def check_url(url: str, *, allow_private: bool = True) -> str:
    if len(url) > MAX_URL:
        raise InputError("url", f"must be at most {MAX_URL} characters")
    try:
        parts = urlsplit(url)
        port = parts.port  # raises on a malformed port
    except ValueError as exc:
        raise InputError("url", f"malformed URL: {exc}") from None
    if parts.scheme not in ("http", "https"):
        raise InputError("url", "scheme must be http or https")
    if not parts.hostname:
        raise InputError("url", "must have a host")
    if parts.username or parts.password:
        raise InputError("url", "must not contain credentials")
    if port == 0:
        raise InputError("url", "port must be 1-65535")
    if any(ord(c) <= 0x20 or ord(c) == 0x7F for c in url):
        raise InputError("url", "must not contain spaces or control characters")
    if not allow_private:
        # Literal addresses can be judged now; names are checked at connect time.
        problem = literal_problem(parts.hostname)
        if problem is not None:
            raise InputError("url", f"{problem} (private targets are not allowed)")
    return url


def _int_range(field: str, value: int, low: int, high: int) -> int:
    if not low <= value <= high:
        raise InputError(field, f"must be from {low} to {high}")
    return value


def _text(field: str, value: str, limit: int) -> str:
    try:
        size = len(value.encode())
    except UnicodeEncodeError:
        raise InputError(field, "must be valid Unicode text") from None
    if size > limit:
        raise InputError(field, f"must be at most {limit} bytes")
    if "\x00" in value:
        raise InputError(field, "must not contain NUL characters")
    return value


# executionGroup (CONTRACT §13): "" is no group; otherwise a name of up to 100 ASCII
# letters, digits and `. _ - : /`, compared exactly (case counts). Narrow on purpose: a
# group name is an identifier admins type in several webhooks, and look-alike Unicode or
# stray spaces would silently split one group into two.
MAX_EXECUTION_GROUP = 100
_EXECUTION_GROUP = re.compile(r"[A-Za-z0-9._:/-]*")


def check_execution_group(value: str) -> str:
    if len(value) > MAX_EXECUTION_GROUP:
        raise InputError("executionGroup", f"must be at most {MAX_EXECUTION_GROUP} characters")
    if not _EXECUTION_GROUP.fullmatch(value):
        raise InputError(
            "executionGroup", "may contain only ASCII letters, digits and . _ - : / (or be empty)"
        )
    return value


# maxDeliveriesPerDay (CONTRACT §13): null is no limit; a limit of 0 would be a pause in
# disguise (pause is `enabled`), so the smallest limit is 1. The top only keeps the count
# an ordinary integer: an every-minute job makes 1,440 slots a day.
MAX_DELIVERIES_PER_DAY = 1_000_000
# Fields whose explicit null means something (no limit) rather than "not given".
NULLABLE_FIELDS = frozenset({"max_deliveries_per_day"})

# runTimeoutSeconds (CONTRACT §16.2): a minute at least, a day at most (heartbeats never
# keep a run past a day either).
MIN_RUN_TIMEOUT = 60

# retryDeadlineSeconds (CONTRACT §17): 0 is none; else from a minute (the first backoff is
# 10 s, so less would forbid almost every retry) to a week.
MIN_RETRY_DEADLINE = 60
MAX_RETRY_DEADLINE = 7 * 86400


def check_retry_deadline(value: int) -> int:
    if value != 0 and not MIN_RETRY_DEADLINE <= value <= MAX_RETRY_DEADLINE:
        raise InputError(
            "retryDeadlineSeconds",
            f"must be 0 (no deadline) or from {MIN_RETRY_DEADLINE} to {MAX_RETRY_DEADLINE}",
        )
    return value


def check_patterns(field: str, patterns: list[str]) -> list[str]:
    """Read/write patterns, checked like paths (the same rule everywhere: globs.py)."""
    if len(patterns) > MAX_PATTERNS:
        raise InputError(field, f"at most {MAX_PATTERNS} patterns")
    for pattern in patterns:
        problem = pattern_problem(pattern)
        if problem is not None:
            raise InputError(field, f"pattern {pattern!r} {problem}")
    return list(patterns)


class WebhookInput(TypedDict, total=False):
    """The `input` of a create or update webhook mutation (either kind, CONTRACT §11) as
    Ariadne hands it over: snake_case keys, each absent or null unless the SDL requires
    it, values of the SDL's types but not yet judged (`normalize` does)."""

    id: int  # update
    secret: str | None
    idempotency_key: str | None  # create
    url: str | None
    instruction: str | None
    pass_api_key: bool | None
    timeout_seconds: int | None
    max_depth: int | None
    max_retries: int | None
    enabled: bool | None
    description: str | None
    read_patterns: list[str] | None
    write_patterns: list[str] | None
    cron_schedule: str | None
    timezone: str | None
    concurrency_policy: ConcurrencyPolicy | None
    catch_up_policy: CatchUpPolicy | None
    misfire_grace_seconds: int | None
    execution_group: str | None
    attach_notes: list[str] | None
    jitter_seconds: int | None
    max_deliveries_per_day: int | None  # null: no limit
    max_cost_per_day: list[dict[str, Any]] | None  # [{unit, amount}]; []: no limit
    run_timeout_seconds: int | None  # both kinds (CONTRACT §16.2)
    include_patterns: list[str] | None
    exclude_patterns: list[str] | None
    on_create: bool | None
    on_update: bool | None
    on_remove: bool | None
    include_content: bool | None
    signature_scheme: str | None  # CONTRACT §17: HMAC | ED25519
    retry_deadline_seconds: int | None  # CONTRACT §17: 0 (none) or 60-604800


def check_schedule(config: ConfigData) -> None:
    try:
        CronSchedule.parse(config["cron_schedule"], config["timezone"])
    except CronError as exc:
        field = "timezone" if exc.field == "timezone" else "cronSchedule"
        raise InputError(field, exc.reason) from None


def check_secret(secret: str | None) -> str | None:
    if secret is None:
        return None
    problem = secret_problem(secret)
    if problem:
        raise InputError("secret", problem)
    return secret


def normalize(fields: WebhookInput, *, allow_private: bool = True, kind: str = CRON) -> ConfigData:
    """Check every given configuration field of a `kind` webhook (snake_case keys) and
    return them."""
    # Read and written by name, field after field: each value of the SDL's type for its
    # field (Any here), judged by the check that names it before it is kept.
    given: Mapping[str, Any] = fields
    out: dict[str, object] = {}
    for key in config_fields(kind):
        value = given.get(key)
        if value is None:
            if key in NULLABLE_FIELDS and key in given:
                out[key] = None  # given as null: clears the limit
            continue
        name = camel(key)
        if key == "url":
            value = check_url(value, allow_private=allow_private)
        elif key == "cron_schedule":
            value = value.strip()
            if not value:
                raise InputError(name, "must not be empty")
        elif key == "timezone":
            try:
                parse_zone(value)
            except CronError as exc:
                raise InputError(name, exc.reason) from None
        elif key == "timeout_seconds":
            value = _int_range(name, value, 1, 900)
        elif key == "max_retries":
            value = _int_range(name, value, 0, 20)
        elif key == "max_depth":
            # A change webhook with maxDepth 0 never fires (CONTRACT §11): allowed.
            value = _int_range(name, value, 0 if kind == CHANGE else 1, 100)
        elif key == "misfire_grace_seconds":
            value = _int_range(name, value, 0, 7 * 86400)
        elif key == "execution_group":
            value = check_execution_group(value)
        elif key == "jitter_seconds":
            value = _int_range(name, value, 0, MAX_JITTER_SECONDS)
        elif key == "max_deliveries_per_day":
            value = _int_range(name, value, 1, MAX_DELIVERIES_PER_DAY)
        elif key == "max_cost_per_day":
            value = check_cost_limits(value)
        elif key == "run_timeout_seconds":
            value = _int_range(name, value, MIN_RUN_TIMEOUT, MAX_RUN_SECONDS)
        elif key == "retry_deadline_seconds":
            value = check_retry_deadline(value)
        elif key == "signature_scheme":
            if value not in SCHEMES:
                raise InputError(name, f"must be one of {', '.join(SCHEMES)}")
        elif key == "instruction":
            value = _text(name, value, MAX_INSTRUCTION)
        elif key == "description":
            value = _text(name, value, MAX_DESCRIPTION)
        elif key in (
            "read_patterns",
            "write_patterns",
            "include_patterns",
            "exclude_patterns",
            "attach_notes",  # CONTRACT §13: the same glob dialect and rules
        ):
            value = check_patterns(name, value)
        out[key] = value
    if out.get("include_patterns") == []:
        raise InputError("includePatterns", "needs at least one pattern, or nothing would match")
    return cast(ConfigData, out)  # keys: config_fields(kind), values checked as above


MAX_TRIGGER_PATHS = 1000


def check_trigger_paths(paths: list[str]) -> list[str]:
    """The paths of a manual change delivery: 1 to 1,000 note paths, each once."""
    if not paths:
        raise InputError("paths", "needs at least one path")
    if len(paths) > MAX_TRIGGER_PATHS:
        raise InputError("paths", f"at most {MAX_TRIGGER_PATHS} paths")
    for path in paths:
        problem = path_problem(path)
        if problem is not None:
            raise InputError("paths", f"{path!r} {problem}")
    return sorted(set(paths))


def check_grace_seconds(grace: int | None) -> int:
    """regenerate…Secret's `graceSeconds` (CONTRACT §17): 0 to 7 days."""
    if grace is None or not 0 <= grace <= MAX_GRACE_SECONDS:
        raise InputError("graceSeconds", f"must be from 0 to {MAX_GRACE_SECONDS}")
    return grace


def check_idempotency_key(key: str | None) -> str | None:
    if key is None:
        return None
    if not key or len(key) > MAX_IDEMPOTENCY_KEY:
        raise InputError("idempotencyKey", f"must be 1 to {MAX_IDEMPOTENCY_KEY} characters")
    if not key.isprintable():
        raise InputError("idempotencyKey", "must contain printable characters only")
    return key
