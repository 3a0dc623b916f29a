"""The SSRF policy: which addresses may be called when private targets are not allowed."""

from __future__ import annotations

import ipaddress

import pytest

from cronhooks_common.targets import GuardedResolver, address_problem, literal_problem

BLOCKED = [
    ("127.0.0.1", "loopback"),
    ("127.9.9.9", "loopback"),
    ("10.0.0.1", "private"),
    ("172.16.5.4", "private"),
    ("192.168.0.1", "private"),
    ("169.254.169.254", "metadata"),
    ("169.254.10.1", "link-local"),
    ("100.64.1.1", "carrier-grade NAT"),
    ("0.0.0.0", "unspecified"),
    ("224.0.0.251", "multicast"),
    ("239.1.2.3", "multicast"),
    ("240.0.0.1", "reserved"),
    ("255.255.255.255", "reserved"),
    ("198.18.0.1", "private"),
    ("192.0.2.7", "private"),
    ("::1", "loopback"),
    ("::", "unspecified"),
    ("fe80::1", "link-local"),
    ("fc00::1", "private"),
    ("fd12:3456::1", "private"),
    ("ff02::1", "multicast"),
    ("::ffff:127.0.0.1", "loopback"),
    ("::ffff:10.1.1.1", "private"),
    ("::ffff:169.254.169.254", "metadata"),
    ("64:ff9b::7f00:1", "loopback"),
    ("64:ff9b::a9fe:a9fe", "metadata"),
    ("64:ff9b:1::a00:1", "private"),
    ("2002:a9fe:a9fe::", "metadata"),
]


@pytest.mark.parametrize(("address", "kind"), BLOCKED)
def test_blocked_addresses_are_named(address: str, kind: str) -> None:
    problem = address_problem(ipaddress.ip_address(address))
    assert problem is not None and kind in problem


@pytest.mark.parametrize(
    "address", ["8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "::ffff:8.8.4.4"]
)
def test_public_addresses_pass(address: str) -> None:
    assert address_problem(ipaddress.ip_address(address)) is None


@pytest.mark.parametrize("host", ["localhost", "LOCALHOST.", "api.localhost", "[::1]", "127.0.0.1"])
def test_literal_and_loopback_names(host: str) -> None:
    assert literal_problem(host) is not None


def test_ordinary_names_are_left_to_connect_time() -> None:
    assert literal_problem("agent.example.com") is None


async def test_guarded_resolver_refuses_a_name_resolving_to_loopback() -> None:
    resolver = GuardedResolver()
    try:
        with pytest.raises(
            OSError, match=r"blocked: localhost resolves to 127\.0\.0\.1 is a loopback"
        ):
            await resolver.resolve("localhost", 80)
    finally:
        await resolver.close()
