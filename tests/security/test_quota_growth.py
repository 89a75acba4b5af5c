"""Issue 29, item 2: what is stopped does not grow, and what a tenant makes on disk counts.

One cluster for the module. The panel stops writes the way its quota cycle does
(``enforce.write_and_reload``: the guard's lists in ``quota.conf``, a reload); the tenant then
attacks as ``doadmin`` over TCP and TLS. On the old code a stopped table grew eightfold through a
fillfactor and ``VACUUM FULL``, a large object and WAL messages were written in a stopped
database, and temporary files had no bound. Next to each refusal, the way back under the quota
(DELETE then ``VACUUM FULL``, reading and unlinking large objects) still works.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import psycopg
import pytest
from psycopg import errors

from panel.backups.engine import runner
from panel.clusters import services
from panel.clusters.engine import dbconn
from panel.clusters.lib.connstr import ConnectionDetails
from panel.clusters.lib.pgconf import TEMP_FILE_DISK_FRACTION
from panel.clusters.models import Cluster
from panel.clusters.services import config, roles
from panel.core.errors import ServiceError
from panel.quotas import services as quotas
from panel.quotas.services import enforce
from panel.quotas.services.measure import measure
from tests.fixtures.clusters import module_cluster

pytestmark = [pytest.mark.integration, pytest.mark.django_db]
DB = "grow"
FREE = "free_grow"


@dataclass(frozen=True)
class Tenant:
    cluster: Cluster
    admin: ConnectionDetails

    def connect(self, database: str = DB) -> psycopg.Connection:
        d = self.admin
        uri = ConnectionDetails(d.user, d.password, d.host, d.port, database, d.sslmode).uri()
        return psycopg.connect(uri, autocommit=True, connect_timeout=10)


@pytest.fixture(scope="module")
def tenant(django_db_setup: None, django_db_blocker: object) -> Iterator[Tenant]:
    with module_cluster(django_db_blocker, "quota-grow", "db-quota-grow") as cluster:
        with django_db_blocker.unblock():  # type: ignore[attr-defined]
            roles.add_database(cluster, DB)
            roles.add_database(cluster, FREE)
            found = Tenant(cluster, services.connection_details(cluster))
        yield found


def stop(tenant: Tenant, databases: list[str], owners: list[str] = ()) -> None:  # type: ignore[assignment]
    """The quota cycle's stop, then wait until a new session of the tenant sees it."""
    enforce.write_and_reload(tenant.cluster, databases, list(owners))
    wanted = ",".join(f'"{name}"' for name in databases)
    deadline = time.monotonic() + 10
    with tenant.connect(FREE) as conn:
        while conn.execute("SHOW pgpanel_guard.readonly_databases").fetchone()[0] != wanted:
            assert time.monotonic() < deadline, "the stop did not reach the sessions"
            time.sleep(0.05)


@pytest.fixture
def clean(tenant: Tenant) -> Iterator[Tenant]:
    yield tenant
    stop(tenant, [])


def refused(conn: psycopg.Connection, statement: str, detail: str) -> None:
    """The guard's disk_full refusal (53100), with ``detail`` in what it says."""
    with pytest.raises(errors.DiskFull, match="over its storage quota") as caught:
        conn.execute(statement)  # type: ignore[arg-type]
    assert detail in (caught.value.diag.message_detail or ""), caught.value.diag.message_detail


def size(conn: psycopg.Connection, relation: str) -> int:
    return conn.execute("SELECT pg_total_relation_size(%s::regclass)", [relation]).fetchone()[0]


