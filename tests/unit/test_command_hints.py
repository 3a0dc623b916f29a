"""Every command the sign-in page, the README's quick start and `cronhooks up` suggest runs
where the reader is: `.venv/bin/cronhooks` in a checkout (`cronhooks` is not on PATH
there), `cronhooks` only inside a container."""

from __future__ import annotations

import re
from pathlib import Path

from cronhooks_cli.quick_start import DemoWebhook, quick_start_text
from cronhooks_common.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
# a `cronhooks <subcommand>` not preceded by `.venv/bin/` or a container's exec
BARE = re.compile(r"(?<![/\w-])(?<!admin-api )cronhooks (admin|migrate|run|up|keys|broker)\b")


def test_the_sign_in_page_names_commands_that_work() -> None:
    page = (ROOT / "services/admin-api/cronhooks_admin/static/index.html").read_text()
    assert ".venv/bin/cronhooks admin create-token" in page
    assert not BARE.search(page), BARE.search(page)


def test_the_readme_quick_start_names_commands_that_work() -> None:
    readme = (ROOT / "README.md").read_text()
    quick = readme[readme.index("## Quick start") : readme.index("## How a delivery flows")]
    assert not BARE.search(quick), BARE.search(quick)


def test_cronhooks_up_prints_curls_for_the_webhook_it_has_and_no_bare_command() -> None:
    settings = Settings.from_mapping({"CRONHOOKS_SECRET_KEY": "x" * 40})
    text = quick_start_text(
        settings,
        token="cha_t",
        agent_url="http://127.0.0.1:8090/webhook",
        agent_secret="whsec_s",
        demo=DemoWebhook(7, created=False, delivery_id=None),
    )
    assert "triggerCronWebhook(webhookId: 7)" in text
    assert "cronWebhookDeliveries(cronWebhookId: 7)" in text
    assert "webhookId: 1)" not in text
    assert 'secret: \\"whsec_s\\"' in text, "webhooks it suggests carry the demo agent's secret"
    assert not BARE.search(text), BARE.search(text)
