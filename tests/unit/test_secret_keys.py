"""Key rotation at rest (crypto.SecretBox over MultiFernet), CRONHOOKS_SECRET_KEY_PREVIOUS,
api tokens across a rotation, and the one line a wrong key gives."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from cronhooks_cli.supervisor import _failure_lines
from cronhooks_common.crypto import SecretBox
from cronhooks_common.secret_probe import mismatch_line
from cronhooks_common.settings import Settings, SettingsError
from cronhooks_common.tokens import ApiTokens, TokenError

A = "key-a-0123456789abcdef0123456789abcdef"
B = "key-b-0123456789abcdef0123456789abcdef"
C = "key-c-0123456789abcdef0123456789abcdef"
NOW = datetime(2026, 12, 7, 6, 0, tzinfo=UTC)


def test_a_value_sealed_under_the_old_key_opens_with_it_as_previous() -> None:
    sealed = SecretBox(A).seal("whsec_x")
    assert SecretBox(B, [A]).open(sealed) == "whsec_x"
    assert SecretBox(B, [C, A]).open(sealed) == "whsec_x"
    with pytest.raises(ValueError, match="CRONHOOKS_SECRET_KEY"):
        SecretBox(B).open(sealed)


def test_sealing_always_uses_the_current_key() -> None:
    sealed = SecretBox(B, [A]).seal("whsec_y")
    assert SecretBox(B).open(sealed) == "whsec_y"
    with pytest.raises(ValueError):
        SecretBox(A).open(sealed)


def test_resealed_moves_a_value_to_the_current_key_once() -> None:
    box = SecretBox(B, [A])
    old = SecretBox(A).seal("whsec_z")
    new = box.resealed(old)
    assert new is not None and new != old
    assert SecretBox(B).open(new) == "whsec_z"
    assert box.resealed(new) is None, "a value already under the current key stays as it is"
    with pytest.raises(ValueError, match="CRONHOOKS_SECRET_KEY_PREVIOUS"):
        box.resealed(SecretBox(C).seal("whsec_z"))


def test_previous_keys_are_comma_separated_checked_and_passed_on() -> None:
    settings = Settings.from_mapping(
        {"CRONHOOKS_SECRET_KEY": B, "CRONHOOKS_SECRET_KEY_PREVIOUS": f" {A}, {C} ,"}
    )
    assert settings.secret_key_previous == (A, C)
    assert Settings.from_mapping(settings.to_env()) == settings
    plain = Settings.from_mapping({"CRONHOOKS_SECRET_KEY": B})
    assert plain.secret_key_previous == ()
    assert "CRONHOOKS_SECRET_KEY_PREVIOUS" not in plain.to_env()
    with pytest.raises(SettingsError, match=r"^CRONHOOKS_SECRET_KEY_PREVIOUS: must be at least"):
        Settings.from_mapping({"CRONHOOKS_SECRET_KEY": B, "CRONHOOKS_SECRET_KEY_PREVIOUS": "short"})


def test_box_of_settings_opens_with_the_previous_keys() -> None:
    settings = Settings.from_mapping(
        {"CRONHOOKS_SECRET_KEY": B, "CRONHOOKS_SECRET_KEY_PREVIOUS": A}
    )
    assert SecretBox.of(settings).open(SecretBox(A).seal("s")) == "s"


def test_api_tokens_minted_before_a_rotation_stay_valid_with_the_previous_key() -> None:
    old = ApiTokens(master_key=A, issuer="http://x", ttl_seconds=3600)
    token = old.mint(
        webhook_id=1, delivery_id=2, depth=0, read_patterns=[], write_patterns=[], now=NOW
    )
    rotated = ApiTokens(master_key=B, issuer="http://x", ttl_seconds=3600, previous_keys=[A])
    assert rotated.verify(token, now=NOW).subject == "webhook:1"
    with pytest.raises(TokenError, match="Signature verification failed"):
        ApiTokens(master_key=B, issuer="http://x", ttl_seconds=3600).verify(token, now=NOW)
    # Only a signature by another key moves on to the next key: other faults are answered.
    elsewhere = ApiTokens(master_key=B, issuer="http://y", ttl_seconds=3600, previous_keys=[A])
    with pytest.raises(TokenError, match="Invalid issuer"):
        elsewhere.verify(token, now=NOW)


def test_the_mismatch_line_names_the_variable_the_file_and_the_ways_out() -> None:
    line = mismatch_line("postgresql://user:pw@db.example:5433/cronhooks")
    assert "\n" not in line
    for part in (
        "CRONHOOKS_SECRET_KEY ",
        ".env",
        "CRONHOOKS_SECRET_KEY_PREVIOUS",
        "`cronhooks secrets reseal`",
        "db.example:5433/cronhooks",
    ):
        assert part in line
    assert "pw" not in line


def test_up_reports_each_failed_service_once_per_reason() -> None:
    why = "CRONHOOKS_SECRET_KEY cannot open …"
    lines = _failure_lines(
        {
            "admin-api": f"cronhooks admin-api: {why}",
            "importer": f"cronhooks importer: {why}",
            "dispatcher": "configuration error",
        }
    )
    assert lines == [
        f"cronhooks up: admin-api, importer stopped: {why}",
        "cronhooks up: dispatcher stopped: configuration error",
    ]
