"""`python -m bench [scheduler ...]`: run benchmarks, print and save a markdown report."""

from __future__ import annotations

import argparse
import asyncio
import logging

from bench import admin_reads, dispatch, herd, notes, scheduler, triggers
from bench.common import write_report
from cronhooks_common.logs import configure_logging

SUITES = {
    "herd": herd.run,
    "scheduler": scheduler.run,
    "dispatch": dispatch.trigger_burst,
    "notes": notes.apply_rate,
    "admin": admin_reads.admin_reads,
    "triggers": triggers.fire_lateness,
}


async def main(names: list[str]) -> None:
    sections: list[tuple[str, str]] = []
    for name in names:
        sections += await SUITES[name]()
    path = write_report("bench", sections)
    for title, content in sections:
        print(f"\n### {title}\n\n{content}")
    print(f"\nreport: {path}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("suites", nargs="*", metavar="suite", help=f"any of {sorted(SUITES)}")
    args = parser.parse_args()
    unknown = set(args.suites) - set(SUITES)
    if unknown:
        parser.error(f"unknown suite(s) {sorted(unknown)}; choose from {sorted(SUITES)}")
    configure_logging("bench", "console", level=logging.WARNING)
    asyncio.run(main(args.suites or list(SUITES)))
