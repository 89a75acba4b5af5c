"""``pg_allow_replication`` and the privilege guard: a tenant's replication user decodes logically
(a slot, pg_recvlogical streaming a committed row), and the attacks beside it are refused for
real: BASE_BACKUP (the server's files: measured allowed on PostgreSQL 15 over a
``replication=database`` connection without the guard), physical streaming and slots, renaming
the role off the guard's list. Taking the setting back takes replication away."""

from __future__ import annotations

import os
import subprocess
import tempfile

import psycopg
import pytest
from psycopg import errors

from panel.clusters import services
from panel.clusters.engine import dbconn, postgres
from panel.clusters.lib.connstr import ConnectionDetails
from panel.clusters.models import Cluster
from panel.clusters.services import roles
from panel.clusters.tests.conftest import module_cluster_fixture
from panel.managed.services import logical_replication

pytestmark = [pytest.mark.integration, pytest.mark.django_db]
DENIED = "permission denied to run replication command"


cluster = module_cluster_fixture("repl-tenant", "db-repl")


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
    assert logical_replication.set_replication(cluster, "cdc", True) is True
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
    assert logical_replication.set_replication(cluster, "cdc", False) is False
    with pytest.raises(psycopg.OperationalError, match="replication"):
        _replication(cluster, "cdc").close()


def test_a_replication_user_makes_no_physical_slot_over_sql(cluster: Cluster) -> None:
    """Issue 37, item 7: over an ordinary connection the logical-only role made a physical slot
    (``pg_create_physical_replication_slot``: no replication command, so nothing the walsender's
    check saw), which holds the server's WAL for a copy. Refused now, its logical slot functions
    still work. Nor does it drop or move the panel's physical slots."""
    roles.add_user(cluster, "cdc_sql")
    assert logical_replication.set_replication(cluster, "cdc_sql", True) is True
    admin = _details(cluster, "doadmin")
    with psycopg.connect(admin.uri(), autocommit=True) as conn:
        conn.execute("CREATE TABLE cdc_sql_t (id int PRIMARY KEY)")

    with psycopg.connect(_details(cluster, "cdc_sql").uri(), autocommit=True) as conn:
        # Legitimate: a logical slot made, read and dropped over SQL.
        conn.execute("SELECT pg_create_logical_replication_slot('cdc_sql_slot', 'test_decoding')")
        with psycopg.connect(admin.uri(), autocommit=True) as writer:
            writer.execute("INSERT INTO cdc_sql_t VALUES (7)")
        changes = [
            row[0]
            for row in conn.execute(
                "SELECT data FROM pg_logical_slot_get_changes('cdc_sql_slot', NULL, NULL)"
            )
        ]
        assert "table public.cdc_sql_t: INSERT: id[integer]:7" in changes, changes

        # The attacks: a physical slot made, or copied from one that exists.
        with dbconn.admin_connection(cluster) as panel:
            panel.execute("SELECT pg_create_physical_replication_slot('panel_phys', true)")
            held = panel.execute(
                "SELECT restart_lsn FROM pg_replication_slots WHERE slot_name = 'panel_phys'"
            ).fetchone()
        for call in (
            "pg_create_physical_replication_slot('cdc_phys', true)",
            "pg_copy_physical_replication_slot('panel_phys', 'cdc_copy')",
            "pg_copy_physical_replication_slot('panel_phys', 'cdc_copy', false)",
            # Drop or move the panel's slot (its replicas' WAL): the hook does not see the name.
            "pg_drop_replication_slot('panel_phys')",
            "pg_replication_slot_advance('panel_phys', pg_current_wal_lsn())",
        ):
            with pytest.raises(errors.InsufficientPrivilege) as caught:
                conn.execute(f"SELECT {call}")
            assert caught.value.diag.source_file == "replication_guard.c", call
            assert "may use logical replication only" in (caught.value.diag.message_detail or "")

    # Over a replication connection the slot is named: its own logical slot is dropped there,
    # the panel's physical one is not.
    with _replication(cluster, "cdc_sql") as conn:
        conn.execute("DROP_REPLICATION_SLOT cdc_sql_slot")
    with _replication(cluster, "cdc_sql") as conn, pytest.raises(errors.InsufficientPrivilege) as caught:
        conn.execute('DROP_REPLICATION_SLOT "panel_phys"')
    assert DENIED in str(caught.value) and caught.value.diag.source_file == "replication_guard.c"

    # Nor through the role from another session: SET ROLE to it (its member doadmin) or a
    # function of its own run as it is the same role.
    with psycopg.connect(admin.uri(), autocommit=True) as conn:
        conn.execute("GRANT cdc_sql TO doadmin")
        conn.execute("SET ROLE cdc_sql")
        with pytest.raises(errors.InsufficientPrivilege):
            conn.execute("SELECT pg_create_physical_replication_slot('cdc_phys_set_role')")
    with dbconn.admin_connection(cluster) as panel:
        physical = panel.execute(
            "SELECT slot_name, restart_lsn FROM pg_replication_slots WHERE slot_type = 'physical'"
        ).fetchall()
        assert panel.execute(
            "SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'cdc_sql_slot'"
        ).fetchone() == (0,)
        panel.execute("SELECT pg_drop_replication_slot('panel_phys')")
    assert held is not None and physical == [("panel_phys", held[0])]  # there, and not moved
