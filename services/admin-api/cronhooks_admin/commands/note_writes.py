"""Admin note writes (CONTRACT §8: `pushNotes`, `commitNotes`, `hideNotes` at depth 0).

The importer owns the note store, and its agent API is the one code path that writes
notes (validation, hash checks, atomic batches, `note.changed`). So admin-api does not
write notes itself: it forwards the admin's mutation to the importer's `POST /graphql`
with a 60-second admin write token (tokens.AdminWriteTokens) naming the admin, and answers
what the importer answered, once admin-api's projector has applied it (so that a query
right after the mutation sees it). The write is attributed to the admin token's name.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import aiohttp
import structlog
from ariadne import convert_camel_case_to_snake
from graphql import GraphQLError

from cronhooks_admin.auth import Admin
from cronhooks_common.clock import Clock
from cronhooks_common.note_inputs import HideNotesInput, PushNotesInput
from cronhooks_common.tokens import AdminWriteTokens

log = structlog.get_logger(__name__)

TIMEOUT_SECONDS = 30.0

_ERROR = "... on ErrorPayload { message errors { path error } }"
PUSH = f"""mutation($input: PushNotesInput!) {{ result: pushNotes(input: $input) {{ __typename
  ... on PushNotesPayload {{ notes {{ id path contentHash version assets {{ id path }} }} }}
  {_ERROR} }} }}"""
COMMIT = f"""mutation {{ result: commitNotes {{ __typename
  ... on CommitNotesPayload {{ success }} {_ERROR} }} }}"""
HIDE = f"""mutation($input: HideNotesInput!) {{ result: hideNotes(input: $input) {{ __typename
  ... on HideNotesPayload {{ paths }} {_ERROR} }} }}"""


_INPUT_NAMES = {"expected_hash": "expectedHash"}  # PushNoteInput's other fields are one word


def _snake(value: Any) -> Any:
    """The importer's answer with the keys this schema's resolvers read (snake_case)."""
    if isinstance(value, dict):
        return {
            (k if k.startswith("__") else convert_camel_case_to_snake(k)): _snake(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_snake(v) for v in value]
    return value


class NoteWrites:
    def __init__(
        self,
        *,
        importer_url: str,
        tokens: AdminWriteTokens,
        clock: Clock,
        caught_up: Callable[[], Awaitable[bool]],
    ) -> None:
        self.importer_url = importer_url  # tests that serve on free ports set it after start
        self._tokens = tokens
        self._clock = clock
        self._caught_up = caught_up
        self._session: aiohttp.ClientSession | None = None

    async def start(self) -> None:
        self._session = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=TIMEOUT_SECONDS),
            cookie_jar=aiohttp.DummyCookieJar(),
        )

    async def stop(self) -> None:
        if self._session is not None:
            await self._session.close()

    # Each returns the importer's answer: the mutation's result object (PushNotesPayload,
    # ..., or ErrorPayload) with snake_case keys, handed to Ariadne as it is (not read here).

    async def push(self, admin: Admin, fields: PushNotesInput) -> dict[str, object]:
        # Each field as given (camelCase again): the importer judges them, patches too.
        updates = [{_INPUT_NAMES.get(k, k): v for k, v in u.items()} for u in fields["updates"]]
        given: dict[str, object] = {"updates": updates}  # the importer's PushNotesInput
        if fields.get("skip_commit") is not None:
            given["skipCommit"] = fields["skip_commit"]
        return await self._call(admin, PUSH, {"input": given})

    async def commit(self, admin: Admin) -> dict[str, object]:
        return await self._call(admin, COMMIT, {})

    async def hide(self, admin: Admin, fields: HideNotesInput) -> dict[str, object]:
        return await self._call(admin, HIDE, {"input": {"paths": list(fields["paths"])}})

    async def _call(
        self, admin: Admin, query: str, variables: Mapping[str, object]
    ) -> dict[str, object]:
        assert self._session is not None, "NoteWrites.start() was not awaited"
        token = self._tokens.mint(actor=admin.actor, now=self._clock.now())
        try:
            async with self._session.post(
                self.importer_url.rstrip("/") + "/graphql",
                json={"query": query, "variables": variables},
                headers={"Authorization": f"Bearer {token}"},
            ) as resp:
                status = resp.status
                body = await resp.json(content_type=None)
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            log.warning("note_store_unavailable", error=repr(exc))
            raise GraphQLError(
                "the note store (importer) is not answering; nothing was written",
                extensions={"code": "SERVICE_UNAVAILABLE"},
            ) from None
        if status == 200 and isinstance(body, dict) and body.get("data"):
            # A query right after the mutation sees its effect (CONTRACT §8): wait for the
            # projector to apply what the importer committed.
            if not await self._caught_up():
                log.warning("note_write_not_yet_projected")
            return _snake(body["data"]["result"])  # type: ignore[no-any-return]
        errors = body.get("errors") if isinstance(body, dict) else None
        if status == 200 and errors:
            # The importer refused the input itself (a GraphQL input error): pass it on.
            first = errors[0]
            raise GraphQLError(str(first.get("message")), extensions=first.get("extensions"))
        log.error("note_store_refused", status=status, body=str(body)[:500])
        raise GraphQLError(
            f"the note store (importer) answered HTTP {status}; nothing was written",
            extensions={"code": "INTERNAL_SERVER_ERROR"},
        )
