"""Which network addresses the platform may call (the SSRF guard, CONTRACT §1/§4).

Unless CRONHOOKS_ALLOW_PRIVATE_TARGETS is true, webhook and callback requests may only
reach globally routable unicast addresses. The check runs on the address a connection
is actually made to (`GuardedResolver` is the connector's resolver, so a DNS answer that
changes between a check and the connect cannot slip through), and on IP-literal URLs.
"""

from __future__ import annotations

import ipaddress
import socket
from typing import Any

from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver

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


def literal_problem(host: str) -> str | None:
    """For a URL host that is an IP literal (or `localhost`), why it may not be called."""
    if host.lower().rstrip(".") in ("localhost", "localhost.localdomain") or host.lower().endswith(
        ".localhost"
    ):
        return f"{host} is a loopback name"
    try:
        ip = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None
    return address_problem(ip)


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


def connector_kwargs(allow_private: bool) -> dict[str, Any]:
    """Keyword arguments for `aiohttp.TCPConnector` that apply the policy."""
    return {} if allow_private else {"resolver": GuardedResolver()}
