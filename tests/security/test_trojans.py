"""Issue 10, row 9 and item 0: the panel never runs a tenant's code with its own rights.

As ``doadmin`` over TCP and TLS, a tenant plants the CVE-2018-1058 class of trojans in ``public``
of its databases: overloads of the functions the panel calls (exact matches where pg_catalog's
need a cast, as row 9's ``pg_total_relation_size(oid)``, and same-signature ones), aggregates,
operators on the types the panel compares, views named as catalog relations, a domain named as a
catalog type (casts to it run its CHECK), and ``ALTER DATABASE … SET search_path = public,
pg_catalog`` so that even same-signature objects would win. Every trojan records who ran it and
tries ``ALTER ROLE doadmin SUPERUSER``. Then the panel does what it does in those databases:
the Insights collection and ``bench init`` (pgbench -i and the data set's size). Nothing may
fire as one of the panel's roles, doadmin stays an ordinary role, and every figure still comes.
The trojans, and the reads of who ran them, are tests/security/tenant_trojans.py.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack

import psycopg
import pytest
from django.conf import settings
from django.contrib.auth.models import User

from benchmarks.models import JobStatus
from benchmarks.services import datasets
from panel.clusters import services
from panel.clusters.engine import dbconn
from panel.clusters.models import Cluster, credentials
from panel.clusters.services import roles
from panel.clusters.services.attach import ExternalServer, attach_cluster
from panel.insights import services as insights
from panel.insights.engine import collector
from panel.pools import services as pool_services
from tests.fixtures.clusters import make_local_cluster
from tests.security.tenant_trojans import (
    BENCH_DB,
    as_doadmin,
    assert_untouched,
    doadmin_is_superuser,
    doadmin_sessions,
    fired,
    plant,
)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster(django_db_setup: None, django_db_blocker) -> Iterator[Cluster]:  # type: ignore[no-untyped-def]
    """One cluster for the module, with a benchmark database, trojans planted in both."""
    with django_db_blocker.unblock():
        owner = User.objects.create_user("mallory", "mallory@example.com", "mallory-password-1")
        cluster = make_local_cluster(owner, name="db-trojans")
    try:
        with django_db_blocker.unblock():
            roles.add_database(cluster, BENCH_DB)
            for dbname in (cluster.default_database, BENCH_DB):
                plant(cluster, dbname)
        yield cluster
    finally:
        with django_db_blocker.unblock():
            cluster.refresh_from_db()
            services.delete_cluster(cluster, confirm_name=cluster.name)
            owner.delete()


@pytest.fixture
def trojans(cluster: Cluster, db: None) -> Cluster:
    return cluster


def test_the_trojans_fire_for_a_caller_that_does_not_pin_its_search_path(trojans: Cluster) -> None:
    """Without this the other tests could not fail: the planted objects do win name lookup,
    the row 9 query of the old panel among them, and as a superuser they make doadmin one."""
    cluster = trojans
    with as_doadmin(cluster, "defaultdb", pinned=False) as conn:
        assert conn.execute("SHOW search_path").fetchone() == ("public, pg_catalog",)
        conn.execute("SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c").fetchone()
    assert {"pg_total_relation_size(oid)", "sum(bigint)", "view pg_class"} <= {
        what for _who, what in fired(cluster, "defaultdb", by_doadmin=True)
    }
    # Default search_path (pg_catalog implicitly first): row 9's exact-match overload still wins.
    with as_doadmin(cluster, BENCH_DB, pinned=False) as conn:
        conn.execute("SET search_path = DEFAULT")
        conn.execute("SELECT pg_total_relation_size(c.oid) FROM pg_catalog.pg_class c LIMIT 1").fetchone()
    assert ("doadmin", "pg_total_relation_size(oid)") in fired(cluster, BENCH_DB, by_doadmin=True)

    # The old data-set size: the superuser, unpinned, inside the tenant's database.
    try:
        with psycopg.connect(
            host=str(cluster.socket_dir),
            port=cluster.port,
            user=settings.PANEL_SUPERUSER,
            password=credentials.superuser_password(cluster),
            dbname="defaultdb",
            autocommit=True,
        ) as conn:
            conn.execute(
                "SELECT sum(pg_total_relation_size(c.oid))::bigint FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE c.relkind IN ('r', 'p') AND c.relname LIKE 'pgbench\\_%'"
            ).fetchone()
        assert doadmin_is_superuser(cluster)
    finally:
        with dbconn.admin_connection(cluster) as conn:
            conn.execute("ALTER ROLE doadmin NOSUPERUSER")
        for dbname in ("defaultdb", BENCH_DB):
            with as_doadmin(cluster, dbname) as conn:
                conn.execute("DELETE FROM public.trojan_marker")
    assert_untouched(cluster)


def test_panel_connections_pin_search_path_over_the_tenants_setting(trojans: Cluster) -> None:
    with dbconn.monitor_connection(trojans, "defaultdb") as conn:
        assert conn.execute("SHOW search_path").fetchone() == ("pg_catalog,pg_temp",)
        assert conn.execute("SELECT current_user").fetchone() == (settings.PANEL_MONITOR_ROLE,)
    with dbconn.admin_connection(trojans) as conn:
        assert conn.execute("SHOW search_path").fetchone() == ("pg_catalog,pg_temp",)
    assert_untouched(trojans)


def test_the_collector_reads_every_figure_without_running_tenant_code(trojans: Cluster) -> None:
    snap = collector.collect(insights.target_for(trojans), budget=15)

    assert snap.up.get("postgres") is True, snap.errors
    gauges = {(metric, labels): value for metric, labels, value in snap.gauges}
    counters = {(name, labels): value for _source, name, labels, value in snap.counters}
    for dbname in ("postgres", "defaultdb", BENCH_DB):
        assert gauges[("db_size_bytes", f"db={dbname}")] > 1_000_000
        assert ("xact_total", f"db={dbname}") in counters
        assert ("seq_scan", f"db={dbname}") in counters, f"no scan counts read in {dbname}"
    assert gauges[("max_connections", "")] == 25
    assert ("conn_total", "") in gauges
    assert_untouched(trojans)


def test_the_collector_sees_other_users_sessions_and_sizes_of_closed_databases(trojans: Cluster) -> None:
    """What pg_monitor is for: another role's sessions, and the size of a database whose owner
    revoked CONNECT from PUBLIC (only the scan counts of that one are lost)."""
    with as_doadmin(trojans, BENCH_DB) as conn:
        conn.execute(f'REVOKE CONNECT ON DATABASE "{BENCH_DB}" FROM PUBLIC')
    try:
        with as_doadmin(trojans, "defaultdb"):
            snap = collector.collect(insights.target_for(trojans), budget=15)
    finally:
        with as_doadmin(trojans, "defaultdb") as conn:
            conn.execute(f'GRANT CONNECT ON DATABASE "{BENCH_DB}" TO PUBLIC')
    gauges = {(metric, labels): value for metric, labels, value in snap.gauges}
    assert gauges[("conn_user", "user=doadmin")] >= 1
    assert gauges[("db_size_bytes", f"db={BENCH_DB}")] > 1_000_000
    assert_untouched(trojans)


def test_a_server_whose_every_slot_tenants_hold_is_still_collected(
    trojans: Cluster, wait_until: Callable[..., object]
) -> None:
    """The monitor role has no reserved slot (PostgreSQL 15): then the superuser reads the
    figures, in the maintenance database only, and still runs nothing of the tenant's."""
    with ExitStack() as stack:
        held = 0
        while True:
            try:
                stack.enter_context(as_doadmin(trojans, "defaultdb"))
            except psycopg.OperationalError as exc:
                assert "remaining connection slots" in str(exc), exc
                break
            held += 1
            assert held <= 25, "the server never ran out of slots"
        with pytest.raises(dbconn.DatabaseError) as refused, dbconn.monitor_connection(trojans):
            pass
        assert refused.value.out_of_connection_slots, refused.value

        snap = collector.collect(insights.target_for(trojans), budget=15)

    assert held == 22  # 25 connections on the 1 GB plan, 3 reserved for the superuser
    assert snap.up.get("postgres") is True, snap.errors
    gauges = {(metric, labels): value for metric, labels, value in snap.gauges}
    assert gauges[("conn_user", "user=doadmin")] == held
    assert gauges[("conn_percent", "")] == pytest.approx(100 * held / 25)
    assert gauges[("db_size_bytes", "db=defaultdb")] > 1_000_000
    # A closed client's backend leaves its slot a moment later: the marker reads wait for that.
    wait_until(lambda: doadmin_sessions(trojans) == 0, timeout=30, message="the held slots are released")
    assert_untouched(trojans)


