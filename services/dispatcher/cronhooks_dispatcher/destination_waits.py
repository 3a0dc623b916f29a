"""What waits in this dispatcher process for its destinations' limits and holds
(CONTRACT §17, destination_gates.py), as it is told outward: to Prometheus
(`cronhooks_destination_waiting`, read at scrape time) and to the other services
(destination_sync.py writes `Destinations.waiting_now` every half second).

The scheduler's watchdog fails a delivery that gets no outcome within its timeout and a
minute after its request as `abandoned`; one that waits its turn here must not look lost.
So the deliveries held here (waiting, then sent) whose request is older than LONG_WAIT
are told by id.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator, Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from prometheus_client import REGISTRY
from prometheus_client.core import GaugeMetricFamily

from cronhooks_common.destination_state import Waiting

if TYPE_CHECKING:  # destination_gates.py imports this module
    from cronhooks_dispatcher.destination_gates import Destinations

# The watchdog's deadline is a minute and more after the request, so a delivery held here
# whose request is this old is told in time; younger ones (a herd's seconds) cost no row.
LONG_WAIT = timedelta(seconds=20)


class Held:
    """Each delivery between `acquire` and `recorded`, since when (its request, on the
    service's clock) and for which destination."""

    __slots__ = ("_since",)

    def __init__(self) -> None:
        self._since: dict[int, tuple[datetime, str]] = {}

    def add(self, delivery_id: int, at: datetime, destination: str) -> None:
        self._since[delivery_id] = (at, destination)

    def drop(self, delivery_id: int) -> None:
        self._since.pop(delivery_id, None)

    def long(self, before: datetime) -> dict[str, list[int]]:
        """The deliveries held since `before` or earlier, by destination. Every one is
        looked at: they come here in no order of their requests' times (a message may sit
        in the queue), and this runs only every half second."""
        found: dict[str, list[int]] = {}
        for delivery_id, (at, destination) in self._since.items():
            if at <= before:
                found.setdefault(destination, []).append(delivery_id)
        return found


def told(waiting: Mapping[str, int], long: Mapping[str, list[int]]) -> dict[str, Waiting]:
    """Per destination: how many wait, and which deliveries are held long."""
    return {
        key: Waiting(waiting.get(key, 0), tuple(long.get(key, ())))
        for key in sorted(waiting.keys() | long.keys())
    }


class WaitingMetric:
    """`cronhooks_destination_waiting`, read from the live `Destinations` at scrape time:
    a gauge set at every wait would cost two label lookups per waiting delivery."""

    NAME = "cronhooks_destination_waiting"
    DOC = "Deliveries waiting for a destination's limits or hold, in this dispatcher process"

    def __init__(self) -> None:
        self.sources: weakref.WeakSet[Destinations] = weakref.WeakSet()

    def describe(self) -> Iterator[GaugeMetricFamily]:
        yield GaugeMetricFamily(self.NAME, self.DOC, labels=["destination"])

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(self.NAME, self.DOC, labels=["destination"])
        totals: dict[str, int] = {}
        for source in list(self.sources):
            for key, n in source.waiting().items():
                totals[key] = totals.get(key, 0) + n
        for key, n in sorted(totals.items()):
            family.add_metric([key], n)
        yield family


WAITING = WaitingMetric()
REGISTRY.register(WAITING)  # a Collector by its methods
