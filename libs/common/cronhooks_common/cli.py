"""The `cronhooks` console script (CONTRACT §1)."""

from __future__ import annotations

import argparse
import asyncio
import importlib
import sys
from collections.abc import Sequence

from cronhooks_common.settings import Settings, SettingsError

SERVICES: dict[str, str] = {
    "scheduler": "cronhooks_scheduler.app",
    "dispatcher": "cronhooks_dispatcher.app",
    "importer": "cronhooks_importer.app",
    "admin-api": "cronhooks_admin.app",
}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="cronhooks", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("migrate", help="create/upgrade every schema (idempotent, concurrent-safe)")
    run = sub.add_parser("run", help="run one service")
    run.add_argument("service", choices=sorted(SERVICES))
    admin = sub.add_parser("admin", help="administration")
    admin_sub = admin.add_subparsers(dest="admin_command", required=True)
    token = admin_sub.add_parser("create-token", help="create an admin API token")
    token.add_argument("--name", required=True)
    projections = sub.add_parser("projections", help="admin read models")
    projections_sub = projections.add_subparsers(dest="projections_command", required=True)
    projections_sub.add_parser("rebuild", help="drop the admin read models and replay the events")
    keys = sub.add_parser("keys", help="signing keys of the agent-cron fire JWTs")
    keys_sub = keys.add_subparsers(dest="keys_command", required=True)
    keys_sub.add_parser(
        "rotate",
        help="retire the signing key (still published) and make a new one of the"
        " CRONHOOKS_FIRE_JWT_ALGORITHM algorithm",
    )
    up = sub.add_parser("up", help="migrate and run all services in one supervised tree")
    up.add_argument("--demo-agent", action="store_true", help="also run the demo agent")
    up.add_argument("--demo-agent-port", type=int, default=8090)
    up.add_argument(
        "--print-token",
        action="store_true",
        help="create an admin token and print quick-start URLs",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        settings = Settings.from_env()
    except SettingsError as exc:
        print(f"cronhooks: configuration error: {exc}", file=sys.stderr)
        return 2
    from cronhooks_common.logs import configure_logging

    name = args.service if args.command == "run" else f"cli-{args.command}"
    configure_logging(name, settings.log_format)
    if args.command == "migrate":
        return asyncio.run(_migrate(settings))
    if args.command == "run":
        return _run(args.service, settings)
    if args.command == "admin":
        return asyncio.run(_create_token(settings, args.name))
    if args.command == "keys":
        return asyncio.run(_rotate_keys(settings))
    if args.command == "projections":
        return asyncio.run(_rebuild(settings))
    if args.command == "up":
        from cronhooks_common.supervisor import up

        return asyncio.run(
            up(
                settings,
                demo_agent_port=args.demo_agent_port if args.demo_agent else None,
                print_token=args.print_token,
            )
        )
    return 2


async def _migrate(settings: Settings) -> int:
    from cronhooks_common.migrate import migrate

    applied = await migrate(settings.database_url)
    print(f"migrations applied: {len(applied)}")
    return 0


def _run(service: str, settings: Settings) -> int:
    from cronhooks_common.service import serve

    module = importlib.import_module(SERVICES[service])
    asyncio.run(serve(service, settings, module.bootstrap))
    return 0


async def _rotate_keys(settings: Settings) -> int:
    from datetime import UTC, datetime

    from cronhooks_common import db
    from cronhooks_common.crypto import SecretBox
    from cronhooks_common.keys import rotate

    algorithm = settings.fire_jwt_algorithm
    conn = await db.connect(settings.database_url, name="keys")
    try:
        retired, new = await rotate(
            conn, SecretBox(settings.secret_key), algorithm=algorithm, now=datetime.now(UTC)
        )
    finally:
        await conn.close()
    print(f"retired key {retired or '(none)'}; signing now with {new} ({algorithm})")
    return 0


async def _rebuild(settings: Settings) -> int:
    from cronhooks_admin.rebuild import rebuild_database

    replayed, position = await rebuild_database(settings.database_url)
    print(f"replayed {replayed} events up to position {position}")
    return 0


async def _create_token(settings: Settings, name: str) -> int:
    import asyncpg

    from cronhooks_admin.auth import create_token

    conn = await asyncpg.connect(settings.database_url)
    try:
        token = await create_token(conn, name)
    finally:
        await conn.close()
    print(token)
    return 0


if __name__ == "__main__":
    sys.exit(main())
