"""The admin page and GraphiQL send the security headers of CONTRACT §15 and need nothing
their Content-Security-Policy forbids: no inline script or style, nothing from another
origin; every file they load is served by admin-api, with the same headers."""

from __future__ import annotations

from collections.abc import AsyncIterator
from html.parser import HTMLParser

import aiohttp
import pytest

from tests.support.system import System

PAGES = ("/", "/graphql")
HEADERS = {
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


class Page(HTMLParser):
    """What a page loads, and what it holds inline."""

    def __init__(self) -> None:
        super().__init__()
        self.loads: list[str] = []
        self.inline: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if tag == "style" or "style" in values or any(a.startswith("on") for a in values):
            self.inline.append(self.get_starttag_text() or tag)
        if tag == "script":
            self._in_script = True
            if values.get("src"):
                self.loads.append(str(values["src"]))
        if tag == "link" and values.get("rel") == "stylesheet":
            self.loads.append(str(values["href"]))

    def handle_endtag(self, tag: str) -> None:
        self._in_script = self._in_script and tag != "script"

    def handle_data(self, data: str) -> None:
        if self._in_script and data.strip():
            self.inline.append(data[:80])


pytestmark = pytest.mark.system(services=("admin-api",))


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


def csp_directives(policy: str) -> dict[str, list[str]]:
    directives = (part.split() for part in policy.split(";") if part.strip())
    return {name: sources for name, *sources in directives}


@pytest.mark.parametrize("path", PAGES)
async def test_the_pages_send_the_security_headers(
    system: System, session: aiohttp.ClientSession, path: str
) -> None:
    base = system.urls["admin-api"]
    async with session.get(base + path) as resp:
        assert resp.status == 200 and resp.content_type == "text/html"
        for name, value in HEADERS.items():
            assert resp.headers[name] == value
        csp = csp_directives(resp.headers["Content-Security-Policy"])
    assert csp["script-src"] == ["'self'"]  # no 'unsafe-inline', no CDN
    assert csp["default-src"] == ["'none'"] and csp["frame-ancestors"] == ["'none'"]
    assert all(not s.startswith(("http:", "https:", "*")) for v in csp.values() for s in v), csp


@pytest.mark.parametrize("path", PAGES)
async def test_the_pages_hold_nothing_inline_and_load_only_from_this_origin(
    system: System, session: aiohttp.ClientSession, path: str
) -> None:
    base = system.urls["admin-api"]
    async with session.get(base + path) as resp:
        page = Page()
        page.feed(await resp.text())
    assert page.inline == []
    assert page.loads and all(src.startswith("/static/") for src in page.loads), page.loads
    for src in page.loads:
        async with session.get(base + src) as resp:
            assert resp.status == 200, src
            assert resp.content_type in ("text/css", "text/javascript", "application/javascript")
            assert resp.content_type.endswith("css") == src.endswith(".css")
            for name, value in HEADERS.items():
                assert resp.headers[name] == value
            assert "Content-Security-Policy" in resp.headers
            modified = resp.headers["Last-Modified"]
        async with session.get(base + src, headers={"If-Modified-Since": modified}) as resp:
            assert resp.status == 304, src  # revalidated, not downloaded again


@pytest.mark.parametrize(
    "path", ["/static/nothing.js", "/static/../app.py", "/static/%2e%2e/app.py", "/static/"]
)
async def test_only_the_static_files_are_served(
    system: System, session: aiohttp.ClientSession, path: str
) -> None:
    base = system.urls["admin-api"]
    async with session.get(base + path) as resp:
        assert resp.status == 404
