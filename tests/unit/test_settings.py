from __future__ import annotations

import pytest

from cronhooks_common.settings import Settings, SettingsError

KEY = {"CRONHOOKS_SECRET_KEY": "k" * 32}


def test_defaults_match_the_contract() -> None:
    s = Settings.from_mapping(KEY)
    assert s.database_url == "postgresql://127.0.0.1:5432/cronhooks"
    assert s.amqp_url == "amqp://guest:guest@127.0.0.1:5672/"
    assert s.timezone == "UTC"
    assert s.public_url == "http://127.0.0.1:8080"
    assert s.allow_private_targets is False
    assert s.api_token_ttl_seconds == 3600
    assert s.api_public_url == "http://127.0.0.1:8081"
    assert s.auto_disable_after == 20
    assert s.log_format == "json"
    assert s.bind == "127.0.0.1"
    assert (s.admin_port, s.importer_port, s.scheduler_port, s.dispatcher_port) == (
        8080,
        8081,
        8082,
        8083,
    )
    assert s.fire_jwt_algorithm == "RS256"
    assert (s.attempt_log_retention_days, s.delivery_retention_days) == (7, 30)
    assert (s.alert_webhook_url, s.alert_webhook_secret, s.alert_after) == (None, None, 3)
    assert s.max_chain_deliveries == 100
    assert s.dev_mode is False
    assert s.queue_type == "classic"


def test_secret_key_is_required() -> None:
    with pytest.raises(SettingsError, match=r"^CRONHOOKS_SECRET_KEY: required"):
        Settings.from_mapping({})


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("CRONHOOKS_ADMIN_PORT", "eighty"),
        ("CRONHOOKS_ADMIN_PORT", "70000"),
        ("CRONHOOKS_TIMEZONE", "Mars/Olympus"),
        ("CRONHOOKS_ALLOW_PRIVATE_TARGETS", "maybe"),
        ("CRONHOOKS_DATABASE_URL", "mysql://x/y"),
        ("CRONHOOKS_AMQP_URL", "http://x/"),
        ("CRONHOOKS_PUBLIC_URL", "ftp://x"),
        ("CRONHOOKS_LOG_FORMAT", "xml"),
        ("CRONHOOKS_API_TOKEN_TTL_SECONDS", "-1"),
        ("CRONHOOKS_AUTO_DISABLE_AFTER", "0"),
        ("CRONHOOKS_SECRET_KEY", "short"),
        ("CRONHOOKS_FIRE_JWT_ALGORITHM", "HS256"),
        ("CRONHOOKS_FIRE_JWT_ALGORITHM", "rs256"),
        ("CRONHOOKS_FIRE_JWT_ALGORITHM", "none"),
        ("CRONHOOKS_FIRE_JWT_ALGORITHM", ""),
        ("CRONHOOKS_ATTEMPT_LOG_RETENTION_DAYS", "-1"),
        ("CRONHOOKS_DELIVERY_RETENTION_DAYS", "a month"),
        ("CRONHOOKS_ALERT_WEBHOOK_URL", "slack"),
        ("CRONHOOKS_ALERT_AFTER", "0"),
        ("CRONHOOKS_MAX_CHAIN_DELIVERIES", "0"),
        ("CRONHOOKS_MAX_CHAIN_DELIVERIES", "many"),
        ("CRONHOOKS_DEV_MODE", "sometimes"),
        ("CRONHOOKS_QUEUE_TYPE", "stream"),
    ],
)
def test_malformed_values_fail_with_one_line_naming_the_variable(name: str, value: str) -> None:
    with pytest.raises(SettingsError) as err:
        Settings.from_mapping({**KEY, name: value})
    message = str(err.value)
    assert message.startswith(f"{name}: ")
    assert "\n" not in message


def test_unknown_cronhooks_variable_fails() -> None:
    with pytest.raises(SettingsError, match=r"^CRONHOOKS_TIMEZON: unknown variable$"):
        Settings.from_mapping({**KEY, "CRONHOOKS_TIMEZON": "UTC"})


def test_other_variables_are_ignored() -> None:
    assert Settings.from_mapping({**KEY, "PATH": "/bin", "HOME": "/root"}).timezone == "UTC"


def test_env_file_supplies_values_and_environment_wins(tmp_path) -> None:  # type: ignore[no-untyped-def]
    env_file = tmp_path / ".env"
    env_file.write_text(
        "CRONHOOKS_SECRET_KEY=" + "f" * 40 + "\nCRONHOOKS_TIMEZONE=Europe/Berlin\n"
        "CRONHOOKS_ADMIN_PORT=9000\n"
    )
    s = Settings.from_env({"CRONHOOKS_ADMIN_PORT": "9100"}, env_file)
    assert s.secret_key == "f" * 40
    assert s.timezone == "Europe/Berlin"
    assert s.admin_port == 9100


def test_unknown_variable_in_env_file_fails(tmp_path) -> None:  # type: ignore[no-untyped-def]
    env_file = tmp_path / ".env"
    env_file.write_text("CRONHOOKS_NOPE=1\n")
    with pytest.raises(SettingsError, match="CRONHOOKS_NOPE"):
        Settings.from_env(KEY, env_file)


def test_round_trip_through_environment() -> None:
    s = Settings.from_mapping({**KEY, "CRONHOOKS_ALLOW_PRIVATE_TARGETS": "yes"})
    assert Settings.from_mapping(s.to_env()) == s


@pytest.mark.parametrize("algorithm", ["RS256", "ES256", "EdDSA"])
def test_fire_jwt_algorithm_takes_the_three_the_signer_knows(algorithm: str) -> None:
    from cronhooks_common.keys import ALGORITHMS, DEFAULT_ALGORITHM

    s = Settings.from_mapping({**KEY, "CRONHOOKS_FIRE_JWT_ALGORITHM": algorithm})
    assert s.fire_jwt_algorithm == algorithm
    assert algorithm in ALGORITHMS
    assert Settings.from_mapping(KEY).fire_jwt_algorithm == DEFAULT_ALGORITHM


def test_a_bad_fire_jwt_algorithm_names_the_variable_and_the_choices() -> None:
    with pytest.raises(SettingsError) as err:
        Settings.from_mapping({**KEY, "CRONHOOKS_FIRE_JWT_ALGORITHM": "HS256"})
    assert str(err.value) == (
        "CRONHOOKS_FIRE_JWT_ALGORITHM: expected one of RS256, ES256, EdDSA (got 'HS256')"
    )


def test_the_chain_limit_is_read_from_the_environment() -> None:
    assert (
        Settings.from_mapping({**KEY, "CRONHOOKS_MAX_CHAIN_DELIVERIES": "5"}).max_chain_deliveries
        == 5
    )
