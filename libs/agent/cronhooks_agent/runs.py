"""Report an asynchronous run (CONTRACT §16.2): an agent that answered a delivery `202`
works on, heartbeats while it does, and reports how it ended — with the delivery's
`api_url` and `api_token` (the token keeps working for its run after its `exp`, until the
run's deadline).

    run = Run.of(delivery_body)                  # the body of the delivery answered 202
    await run.heartbeat(logs=[...])              # the deadline moves: now + runTimeoutSeconds
    report = RunReport().cost("usd", 0.01).log("info", "digest written")
    await run.report(report)                     # or RunReport("error", "no data")
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

import aiohttp

from cronhooks_agent.answers import LogJSON
from cronhooks_agent.client import AuthRejected, PlatformUnavailable


class RunFinished(Exception):
    """The run had ended already (409): by another report, or by its deadline."""


class NoRun(Exception):
    """The token's delivery started no run (404): it was not answered 202 with a token."""


@dataclass
class RunReport:
    """How the run ended, with what it cost and logged (16.1's rules, for the whole run)."""

    status: Literal["ok", "error"] = "ok"
    message: str | None = None
    costs: dict[str, float] = field(default_factory=dict)
    logs: list[LogJSON] = field(default_factory=list)

    def cost(self, unit: str, amount: float) -> RunReport:
        """Add `amount` of `unit` (summed with what was added before)."""
        self.costs[unit] = self.costs.get(unit, 0) + amount
        return self

    def log(
        self, level: str, msg: str, *, data: object = None, ts: datetime | None = None
    ) -> RunReport:
        """Append a log entry; `ts` (aware) is sent as RFC 3339, `data` as given."""
        self.logs.append(log_entry(level, msg, data=data, ts=ts))
        return self

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"status": self.status, "message": self.message}
        if self.costs:
            out["costs"] = dict(self.costs)
        if self.logs:
            out["logs"] = list(self.logs)
        return out


def log_entry(level: str, msg: str, *, data: object = None, ts: datetime | None = None) -> LogJSON:
    entry: LogJSON = {"level": level, "msg": msg}
    if ts is not None:
        entry["ts"] = ts.isoformat()
    if data is not None:
        entry["data"] = data
    return entry


@dataclass(frozen=True)
class Run:
    """The run a delivery's `202` started, reported through the platform's token API."""

    api_url: str
    api_token: str
    session: aiohttp.ClientSession | None = None

    @classmethod
    def of(cls, delivery: Mapping[str, Any], **kw: Any) -> Run:
        """The run of a delivery's body (its `api_url` and `api_token`: passApiKey)."""
        return cls(str(delivery["api_url"]), str(delivery["api_token"]), **kw)

    async def heartbeat(self, logs: list[LogJSON] | None = None) -> datetime:
        """Still at work: the new deadline (never past the run's start + 24 h)."""
        answer = await self._post("/api/runs/current/heartbeat", {"logs": logs} if logs else {})
        return datetime.fromisoformat(str(answer["deadline"]).replace("Z", "+00:00"))

    async def report(self, report: RunReport) -> dict[str, Any]:
        """End the run: `{"state", "finished_at"}`. Safe to send again (the same report is
        answered the same); RunFinished if the run had ended otherwise."""
        answer = await self._post("/api/runs/current", report.to_json())
        return dict(answer["run"])

    async def _post(self, path: str, body: Any) -> Any:
        session = self.session or aiohttp.ClientSession()
        try:
            async with session.post(
                f"{self.api_url.rstrip('/')}{path}",
                json=body,
                headers={"Authorization": f"Bearer {self.api_token}"},
                timeout=aiohttp.ClientTimeout(total=30),
            ) as resp:
                payload = await resp.json(content_type=None)
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise PlatformUnavailable(str(exc) or type(exc).__name__) from None
        finally:
            if self.session is None:
                await session.close()
        if resp.status == 401:
            raise AuthRejected(f"HTTP 401: {payload}")
        if resp.status == 404:
            raise NoRun(str(payload))
        if resp.status == 409:
            raise RunFinished(str(payload))
        if resp.status >= 500:
            raise PlatformUnavailable(f"HTTP {resp.status}")
        if resp.status != 200:
            raise ValueError(f"HTTP {resp.status}: {payload}")
        return payload
