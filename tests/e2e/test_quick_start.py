"""The README's quick start: `cronhooks up --demo-agent --print-token --log-file …` (what
`make up` runs) makes a webhook for the demo agent and runs it once; a second start reuses
the admin token and that webhook and prints commands for what exists. Every printed command
works as printed, every URL it prints answers a browser's GET with 200, migrations and
service logs go to the log file it names (the terminal shows the quick start only, last),
and the JWKS is published from the start."""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path

import aiohttp
import asyncpg
from prometheus_client.parser import text_string_to_metric_families

from cronhooks_common.settings import Settings
from tests.support import quick_start
from tests.support.inprocess import eventually
from tests.support.processes import free_port, with_free_ports

CREATE = "Create a webhook (its id and secret are in the answer):"
DASHBOARD = Path(__file__).resolve().parents[2] / "infra/grafana/cronhooks.json"
SUFFIXES = {"counter": ("_total", "_created"), "histogram": ("_bucket", "_sum", "_count")}


def _dashboard_metrics() -> set[str]:
    """Every metric an expression of infra/grafana/cronhooks.json names."""
    panels = json.loads(DASHBOARD.read_text())["panels"]
    exprs = [t["expr"] for p in panels for t in p["targets"]]
    return {m for e in exprs for m in re.findall(r"\bcronhooks_[a-z_]+\b", e)}


async def _exported(ports: list[str]) -> set[str]:
    """The sample names the services' /metrics can carry (families without samples yet too)."""
    names: set[str] = set()
    async with aiohttp.ClientSession() as session:
        for port in ports:
            async with session.get(f"http://127.0.0.1:{port}/metrics") as resp:
                text = await resp.text()
            for family in text_string_to_metric_families(text):
                names.add(family.name)
                names.update(family.name + s for s in SUFFIXES.get(family.type, ()))
                names.update(sample.name for sample in family.samples)
    return names


async def _browser_urls_answer(qs: quick_start.QuickStart) -> None:
    urls = qs.browser_urls()
    assert any(u.endswith("/received") for u in urls), qs.text
    async with aiohttp.ClientSession() as session:
        for url in urls:
            async with session.get(url, headers={"Accept": "text/html"}) as resp:
                assert resp.status == 200, f"{url} answered {resp.status}"


def _terminal_is_quiet(qs: quick_start.QuickStart, log: Path) -> None:
    """Only the quick start (and the line naming the log file) reached the terminal."""
    assert qs.lines[0] == f"cronhooks up: migrations and service logs go to {log.name}"
    assert qs.lines[1:3] == ["", "cronhooks is up."], qs.text
    assert not [line for line in qs.lines if line.startswith("{") or "[info" in line]
    assert f"Logs (migrations, services):     {log.name}" in qs.text


async def _statuses(qs: quick_start.QuickStart) -> list[str]:
    body = await quick_start.curl_json(qs.curl_after("Its deliveries:"))
    return [d["status"] for d in body["data"]["cronWebhookDeliveries"]]


async def _done(qs: quick_start.QuickStart) -> list[str] | None:
    """The statuses once no delivery is pending."""
    statuses = await _statuses(qs)
    return statuses if statuses and "pending" not in statuses else None


def _token(qs: quick_start.QuickStart) -> str:
    [token] = re.findall(r"^  Admin token: +(\S+)$", qs.text, re.M)
    return token


async def test_make_up_twice_reuses_its_token_and_demo_webhook_and_every_printed_command_works(
    settings: Settings, tmp_path: Path
) -> None:
    env = {**os.environ, **with_free_ports(settings)}
    demo_port = free_port()

    first = await quick_start.start(env, tmp_path, demo_port)
    try:
        hook, created = first.demo_webhook()
        assert created, first.text
        _terminal_is_quiet(first, tmp_path / quick_start.LOG_FILE)
        assert "service_started" in (tmp_path / quick_start.LOG_FILE).read_text()
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"{env['CRONHOOKS_PUBLIC_URL']}/.well-known/jwks.json") as resp,
        ):
            assert (await resp.json())["keys"], "the signing key is published at start"
        # The demo agent verifies signatures: a success means it accepted this one.
        assert await eventually(lambda: _done(first), timeout=30, interval=0.2) == ["success"]
        await _browser_urls_answer(first)
        # The Grafana dashboard names only metrics some service exports.
        ports = [
            env[f"CRONHOOKS_{s}_PORT"] for s in ("ADMIN", "IMPORTER", "SCHEDULER", "DISPATCHER")
        ]
        missing = _dashboard_metrics() - await _exported(ports)
        assert not missing, f"infra/grafana/cronhooks.json names unexported {sorted(missing)}"
        # The printed hint for another admin token runs as printed, from where `up` runs.
        [cli] = re.findall(r"another: (\S+) admin create-token --name you", first.text)
        out = await quick_start.shell(f"{cli} admin create-token --name hint", tmp_path, env)
        assert out.splitlines()[-1].startswith("cha_")
        assert not re.search(r"(^|[\s(`])cronhooks admin", first.text), "a bare `cronhooks`"
    finally:
        await first.stop()
    token_file = tmp_path / ".cronhooks-admin-token"
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600

    second = await quick_start.start(env, tmp_path, demo_port)
    try:
        assert _token(second) == _token(first) == token_file.read_text().strip()
        _terminal_is_quiet(second, tmp_path / quick_start.LOG_FILE)
        await _browser_urls_answer(second)
        # What the demo agent received before the restart is still shown.
        received = f"http://127.0.0.1:{demo_port}/received"
        async with aiohttp.ClientSession() as session, session.get(received) as resp:
            assert len(await resp.json()) >= 1
        assert second.demo_webhook() == (hook, False)
        ran = await quick_start.curl_json(second.curl_after("Run it now:"))
        assert ran["data"]["triggerCronWebhook"]["deliveryId"] > 0

        assert await eventually(lambda: _done(second), timeout=30, interval=0.2) == [
            "success",
            "success",
        ]
        # The printed create curl carries the demo agent's secret: its deliveries succeed.
        made = await quick_start.curl_json(second.curl_after(CREATE))
        new = made["data"]["createCronWebhook"]["cronWebhook"]["id"]
        assert new != hook
        # …and its writePatterns allow the demo agent's note: a run of it succeeds.
        run = second.curl_after("Run it now:").replace(f"webhookId: {hook})", f"webhookId: {new})")
        ran = await quick_start.curl_json(run)
        deliveries = second.curl_after("Its deliveries:").replace(
            f"cronWebhookId: {hook})", f"cronWebhookId: {new})"
        )

        async def new_done() -> list[str] | None:
            body = await quick_start.curl_json(deliveries)
            got = [d["status"] for d in body["data"]["cronWebhookDeliveries"]]
            return got if got and "pending" not in got else None

        assert ran["data"]["triggerCronWebhook"]["deliveryId"] > 0
        assert await eventually(new_done, timeout=30, interval=0.2) == ["success"]
        conn = await asyncpg.connect(settings.database_url)
        try:
            assert (
                await conn.fetchval(
                    "select count(*) from importer.notes where path like 'demo/digest-%'"
                )
                == 3
            )
        finally:
            await conn.close()
    finally:
        await second.stop()
