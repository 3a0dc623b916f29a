"""Credentials only over TLS (CONTRACT §17). Pure.

A webhook whose deliveries carry an `api_token` or notes — `passApiKey`, non-empty
`attachNotes`, a change webhook's `includeContent` — may not target plain `http://`: the
token would let anyone on the path act as the agent, and the notes are the users' data.
Loopback is the exception (nothing leaves the machine: `make up`'s demo agent, a local
agent under development), and so is `CRONHOOKS_ALLOW_INSECURE_TARGETS=true` (development
setups with a plain-HTTP agent on another host). The rule holds whether the webhook is
enabled or not: a paused webhook is one `enabled: true` away from sending.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from cronhooks_admin.errors import InputError
from cronhooks_common.events import CHANGE

REASON = "must be https when the delivery carries a token or notes"
# The settings that decide it; an update touching none of them leaves the rule alone.
FIELDS = frozenset({"url", "pass_api_key", "attach_notes", "include_content"})


def carries_credentials(config: Mapping[str, Any], kind: str) -> bool:
    """Whether a `kind` webhook's deliveries carry an API token or notes."""
    if config.get("pass_api_key"):
        return True
    if config.get("attach_notes"):
        return True
    # A change webhook's content is on by default (CONTRACT §11).
    return kind == CHANGE and bool(config.get("include_content", True))


def is_loopback(host: str | None) -> bool:
    """127.0.0.0/8, ::1 and the name `localhost`, as written (no DNS lookup)."""
    if not host:
        return False
    name = host.strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def transport_problem(url: str, *, carries: bool, allow_insecure: bool) -> str | None:
    """Why `url` may not be used by a webhook (None: it may)."""
    if not carries or allow_insecure:
        return None
    parts = urlsplit(url)
    if parts.scheme.lower() == "https" or is_loopback(parts.hostname):
        return None
    return REASON


def check_transport(config: Mapping[str, Any], kind: str, *, allow_insecure: bool) -> None:
    """Raise BAD_USER_INPUT on `url` when the webhook `config` (its whole configuration)
    would send a token or notes over plain HTTP to another host."""
    problem = transport_problem(
        str(config.get("url", "")),
        carries=carries_credentials(config, kind),
        allow_insecure=allow_insecure,
    )
    if problem is not None:
        raise InputError("url", problem)
