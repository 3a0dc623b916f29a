"""`python -m bench [scheduler ...] [--replicas N] [--lookups]`: run benchmarks, print and
save a markdown report. `--replicas N` runs the herd suite with N processes of each
service; `retention --lookups` runs the retention suite's hot-path micro-bench instead of
its storage figure."""

from __future__ import annotations

import argparse
import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable

from bench import (
    admin_reads,
    amqp,
    changes,
    destinations,
    dispatch,
    event_compression,
    events_codec,
    herd,
    jitter,
    notes,
    retention,
    retention_lookups,
    scheduler,
    triggers,
)
from bench.common import write_report
from cronhooks_common.logs import configure_logging

Suite = Callable[[], Awaitable[list[tuple[str, str]]]]
SUITES: dict[str, Suite] = {
    "herd": herd.run,
    "destinations": destinations.run,  # the herd over 100 destinations (agent ports)
    "jitter": jitter.jitter_herd,
    "amqp": amqp.ceiling,
    "scheduler": scheduler.run,
    "dispatch": dispatch.trigger_burst,
    "notes": notes.apply_rate,
    "changes": changes.change_lag,
    "admin": admin_reads.admin_reads,
    "triggers": triggers.fire_lateness,
    "retention": retention.sizes,
    "events": events_codec.codec,
    "compression": event_compression.compression,
}


async def main(suites: list[Suite]) -> None:
    sections: list[tuple[str, str]] = []
    for suite in suites:
        sections += await suite()
    path = write_report("bench", sections)
    for title, content in sections:
        print(f"\n### {title}\n\n{content}")
    print(f"\nreport: {path}")


def chosen(args: argparse.Namespace) -> list[Suite]:
    names = args.suites or list(SUITES)
    suites = {name: SUITES[name] for name in names}
    if args.replicas != 1:
        suites["herd"] = functools.partial(herd.run, replicas=args.replicas)
    if args.lookups:
        suites["retention"] = retention_lookups.lookups
    return list(suites.values())


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("suites", nargs="*", metavar="suite", help=f"any of {sorted(SUITES)}")
    parser.add_argument(
        "--replicas",
        type=int,
        default=1,
        metavar="N",
        help="herd only: N processes of each service against one database and vhost",
    )
    parser.add_argument(
        "--lookups",
        action="store_true",
        help="retention only: one table vs delivery buckets for each hot-path statement",
    )
    args = parser.parse_args()
    unknown = set(args.suites) - set(SUITES)
    if unknown:
        parser.error(f"unknown suite(s) {sorted(unknown)}; choose from {sorted(SUITES)}")
    if args.replicas < 1:
        parser.error("--replicas must be at least 1")
    # Only the herd knows replicas; the other suites would quietly run one of each.
    if args.replicas != 1 and args.suites != ["herd"]:
        parser.error("--replicas applies to the herd suite only: python -m bench herd --replicas 2")
    if args.lookups and args.suites != ["retention"]:
        parser.error(
            "--lookups applies to the retention suite only: python -m bench retention --lookups"
        )
    configure_logging("bench", "console", level=logging.WARNING)
    asyncio.run(main(chosen(args)))
