"""runTimeoutSeconds (CONTRACT §16.2), the pure part: 60 to 86400 on both kinds, named by
its GraphQL name when out of range, a setting of both kinds' configurations, carried by
the target a delivery is sent with."""

from __future__ import annotations

import pytest

from cronhooks_admin.commands.validation import normalize
from cronhooks_admin.errors import InputError
from cronhooks_common.events import CHANGE, CRON, RUN_TIMEOUT_SECONDS
from cronhooks_common.webhooks import config_fields, target_of


@pytest.mark.parametrize("kind", [CRON, CHANGE])
@pytest.mark.parametrize("value", [60, 3600, 86400])
def test_run_timeouts_that_pass(kind: str, value: int) -> None:
    assert normalize({"run_timeout_seconds": value}, kind=kind) == {"run_timeout_seconds": value}


@pytest.mark.parametrize("kind", [CRON, CHANGE])
@pytest.mark.parametrize("value", [-1, 0, 59, 86401, 10**12])
def test_bad_run_timeouts_are_named(kind: str, value: int) -> None:
    with pytest.raises(InputError) as err:
        normalize({"run_timeout_seconds": value}, kind=kind)
    assert err.value.field == "runTimeoutSeconds" and "from 60 to 86400" in err.value.reason


def test_both_kinds_keep_it_and_their_targets_carry_it() -> None:
    assert "run_timeout_seconds" in config_fields(CRON)
    assert "run_timeout_seconds" in config_fields(CHANGE)
    config = {
        "url": "https://agent.example/hook",
        "instruction": "",
        "timeout_seconds": 60,
        "pass_api_key": True,
        "read_patterns": ["*"],
        "write_patterns": [],
        "max_depth": 1,
        "max_retries": 0,
        "run_timeout_seconds": 120,
    }
    assert target_of(config).run_timeout_seconds == 120
    assert RUN_TIMEOUT_SECONDS == 3600  # the default of the SDL and of configs without it
