"""How refused input is logged: one `warning` line naming the field and the reason, with
no traceback.

Bad input is the client's mistake, not a fault of the service: a bad cron, a second
delete, a note outside the write patterns. Operators want to see it (a misconfigured agent
shows up here), but as one line they can grep, not as a 40-line traceback at `error`,
which is kept for unexpected exceptions. The reason is our own text; callers never pass
a message that quotes the request (it may hold a secret).
"""

from __future__ import annotations

from typing import Any

import structlog

log = structlog.get_logger("cronhooks.refused")


def log_refused(event: str, *, field: str | None, reason: str, **context: Any) -> None:
    """Log refused input: `event` says what was refused (`graphql_error`, ...)."""
    log.warning(event, field=field, reason=reason, **context)
