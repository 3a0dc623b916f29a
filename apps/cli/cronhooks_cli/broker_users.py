"""Read-only broker users for subscribers (CONTRACT §15 "Broker users").

The services share one RabbitMQ user (the one in CRONHOOKS_AMQP_URL). A subscriber — an
ops dashboard, another team's service — gets a user of its own that can only make and use
queues named `NAME.*` and read from `cronhooks.events`: it can bind its queues and consume,
but it cannot publish to the exchange nor touch the services' queues. (Publishing would be
harmless anyway — consumers act only on what the event store holds — but least privilege
costs nothing.) Made through the RabbitMQ management HTTP API.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from urllib.parse import quote, unquote, urlsplit

import aiohttp

from cronhooks_common.broker import EXCHANGE

READER_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")


class BrokerAdminError(RuntimeError):
    """The management API refused or could not be reached."""


@dataclass(frozen=True, slots=True)
class Management:
    """Where the management API is, as whom, and for which vhost."""

    url: str
    user: str
    password: str
    vhost: str

    @classmethod
    def from_amqp_url(cls, amqp_url: str, management_url: str | None = None) -> Management:
        parts = urlsplit(amqp_url)
        vhost = unquote(parts.path[1:]) if parts.path not in ("", "/") else "/"
        default = f"http://{parts.hostname or '127.0.0.1'}:15672"
        return cls(
            url=(management_url or default).rstrip("/"),
            user=unquote(parts.username or "guest"),
            password=unquote(parts.password or "guest"),
            vhost=vhost,
        )


def reader_permissions(name: str) -> dict[str, str]:
    own = re.escape(name) + r"\..*"
    return {
        "configure": f"^{own}$",  # declare/delete its own queues
        "write": f"^{own}$",  # bind its own queues (publishing to the exchange is refused)
        "read": f"^({re.escape(EXCHANGE)}|{own})$",  # bind from the exchange, consume its own
    }


async def add_reader(management: Management, name: str) -> str:
    """Create (or reset) the reader `name`; return its new password (shown once)."""
    if not READER_NAME.match(name):
        raise ValueError("NAME must be 1-63 lowercase letters, digits, - or _, from a letter")
    password = secrets.token_urlsafe(24)
    auth = aiohttp.BasicAuth(management.user, management.password)
    api = f"{management.url}/api"
    async with aiohttp.ClientSession(auth=auth, timeout=aiohttp.ClientTimeout(total=15)) as s:
        try:
            async with s.put(
                f"{api}/users/{quote(name, safe='')}", json={"password": password, "tags": ""}
            ) as resp:
                _check(resp.status, await resp.text(), "create the user")
            async with s.put(
                f"{api}/permissions/{quote(management.vhost, safe='')}/{quote(name, safe='')}",
                json=reader_permissions(name),
            ) as resp:
                _check(resp.status, await resp.text(), "set its permissions")
        except aiohttp.ClientError as exc:
            raise BrokerAdminError(f"management API at {management.url}: {exc}") from None
    return password


def _check(status: int, text: str, doing: str) -> None:
    if status not in (200, 201, 204):
        raise BrokerAdminError(f"could not {doing}: HTTP {status} {text[:200]}")
