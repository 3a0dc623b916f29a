"""What an agent's answer means for the attempt (CONTRACT §4, §15), and the importer's
verdict on its changes: the judging half of step 4 (deliver.py; record.py words what it
means). Pure and total: any bytes an agent sends judge the attempt — a success, or a
failure with a reason (an answer nested deeper than 64 levels among them) — and nothing
here raises."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cronhooks_common import agent_report, json_input
from cronhooks_common.agent_report import AgentReport
from cronhooks_common.events import ChangeRefused, storable, storable_json, storable_text
from cronhooks_dispatcher.sender import HttpResult

EXCERPT = 200


@dataclass(frozen=True, slots=True)
class Outcome:
    succeeded: bool
    error: str | None = None
    changes: list[Any] | None = None  # as answered: the importer's rules judge them
    gone: bool = False  # 410: the agent asks us to stop calling
    # costs and logs of an answer with a JSON body, whatever its status (§16.1)
    report: AgentReport = agent_report.NOTHING


def excerpt(body: bytes, limit: int = EXCERPT) -> str:
    text = storable(body.decode("utf-8", "replace").strip())
    return text if len(text) <= limit else text[:limit] + "…"


def classify(result: HttpResult) -> Outcome:
    if result.error is not None:
        return Outcome(False, result.error)
    status = result.status or 0
    if not 200 <= status < 300 or status == 202:
        # Not a synchronous answer: its JSON body, if any, still reports costs and logs.
        return _unanswered(status, result.body)
    try:
        answer = _json_object(result.body)
    except json_input.TooDeep as exc:
        return Outcome(False, str(exc))
    if answer is None:
        return Outcome(True)  # empty or non-JSON 2xx: success, nothing to import
    # Most answers' text shows at once that nothing in them needs walking (ASCII, no
    # escapes); the others are walked (storable_json).
    storable = storable_text(result.body)
    report = agent_report.of_answer(answer, storable=storable)
    if not (storable or storable_json(answer)):
        error = "the answer contains NUL characters or invalid Unicode"
        return Outcome(False, error, report=report)
    if answer.get("status") == "error":
        message = answer.get("message")
        if message:
            error = f"agent reported error: {str(message)[:EXCERPT]}"
            return Outcome(False, error, report=report)
        return Outcome(False, "agent reported error", report=report)
    changes = answer.get("changes")
    if changes is None or changes == []:
        return Outcome(True, report=report)
    if not isinstance(changes, list):
        return Outcome(False, "answer's changes must be an array", report=report)
    return Outcome(True, changes=changes, report=report)


def _unanswered(status: int, body: bytes) -> Outcome:
    """A 202, a redirect, a 410 or another status that is not 2xx."""
    report = _report_of(body)
    if status == 202:
        return Outcome(True, report=report)
    if status == 410:
        error = "HTTP 410 Gone: the agent asked to stop this webhook"
        return Outcome(False, error, gone=True, report=report)
    if 300 <= status < 400:
        return Outcome(False, f"HTTP {status}: redirects are not followed", report=report)
    detail = excerpt(body)
    return Outcome(False, f"HTTP {status}" + (f": {detail}" if detail else ""), report=report)


def _report_of(body: bytes) -> AgentReport:
    """The costs and logs of a body that is not judged as an answer: nothing when it is
    not a JSON object (nested too deep among them: the status decides the attempt).
    A body that cannot name either key (not even \\u-escaped) is not parsed: async agents
    answer 202 with small JSON bodies all the time."""
    if b"costs" not in body and b"logs" not in body and b"\\u" not in body:
        return agent_report.NOTHING
    try:
        answer = _json_object(body)
    except json_input.TooDeep:
        return agent_report.NOTHING
    if answer is None:
        return agent_report.NOTHING
    return agent_report.of_answer(answer, storable=storable_text(body))


def rejected(errors: list[ChangeRefused]) -> Outcome:
    """The attempt's outcome when the importer rejected its changes."""
    # An error about the whole batch (the depth guard, an internal error) names no path.
    # (The report of the answer stays with the waiting attempt: finish.py keeps it.)
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
