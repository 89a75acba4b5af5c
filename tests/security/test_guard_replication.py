"""``pg_allow_replication`` and the privilege guard: a tenant's replication user decodes logically
(a slot, pg_recvlogical streaming a committed row), and the attacks beside it are refused for
real: BASE_BACKUP (the server's files: measured allowed on PostgreSQL 15 over a
``replication=database`` connection without the guard), physical streaming and slots, renaming
the role off the guard's list. Taking the setting back takes replication away."""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import errors

from conftest import module_cluster
from panel.clusters import services
from panel.clusters.engine import postgres
from panel.clusters.lib.connstr import ConnectionDetails
from panel.clusters.models import Cluster
from panel.clusters.services import roles
from panel.managed.services import replication

pytestmark = [pytest.mark.integration, pytest.mark.django_db]
DENIED = "permission denied to run replication command"


@pytest.fixture(scope="module")
def cluster(django_db_setup: None, django_db_blocker: object) -> Iterator[Cluster]:
    with module_cluster(django_db_blocker, "repl-tenant", "db-repl") as made:
        yield made


def _details(cluster: Cluster, user: str) -> ConnectionDetails:
    admin = services.connection_details(cluster)
    if user == admin.user:
        return admin
    row = cluster.users.get(name=user)
    return ConnectionDetails(user, row.password, admin.host, admin.port, admin.database)


def _replication(cluster: Cluster, user: str) -> psycopg.Connection:
    return psycopg.connect(
        _details(cluster, user).uri(), replication="database", autocommit=True, connect_timeout=10
    )


def _refused(cluster: Cluster, command: str) -> None:
    with _replication(cluster, "cdc") as conn, pytest.raises(errors.InsufficientPrivilege) as caught:
        conn.execute(command)
    assert DENIED in str(caught.value) and caught.value.diag.source_file == "replication_guard.c"
    assert "may use logical replication only" in (caught.value.diag.message_detail or "")


def test_a_replication_user_decodes_logically_and_copies_nothing_of_the_server(cluster: Cluster) -> None:
    roles.add_user(cluster, "cdc")
    assert replication.set_replication(cluster, "cdc", True) is True
    admin = _details(cluster, "doadmin")
    with psycopg.connect(admin.uri(), autocommit=True) as conn:
        conn.execute("CREATE TABLE cdc_t (id int PRIMARY KEY, note text)")

    # Legitimate: a logical slot, then a committed row streamed by pg_recvlogical.
    with _replication(cluster, "cdc") as conn:
        conn.execute("IDENTIFY_SYSTEM")
        conn.execute("CREATE_REPLICATION_SLOT cdc_slot LOGICAL test_decoding")
    with psycopg.connect(admin.uri(), autocommit=True) as conn:
        conn.execute("INSERT INTO cdc_t VALUES (1, 'captured')")
        row = conn.execute("SELECT pg_current_wal_lsn()").fetchone()
        assert row is not None
        end = str(row[0])
    recvlogical = postgres.bindir_for(cluster.version) / "pg_recvlogical"
    cdc = _details(cluster, "cdc")
    with tempfile.NamedTemporaryFile("r", suffix=".txt") as out:
        result = subprocess.run(
            [
                str(recvlogical),
                "-d",
                f"host={cdc.host} port={cdc.port} dbname={cdc.database} user=cdc sslmode=require",
                "-S",
                "cdc_slot",
                "--start",
                "--no-loop",
                f"--endpos={end}",
                "-f",
                out.name,
            ],
            env={**os.environ, "PGPASSWORD": cdc.password},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 0, result.stderr
        assert "table public.cdc_t: INSERT: id[integer]:1 note[text]:'captured'" in out.read()

    # The attacks: the server's files, physical WAL, a physical slot, a rename off the list.
    _refused(cluster, "BASE_BACKUP (LABEL 'steal')")
    _refused(cluster, "START_REPLICATION 0/0")
    _refused(cluster, 'START_REPLICATION SLOT "LOGICAL" 0/0')
    _refused(cluster, "CREATE_REPLICATION_SLOT cdc_phys PHYSICAL")
    with psycopg.connect(admin.uri(), autocommit=True) as conn:
        with pytest.raises(errors.InsufficientPrivilege) as caught:
            conn.execute("ALTER ROLE cdc RENAME TO cdc_free")
        assert caught.value.diag.source_file == "replication_guard.c"
        with pytest.raises(errors.InsufficientPrivilege):
            conn.execute("ALTER ROLE cdc NOREPLICATION")  # the attribute stays the panel's
        assert conn.execute(
            "SELECT count(*) FROM pg_replication_slots WHERE slot_type = 'physical'"
        ).fetchone() == (0,)

    # Taken back: no replication connection at all.
    with _replication(cluster, "cdc") as conn:
        conn.execute("DROP_REPLICATION_SLOT cdc_slot")
    assert replication.set_replication(cluster, "cdc", False) is False
    with pytest.raises(psycopg.OperationalError, match="replication"):
        _replication(cluster, "cdc").close()
