"""Breadth of a chain (CONTRACT §11 revision 3): one root causes at most
CRONHOOKS_MAX_CHAIN_DELIVERIES deliveries in its trace (§16.3). The depth guard bounds how
deep a chain goes; two change webhooks answering each other's deliveries with writes, or
an agent pushing several batches per delivery, still fan out wide under it.

The count is `importer.chain_counts`, a row per trace upserted in the transaction that
claims the change deliveries (change_step.py), so it is exact with any number of
replicas and never waits on a read model. Reading "causes at most N deliveries in its
trace" as the root included: a chain first seen counts its root (a cron slot, a trigger,
an admin's write: requested elsewhere) as 1. Every change delivery the chain asks for
takes the next number, skipped ones too, so exactly one of them is number N + 1: that
one raises the chain's alert, once, whatever comes after. Retries are the same delivery
and never pass here; a root (no trace) is not counted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta

from cronhooks_common.events import DeliveryRequested, DeliverySkipped


@dataclass(frozen=True, slots=True)
class ChainPolicy:
    """How the matcher bounds chains: the limit, whether alerts are POSTed (the
    dispatcher's sink sends them), and how long an idle chain's count is kept."""

    limit: int = 100
    post_alerts: bool = False
    keep: timedelta = timedelta(days=30)


DEFAULT = ChainPolicy()


@dataclass(frozen=True, slots=True)
class Place:
    """A requested change delivery's number in its chain (its root is 1)."""

    number: int
    limit: int

    @property
    def allowed(self) -> bool:
        return self.number <= self.limit

    @property
    def raises_alert(self) -> bool:
        """The first delivery of the chain over the limit: the one alert's occasion."""
        return self.number == self.limit + 1


def added(traces: Sequence[str | None]) -> list[tuple[str, int]]:
    """(trace, deliveries requested in it now), for the counting upsert; roots left out."""
    return sorted(Counter(t for t in traces if t is not None).items())


def places(
    traces: Sequence[str | None], after: Mapping[str, int], limit: int
) -> list[Place | None]:
    """The place of each delivery, in request order, given each chain's count after this
    step's upsert (`after`); None for a root, which no limit holds back."""
    taken = dict(added(traces))
    next_number = {trace: after[trace] - n + 1 for trace, n in taken.items()}
    out: list[Place | None] = []
    for trace in traces:
        if trace is None:
            out.append(None)
            continue
        out.append(Place(next_number[trace], limit))
        next_number[trace] += 1
    return out


def skipped(request: DeliveryRequested, limit: int) -> DeliverySkipped:
    """What stands on the delivery's stream instead of its request."""
    return DeliverySkipped(
        **request.fields(),
        reason="chain_limit",
        skipped_count=1,
        max_chain_deliveries=limit,
        trace=request.trace,
        parent=request.parent,
    )


def chain_error(trace: str | object, limit: int) -> str:
    """The alert's `last_error`: what happened, in the words of the history's error."""
    name = trace if isinstance(trace, str) else "?"
    return f"chain_limit: trace {name} reached CRONHOOKS_MAX_CHAIN_DELIVERIES ({limit})"
