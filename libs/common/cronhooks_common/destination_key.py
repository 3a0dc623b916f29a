"""The destination of a URL (CONTRACT §17): `scheme://host:port`, lower case, the default
port written out. Pure; used by the dispatcher's limiter (one key per request: cached by
URL, `destination_of`) and by admin-api's setDestinationLimit (an admin may name a
destination by any URL to it, `https://Example.com/hook` included).

Host spellings that reach the same place by construction are one destination: the case
of a name, a trailing dot, an IPv6 address written long or short (always in brackets).
Names are not resolved: two names of one host are two destinations, as a limit is about
what the operator named.
"""

from __future__ import annotations

import functools
import ipaddress
from urllib.parse import urlsplit

DEFAULT_PORTS = {"http": 80, "https": 443}
MAX_LENGTH = 300  # a host name is at most 253 characters; with scheme and port, less than this


class DestinationError(ValueError):
    """Not an http(s) URL with a host: the reason, for BAD_USER_INPUT."""


def destination(url: str) -> str:
    """`scheme://host:port` of `url`; DestinationError when it has none."""
    if len(url) > 4096:
        raise DestinationError("must be an http or https URL")
    try:
        parts = urlsplit(url.strip())
        port = parts.port  # ValueError when not a number in 0-65535
        host = parts.hostname  # lower case, without the brackets of an IPv6 literal
    except ValueError as exc:
        raise DestinationError("must be an http or https URL with a valid port") from exc
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS:
        raise DestinationError("must be an http or https URL")
    if not host:
        raise DestinationError("must name a host")
    if port == 0:
        raise DestinationError("must be an http or https URL with a valid port")
    key = f"{scheme}://{_host(host)}:{port or DEFAULT_PORTS[scheme]}"
    if len(key) > MAX_LENGTH:
        raise DestinationError("host name is too long")
    return key


def _host(host: str) -> str:
    if ":" in host:  # only an IPv6 literal has a colon once urlsplit took the port off
        try:
            return f"[{ipaddress.IPv6Address(host.split('%', 1)[0]).compressed}]"
        except ValueError as exc:
            raise DestinationError("must name a valid IPv6 address") from exc
    return host.rstrip(".") or host


@functools.lru_cache(maxsize=50_000)
def destination_of(url: str) -> str:
    """`destination(url)` for the dispatcher's hot path: a webhook's URL is parsed once,
    not per delivery. A URL with no destination (stored before it was checked) is its own
    key, so it is limited like any other and never raises here."""
    try:
        return destination(url)
    except DestinationError:
        return url
