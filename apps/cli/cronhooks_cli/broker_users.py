"""Read-only broker users for subscribers (CONTRACT §15 "Broker users").

The services share one RabbitMQ user (the one in CRONHOOKS_AMQP_URL). A subscriber — an
ops dashboard, another team's service — gets a user of its own that can only make and use
queues named `NAME.*` and read from `cronhooks.events`: it can bind its queues and consume,
but it cannot publish to the exchange nor touch the services' queues. (Publishing would be
harmless anyway — consumers act only on what the event store holds — but least privilege
costs nothing.) Its queues are bounded by a policy (`DEFAULT_MAX_LENGTH` messages, the
oldest dropped first), so a forgotten reader cannot fill the broker; `remove-reader`
deletes the user, its queues and the policy. Made through the RabbitMQ management HTTP API.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from urllib.parse import quote, unquote, urlsplit

import aiohttp

from cronhooks_common.broker import EXCHANGE

READER_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
# A reader named like the services' queue prefix would be granted their queues.
RESERVED = frozenset({"cronhooks"})
# What a reader's queue keeps at most: past it the oldest message is dropped, so a reader
# that stopped consuming costs the broker a bounded amount.
DEFAULT_MAX_LENGTH = 10_000


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


def check_name(name: str) -> None:
    if not READER_NAME.match(name) or name in RESERVED:
        raise ValueError(
            "NAME must be 1-63 lowercase letters, digits, - or _, from a letter"
            f" (not {', '.join(sorted(RESERVED))})"
        )


def policy_name(name: str) -> str:
    return f"cronhooks-reader-{name}"


def reader_policy(name: str, max_length: int) -> dict[str, object]:
    """The policy that bounds every queue `NAME.*`: a length limit, dropping the oldest."""
    return {
        "pattern": f"^{re.escape(name)}\\.",
        "apply-to": "queues",
        "priority": 100,
        "definition": {"max-length": max_length, "overflow": "drop-head"},
    }


def _session(management: Management) -> aiohttp.ClientSession:
    auth = aiohttp.BasicAuth(management.user, management.password)
    return aiohttp.ClientSession(auth=auth, timeout=aiohttp.ClientTimeout(total=15))


async def add_reader(
    management: Management, name: str, *, max_length: int = DEFAULT_MAX_LENGTH
) -> str:
    """Create (or reset) the reader `name` with its queues bounded to `max_length`
    messages; return its new password (shown once)."""
    check_name(name)
    if max_length < 1:
        raise ValueError("--max-length must be at least 1")
    password = secrets.token_urlsafe(24)
    api = f"{management.url}/api"
    vhost, user = quote(management.vhost, safe=""), quote(name, safe="")
    async with _session(management) as s:
        try:
            async with s.put(f"{api}/users/{user}", json={"password": password, "tags": ""}) as r:
                _check(r.status, await r.text(), "create the user")
            async with s.put(
                f"{api}/permissions/{vhost}/{user}", json=reader_permissions(name)
            ) as r:
                _check(r.status, await r.text(), "set its permissions")
            async with s.put(
                f"{api}/policies/{vhost}/{quote(policy_name(name), safe='')}",
                json=reader_policy(name, max_length),
            ) as r:
                _check(r.status, await r.text(), "bound its queues' length")
        except aiohttp.ClientError as exc:
            raise BrokerAdminError(f"management API at {management.url}: {exc}") from None
    return password


async def remove_reader(management: Management, name: str) -> list[str]:
    """Delete the reader `name`, its queues `NAME.*` and their policy; return the queues
    deleted. Deleting a reader that is not there is not an error."""
    check_name(name)
    api = f"{management.url}/api"
    vhost = quote(management.vhost, safe="")
    deleted = []
    async with _session(management) as s:
        try:
            async with s.delete(f"{api}/users/{quote(name, safe='')}") as r:
                _check(r.status, await r.text(), "delete the user", missing_ok=True)
            async with s.get(f"{api}/queues/{vhost}", params={"columns": "name"}) as r:
                _check(r.status, await r.text(), "list the queues")
                queues = [q["name"] for q in await r.json()]
            for queue in sorted(q for q in queues if q.startswith(f"{name}.")):
                async with s.delete(f"{api}/queues/{vhost}/{quote(queue, safe='')}") as r:
                    _check(r.status, await r.text(), f"delete queue {queue}", missing_ok=True)
                deleted.append(queue)
            async with s.delete(f"{api}/policies/{vhost}/{quote(policy_name(name), safe='')}") as r:
                _check(r.status, await r.text(), "delete its policy", missing_ok=True)
        except aiohttp.ClientError as exc:
            raise BrokerAdminError(f"management API at {management.url}: {exc}") from None
    return deleted


def _check(status: int, text: str, doing: str, *, missing_ok: bool = False) -> None:
    if status == 404 and missing_ok:
        return
    if status not in (200, 201, 204):
        raise BrokerAdminError(f"could not {doing}: HTTP {status} {text[:200]}")
