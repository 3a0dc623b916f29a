"""admin-api's static files (the admin page, GraphiQL and its vendored build) are all
covered by the package data of pyproject.toml, so an installed cronhooks serves them too,
and the vendored files are the ones graphiql/README.md names."""

from __future__ import annotations

import glob
import hashlib
import re
import tomllib
from pathlib import Path

import cronhooks_admin

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = Path(cronhooks_admin.__file__).parent
STATIC = PACKAGE / "static"


def test_every_static_file_is_package_data() -> None:
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"
    ]["*"]
    covered = {Path(match) for pattern in patterns for match in glob.glob(str(PACKAGE / pattern))}
    files = {p for p in STATIC.rglob("*") if p.is_file()}
    assert files and files <= covered, sorted(str(p) for p in files - covered)


def test_the_vendored_files_match_their_recorded_checksums() -> None:
    readme = (STATIC / "graphiql" / "README.md").read_text()
    recorded = dict(re.findall(r"^\| `([\w.-]+)` \|.*\| `([0-9a-f]{64})` \|$", readme, re.M))
    vendored = {p.name for p in (STATIC / "graphiql").iterdir() if p.suffix in (".js", ".css")}
    assert set(recorded) == vendored
    for name, digest in recorded.items():
        assert hashlib.sha256((STATIC / "graphiql" / name).read_bytes()).hexdigest() == digest


def test_the_vendored_chart_library_matches_its_recorded_checksums_and_is_pinned() -> None:
    readme = (STATIC / "uplot" / "README.md").read_text()
    recorded = dict(re.findall(r"^\| `([\w.-]+)` \|.*\| `([0-9a-f]{64})` \|$", readme, re.M))
    vendored = {p.name for p in (STATIC / "uplot").iterdir() if p.suffix in (".js", ".css")}
    assert set(recorded) == vendored and (STATIC / "uplot" / "LICENSE.uplot").is_file()
    for name, digest in recorded.items():
        assert re.search(r"-\d+\.\d+\.\d+\.", name), f"{name}: no version in its name"
        assert hashlib.sha256((STATIC / "uplot" / name).read_bytes()).hexdigest() == digest


# A URL of a CDN (GraphiQL's bundle names jsdelivr and unpkg in an error message's text).
CDN = re.compile(
    r"//[\w.-]*(unpkg\.com|jsdelivr\.net|cdnjs\.cloudflare\.com|esm\.sh|googleapis\.com"
    r"|gstatic\.com|skypack\.dev)",
    re.I,
)


def test_the_pages_load_only_files_of_this_origin_that_exist() -> None:
    """No CDN anywhere (the pages work offline), and every script, style and icon the
    pages and the page's modules name is one of the static files."""
    for path in STATIC.rglob("*"):
        if path.suffix in (".html", ".js", ".css") and path.is_file():
            assert not CDN.search(path.read_text(errors="replace")), path
    for page in ("index.html", "graphiql.html"):
        html = (STATIC / page).read_text()
        urls = re.findall(r'(?:src|href)="([^"]+)"', html)
        assert urls and all(u.startswith("/") and not u.startswith("//") for u in urls), urls
        for url in urls:
            if url.startswith("/static/"):
                assert (STATIC / url.removeprefix("/static/")).is_file(), url
            else:
                assert url in ("/favicon.ico", "/graphql"), url
    for module in (STATIC / "page").glob("*.js"):
        for name in re.findall(r'from "\./([\w.]+)"', module.read_text()):
            assert (STATIC / "page" / name).is_file(), f"{module.name} imports {name}"
