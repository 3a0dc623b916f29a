"""A run's logs (CONTRACT §16.2), grown by its heartbeats and its report under 16.1's
limits for the whole run: at most 500 of the agent's entries and 65,536 bytes of their
compact JSON, then one drop note. The pieces that judge an entry or a cost are those of an
answer's (cronhooks_common.agent_report). Pure."""

from __future__ import annotations

from dataclasses import dataclass

from cronhooks_common.agent_report import (
    MAX_LOG_BYTES,
    MAX_LOG_ENTRIES,
    MAX_NAMED,
    Warnings,
    compact,
    entry_of,
    json_type,
    sanitise_costs,
    warn,
)
from cronhooks_common.events import AgentLog, CostAmount


@dataclass(frozen=True, slots=True)
class RunLogs:
    """A run's logs so far, under 16.1's limits for the whole run: the entries shown, and
    what the limits count (columns of `shared.runs`)."""

    entries: tuple[AgentLog, ...] = ()  # the agent's, our warnings, then the drop note
    count: int = 0  # the agent's entries kept
    size: int = 0  # their compact JSON array's bytes (0: none yet)
    dropped: int = 0  # the agent's entries dropped over the limits: the last entry says so
    warnings: int = 0  # entries of ours naming malformed input (at most MAX_NAMED a run)


def drop_note(dropped: int) -> AgentLog:
    return warn(
        f"{dropped} further log entries dropped: over the "
        f"{MAX_LOG_ENTRIES}-entry / {MAX_LOG_BYTES}-byte limit"
    )


def append_to_run(
    run: RunLogs, logs: object, costs: object = None
) -> tuple[RunLogs, list[CostAmount]]:
    """`run` with the entries of `logs` (a heartbeat's or the report's) appended, and the
    valid `costs` of a report. The first entries that fit the run's limits are kept; once
    one does not, it and every later one (of this call and the next) are dropped, counted
    by one drop note, always the run's last entry. Malformed entries and costs are named as
    for an answer, up to MAX_NAMED for the whole run (its storage stays bounded however
    often an agent calls). Pure and total."""
    warnings = Warnings()
    kept: list[AgentLog] = []
    count, size, dropped = run.count, run.size or 2, 0
    if logs is not None and not isinstance(logs, list):
        warnings.add(f"logs dropped: must be an array, not {json_type(logs)}")
    elif logs is not None and run.dropped:
        dropped = len(logs)  # the run is full: nothing more fits
    elif logs is not None:
        for index, item in enumerate(logs):
            entry, reason = entry_of(item)
            if entry is None:
                warnings.add(f"logs[{index}] dropped: {reason}")
                continue
            grown = size + len(compact(entry)) + (1 if count else 0)
            if count >= MAX_LOG_ENTRIES or grown > MAX_LOG_BYTES:
                dropped = len(logs) - index
                break
            kept.append(entry)
            count, size = count + 1, grown
    kept_costs = sanitise_costs(costs, warnings) if costs is not None else []
    named = warnings.entries()[: max(MAX_NAMED - run.warnings, 0)]
    entries = list(run.entries[:-1] if run.dropped else run.entries)
    entries += kept + named
    total = run.dropped + dropped
    if total:
        entries.append(drop_note(total))
    grown_run = RunLogs(
        tuple(entries), count, size if count else 0, total, run.warnings + len(named)
    )
    return grown_run, kept_costs
