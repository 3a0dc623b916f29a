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
