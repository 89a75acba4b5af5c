"""The renderer, auth file and parsers against a real PgBouncer 1.18 (no Django, no server needed).

PgBouncer loads the rendered files, the admin logs in with a verifier made by ``authfile``, and
``SHOW DATABASES`` must match what was rendered; then a RELOAD of a changed file, and of a broken
one, which PgBouncer answers with success while the diff and the log tell the truth.
"""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

from panel.pools.lib import admin_console
from panel.pools.lib.authfile import render_auth_file, scram_sha256_verifier
from panel.pools.lib.pgbouncer_ini import GlobalSettings, PoolSpec, ServerTarget, render

pytestmark = pytest.mark.integration

RUN_AS = "postgres"  # PgBouncer refuses to run as root
ADMIN = "paneladmin"


@dataclass
class Bouncer:
    directory: Path
    settings: GlobalSettings
    target: ServerTarget
    password: str

    def write(self, name: str, text: str) -> None:
        path = self.directory / name
        path.write_text(text)
        path.chmod(0o600)
        if os.geteuid() == 0:
            shutil.chown(path, RUN_AS, RUN_AS)

    def connect(self, **kwargs: object) -> psycopg.Connection[tuple[object, ...]]:
        params: dict[str, object] = {
            "host": self.settings.unix_socket_dir,
            "port": self.settings.listen_port,
            "dbname": "pgbouncer",
            "user": ADMIN,
            "password": self.password,
            "connect_timeout": 5,
        }
        params.update(kwargs)
        return psycopg.connect(cursor_factory=psycopg.ClientCursor, autocommit=True, **params)  # type: ignore[arg-type]


def show(
    conn: psycopg.Connection[tuple[object, ...]], what: str
) -> tuple[list[str], list[tuple[object, ...]]]:
    cur = conn.execute(f"SHOW {what}")
    assert cur.description is not None
    return [col.name for col in cur.description], cur.fetchall()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def bouncer_dir() -> Iterator[Path]:
    directory = Path(tempfile.mkdtemp(prefix="pgbouncer-test-", dir="/tmp"))
    directory.chmod(0o755)
    if os.geteuid() == 0:
        shutil.chown(directory, RUN_AS, RUN_AS)
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


def start(bouncer: Bouncer) -> subprocess.Popen[bytes]:
    binary = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
    as_user: dict[str, object] = {}
    if os.geteuid() == 0:
        as_user = {"user": RUN_AS, "group": pwd.getpwnam(RUN_AS).pw_gid, "extra_groups": []}
    stderr = open(bouncer.directory / "stderr.txt", "wb")  # noqa: SIM115  (closed below)
    proc = subprocess.Popen(
        [binary, str(bouncer.directory / "pgbouncer.ini")],
        stdout=subprocess.DEVNULL,
        stderr=stderr,
        start_new_session=True,
        **as_user,  # type: ignore[arg-type]
    )
    stderr.close()
    sock = Path(bouncer.settings.unix_socket_dir) / f".s.PGSQL.{bouncer.settings.listen_port}"
    deadline = time.monotonic() + 10
    while not sock.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            proc.wait(timeout=5)
            pytest.fail(f"PgBouncer did not start:\n{(bouncer.directory / 'stderr.txt').read_text()}")
        time.sleep(0.05)
    return proc


def make_tls_pair(directory: Path) -> tuple[Path, Path]:
    key, cert = directory / "server.key", directory / "server.crt"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        + ["-subj", "/CN=localhost", "-days", "1", "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
        timeout=30,
    )
    for path in (key, cert):
        path.chmod(0o600)
        if os.geteuid() == 0:
            shutil.chown(path, RUN_AS, RUN_AS)
    return key, cert


POOLS = [
    PoolSpec("test-pool", "benchmark", "doadmin", "transaction", 97),
    PoolSpec("inbound.reports", "defaultdb", None, "session", 10),
    PoolSpec("UPPER_stmt", "my db", None, "statement", 3),
    PoolSpec("1-doomed", "benchmark", None, "transaction", 2),
]


