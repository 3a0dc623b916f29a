"""The webhook request body (CONTRACT §3; a change webhook's, §11), built from the typed
request (`delivery.requested`, or `delivery.released`), and how it is recorded. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, NotRequired, TypedDict

from cronhooks_common import jsonfast
from cronhooks_common.events import CHANGE, UNSET, ChangeSent, Kind, RequestFields
from cronhooks_common.events import Trigger as TriggerName
from cronhooks_common.events.delivery import ChangeEvent
from cronhooks_common.traces import trace_of

if TYPE_CHECKING:  # the types only: this module stays pure
    from cronhooks_dispatcher.context_notes import ContextNote, ContextNotes

# A JSON Schema document, sent as it is in every body: only encoded, never read here.
RESPONSE_SCHEMA: Mapping[str, object] = {
    "type": "object",
    "properties": {
        "status": {"type": "string"},
        "message": {"type": "string"},
        "changes": {
            "type": "array",
            "items": {
                "type": "object",
                # CONTRACT §16.1: a write carries content; a patch, find and replace. Said
                # in descriptions, not if/then: schema-guided model outputs often refuse
                # conditional schemas.
                "properties": {
                    "kind": {
                        "type": "string",
                        "enum": ["", "upsert", "write", "patch"],
                        "description": "absent, '', upsert or write: content; patch: find/replace",
                    },
                    "path": {"type": "string"},
                    "content": {"type": "string", "description": "required unless kind is patch"},
                    "expected_hash": {"type": "string"},
                    "find": {
                        "type": "string",
                        "minLength": 1,
                        "description": "patch: occurs exactly once in the note's content",
                    },
                    "replace": {
                        "type": "string",
                        "description": "patch: replaces find; default ''",
                    },
                },
                "required": ["path"],
            },
        },
        # CONTRACT §16.1: what the run cost and what the agent logged, recorded per attempt
        "costs": {
            "type": "object",
            "maxProperties": 32,
            "propertyNames": {"pattern": "^[A-Za-z0-9_.:-]{1,64}$"},
            "additionalProperties": {"type": "number", "minimum": 0},
        },
        "logs": {
            "type": "array",
            "maxItems": 500,
            "items": {
                "type": "object",
                "properties": {
                    "ts": {"type": "string", "format": "date-time"},
                    "level": {"type": "string"},
                    "msg": {"type": "string"},
                    "data": {},
                },
                "required": ["level", "msg"],
            },
        },
    },
}


class SentChange(TypedDict):
    """One change as a change webhook's body carries it (CONTRACT §11)."""

    path: str
    event: ChangeEvent
    content: NotRequired[str | None]  # only with includeContent
    version: int
    content_hash: str | None


class WebhookBody(TypedDict):
    """The request body (CONTRACT §3, §11). A TypedDict, not a Struct: built once per
    attempt and encoded as it is, no conversion on the hot path. The keys after
    `timestamp` depend on the kind and the attempt, so the type says which may be absent;
    `build_body` says when, and in which order (the bytes signed)."""

    version: int
    id: int
    webhook_id: int
    kind: Kind
    timestamp: int
    scheduled_for: NotRequired[str | None]  # cron
    trigger: NotRequired[TriggerName]
    attempt: NotRequired[int]
    depth: NotRequired[int]  # change
    missed_count: NotRequired[int]  # cron
    instruction: NotRequired[str]
    changes: NotRequired[list[SentChange]]  # change
    content_truncated: NotRequired[bool]  # change, only when the content cap cut
    context_notes: NotRequired[list[ContextNote]]  # cron with attachNotes
    context_truncated: NotRequired[bool]  # only when the cap left a note out
    previous_error: NotRequired[str]  # retries
    response_schema: NotRequired[Mapping[str, object]]
    api_token: NotRequired[str | None]  # passApiKey
    api_url: NotRequired[str | None]  # passApiKey
    trace: NotRequired[str]  # CONTRACT §16.3: the chain's root, `{kind}:{id}` (always, last)
    parent: NotRequired[str]  # only when another delivery's write caused this one


REDACTED = "[redacted]"
RECORDED_BYTES = 64 << 10  # of a request body kept in the attempt log (CONTRACT §15)


