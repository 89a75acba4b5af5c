"""Reaching a cluster from below, as the security tests replay it: a program run as a cluster's OS
user with none of root's groups (as code escaping the cluster would), ``psql``, and a query that
says who a connection URI logs in as, where, and over TLS or not."""

from __future__ import annotations

import shutil
import subprocess

import psycopg

from panel.core.runas import OsUser


def as_user(user: OsUser, *args: str) -> subprocess.CompletedProcess[str]:
    """Run a program as ``user`` with none of root's groups, as code escaping a cluster would."""
    return subprocess.run(
        list(args),
        user=user.uid,
        group=user.gid,
        extra_groups=[],
        capture_output=True,
        text=True,
        timeout=30,
        cwd="/",
        env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "PGCONNECT_TIMEOUT": "5"},
    )


def psql() -> str:
    found = shutil.which("psql")
    assert found, "psql (postgresql-client) is not installed"
    return found


def query(uri: str) -> tuple[str, str, bool]:
    with psycopg.connect(uri, connect_timeout=5) as conn:
        row = conn.execute("SELECT current_user, current_database()").fetchone()
        assert row is not None
        return row[0], row[1], conn.pgconn.ssl_in_use
