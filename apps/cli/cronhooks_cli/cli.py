"""The `cronhooks` console script: configuration, ports and every command are in
docs/reference/configuration.md."""

from __future__ import annotations

import argparse
import asyncio
import importlib
import sys
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

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
    token.add_argument(
        "--expires-in",
        type=_duration,
        metavar="DURATION",
        help="e.g. 30d, 12h, 90m (default: never)",
    )
    admin_sub.add_parser("list-tokens", help="list admin API tokens (never the tokens themselves)")
    revoke = admin_sub.add_parser("revoke-token", help="revoke an admin API token")
    revoke.add_argument("id", type=int)
    broker_cmd = sub.add_parser("broker", help="RabbitMQ users")
    broker_sub = broker_cmd.add_subparsers(dest="broker_command", required=True)
    reader = broker_sub.add_parser(
        "add-reader",
        help="a read-only subscriber user: queues NAME.* only, reads cronhooks.events;"
        " prints its password once",
    )
    reader.add_argument("name")
    reader.add_argument(
        "--management-url",
        help="RabbitMQ management API (default: http://<CRONHOOKS_AMQP_URL host>:15672)",
    )
    reader.add_argument(
        "--max-length",
        type=int,
        default=10_000,
        help="messages each of its queues keeps at most; the oldest are dropped (default 10000)",
    )
    unreader = broker_sub.add_parser(
        "remove-reader", help="delete a reader user, its queues NAME.* and their length limit"
    )
    unreader.add_argument("name")
    unreader.add_argument("--management-url", help="as for add-reader")
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
        "--log-file",
        type=Path,
        help="append migrations' and services' logs to this file (make up: cronhooks-up.log)",
    )
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
        return asyncio.run(_admin(settings, args))
    if args.command == "broker":
        return asyncio.run(_broker(settings, args))
    if args.command == "keys":
        return asyncio.run(_rotate_keys(settings))
    if args.command == "projections":
        return asyncio.run(_rebuild(settings))
    if args.command == "up":
        from cronhooks_cli.supervisor import up

        return asyncio.run(
            up(
                settings,
                demo_agent_port=args.demo_agent_port if args.demo_agent else None,
                print_token=args.print_token,
                log_file=args.log_file,
            )
        )
    return 2


async def _migrate(settings: Settings) -> int:
    from cronhooks_common.migrate import migrate

    applied = await migrate(settings.database_url)
    print(f"migrations applied: {len(applied)}")
    return 0


def _run(service: str, settings: Settings) -> int:
    import uvloop

    from cronhooks_common.queues import QueueSetupError
    from cronhooks_common.service import serve

    module = importlib.import_module(SERVICES[service])
    # uvloop: a faster event loop for the services (the bench measured it: docs/architecture.md).
    try:
        defer_relay = getattr(module, "DEFER_RELAY", False)
        uvloop.run(serve(service, settings, module.bootstrap, defer_relay=defer_relay))
    except QueueSetupError as exc:  # the broker's queues do not fit the settings
        print(f"cronhooks {service}: configuration error: {exc}", file=sys.stderr)
        return 2
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
    from cronhooks_admin.projections.rebuild import rebuild_database

    replayed, position = await rebuild_database(settings.database_url)
    print(f"replayed {replayed} events up to position {position}")
    return 0


def _duration(text: str) -> timedelta:
    """`30d`, `12h`, `90m`, `3600s` → a timedelta (argparse type)."""
    units = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}
    number, unit = text[:-1], text[-1:]
    if unit not in units or not number.isdigit() or int(number) == 0:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a number and s, m, h or d (30d)")
    return timedelta(**{units[unit]: int(number)})


async def _admin(settings: Settings, args: argparse.Namespace) -> int:
    from cronhooks_admin import auth
    from cronhooks_common import db

    now = datetime.now(UTC)
    conn = await db.connect(settings.database_url, name="cli-admin")
    try:
        if args.admin_command == "create-token":
            expires = None if args.expires_in is None else now + args.expires_in
            token = await auth.create_token(conn, args.name, expires_at=expires)
            if expires is not None:
                print(f"expires {expires.isoformat(timespec='seconds')}")
            print(token)
            return 0
        if args.admin_command == "list-tokens":
            print("id\tname\tcreated\texpires\trevoked")
            for row in await auth.list_tokens(conn):
                dates = [row[k] for k in ("created_at", "expires_at", "revoked_at")]
                shown = [d.isoformat(timespec="seconds") if d else "-" for d in dates]
                print("\t".join([str(row["id"]), row["name"], *shown]))
            return 0
        if await auth.revoke_token(conn, args.id, now=now):
            print(f"revoked token {args.id}")
            return 0
        print(f"cronhooks: no live admin token with id {args.id}", file=sys.stderr)
        return 1
    finally:
        await conn.close()


async def _broker(settings: Settings, args: argparse.Namespace) -> int:
    from cronhooks_cli.broker_users import BrokerAdminError, Management, add_reader, remove_reader

    name = args.name
    try:
        management = Management.from_amqp_url(settings.amqp_url, args.management_url)
        if args.broker_command == "remove-reader":
            queues = await remove_reader(management, name)
            print(f"user {name} removed, with {len(queues)} queues: {' '.join(queues) or '-'}")
            return 0
        password = await add_reader(management, name, max_length=args.max_length)
    except (ValueError, BrokerAdminError) as exc:
        print(f"cronhooks: {exc}", file=sys.stderr)
        return 1
    print(
        f"user {name}: queues {name}.* only (at most {args.max_length} messages each,"
        " the oldest dropped), reads cronhooks.events; password (shown once):"
    )
    print(password)
    return 0


if __name__ == "__main__":
    sys.exit(main())
