"""Wait until what a role of the image needs answers: the metadata database and Redis, and with
``--migrated`` the migrations the web container applies (docker/entrypoint.sh).

Compose starts the containers in the order of their ``depends_on``; whether it also waits for a
dependency's healthcheck depends on the tool (docker compose does; podman-compose only with podman
4.6 or later). Waiting here makes the order safe with any of them, and with systemd units.

Exit 0 once everything answers, 1 after ``PANEL_WAIT_SECONDS`` (default 180) with what did not.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import django

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the panel, run as docker/wait_ready.py

POLL_SECONDS = 1.0


def database_answers() -> str | None:
    from django.db import connection
    from django.db.utils import OperationalError

    try:
        connection.ensure_connection()
    except OperationalError as exc:
        connection.close()
        return f"the metadata database ({str(exc).strip().splitlines()[0]})"
    return None


def redis_answers() -> str | None:
    import redis
    from django.conf import settings

    try:
        redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=2, socket_timeout=2).ping()
    except (redis.RedisError, OSError) as exc:
        return f"Redis ({exc})"
    return None


def migrated() -> str | None:
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connection)
    plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    if plan:
        return f"the migrations ({len(plan)} not applied yet; the web container applies them)"
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--migrated", action="store_true", help="also wait for the migrations")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "panel.settings")
    django.setup()

    checks: list[Callable[[], str | None]] = [database_answers, redis_answers]
    if args.migrated:
        checks.append(migrated)
    timeout = float(os.environ.get("PANEL_WAIT_SECONDS", "180"))
    deadline = time.monotonic() + timeout
    said: set[str] = set()
    for check in checks:
        while (waiting := check()) is not None:
            if time.monotonic() > deadline:
                print(f"wait_ready: gave up after {timeout:.0f} s waiting for {waiting}", file=sys.stderr)
                return 1
            if check.__name__ not in said:
                said.add(check.__name__)
                print(f"wait_ready: waiting for {waiting}", file=sys.stderr)
            time.sleep(POLL_SECONDS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