def build_body(
    request: RequestFields,
    *,
    timestamp: int,
    api_token: str | None,
    api_url: str | None,
    context: ContextNotes | None = None,
) -> WebhookBody:
    """The JSON body for one attempt of `request` (a request, or the release of a queued
    one); `context` the notes read for it when its webhook has attachNotes (CONTRACT §13),
    else None."""
    target = request.target
    kind = request.kind
    body: WebhookBody = {
        "version": 1,
        "id": request.delivery_id,
        "webhook_id": request.webhook_id,
        "kind": kind,
        "timestamp": timestamp,
    }
    if kind == CHANGE:  # CONTRACT §11: the batch's changes instead of a slot
        body["trigger"] = request.trigger
        body["attempt"] = request.attempt
        body["depth"] = request.depth or 0
        body["instruction"] = target.instruction
        body["changes"] = [_change(c) for c in request.changes or ()]
        if request.content_truncated:  # the 1 MiB content cap left some out (§15)
            body["content_truncated"] = True
    else:
        body["scheduled_for"] = request.scheduled_for
        body["trigger"] = request.trigger
        body["attempt"] = request.attempt
        body["missed_count"] = request.missed_count
        body["instruction"] = target.instruction
        if context is not None:
            body["context_notes"] = context.notes
            if context.truncated:  # only when the cap left a note out, like previous_error
                body["context_truncated"] = True
    if request.attempt > 1:
        body["previous_error"] = request.previous_error or ""
    body["response_schema"] = RESPONSE_SCHEMA
    if target.pass_api_key:
        body["api_token"] = api_token
        body["api_url"] = api_url
    # Last, so that every byte before them is what it was before traces (§16.3).
    body["trace"] = trace_of(request)
    if isinstance(request.parent, str):
        body["parent"] = request.parent
    return body


def _change(change: ChangeSent) -> SentChange:
    """One change as the body carries it. The keys in the order of the stored event's
    (jsonb: by length, then bytes) — the order bodies were signed in before the request
    was typed, kept so that the bytes an agent gets do not change."""
    if change.content is UNSET:  # only with includeContent
        return {
            "path": change.path,
            "event": change.event,
            "version": change.version,
            "content_hash": change.content_hash,
        }
    return {
        "path": change.path,
        "event": change.event,
        "content": change.content,
        "version": change.version,
        "content_hash": change.content_hash,
    }


def encode(body: Mapping[str, object]) -> bytes:
    """A body's bytes (a webhook's, or an alert's: alert_messages.py)."""
    return jsonfast.dumps_bytes(body)


def recorded(body: WebhookBody, raw: bytes) -> str:
    """The body as recorded, given the bytes sent: those bytes as they are unless a token
    must be redacted or context notes shortened (most deliveries carry neither: no second
    encoding)."""
    if "api_token" in body or "context_notes" in body:
        return redacted(body)
    return jsonfast.text(raw)


def redacted(body: WebhookBody) -> str:
    """The body as recorded in logs and events: the token replaced, and each context note
    without its content — path and content_hash name the version sent, which the note's
    own history (`note.changed`) holds; recording up to 1 MiB of notes again with every
    attempt of every slot would make the attempt log mostly copies of the note store."""
    shown: Mapping[str, object] = body  # no longer a WebhookBody once notes are cut
    if "api_token" in body:
        shown = {**shown, "api_token": REDACTED}
    if "context_notes" in body:
        shown = {
            **shown,
            "context_notes": [
                {"path": n["path"], "content_hash": n["content_hash"]}
                for n in body["context_notes"]
            ],
        }
    return jsonfast.dumps(shown)


def cut(recorded: str, limit: int = RECORDED_BYTES) -> tuple[str, bool]:
    """The first `limit` bytes of a recorded body, cut at a UTF-8 boundary (no marker), and
    whether anything was cut. A 40 MiB POST is sent whole; its log keeps 64 KiB."""
    if len(recorded) <= limit // 4:  # no character is more than 4 bytes: fits as it is
        return recorded, False
    raw = recorded.encode("utf-8", "surrogatepass")
    if len(raw) <= limit:
        return recorded, False
    end = limit
    while end > 0 and raw[end] & 0xC0 == 0x80:  # a continuation byte: that character goes
        end -= 1
    return raw[:end].decode("utf-8", "surrogatepass"), True
