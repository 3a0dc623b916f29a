from __future__ import annotations

import pytest

from cronhooks_dispatcher.outcome import classify
from cronhooks_dispatcher.sender import HttpResult


def result(status: int | None, body: bytes = b"", error: str | None = None) -> HttpResult:
    return HttpResult(status, body, error, 5)


@pytest.mark.parametrize(
    ("res", "succeeded", "error_part"),
    [
        (result(202, b'{"status":"accepted"}'), True, None),
        (result(200, b""), True, None),
        (result(200, b"<html>ok</html>"), True, None),
        (result(204), True, None),
        (result(200, b'{"status":"ok","message":"done"}'), True, None),
        (result(200, b'{"status":"error","message":"no data"}'), False, "no data"),
        (result(500, b"boom"), False, "HTTP 500: boom"),
        (result(404), False, "HTTP 404"),
        (result(302), False, "redirects are not followed"),
        (result(410), False, "410"),
        (result(None, error="timeout after 60 s"), False, "timeout"),
        (result(200, b"x" * 10, error="response body over 1 MiB"), False, "1 MiB"),
    ],
)
def test_classification(res: HttpResult, succeeded: bool, error_part: str | None) -> None:
    outcome = classify(res)
    assert outcome.succeeded is succeeded
    if error_part is None:
        assert outcome.error is None
    else:
        assert outcome.error is not None and error_part in outcome.error


def test_410_asks_to_disable() -> None:
    assert classify(result(410)).gone


def test_long_error_bodies_are_excerpted() -> None:
    outcome = classify(result(500, b"e" * 5000))
    assert outcome.error is not None and len(outcome.error) < 300


def test_changes_are_passed_on() -> None:
    outcome = classify(result(200, b'{"status":"ok","changes":[{"path":"a","content":"b"}]}'))
    assert outcome.succeeded and outcome.changes == [{"path": "a", "content": "b"}]


@pytest.mark.parametrize(
    ("body", "succeeded"),
    [
        ('{"status":"ok","changes":[{"path":"a.md","content":"x\\u0000y"}]}', False),
        ('{"status":"ok","message":"\\ud800"}', False),
        ('{"status":"ok","x\\u0000":1}', False),
        # The six characters \u0000 as text (JSON escapes' docs) are fine to store.
        ('{"status":"ok","changes":[{"path":"a.md","content":"write \\\\u0000"}]}', True),
    ],
)
def test_answers_postgres_cannot_store_fail_and_others_pass(body: str, succeeded: bool) -> None:
    outcome = classify(result(200, body.encode()))
    assert outcome.succeeded is succeeded
    if not succeeded:
        assert "NUL characters or invalid Unicode" in str(outcome.error)


@pytest.mark.parametrize("levels", [65, 500, 30_000])
def test_an_answer_nested_too_deep_is_a_failed_attempt_with_its_reason(levels: int) -> None:
    body = b'{"status":"ok","x":' + b"[" * (levels - 1) + b"]" * (levels - 1) + b"}"
    outcome = classify(result(200, body))
    assert not outcome.succeeded
    assert outcome.error == "answer nested deeper than 64 levels"


def test_an_answer_of_64_levels_is_judged_as_usual() -> None:
    body = b'{"status":"ok","x":' + b"[" * 63 + b"]" * 63 + b"}"
    assert classify(result(200, body)).succeeded


@pytest.mark.parametrize(
    "body",
    [
        b'{"status":"ok","message":"\\u0000"}',
        # a surrogate in (CESU-style) UTF-8, which Python's parser takes as it is
        b'{"status":"ok","message":"\xed\xa0\x80"}',
        # UTF-16, where a byte search for the escape cannot see it
        '{"status":"ok","message":"\\u0000"}'.encode("utf-16"),
    ],
)
def test_what_jsonb_refuses_is_found_however_the_answer_writes_it(body: bytes) -> None:
    # The fast path (events.storable_text) passes only texts that cannot hold it.
    outcome = classify(result(200, body))
    assert not outcome.succeeded
    assert "NUL characters or invalid Unicode" in str(outcome.error)


@pytest.mark.parametrize(
    ("logs", "kept"),
    [
        ('[{"level":"info","msg":"plain"}]', ["plain"]),
        ('[{"level":"info","msg":"a\\u0000b"},{"level":"info","msg":"ok"}]', ["ok"]),
        ('[{"level":"info","msg":"\\ud800"},{"level":"info","msg":"ok"}]', ["ok"]),
        ('[{"level":"info","msg":"Hangul \xed\x95\x9c"}]', ["Hangul \ud55c"]),
    ],
)
def test_a_202_reports_its_storable_log_entries_only(logs: str, kept: list[str]) -> None:
    body = b'{"status":"accepted","logs":' + logs.encode("latin-1") + b"}"
    report = classify(result(202, body)).report
    assert [entry.msg for entry in report.logs if entry.level != "warn"] == kept