def test_a_stopped_table_cannot_be_made_larger_and_vacuum_full_still_frees_space(clean: Tenant) -> None:
    tenant = clean
    with tenant.connect() as conn:
        conn.execute("DROP TABLE IF EXISTS big")
        conn.execute(
            "CREATE TABLE big AS SELECT g AS id, repeat('x', 200) AS pad FROM generate_series(1, 12000) g"
        )
        conn.execute("CREATE INDEX big_id ON big (id)")
    stop(tenant, [DB])
    with tenant.connect() as conn:
        before = size(conn, "big")
        # Storage parameters that would only make a rewrite larger are refused while stopped.
        for statement in (
            "ALTER TABLE big SET (fillfactor = 10)",
            "ALTER INDEX big_id SET (fillfactor = 10)",
        ):
            refused(conn, statement, "rewrite relations are refused")
        # The legitimate way back: DELETE, then VACUUM FULL gives the space back.
        conn.execute("DELETE FROM big WHERE id > 6000")
        conn.execute("VACUUM FULL big")
        after = size(conn, "big")
        assert after < before * 0.7, (before, after)

    # A fillfactor set before the stop: the rewrite that would grow is refused, in every form.
    stop(tenant, [])
    with tenant.connect() as conn:
        conn.execute("ALTER TABLE big SET (fillfactor = 10)")
        conn.execute("ALTER INDEX big_id SET (fillfactor = 10)")
    stop(tenant, [DB])
    with tenant.connect() as conn:
        for statement in (
            "VACUUM FULL big",
            "VACUUM (FULL, ANALYZE)",
            "REINDEX INDEX big_id",
            "REINDEX TABLE big",
        ):
            refused(conn, statement, "fillfactor below the default")
        assert size(conn, "big") <= after
        # RESET is allowed, and then the rewrite packs densely again.
        conn.execute("ALTER TABLE big RESET (fillfactor)")
        conn.execute("ALTER INDEX big_id RESET (fillfactor)")
        conn.execute("VACUUM FULL big")
        conn.execute("REINDEX TABLE big")
        assert size(conn, "big") <= after * 1.1
        conn.execute("VACUUM big")  # plain VACUUM never was a question


def test_a_stopped_roles_table_cannot_grow_by_a_rewrite(clean: Tenant) -> None:
    tenant = clean
    with tenant.connect(FREE) as conn:
        conn.execute("DROP ROLE IF EXISTS grower")
        conn.execute("CREATE ROLE grower")
        conn.execute("GRANT grower TO doadmin")
        conn.execute("GRANT CREATE ON SCHEMA public TO grower")
        conn.execute("DROP TABLE IF EXISTS theirs, mine")
        conn.execute("CREATE TABLE theirs WITH (fillfactor = 10) AS SELECT g FROM generate_series(1, 2000) g")
        conn.execute("ALTER TABLE theirs OWNER TO grower")
        conn.execute("CREATE TABLE mine WITH (fillfactor = 10) AS SELECT g FROM generate_series(1, 2000) g")
    stop(tenant, [], ["grower"])
    with tenant.connect(FREE) as conn:
        refused(conn, "VACUUM FULL theirs", "fillfactor below the default")
        refused(conn, "ALTER TABLE theirs SET (fillfactor = 20)", "are refused")
        conn.execute("VACUUM FULL mine")  # another role's table: not stopped
        conn.execute("DROP TABLE theirs")  # dropping is the way back


def test_large_objects_and_wal_messages_are_refused_in_a_stopped_database(clean: Tenant) -> None:
    tenant = clean
    with tenant.connect() as conn:
        oid = conn.execute("SELECT lo_from_bytea(0, 'kept')").fetchone()[0]
    stop(tenant, [DB])
    with tenant.connect() as conn:
        for statement in (
            "SELECT lo_from_bytea(0, decode(repeat('ab', 1000000), 'hex'))",
            "SELECT lo_create(0)",
            f"SELECT lo_put({oid}, 4, decode(repeat('ab', 1000000), 'hex'))",
            "SELECT pg_logical_emit_message(false, 'p', repeat('x', 100000))",
            "DO $$ BEGIN PERFORM lo_from_bytea(0, 'in plpgsql'); END $$",
        ):
            refused(conn, statement, "large objects")
    with tenant.connect() as conn:
        conn.autocommit = False
        fd = conn.execute(f"SELECT lo_open({oid}, 131072)").fetchone()[0]  # INV_WRITE
        with pytest.raises(errors.DiskFull):
            conn.execute("SELECT lowrite(%s, 'more')", [fd])
        conn.rollback()
    with tenant.connect() as conn:
        assert conn.execute(f"SELECT lo_get({oid})").fetchone()[0] == b"kept"  # reads work
        conn.execute(f"SELECT lo_unlink({oid})")  # and freeing space
    with tenant.connect(FREE) as conn:  # another database is not stopped
        made = conn.execute("SELECT lo_from_bytea(0, 'elsewhere')").fetchone()[0]
        conn.execute(f"SELECT lo_unlink({made})")


