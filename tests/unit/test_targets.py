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


# Every spelling of an address the resolver accepts is judged as that address (§15).
ODD_LITERALS = [
    ("2852039166", "169.254.169.254 is the cloud metadata address"),  # decimal
    ("0251.0376.0251.0376", "169.254.169.254 is the cloud metadata address"),  # octal
    ("167772161", "10.0.0.1 is a private address"),
    ("2130706433", "127.0.0.1 is a loopback address"),
    ("127.1", "127.0.0.1 is a loopback address"),  # short form
    ("0", "0.0.0.0 is an unspecified address"),
    ("127.0.0.1.", "127.0.0.1 is a loopback address"),  # trailing dot
    ("0x7f.1", "127.0.0.1 is a loopback address"),  # hex, short
    ("0X7F.0.0.1", "127.0.0.1 is a loopback address"),
    ("0x7f000001", "127.0.0.1 is a loopback address"),
    ("017700000001", "127.0.0.1 is a loopback address"),
    ("0177.0.0.01", "127.0.0.1 is a loopback address"),
    ("10.1", "10.0.0.1 is a private address"),
    ("192.168.257", "192.168.1.1 is a private address"),
    ("１２７.0.0.1", "127.0.0.1 is a loopback address"),  # full-width digits (IDNA-mapped)
    ("127。0。0。1", "127.0.0.1 is a loopback address"),  # ideographic full stops
]


@pytest.mark.parametrize(("host", "problem"), ODD_LITERALS)
def test_odd_ipv4_spellings_are_judged_as_their_address(host: str, problem: str) -> None:
    assert literal_problem(host) == f"{problem} (written {host})"


@pytest.mark.parametrize(
    "host", ["[::ffff:127.0.0.1]", "::ffff:127.0.0.1", "[::ffff:7f00:1]", "[::FFFF:7F00:1]"]
)
def test_ipv4_mapped_loopback_is_refused_in_any_ipv6_spelling(host: str) -> None:
    assert literal_problem(host) == "127.0.0.1 is a loopback address (embedded in ::ffff:7f00:1)"


@pytest.mark.parametrize(
    "host", ["localhost.", "localhost..", "api.localhost.", "LocalHost.", "ⓛocalhost"]
)
def test_loopback_names_in_any_spelling(host: str) -> None:
    assert literal_problem(host) == f"{host} is a loopback name"


@pytest.mark.parametrize(
    ("host", "address"),
    [
        ("134744072", "8.8.8.8"),
        ("0x8080808", "8.8.8.8"),
        ("010.010.010.010", "8.8.8.8"),
        ("8.8.2056", "8.8.8.8"),
        ("8.8.8.8.", "8.8.8.8"),
        ("0x01.1.1.1", "1.1.1.1"),
    ],
)
def test_public_addresses_in_odd_spellings_are_refused_naming_the_plain_one(
    host: str, address: str
) -> None:
    # One rule whatever the spelling (aiohttp would refuse the all-digit ones at connect
    # time but resolve the hex ones): only the dotted quad is accepted.
    assert (
        literal_problem(host)
        == f"{host} is a non-canonical spelling of {address} (write {address})"
    )


@pytest.mark.parametrize("host", ["8.8.8.8", "1.1.1.1", "[2606:4700:4700::1111]", "８.８.８.８"])
def test_public_addresses_as_the_client_connects_to_them_pass(host: str) -> None:
    assert literal_problem(host) is None


@pytest.mark.parametrize(
    "host", ["agent.example.com", "0x7f.example.com", "127.0.0.1.nip.io", "1e100", "x127.1"]
)
def test_names_that_merely_look_numeric_are_left_to_connect_time(host: str) -> None:
    assert literal_problem(host) is None