@pytest.mark.parametrize("dbname", ["defaultdb", BENCH_DB])
def test_bench_init_measures_the_data_set_without_running_tenant_code(trojans: Cluster, dbname: str) -> None:
    dataset = datasets.init_dataset(trojans, dbname, 1, enqueue=False)
    dataset = datasets.execute_init(dataset.pk)

    assert dataset.status == JobStatus.SUCCEEDED, dataset.error_message
    # pgbench -i at scale 1: about 15 MB of tables and indexes.
    assert dataset.size_bytes is not None and dataset.size_bytes > 10_000_000
    assert_untouched(trojans)


def test_the_monitor_role_reads_but_cannot_write_or_escalate(trojans: Cluster) -> None:
    cluster = trojans
    role = settings.PANEL_MONITOR_ROLE
    with dbconn.admin_connection(cluster) as conn:
        attributes = conn.execute(
            "SELECT rolsuper, rolcreaterole, rolcreatedb, rolreplication, rolbypassrls, rolcanlogin, "
            "rolinherit FROM pg_catalog.pg_roles WHERE rolname = %s",
            [role],
        ).fetchone()
        memberships = conn.execute(
            "SELECT pg_catalog.pg_get_userbyid(roleid) FROM pg_catalog.pg_auth_members "
            "WHERE member = %s::regrole",
            [role],
        ).fetchall()
    assert attributes == (False, False, False, False, False, True, True)
    assert memberships == [("pg_monitor",)]

    refused = [
        ("defaultdb", "SELECT rolpassword FROM pg_catalog.pg_authid"),
        ("defaultdb", "CREATE TABLE public.monitor_was_here (x int)"),
        ("defaultdb", "ALTER ROLE doadmin SUPERUSER"),
        ("postgres", "CREATE ROLE monitor_made_me LOGIN"),
        ("postgres", "CREATE DATABASE monitor_made_me"),
        ("postgres", "CREATE TABLE public.monitor_was_here (x int)"),
    ]
    for dbname, statement in refused:
        with (
            dbconn.monitor_connection(cluster, dbname) as conn,
            pytest.raises(psycopg.errors.InsufficientPrivilege),
        ):
            conn.execute(statement)

    # What it is for: every session's query text and every database's size.
    with as_doadmin(cluster, "defaultdb") as tenant:
        tenant.execute("SELECT 'tenant-query-marker'")
        with dbconn.monitor_connection(cluster) as conn:
            queries = conn.execute(
                "SELECT query FROM pg_catalog.pg_stat_activity WHERE usename = 'doadmin'"
            ).fetchall()
            size = conn.execute("SELECT pg_catalog.pg_database_size('defaultdb')").fetchone()
    assert ("SELECT 'tenant-query-marker'",) in queries
    assert size is not None and size[0] > 1_000_000
    assert not doadmin_is_superuser(cluster)


