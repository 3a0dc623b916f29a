"""What an agent's answer reports besides its outcome: its `costs` and `logs` (CONTRACT
§16.1), as they are recorded with the attempt. Pure and total: whatever an agent puts
there, the report keeps what follows the rules and names (in `warn` entries of ours,
appended to the logs) what it dropped; nothing here raises, and a bad report never fails
an attempt.

Two users: the dispatcher (the answers of attempts) and the importer (the reports and
heartbeats of asynchronous runs, §16.2, whose logs grow under the same limits: its
run_logs.py takes the pieces).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypedDict

import msgspec

from cronhooks_common import jsonfast
from cronhooks_common.events import AgentLog, CostAmount, storable, storable_json

MAX_UNITS = 32
MAX_LOG_ENTRIES = 500
MAX_LOG_BYTES = 65_536
# Our `warn` entries are not counted toward the log limits, so they need their own bound:
# a 1 MiB answer can hold ~100,000 bad entries. Beyond this many, one entry counts the rest.
MAX_NAMED = 100
UNIT = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
# RFC 3339 date-time (upper or lower case T/Z); fromisoformat then checks the values.
RFC3339 = re.compile(
    r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})", re.ASCII
)
SHOWN = 64  # characters of a bad unit name quoted in its warning


@dataclass(frozen=True, slots=True)
class AgentReport:
    costs: tuple[CostAmount, ...] = ()
    logs: tuple[AgentLog, ...] = ()  # the agent's kept entries, then our warnings

    def __bool__(self) -> bool:
        return bool(self.costs or self.logs)


NOTHING = AgentReport()


class ReportFields(TypedDict, total=False):
    costs: list[CostAmount]
    agent_logs: list[AgentLog]


def event_fields(report: AgentReport) -> ReportFields:
    """The outcome event's fields of a report: none when it is empty, so the events of
    answers without costs and logs stay as they were, byte for byte."""
    fields: ReportFields = {}
    if report.costs:
        fields["costs"] = list(report.costs)
    if report.logs:
        fields["agent_logs"] = list(report.logs)
    return fields


def to_data(report: AgentReport) -> dict[str, Any] | None:
    """A report as kept in a database row (waiting.py); None when empty."""
    return msgspec.to_builtins(event_fields(report)) if report else None


def from_data(data: object) -> AgentReport:
    """A report kept by `to_data` (None: nothing)."""
    if not isinstance(data, dict):
        return NOTHING
    costs = msgspec.convert(data.get("costs", []), list[CostAmount])
    logs = msgspec.convert(data.get("agent_logs", []), list[AgentLog])
    return AgentReport(tuple(costs), tuple(logs))


def of_answer(answer: dict[str, Any], *, storable: bool = False) -> AgentReport:
    """The report of an answer's JSON object. An answer without `costs` and `logs` costs
    two key lookups (the dispatcher's hot path). `storable`: its text was found to hold
    nothing jsonb refuses (events.storable_text), so no entry's strings are walked."""
    costs = answer.get("costs")
    logs = answer.get("logs")
    if costs is None and logs is None:
        return NOTHING
    warnings = Warnings()
    kept_logs = sanitise_logs(logs, warnings, storable) if logs is not None else []
    kept_costs = sanitise_costs(costs, warnings) if costs is not None else []
    return AgentReport(tuple(kept_costs), tuple(kept_logs + warnings.entries()))


class Warnings:
    """What was dropped, each named once, up to MAX_NAMED; then one entry counts the rest."""

    def __init__(self) -> None:
        self.named: list[str] = []
        self.unnamed = 0

    def add(self, message: str) -> None:
        if len(self.named) < MAX_NAMED:
            self.named.append(message)
        else:
            self.unnamed += 1

    def entries(self) -> list[AgentLog]:
        messages = list(self.named)
        if self.unnamed:
            messages.append(f"{self.unnamed} further invalid costs or log entries dropped")
        return [warn(m) for m in messages]


def warn(msg: str) -> AgentLog:
    return AgentLog(ts=None, level="warn", msg=msg)


def sanitise_costs(value: object, warnings: Warnings) -> list[CostAmount]:
    """The valid entries of `costs`, in the object's order, at most MAX_UNITS."""
    if not isinstance(value, dict):
        warnings.add(f"costs dropped: must be an object, not {json_type(value)}")
        return []
    kept: list[CostAmount] = []
    for unit, amount in value.items():
        reason = _bad_cost(unit, amount)
        if reason is None and len(kept) >= MAX_UNITS:
            reason = f"over the {MAX_UNITS}-unit limit"
        if reason is not None:
            warnings.add(f"costs[{_quoted(unit)}] dropped: {reason}")
            continue
        kept.append(CostAmount(unit=unit, amount=float(amount)))
    return kept


def _bad_cost(unit: str, amount: object) -> str | None:
    if UNIT.fullmatch(unit) is None:
        return "unit names are 1-64 characters of [A-Za-z0-9_.:-]"
    # bool is an int to Python, not a number to JSON; a huge int has no float
    if isinstance(amount, bool) or not isinstance(amount, (int, float)):
        return f"amount must be a number, not {json_type(amount)}"
    try:
        number = float(amount)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number) or number < 0:
        return "amount must be a finite number >= 0"
    return None


