"""What an agent's answer means for the attempt (CONTRACT §4, §15), and the importer's
verdict on its changes: the judging half of step 4 (deliver.py; record.py words what it
means). Pure and total: any bytes an agent sends judge the attempt — a success, or a
failure with a reason (an answer nested deeper than 64 levels among them) — and nothing
here raises."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cronhooks_common import json_input
from cronhooks_common.events import ChangeRefused, storable, storable_json
from cronhooks_dispatcher.sender import HttpResult

EXCERPT = 200


@dataclass(frozen=True, slots=True)
class Outcome:
    succeeded: bool
    error: str | None = None
    changes: list[Any] | None = None  # as answered: the importer's rules judge them
    gone: bool = False  # 410: the agent asks us to stop calling


def excerpt(body: bytes, limit: int = EXCERPT) -> str:
    text = storable(body.decode("utf-8", "replace").strip())
    return text if len(text) <= limit else text[:limit] + "…"


def classify(result: HttpResult) -> Outcome:
    if result.error is not None:
        return Outcome(False, result.error)
    status = result.status or 0
    if status == 410:
        return Outcome(False, "HTTP 410 Gone: the agent asked to stop this webhook", gone=True)
    if 300 <= status < 400:
        return Outcome(False, f"HTTP {status}: redirects are not followed")
    if not 200 <= status < 300:
        detail = excerpt(result.body)
        return Outcome(False, f"HTTP {status}" + (f": {detail}" if detail else ""))
    if status == 202:
        return Outcome(True)
    try:
        answer = _json_object(result.body)
    except json_input.TooDeep as exc:
        return Outcome(False, str(exc))
    if answer is None:
        return Outcome(True)  # empty or non-JSON 2xx: success, nothing to import
    if not storable_json(answer):
        return Outcome(False, "the answer contains NUL characters or invalid Unicode")
    if answer.get("status") == "error":
        message = answer.get("message")
        if message:
            return Outcome(False, f"agent reported error: {str(message)[:EXCERPT]}")
        return Outcome(False, "agent reported error")
    changes = answer.get("changes")
    if changes is None or changes == []:
        return Outcome(True)
    if not isinstance(changes, list):
        return Outcome(False, "answer's changes must be an array")
    return Outcome(True, changes=changes)


def rejected(errors: list[ChangeRefused]) -> Outcome:
    """The attempt's outcome when the importer rejected its changes."""
    # An error about the whole batch (the depth guard, an internal error) names no path.
    detail = "; ".join(f"{e.path}: {e.error}" if e.path else str(e.error) for e in errors[:20])
    more = f" (+{len(errors) - 20} more)" if len(errors) > 20 else ""
    return Outcome(False, f"changes rejected: {detail}{more}" if detail else "changes rejected")


def _json_object(body: bytes) -> dict[str, object] | None:
    """The answer's JSON object (any JSON: its values are checked where read); None for an
    empty or non-JSON body (or JSON that is not an object); TooDeep past the nesting bound,
    which is a failure, not "not JSON"."""
    if not body.strip():
        return None
    try:
        value = json_input.loads(body, what="answer")
    except json_input.TooDeep:
        raise
    except ValueError:  # UnicodeDecodeError among them
        return None
    return value if isinstance(value, dict) else None