def test_the_superuser_never_enters_a_tenant_database(trojans: Cluster) -> None:
    for dbname in ("defaultdb", BENCH_DB, "template1"):
        with pytest.raises(dbconn.TenantDatabaseRefused), dbconn.admin_connection(trojans, dbname):
            pass
    with dbconn.admin_connection(trojans, "postgres") as conn:
        assert conn.execute("SELECT current_database()").fetchone() == ("postgres",)


def test_a_tenant_cannot_hijack_a_cast_between_catalog_types(trojans: Cluster) -> None:
    """Casts the panel writes (``::bigint``, ``::int``, ``::double precision``) are between
    catalog types; only the owner of one of the types may create a cast, a superuser here."""
    with as_doadmin(trojans, "defaultdb") as conn:
        conn.execute(
            "CREATE FUNCTION public.trojan_cast(numeric) RETURNS bigint LANGUAGE plpgsql AS $$ "
            "BEGIN PERFORM public.trojan_fire('cast numeric to bigint'); RETURN 0; END $$"
        )
        try:
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="must be owner of type"):
                conn.execute("CREATE CAST (numeric AS bigint) WITH FUNCTION public.trojan_cast(numeric)")
            # The legitimate action beside it: a cast from a type of the tenant's own.
            conn.execute("CREATE TYPE public.mood AS ENUM ('ok')")
            conn.execute("CREATE CAST (public.mood AS text) WITH INOUT")
        finally:
            conn.execute("DROP FUNCTION public.trojan_cast(numeric)")
            conn.execute("DROP TYPE IF EXISTS public.mood CASCADE")


def test_a_server_attached_through_a_pooler_is_still_collected(trojans: Cluster) -> None:
    """PgBouncer refuses the ``options`` that pin search_path; a server the user attached may sit
    behind one. Its connections are the user's own credentials, so they go unpinned then."""
    staff = User.objects.create_user("trent", "trent@example.com", "trent-password-1", is_staff=True)
    pool = pool_services.create_pool(trojans, "trojan-pool", "defaultdb", None, "transaction", 2)
    try:
        details = pool_services.pool_connection_details(pool)
        server = ExternalServer(
            host=details.host,
            port=details.port,
            user=details.user,
            password=details.password,
            database=details.database,
            sslmode="require",
        )
        attached = attach_cluster(staff, name="db-behind-pooler", server=server)
        snap = collector.collect(insights.target_for(attached), budget=15)
    finally:
        pool_services.stop_pgbouncer(trojans)
    assert snap.up.get("postgres") is True, snap.errors
    gauges = {(metric, labels): value for metric, labels, value in snap.gauges}
    assert gauges[("db_size_bytes", "db=defaultdb")] > 1_000_000
    assert_untouched(trojans)