def test_pgbouncer_loads_what_the_panel_renders(bouncer_dir: Path) -> None:
    key, cert = make_tls_pair(bouncer_dir)
    password = secrets.token_urlsafe(12) + " 'ü\""
    settings = GlobalSettings(
        listen_port=free_port(),
        unix_socket_dir=str(bouncer_dir),
        auth_file=str(bouncer_dir / "userlist.txt"),
        logfile=str(bouncer_dir / "pgbouncer.log"),
        pidfile=str(bouncer_dir / "pgbouncer.pid"),
        client_tls_key_file=str(key),
        client_tls_cert_file=str(cert),
        admin_users=(ADMIN,),
        stats_users=("doadmin",),
    )
    # A server that is never contacted: no client of the pools connects in this test.
    target = ServerTarget(str(bouncer_dir / "no-server"), free_port())
    bouncer = Bouncer(bouncer_dir, settings, target, password)
    bouncer.write("pgbouncer.ini", render(settings, target, POOLS))
    bouncer.write("userlist.txt", render_auth_file({ADMIN: scram_sha256_verifier(password)}))

    proc = start(bouncer)
    try:
        with bouncer.connect() as conn:
            columns, rows = show(conn, "DATABASES")
            loaded = admin_console.parse_show_databases(columns, rows)
            assert admin_console.diff_databases(POOLS, loaded, target=target) == []
            by_name = {row.name: row for row in loaded}
            assert by_name["UPPER_stmt"].database == "my db"  # quoted value read back whole
            assert by_name["inbound.reports"].max_connections == 10
            assert by_name["test-pool"].force_user == "doadmin"

            # The other parsers accept what psycopg returns for the real thing.
            assert admin_console.parse_show_pools(*show(conn, "POOLS"))
            assert {s.database for s in admin_console.parse_show_stats(*show(conn, "STATS"))} >= {"pgbouncer"}
            clients = admin_console.parse_show_clients(*show(conn, "CLIENTS"))
            assert [(c.user, c.database) for c in clients] == [(ADMIN, "pgbouncer")]

            # An online change: one pool resized and moved to session mode, one removed, one added.
            changed = [p for p in POOLS if p.name not in {"1-doomed", "UPPER_stmt"}]
            changed += [
                PoolSpec("UPPER_stmt", "my db", None, "session", 5),
                PoolSpec("new-pool", "benchmark", None, "transaction", 4),
            ]
            bouncer.write("pgbouncer.ini", render(settings, target, changed))
            conn.execute("RELOAD")
            assert (
                admin_console.diff_databases(
                    changed, admin_console.parse_show_databases(*show(conn, "DATABASES")), target=target
                )
                == []
            )

            # A broken file: RELOAD still answers success; the diff and the log say what happened.
            log_offset = len((bouncer_dir / "pgbouncer.log").read_text())
            broken = render(
                settings, target, [*changed, PoolSpec("late-pool", "benchmark", None, "session", 1)]
            )
            broken = broken.replace("late-pool = ", "this line is broken\nlate-pool = ")
            bouncer.write("pgbouncer.ini", broken)
            conn.execute("RELOAD")
            problems = admin_console.diff_databases(
                [*changed, PoolSpec("late-pool", "benchmark", None, "session", 1)],
                admin_console.parse_show_databases(*show(conn, "DATABASES")),
            )
            assert problems == ["Pool 'late-pool' is missing from PgBouncer."]
            errors = admin_console.parse_log_errors(
                (bouncer_dir / "pgbouncer.log").read_text(), since_offset=log_offset
            )
            assert any("ERROR syntax error in configuration" in line for line in errors), errors

        # Over TCP the client must use TLS, as the connection details promise.
        with bouncer.connect(host="127.0.0.1", sslmode="require") as conn:
            assert conn.pgconn.ssl_in_use
        with pytest.raises(psycopg.OperationalError, match="SSL required"):
            bouncer.connect(host="127.0.0.1", sslmode="disable")
        with pytest.raises(psycopg.OperationalError, match="SASL authentication failed"):
            bouncer.connect(password="wrong")
        # Logins and logouts are not logged (two lines per connection under churn), refusals are.
        log = (bouncer_dir / "pgbouncer.log").read_text()
        assert "login attempt" not in log and "closing because: client close request" not in log
        assert "SASL authentication failed" in log
    finally:
        proc.terminate()
        proc.wait(timeout=10)