def test_temporary_files_are_bounded_by_the_plan_and_not_raised_by_the_tenant(tenant: Tenant) -> None:
    plan = tenant.cluster.plan
    assert plan is not None
    with tenant.connect() as conn:
        limit = conn.execute(
            "SELECT setting::bigint FROM pg_settings WHERE name = 'temp_file_limit'"
        ).fetchone()[0]
        assert limit == plan.disk_bytes // TEMP_FILE_DISK_FRACTION // 1024, limit  # kB, was -1
        for statement in (
            "SET temp_file_limit = -1",
            "ALTER ROLE doadmin SET temp_file_limit = -1",
            f"ALTER DATABASE {DB} SET temp_file_limit = -1",
        ):
            with pytest.raises(errors.InsufficientPrivilege):
                conn.execute(statement)


def test_wal_and_the_backup_repository_count_against_the_plans_disk(
    clean: Tenant, settings: object, wait_until: Callable[..., object]
) -> None:
    """WAL a tenant makes (pg_logical_emit_message in a database that is not stopped) ends in the
    cluster's backup repository on the node's disk: the plan's disk counts it and stops writes."""
    tenant = clean
    cluster = tenant.cluster
    with tenant.connect(FREE) as conn:
        conn.execute("SELECT pg_logical_emit_message(false, 'p', repeat('x', 3 * 1024 * 1024))")
    with dbconn.admin_connection(cluster) as conn:
        conn.execute("SELECT pg_switch_wal()")
    wait_until(lambda: runner.repository_bytes(cluster) > 2 * 1024**2, timeout=60, message="WAL archived")
    repository = runner.repository_bytes(cluster)
    data_only = measure(cluster).data_dir_bytes
    assert cluster.plan is not None
    disk = cluster.plan.disk_bytes
    # A full disk between the data directory alone and with the repository.
    settings.PANEL_DISK_READONLY_PERCENT = 100 * (data_only + repository // 2) / disk  # type: ignore[attr-defined]
    settings.PANEL_DISK_WRITABLE_PERCENT = settings.PANEL_DISK_READONLY_PERCENT * 0.999  # type: ignore[attr-defined]
    try:
        quotas.run_cycle(cluster)
        storage = quotas.storage_of(cluster)
        assert storage.data_dir_bytes is not None and storage.data_dir_bytes >= data_only + repository * 0.9
        assert storage.disk_full_since is not None
        with tenant.connect(FREE) as conn:
            refused(conn, "CREATE TABLE more_wal (x int)", "are refused")
    finally:
        settings.PANEL_DISK_READONLY_PERCENT = 97  # type: ignore[attr-defined]
        settings.PANEL_DISK_WRITABLE_PERCENT = 93  # type: ignore[attr-defined]
        quotas.run_cycle(cluster)
    assert quotas.storage_of(cluster).disk_full_since is None


def test_the_owner_may_lower_temp_file_limit_but_not_raise_it(tenant: Tenant) -> None:
    cluster = tenant.cluster
    assert cluster.plan is not None
    bound = cluster.plan.disk_bytes // TEMP_FILE_DISK_FRACTION // 1024
    for too_much in (-1, bound + 1):
        with pytest.raises(ServiceError) as refused_change:
            config.update_config(cluster, {"temp_file_limit": too_much})
        assert refused_change.value.field == "temp_file_limit"
        assert refused_change.value.code == "config.temp_file_limit_over_plan"
    config.update_config(cluster, {"temp_file_limit": 64 * 1024})  # lower: the owner's own
    with tenant.connect() as conn:
        assert conn.execute("SHOW temp_file_limit").fetchone()[0] == "64MB"
        with pytest.raises(errors.ConfigurationLimitExceeded, match="temp_file_limit"):
            conn.execute(
                "SELECT count(*) FROM (SELECT g FROM generate_series(1, 20000000) g ORDER BY g DESC) s"
            )
    config.update_config(cluster, {"temp_file_limit": bound})
