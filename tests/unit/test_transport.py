"""Credentials only over TLS (CONTRACT §17): the accept/refuse table of the pure rule."""

from __future__ import annotations

import pytest

from cronhooks_admin.commands.transport import (
    REASON,
    carries_credentials,
    check_transport,
    is_loopback,
    transport_problem,
)
from cronhooks_admin.errors import InputError
from cronhooks_common.events import CHANGE, CRON
from cronhooks_common.settings import Settings

KEY = {"CRONHOOKS_SECRET_KEY": "k" * 32}


@pytest.mark.parametrize(
    ("config", "kind", "carries"),
    [
        ({}, CRON, False),
        ({"pass_api_key": False, "attach_notes": []}, CRON, False),
        ({"pass_api_key": True}, CRON, True),
        ({"attach_notes": ["notes/*"]}, CRON, True),
        ({"include_content": True}, CRON, False),  # not a cron setting
        ({"include_content": True, "pass_api_key": False}, CHANGE, True),
        ({"include_content": False, "pass_api_key": False}, CHANGE, False),
        ({"include_content": False, "pass_api_key": True}, CHANGE, True),
        ({}, CHANGE, True),  # includeContent defaults to true
    ],
)
def test_what_carries_a_token_or_notes(config: dict[str, object], kind: str, carries: bool) -> None:
    assert carries_credentials(config, kind) is carries


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("LOCALHOST", True),
        ("agent.example", False),
        ("10.0.0.1", False),
        ("192.168.1.5", False),
        ("128.0.0.1", False),
        ("localhost.example", False),
        ("::ffff:127.0.0.1", False),  # the rule names 127.0.0.0/8, ::1 and localhost only
        ("", False),
        (None, False),
    ],
)
def test_loopback_is_127_8_and_1_and_localhost(host: str | None, loopback: bool) -> None:
    assert is_loopback(host) is loopback


@pytest.mark.parametrize(
    ("url", "carries", "allow_insecure", "refused"),
    [
        ("http://agent.example/hook", True, False, True),
        ("HTTP://agent.example/hook", True, False, True),
        ("http://10.0.0.1:8090/hook", True, False, True),
        ("http://agent.example/hook", False, False, False),
        ("http://agent.example/hook", True, True, False),
        ("https://agent.example/hook", True, False, False),
        ("http://127.0.0.1:8090/webhook", True, False, False),
        ("http://127.1.2.3/hook", True, False, False),
        ("http://[::1]:8090/hook", True, False, False),
        ("http://localhost:8090/hook", True, False, False),
    ],
)
def test_accept_refuse_table(url: str, carries: bool, allow_insecure: bool, refused: bool) -> None:
    problem = transport_problem(url, carries=carries, allow_insecure=allow_insecure)
    assert problem == (REASON if refused else None)


def test_the_refusal_names_url_with_the_contract_reason() -> None:
    with pytest.raises(InputError) as caught:
        check_transport(
            {"url": "http://agent.example/", "pass_api_key": True}, CRON, allow_insecure=False
        )
    assert caught.value.field == "url"
    assert caught.value.reason == "must be https when the delivery carries a token or notes"
    check_transport(
        {"url": "http://agent.example/", "pass_api_key": True}, CRON, allow_insecure=True
    )


def test_the_setting_is_typed_and_off_by_default() -> None:
    assert Settings.from_mapping(KEY).allow_insecure_targets is False
    on = Settings.from_mapping({**KEY, "CRONHOOKS_ALLOW_INSECURE_TARGETS": "true"})
    assert on.allow_insecure_targets is True
    with pytest.raises(ValueError, match="CRONHOOKS_ALLOW_INSECURE_TARGETS"):
        Settings.from_mapping({**KEY, "CRONHOOKS_ALLOW_INSECURE_TARGETS": "maybe"})
