from __future__ import annotations

import pytest

from cronhooks_admin.commands.validation import camel, check_schedule, normalize
from cronhooks_admin.errors import InputError


def test_camel_names() -> None:
    assert camel("cron_schedule") == "cronSchedule"
    assert camel("misfire_grace_seconds") == "misfireGraceSeconds"
    assert camel("url") == "url"


@pytest.mark.parametrize(
    ("fields", "field", "reason"),
    [
        ({"url": "ftp://x"}, "url", "scheme"),
        ({"url": "http://"}, "url", "host"),
        ({"url": "http://a b"}, "url", "spaces"),
        ({"url": "http://u:p@host/"}, "url", "credentials"),
        ({"url": "http://host:99999/"}, "url", "malformed"),
        ({"url": "http://h/" + "a" * 3000}, "url", "at most"),
        ({"cron_schedule": "  "}, "cronSchedule", "empty"),
        ({"timezone": "Nowhere/City"}, "timezone", "unknown"),
        ({"timeout_seconds": 0}, "timeoutSeconds", "1 to 900"),
        ({"timeout_seconds": 901}, "timeoutSeconds", "1 to 900"),
        ({"max_retries": 21}, "maxRetries", "0 to 20"),
        ({"max_depth": 0}, "maxDepth", "1 to"),
        ({"misfire_grace_seconds": -1}, "misfireGraceSeconds", "0 to"),
        ({"instruction": "x" * (64 * 1024 + 1)}, "instruction", "65536 bytes"),
        ({"description": "a\x00b"}, "description", "NUL"),
        ({"read_patterns": [""]}, "readPatterns", "empty"),
        ({"read_patterns": ["../*"]}, "readPatterns", ".. segment"),
        ({"read_patterns": ["x/../*"]}, "readPatterns", ".. segment"),
        ({"write_patterns": ["/abs/*"]}, "writePatterns", "relative"),
        ({"write_patterns": ["a\x00*"]}, "writePatterns", "NUL"),
        ({"write_patterns": ["x" * 513]}, "writePatterns", "512 bytes"),
        ({"write_patterns": ["a["]}, "writePatterns", "brackets"),
        ({"write_patterns": ["x"] * 101}, "writePatterns", "at most"),
    ],
)
def test_bad_fields_are_named(fields: dict[str, object], field: str, reason: str) -> None:
    with pytest.raises(InputError) as err:
        normalize(fields)
    assert err.value.field == field
    assert reason in err.value.reason


@pytest.mark.parametrize(
    ("schedule", "zone", "field"),
    [
        ("61 * * * *", "UTC", "cronSchedule"),
        ("* * *", "UTC", "cronSchedule"),
        ("@sometimes", "UTC", "cronSchedule"),
        ("0 9 * * *", "Bad/Zone", "timezone"),
    ],
)
def test_bad_schedules_are_named(schedule: str, zone: str, field: str) -> None:
    with pytest.raises(InputError) as err:
        check_schedule({"cron_schedule": schedule, "timezone": zone})
    assert err.value.field == field


def test_good_input_passes() -> None:
    out = normalize(
        {
            "url": "https://agent.example/hook",
            "cron_schedule": " 0 9 * * * ",
            "timeout_seconds": 900,
            "read_patterns": ["*"],
            "write_patterns": [],
        }
    )
    assert out["cron_schedule"] == "0 9 * * *"
    check_schedule({"cron_schedule": "@daily", "timezone": "Europe/Berlin"})


@pytest.mark.parametrize("group", ["", "reports", "team-a/nightly.v2", "ns:job_1", "g" * 100])
def test_execution_groups_that_pass(group: str) -> None:
    assert normalize({"execution_group": group}) == {"execution_group": group}


@pytest.mark.parametrize(
    ("group", "reason"),
    [
        ("g" * 101, "at most 100 characters"),
        ("two words", "only ASCII letters"),
        ("caf\u00e9", "only ASCII letters"),
        ("a\x00b", "only ASCII letters"),
        ("\ud800", "only ASCII letters"),
    ],
)
def test_bad_execution_groups_are_named(group: str, reason: str) -> None:
    with pytest.raises(InputError) as err:
        normalize({"execution_group": group})
    assert err.value.field == "executionGroup" and reason in err.value.reason
