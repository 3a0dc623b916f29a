"""A test's report crosses from a pytest -n worker as UTF-8: a lone surrogate the fuzz
tests sent (and a service logged) must not crash the worker (tests/conftest.py)."""

from __future__ import annotations

from tests.conftest import utf8_safe


def test_lone_surrogates_are_escaped_and_everything_else_is_kept() -> None:
    report = {
        "sections": [("Captured log call", "WARNING refused \ud800 here")],
        "longrepr": None,
        "nodeid": "tests/x.py::t[ü✓]",
        "duration": 0.5,
    }
    safe = utf8_safe(report)
    assert safe == {
        "sections": [("Captured log call", "WARNING refused \\ud800 here")],
        "longrepr": None,
        "nodeid": "tests/x.py::t[ü✓]",
        "duration": 0.5,
    }
    assert isinstance(safe, dict)
    str(safe).encode("utf-8")  # what execnet does with every string
