"""Which network addresses the platform may call (the SSRF guard, CONTRACT §1/§4/§15).

Unless CRONHOOKS_ALLOW_PRIVATE_TARGETS is true, webhook and callback requests may only
reach globally routable unicast addresses. The check runs on the address a connection
is actually made to (`GuardedResolver` is the connector's resolver, so a DNS answer that
changes between a check and the connect cannot slip through), and on IP-literal URLs.

An IP literal is judged as the address the platform would connect to, in whatever
spelling the resolver accepts: `2130706433`, `0177.0.0.1`, `0x7f.1`, `127.1`, `0`,
a trailing dot, IPv4-mapped IPv6, full-width digits (the client IDNA-maps them). A
*public* IPv4 address spelled any way but the dotted quad (`134744072` for 8.8.8.8) is
refused too, with a reason naming the plain spelling: aiohttp itself refuses to connect
to the all-digit forms, while the hex forms would go through the resolver, so accepting
them would make "allowed" depend on the spelling instead of on the address.
"""

from __future__ import annotations

import ipaddress
import socket
from typing import TypedDict

from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver
from yarl import URL

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# NAT64 prefixes (RFC 6052 well-known, RFC 8215 local-use) embed an IPv4 address.
_NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))
_CGNAT = ipaddress.ip_network("100.64.0.0/10")
_METADATA = ipaddress.ip_address("169.254.169.254")


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if any(ip in net for net in _NAT64):
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]
    return None


def address_problem(ip: IPAddress) -> str | None:
    """Why `ip` is not a public unicast address, or None if it is one."""
    if isinstance(ip, ipaddress.IPv6Address):
        inner = _embedded_ipv4(ip)
        if inner is not None:
            problem = address_problem(inner)
            return None if problem is None else f"{problem} (embedded in {ip})"
    kind = (
        "the cloud metadata address"
        if ip == _METADATA
        else "a loopback address"
        if ip.is_loopback
        else "an unspecified address"
        if ip.is_unspecified
        else "a link-local address"
        if ip.is_link_local
        else "a multicast address"
        if ip.is_multicast
        else "a carrier-grade NAT address"
        if isinstance(ip, ipaddress.IPv4Address) and ip in _CGNAT
        else "a reserved address"
        if ip.is_reserved
        else "a private address"
        if ip.is_private
        else "a non-global address"
        if not ip.is_global
        else None
    )
    return None if kind is None else f"{ip} is {kind}"


_LOOPBACK_NAMES = ("localhost", "localhost.localdomain")


def client_host(host: str) -> str | None:
    """`host` as the HTTP client will send and resolve it (yarl's IDNA encoding, lower
    case), or None if the client would refuse it. Judging this form matters: `１２７.0.0.1`
    (full-width digits) is connected to as `127.0.0.1`."""
    try:
        return URL.build(scheme="http", host=host.strip("[]")).raw_host
    except (ValueError, UnicodeError):
        return None


def literal_address(host: str) -> IPAddress | None:
    """The address an (already client-encoded) host denotes without a DNS lookup, in any
    spelling the platform resolver accepts, or None if it is a name."""
    # A trailing dot only marks a name absolute: `127.0.0.1.` is judged as 127.0.0.1
    # (CONTRACT §15), whatever a resolver would make of it.
    name = host.strip("[]").rstrip(".")
    if not name:
        return None
    try:
        return ipaddress.ip_address(name)
    except ValueError:
        pass
    # The legacy IPv4 forms (decimal, octal, hex, 127.1): ask the resolver aiohttp uses
    # (getaddrinfo, which parses them with glibc's inet_aton) rather than re-implementing
    # its rules. AI_NUMERICHOST makes this pure parsing: it never sends a DNS query.
    try:
        infos = socket.getaddrinfo(name, None, flags=socket.AI_NUMERICHOST)
    except (OSError, UnicodeError, ValueError):
        return None
    return ipaddress.ip_address(infos[0][4][0])


def _is_loopback_name(name: str) -> bool:
    name = name.rstrip(".")
    return name in _LOOPBACK_NAMES or name.endswith(".localhost")


def _canonical(name: str, ip: IPAddress) -> bool:
    """Whether an IPv4 literal is the plain dotted quad (every IPv6 spelling is exact)."""
    return isinstance(ip, ipaddress.IPv6Address) or name == str(ip)


def literal_problem(host: str) -> str | None:
    """For a URL host that is an IP literal (in any spelling) or a loopback name, why it
    may not be called; None for other names (they are checked at connect time)."""
    name = client_host(host)
    if name is None:
        return None  # the client cannot send this URL at all
    if _is_loopback_name(name):
        return f"{host} is a loopback name"
    ip = literal_address(name)
    if ip is None:
        return None
    problem = address_problem(ip)
    if problem is not None:
        # Name the odd spelling, so the refusal of e.g. `0x7f.1` can be understood.
        written = isinstance(ip, ipaddress.IPv6Address) or host == str(ip)
        return problem if written else f"{problem} (written {host})"
    if not _canonical(name, ip):
        return f"{host} is a non-canonical spelling of {ip} (write {ip})"
    return None


class BlockedAddressError(OSError):
    """Raised by the guarded resolver: every address of the host is off limits."""


class GuardedResolver(AbstractResolver):
    """Resolves like aiohttp's default resolver, then drops addresses that may not be
    called; raises `BlockedAddressError` naming them if none is left."""

    def __init__(self) -> None:
        self._inner = DefaultResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        results = await self._inner.resolve(host, port, family)
        allowed, problems = [], []
        for result in results:
            problem = address_problem(ipaddress.ip_address(result["host"]))
            if problem is None:
                allowed.append(result)
            else:
                problems.append(problem)
        if not allowed:
            raise BlockedAddressError(
                f"blocked: {host} resolves to {'; '.join(problems)}"
                " (private targets are not allowed)"
            )
        return allowed

    async def close(self) -> None:
        await self._inner.close()


class ConnectorKwargs(TypedDict, total=False):
    resolver: AbstractResolver  # absent: aiohttp's own (private targets allowed)


def connector_kwargs(allow_private: bool) -> ConnectorKwargs:
    """Keyword arguments for `aiohttp.TCPConnector` that apply the policy."""
    return {} if allow_private else {"resolver": GuardedResolver()}
