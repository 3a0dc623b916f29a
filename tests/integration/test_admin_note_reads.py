"""The admin `notes` read bound (CONTRACT §15): a request whose `notes` fields would return
more than 16 MiB of content in all, over every field and alias, is refused whole — `data`
null, one QUERY_TOO_COMPLEX error naming 16 MiB — before any note content is loaded.

Issue 37, finding 8: 60 aliases of `notes(limit: 500) { content }` returned 210 MB in one
answer."""

from __future__ import annotations

import pytest
from structlog.testing import capture_logs

from tests.integration.test_graphql_limits import aliases, post, too_complex
from tests.support.graphql import PUSH_NOTES
from tests.support.graphql_spy import Spy
from tests.support.system import System
from tests.support.token_api import NOW

NOTE_BYTES = 1_000_000  # five of them: 5 MB, so 3 reads fit in 16 MiB and 4 do not
NOTES = 5


pytestmark = pytest.mark.system(services=("admin-api", "importer"), start=NOW)


@pytest.fixture(autouse=True)
def spy(monkeypatch: pytest.MonkeyPatch) -> Spy:
    """Installed before the services start (autouse: ahead of `system`)."""
    return Spy.install(monkeypatch)


@pytest.fixture
async def big_notes(system: System) -> None:
    """NOTES notes of NOTE_BYTES each, big/0.md to big/4.md."""
    for i in range(NOTES):
        update = {"path": f"big/{i}.md", "content": str(i) * NOTE_BYTES}
        status, body = await system.graphql(
            system.admin, PUSH_NOTES, {"input": {"updates": [update]}}
        )
        assert status == 200 and body["data"]["pushNotes"]["__typename"] == "PushNotesPayload"


async def read(system: System, query: str) -> tuple[int, dict]:  # type: ignore[type-arg]
    status, body, _ = await post(
        f"{system.urls['admin-api']}/graphql", system.admin, {"query": query}
    )
    return status, body


@pytest.mark.usefixtures("big_notes")
async def test_notes_past_16_mib_in_all_are_refused_whole(system: System, spy: Spy) -> None:
    # Within the bound: three reads of the five notes, 15 MB.
    status, body = await read(system, aliases(3, "notes(limit: 500) { content }"))
    assert status == 200 and "errors" not in body
    assert [len(body["data"][f"a{i}"]) for i in range(3)] == [NOTES] * 3
    assert body["data"]["a2"][4]["content"] == "4" * NOTE_BYTES

    for count in (4, 60):  # 20 MB and 300 MB of content asked for
        spy.reset()
        with capture_logs() as logs:
            status, body = await read(system, aliases(count, "notes(limit: 500) { content }"))
        assert status == 400
        assert "16 MiB" in too_complex(body) and body["data"] is None
        assert "content" not in spy.resolved  # refused before any content was read
        [refused] = [x for x in logs if x["event"] == "notes_read_refused"]
        assert refused["bytes"] == count * NOTES * NOTE_BYTES

    # Fragments and inline fragments count as well; an alias reading only paths costs none.
    query = (
        "{ a: notes { ...Body } b: notes { ... on Note { content } } c: notes { content }"
        " d: notes { path } e: notes { path contentHash } f: notes { ...Body } }"
        " fragment Body on Note { path content }"
    )
    status, body = await read(system, query)
    assert status == 400 and "16 MiB" in too_complex(body)
    status, body = await read(system, aliases(60, "notes(limit: 500) { path }"))
    assert status == 200 and len(body["data"]["a59"]) == NOTES

    # A narrower pattern and a smaller limit count only what they would return.
    narrow = (
        '{ a: notes(pattern: "big/1*") { content } '
        + " ".join(f"b{i}: notes(limit: 3) {{ content }}" for i in range(5))
        + " }"
    )  # 1 MB + 5 × 3 MB = 16 MB, under 16 MiB
    status, body = await read(system, narrow)
    assert status == 200 and "errors" not in body and len(body["data"]["b4"]) == 3

    # `note(path)` aliases share the bound: 16 reads of a 1 MB note fit, 17 do not.
    status, body = await read(system, aliases(16, 'note(path: "big/0.md") { content }'))
    assert status == 200 and "errors" not in body
    assert len(body["data"]["a15"]["content"]) == NOTE_BYTES
    status, body = await read(system, aliases(17, 'note(path: "big/0.md") { content }'))
    assert status == 400 and "16 MiB" in too_complex(body)
