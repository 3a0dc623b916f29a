"""What one HTTP attempt sent and got (deliver.py sends it, outcome.py judges its answer,
record.py words what followed): a value passed between the steps of a delivery."""

from __future__ import annotations

import dataclasses
from datetime import datetime

from cronhooks_common.agent_report import NOTHING, AgentReport
from cronhooks_common.events import RequestFields


@dataclasses.dataclass(frozen=True, slots=True)
class Attempt:
    """What one HTTP attempt sent and got."""

    request: RequestFields  # a request, or a release (which names the group it holds)
    started_at: datetime
    request_body: str  # as sent, api_token redacted, cut at 64 KiB
    response_status: int | None
    response_body: str | None
    duration_ms: int
    request_body_truncated: bool = False
    report: AgentReport = NOTHING  # the answer's costs and logs (§16.1)

    @property
    def minted_token(self) -> bool:
        """Its request carried an api_token (passApiKey): a 202 to it starts a run (§16.2)."""
        return bool(self.request.target.pass_api_key)
