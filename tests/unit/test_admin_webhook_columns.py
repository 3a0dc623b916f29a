"""admin-api's read model takes a webhook's settings from one list (projections/queries.py
CONFIG_COLUMNS): it covers every field of the event class, and the statements that write
admin.webhooks name each column once."""

from __future__ import annotations

import re

import msgspec

from cronhooks_admin.projections import queries
from cronhooks_admin.projections.webhooks import config_values
from cronhooks_common.events import WebhookConfig


def _fields() -> list[str]:
    return [f.name for f in msgspec.structs.fields(WebhookConfig)]


def test_the_read_model_has_a_column_for_every_webhook_setting() -> None:
    assert sorted(queries.CONFIG_COLUMNS) == sorted(_fields())


def test_insert_and_update_write_every_setting_once() -> None:
    for column in queries.CONFIG_COLUMNS:
        insert_columns = queries.INSERT_WEBHOOK.split("values")[0]
        assert insert_columns.count(f" {column},") + insert_columns.count(f" {column})") == 1
        assert len(re.findall(rf"\b{column} = \$", queries.UPDATE_WEBHOOK)) == 1


def test_a_setting_the_event_lacks_gets_the_columns_value_for_none() -> None:
    cron = WebhookConfig(
        url="https://agent.example/hook",
        instruction="do",
        pass_api_key=False,
        timeout_seconds=30,
        max_depth=1,
        max_retries=0,
        enabled=True,
        description="",
        read_patterns=[],
        write_patterns=[],
        cron_schedule="@daily",
        timezone="UTC",
        concurrency_policy="ALLOW",
        catch_up_policy="SKIP",
        misfire_grace_seconds=60,
    )
    values = dict(zip(queries.CONFIG_COLUMNS, config_values(cron), strict=True))
    assert values["cron_schedule"] == "@daily"
    # written before they existed: no group, no notes, no jitter, no limit
    assert values["execution_group"] == ""
    assert values["attach_notes"] == []
    assert values["jitter_seconds"] == 0
    assert values["max_deliveries_per_day"] is None
    # the other kind's settings
    assert values["include_patterns"] is None and values["on_create"] is None
