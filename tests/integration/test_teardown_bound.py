"""The in-process teardown (tests/support/inprocess.py): a service's stop() that does not
return within the bound fails the test, naming it, and the rest of the teardown still
runs; a stop that is just slow does not."""

from __future__ import annotations

import asyncio

import pytest

from cronhooks_common.clock import ManualClock
from cronhooks_common.settings import Settings
from tests.support import inprocess
from tests.support.inprocess import running


async def test_a_stop_that_never_returns_fails_the_test(
    settings: Settings, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(inprocess, "STOP_WITHIN", 0.5)
    monkeypatch.setattr(inprocess, "CANCEL_WITHIN", 0.5)
    stopped: list[str] = []
    with pytest.raises(AssertionError, match=r"scheduler\.stop\(\) did not finish within 0\.5 s"):
        async with running(settings, clock, names=("scheduler", "importer")) as r:
            scheduler, importer = r.services["scheduler"], r.services["importer"]
            real_stop = scheduler.stop

            async def stuck() -> None:
                await real_stop()
                stopped.append("scheduler")
                await asyncio.Event().wait()  # as a stop awaiting a loop that lost its cancel

            scheduler.stop = stuck
            importer_stop = importer.stop

            async def importer_stops() -> None:
                await importer_stop()
                stopped.append("importer")

            importer.stop = importer_stops
    assert stopped == ["scheduler", "importer"], "the teardown went on past the stuck stop"


async def test_a_slow_stop_within_the_bound_passes(
    settings: Settings, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(inprocess, "STOP_WITHIN", 5.0)
    async with running(settings, clock, names=("scheduler",)) as r:
        real_stop = r.services["scheduler"].stop

        async def slow() -> None:
            await asyncio.sleep(0.5)
            await real_stop()

        r.services["scheduler"].stop = slow
