"""The destination of a URL (CONTRACT §17): scheme://host:port, lower case, the default
port written out, IPv6 in brackets."""

from __future__ import annotations

import pytest

from cronhooks_common.destination_key import DestinationError, destination, destination_of


@pytest.mark.parametrize(
    ("url", "key"),
    [
        ("https://agent.example.com/hook", "https://agent.example.com:443"),
        ("http://agent.example.com/a/b?c=d#e", "http://agent.example.com:80"),
        ("HTTPS://Agent.Example.COM/Hook", "https://agent.example.com:443"),
        ("https://agent.example.com:443/x", "https://agent.example.com:443"),
        ("https://agent.example.com:8443", "https://agent.example.com:8443"),
        ("http://agent.example.com:443/", "http://agent.example.com:443"),
        ("https://agent.example.com.:443/", "https://agent.example.com:443"),
        ("http://user:pw@agent.example.com/", "http://agent.example.com:80"),
        ("http://127.0.0.1:8090/hook", "http://127.0.0.1:8090"),
        ("http://[::1]:8090/hook", "http://[::1]:8090"),
        ("http://[0:0:0:0:0:0:0:1]/hook", "http://[::1]:80"),
        ("https://[2001:DB8::1]/", "https://[2001:db8::1]:443"),
        ("  https://a.example/  ", "https://a.example:443"),
        ("https://a.example", "https://a.example:443"),
    ],
)
def test_destination_of_a_url(url: str, key: str) -> None:
    assert destination(url) == key
    assert destination(key) == key  # a destination names itself


@pytest.mark.parametrize(
    "url",
    [
        "",
        "agent.example.com",
        "ftp://agent.example.com/",
        "https://",
        "https:///path",
        "https://agent.example.com:99999/",
        "https://agent.example.com:0/",
        "https://agent.example.com:port/",
        "https://[::1/",
        "https://[fe80::zz]/",
        "https://" + "a" * 400 + ".example/",
    ],
)
def test_what_has_no_destination(url: str) -> None:
    with pytest.raises(DestinationError):
        destination(url)


def test_the_hot_path_never_raises() -> None:
    assert destination_of("https://A.example/x") == "https://a.example:443"
    assert destination_of("not a url") == "not a url"
