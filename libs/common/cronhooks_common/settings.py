"""Typed settings read once from the environment (CONTRACT §1).

A `.env` file in the working directory may supply variables; the real environment wins.
An unknown ``CRONHOOKS_*`` variable or a malformed value raises `SettingsError` whose
message is one line naming the variable, so a service fails fast at start.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from dotenv import dotenv_values

PREFIX = "CRONHOOKS_"


class SettingsError(ValueError):
    """A configuration variable is unknown, missing or malformed."""


def _url(*schemes: str) -> Callable[[str], str]:
    def parse(raw: str) -> str:
        parts = urlsplit(raw)
        if parts.scheme not in schemes or not parts.hostname:
            raise ValueError(f"expected a {'/'.join(schemes)} URL with a host")
        return raw.rstrip("/") if parts.scheme.startswith("http") else raw

    return parse


def _int(low: int, high: int) -> Callable[[str], int]:
    def parse(raw: str) -> int:
        try:
            value = int(raw)
        except ValueError:
            raise ValueError("expected an integer") from None
        if not low <= value <= high:
            raise ValueError(f"expected an integer from {low} to {high}")
        return value

    return parse


def _bool(raw: str) -> bool:
    lowered = raw.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ValueError("expected true or false")


def _zone(raw: str) -> str:
    try:
        ZoneInfo(raw)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError("unknown IANA time zone") from None
    return raw


def _choice(*options: str) -> Callable[[str], str]:
    def parse(raw: str) -> str:
        if raw not in options:
            raise ValueError(f"expected one of {', '.join(options)}")
        return raw

    return parse


def _secret_key(raw: str) -> str:
    if len(raw) < 32:
        raise ValueError("must be at least 32 characters")
    return raw


def _previous_keys(raw: str) -> tuple[str, ...]:
    """Comma-separated older secret keys (key rotation); empty: none."""
    keys = tuple(key.strip() for key in raw.split(",") if key.strip())
    for key in keys:
        _secret_key(key)
    return keys


def _text(raw: str) -> str:
    if not raw.strip():
        raise ValueError("must not be empty")
    return raw


@dataclass(frozen=True, slots=True)
class Settings:
    """Every ``CRONHOOKS_*`` variable, parsed. Field name = variable name minus the prefix."""

    secret_key: str
    # Older keys that still open what they sealed (key rotation: `cronhooks secrets reseal`).
    secret_key_previous: tuple[str, ...] = ()
    database_url: str = "postgresql://127.0.0.1:5432/cronhooks"
    amqp_url: str = "amqp://guest:guest@127.0.0.1:5672/"
    timezone: str = "UTC"
    public_url: str = "http://127.0.0.1:8080"
    allow_private_targets: bool = False
    # Plain http:// to a non-loopback host for webhooks whose deliveries carry a token or
    # notes (CONTRACT §17): development only.
    allow_insecure_targets: bool = False
    api_token_ttl_seconds: int = 3600
    api_public_url: str = "http://127.0.0.1:8081"
    # Where admin-api reaches the importer for admin note writes (its agent API);
    # unset: the importer's port on this machine.
    importer_url: str | None = None
    auto_disable_after: int = 20
    log_format: str = "json"
    bind: str = "127.0.0.1"
    admin_port: int = 8080
    importer_port: int = 8081
    scheduler_port: int = 8082
    dispatcher_port: int = 8083
    fire_jwt_algorithm: str = "RS256"  # how fire JWTs are signed (CONTRACT §9)
    dispatch_concurrency: int = 256  # deliveries in flight at once per dispatcher process
    # Requests in flight to one destination per dispatcher process, unless setDestinationLimit
    # says otherwise for it (CONTRACT §17).
    destination_concurrency: int = 100
    # Retention (CONTRACT §12); 0 keeps forever.
    attempt_log_retention_days: int = 7
    delivery_retention_days: int = 30
    # Alerts (CONTRACT §12): POSTed, signed as deliveries are, when set.
    alert_webhook_url: str | None = None
    alert_webhook_secret: str | None = None
    alert_after: int = 3
    # Breadth of a chain (CONTRACT §11): deliveries one root causes in its trace, itself
    # included; the depth guard alone bounds how deep a chain goes, not how wide.
    max_chain_deliveries: int = 100
    dev_mode: bool = False  # the unauthenticated debug endpoints; never in production
    queue_type: str = "classic"  # of every queue the services declare

    @classmethod
    def from_env(
        cls, environ: Mapping[str, str] | None = None, env_file: str | Path | None = ".env"
    ) -> Settings:
        """Read settings from `environ` (default: os.environ) over an optional .env file."""
        merged: dict[str, str] = {}
        if env_file is not None and Path(env_file).is_file():
            merged.update({k: v for k, v in dotenv_values(env_file).items() if v is not None})
        merged.update(os.environ if environ is None else environ)
        return cls.from_mapping(merged)

    @classmethod
    def from_mapping(cls, values: Mapping[str, str]) -> Settings:
        known = {f"{PREFIX}{f.name.upper()}": f.name for f in fields(cls)}
        for name in sorted(values):
            if name.startswith(PREFIX) and name not in known:
                raise SettingsError(f"{name}: unknown variable")
        parsed: dict[str, Any] = {}
        for var, attr in known.items():
            raw = values.get(var)
            if raw is None:
                continue
            try:
                parsed[attr] = _PARSERS[attr](raw)
            except ValueError as exc:
                raise SettingsError(f"{var}: {exc} (got {raw!r})") from None
        if "secret_key" not in parsed:
            raise SettingsError(f"{PREFIX}SECRET_KEY: required, not set")
        return cls(**parsed)

    def port_of(self, service: str) -> int:
        """The HTTP port of a service by its CLI name (``admin-api``, ``scheduler``, ...)."""
        return {
            "admin-api": self.admin_port,
            "importer": self.importer_port,
            "scheduler": self.scheduler_port,
            "dispatcher": self.dispatcher_port,
        }[service]

    @property
    def importer_base_url(self) -> str:
        return self.importer_url or f"http://127.0.0.1:{self.importer_port}"

    def to_env(self) -> dict[str, str]:
        """The settings as environment variables (for child processes)."""
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None or value == ():
                continue  # unset stays unset
            if isinstance(value, tuple):
                value = ",".join(value)
            out[f"{PREFIX}{f.name.upper()}"] = (
                str(value).lower() if isinstance(value, bool) else str(value)
            )
        return out


_PARSERS: dict[str, Callable[[str], Any]] = {
    "secret_key": _secret_key,
    "secret_key_previous": _previous_keys,
    "database_url": _url("postgresql", "postgres"),
    "amqp_url": _url("amqp", "amqps"),
    "timezone": _zone,
    "public_url": _url("http", "https"),
    "allow_private_targets": _bool,
    "allow_insecure_targets": _bool,
    "api_token_ttl_seconds": _int(30, 86400),
    "api_public_url": _url("http", "https"),
    "importer_url": _url("http", "https"),
    "auto_disable_after": _int(1, 1_000_000),
    "log_format": _choice("json", "console"),
    "bind": _text,
    "admin_port": _int(1, 65535),
    "importer_port": _int(1, 65535),
    "scheduler_port": _int(1, 65535),
    "dispatcher_port": _int(1, 65535),
    "fire_jwt_algorithm": _choice("RS256", "ES256", "EdDSA"),
    "dispatch_concurrency": _int(1, 10_000),
    "destination_concurrency": _int(1, 10_000),
    "attempt_log_retention_days": _int(0, 36_500),
    "delivery_retention_days": _int(0, 36_500),
    "alert_webhook_url": _url("http", "https"),
    "alert_webhook_secret": _text,
    "alert_after": _int(1, 1_000_000),
    "max_chain_deliveries": _int(1, 1_000_000),
    "dev_mode": _bool,
    "queue_type": _choice("classic", "quorum"),
}
