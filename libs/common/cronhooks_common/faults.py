"""How the services word what went wrong on their side (CONTRACT §15).

`internal error: {what}` ends an attempt (or a delivery, or a fire) that failed for a
reason of ours rather than the agent's — a record the database refused, an event that
could not be handled however often it was tried. `abandoned` is the scheduler's
watchdog's word for a delivery that had no outcome in time (the dispatcher counts it
for the webhook's health).
"""

from __future__ import annotations

from cronhooks_common.events import storable

ABANDONED = "abandoned"
_WHAT = 300  # characters of the exception kept


def internal_error(exc: BaseException) -> str:
    """`internal error: {type}: {message}`, short and storable (no NUL, no lone surrogate)."""
    text = str(exc)
    what = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    if len(what) > _WHAT:
        what = what[:_WHAT] + "…"
    return storable(f"internal error: {what}")
