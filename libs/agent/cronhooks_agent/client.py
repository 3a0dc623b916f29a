"""Arm, cancel and list one-shot triggers at cronhooks, and reconcile them (CONTRACT §9)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, TypedDict

import aiohttp


class AuthRejected(Exception):
    """The platform refuses this token for good (401, or 403 invalid_client)."""


class PlatformUnavailable(Exception):
    """A transient failure (5xx, transport): try again at the next reconcile."""


class ArmedJob(TypedDict):
    """An armed job as `GET /api/agent-cron/list` answers it (CONTRACT §9)."""

    job_id: str
    fire_at: str  # as provisioned, byte for byte
    schedule_id: str
    agent_callback_url: str


@dataclass(frozen=True, slots=True)
class Diff:
    armed: list[str] = field(default_factory=list)
    rearmed: list[str] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)


def _iso(moment: datetime) -> str:
    if moment.tzinfo is None:
        raise ValueError("fire_at needs a timezone")
    return moment.isoformat()


class CronClient:
    def __init__(
        self, portal_url: str, access_token: str, *, session: aiohttp.ClientSession | None = None
    ) -> None:
        self._base = portal_url.rstrip("/")
        self._token = access_token
        self._session = session

    async def _call(self, method: str, path: str, body: Any = None) -> Any:
        session = self._session or aiohttp.ClientSession()
        try:
            async with session.request(
                method,
                f"{self._base}{path}",
                json=body,
                headers={"Authorization": f"Bearer {self._token}"},
                timeout=aiohttp.ClientTimeout(total=30),
            ) as resp:
                payload = await resp.json(content_type=None)
                if resp.status in (401, 403):
                    raise AuthRejected(f"HTTP {resp.status}: {payload}")
                if resp.status >= 500:
                    raise PlatformUnavailable(f"HTTP {resp.status}")
                if resp.status != 200:
                    raise ValueError(f"HTTP {resp.status}: {payload}")
                return payload
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise PlatformUnavailable(str(exc) or type(exc).__name__) from None
        finally:
            if self._session is None:
                await session.close()

    async def provision(
        self, job_id: str, fire_at: datetime, callback_url: str, *, dedup_key: str | None = None
    ) -> str:
        body = {
            "job_id": job_id,
            "fire_at": _iso(fire_at),
            "agent_callback_url": callback_url,
            "dedup_key": dedup_key or f"{job_id}:{_iso(fire_at)}",
        }
        return str((await self._call("POST", "/api/agent-cron/provision", body))["schedule_id"])

    async def cancel(self, job_id: str) -> None:
        await self._call("POST", "/api/agent-cron/cancel", {"job_id": job_id})

    async def list(self) -> list[ArmedJob]:
        return list((await self._call("GET", "/api/agent-cron/list"))["jobs"])

    async def reconcile(self, desired: Mapping[str, datetime], callback_url: str) -> Diff:
        """Arm what is missing or changed, cancel what is armed but not wanted."""
        armed = {job["job_id"]: job for job in await self.list()}
        diff = Diff()
        for job_id, fire_at in desired.items():
            current = armed.get(job_id)
            if current is None:
                await self.provision(job_id, fire_at, callback_url)
                diff.armed.append(job_id)
            elif (
                # The platform echoes fire_at as provisioned; compare instants all the same,
                # so a trigger armed with another spelling (or normalised before rev. 2, to
                # the millisecond) is not re-armed for nothing.
                abs(datetime.fromisoformat(current["fire_at"].replace("Z", "+00:00")) - fire_at)
                >= timedelta(milliseconds=1)
                or current["agent_callback_url"] != callback_url
            ):
                await self.provision(job_id, fire_at, callback_url)
                diff.rearmed.append(job_id)
            else:
                diff.unchanged.append(job_id)
        for job_id in armed.keys() - desired.keys():
            await self.cancel(job_id)
            diff.cancelled.append(job_id)
        return diff
