"""cronhooks agent SDK: everything an agent needs to be called by cronhooks.

* `verify_webhook` — check a cron-webhook delivery's signature (either header scheme);
* `SyncAnswer` — build the synchronous answer with note changes;
* `ChangeDelivery` — read a change-webhook delivery (the notes that changed);
* `FireVerifier`, `fire_handler` — receive managed one-shot fires (`POST /api/cron/fire`),
  with `SqliteClaimStore` / `PostgresClaimStore` so that a fire runs at most once;
* `Run`, `RunReport` — an asynchronous run (a `202` answer): heartbeat and report it;
* `CronClient`, `AgentScheduler` — arm, cancel, list and reconcile one-shot triggers, with
  recurring jobs and an in-process fallback ticker.
"""

from cronhooks_agent.answers import Change, Patch, SyncAnswer
from cronhooks_agent.changes import ChangeDelivery, NoteChange
from cronhooks_agent.claims import ClaimStore, PostgresClaimStore, SqliteClaimStore
from cronhooks_agent.client import AuthRejected, CronClient, Diff, PlatformUnavailable
from cronhooks_agent.fire import FireAuthError, FireVerifier, fire_handler
from cronhooks_agent.runs import NoRun, Run, RunFinished, RunReport
from cronhooks_agent.scheduler import AgentScheduler, Job
from cronhooks_agent.webhooks import SignatureError, verify_webhook

__all__ = [
    "AgentScheduler",
    "AuthRejected",
    "Change",
    "ChangeDelivery",
    "ClaimStore",
    "CronClient",
    "Diff",
    "FireAuthError",
    "FireVerifier",
    "Job",
    "NoRun",
    "NoteChange",
    "Patch",
    "PlatformUnavailable",
    "PostgresClaimStore",
    "Run",
    "RunFinished",
    "RunReport",
    "SignatureError",
    "SqliteClaimStore",
    "SyncAnswer",
    "fire_handler",
    "verify_webhook",
]