def sanitise_logs(value: object, warnings: Warnings, storable: bool = False) -> list[AgentLog]:
    """The well-formed entries of `logs`, in order, within the entry and byte limits; an
    entry saying how many did not fit ends them when some did not. `storable`: as in
    `of_answer`."""
    if not isinstance(value, list):
        warnings.add(f"logs dropped: must be an array, not {json_type(value)}")
        return []
    kept: list[AgentLog] = []
    size = 2  # the brackets of the kept entries' JSON array
    for index, item in enumerate(value):
        entry, reason = entry_of(item, storable)
        if entry is None:
            warnings.add(f"logs[{index}] dropped: {reason}")
            continue
        # ", " never: compact JSON, one comma between entries
        grown = size + len(compact(entry)) + (1 if kept else 0)
        if len(kept) >= MAX_LOG_ENTRIES or grown > MAX_LOG_BYTES:
            dropped = len(value) - index
            kept.append(
                warn(
                    f"{dropped} further log entries dropped: over the "
                    f"{MAX_LOG_ENTRIES}-entry / {MAX_LOG_BYTES}-byte limit"
                )
            )
            break
        kept.append(entry)
        size = grown
    return kept


def entry_of(item: object, storable: bool = False) -> tuple[AgentLog | None, str]:
    """One log entry as recorded, or None and why it is dropped. `storable`: its strings
    are known to be (see `of_answer`), and are not walked again."""
    if not isinstance(item, dict):
        return None, f"an entry must be an object, not {json_type(item)}"
    level, msg = item.get("level"), item.get("msg")
    if not isinstance(level, str):
        return None, "level must be a string"
    if not isinstance(msg, str):
        return None, "msg must be a string"
    try:
        ts = _timestamp(item.get("ts"))
    except ValueError:
        return None, "ts must be an RFC 3339 date-time"
    data = item.get("data")
    # jsonb (the event store) refuses NUL, lone surrogates, NaN and infinities: such an
    # entry cannot be kept
    if not (storable or (storable_json(level) and storable_json(msg) and storable_json(data))):
        return None, "it contains NUL characters or invalid Unicode"
    if not _finite(data):
        return None, "data holds NaN or an infinity, which JSON has not"
    return AgentLog(ts=ts, level=level, msg=msg, data=data), ""


def _timestamp(value: object) -> str | None:
    """`ts` as UTC ISO 8601; None when absent; ValueError when not RFC 3339."""
    if value is None:
        return None
    if not isinstance(value, str) or RFC3339.fullmatch(value) is None:
        raise ValueError(value)
    # fromisoformat checks the values (a 13th month, a leap second: ValueError)
    return datetime.fromisoformat(value.upper()).astimezone(UTC).isoformat()


def _finite(value: object) -> bool:
    """No NaN or infinity anywhere in `value` (Python's parser takes them; JSON has none).
    Recursive: what it walks was parsed under the 64-level bound."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    if isinstance(value, list):
        return all(_finite(v) for v in value)
    return True


def compact(entry: AgentLog) -> bytes:
    record = {"ts": entry.ts, "level": entry.level, "msg": entry.msg, "data": entry.data}
    return jsonfast.dumps_bytes(record)


def _quoted(unit: str) -> str:
    """A unit name as a warning shows it: quoted, cut, storable whatever it holds."""
    shown = unit if len(unit) <= SHOWN else unit[:SHOWN] + "…"
    return storable(json.dumps(shown, ensure_ascii=False))


def json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"
