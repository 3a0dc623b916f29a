"""`make bench` runs `python -m bench`, which imports every suite: a suite that no longer
imports (a renamed name of the code it measures) would fail only there, so it is checked
here."""

from __future__ import annotations

import importlib


def test_every_bench_suite_imports() -> None:
    main = importlib.import_module("bench.__main__")
    assert "compression" in main.SUITES and "herd" in main.SUITES
