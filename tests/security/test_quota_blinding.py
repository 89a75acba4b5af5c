"""Issue 29, item 1: a tenant cannot blind the quota measurement, and a measurement that cannot see
fails closed.

One cluster for the module. The tenant's ``doadmin`` and a role ``app`` of its own attack over TCP
and TLS with their real connection details; the panel measures with the real quota cycle. Each
attack made the cycle read "ok, 0 bytes" and let writes through on the old code; next to each,
the legitimate action still works (the owner revoking CONNECT from PUBLIC is one: the quota is
still measured).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from psycopg import errors, sql

from panel.clusters.engine import dbconn
from panel.clusters.models import Cluster
from panel.quotas import services as quotas
from panel.quotas.lib import blindness
from panel.quotas.models import Quota, QuotaKind, QuotaState
from panel.quotas.services import enforce
from tests.fixtures.tenants import Tenant, lift_quotas, tenant_cluster

pytestmark = [pytest.mark.integration, pytest.mark.django_db]
MB = 1024**2
DB = "qt"


@pytest.fixture(scope="module")
def tenant(django_db_setup: None, django_db_blocker: object) -> Iterator[Tenant]:
    with tenant_cluster(django_db_blocker, "quota-blind", "db-quota-blind", [DB], database=DB) as found:
        with found.connect(as_app=True) as conn:
            conn.execute("CREATE TABLE big (id int, pad text)")
            # About 3 MB the role owns, over a 1 MB quota.
            conn.execute("INSERT INTO big SELECT g, repeat(md5(g::text), 24) FROM generate_series(1, 3500) g")
        yield found


@pytest.fixture
def clean(tenant: Tenant) -> Iterator[Tenant]:
    """Each test leaves no quota, no write stop and no database setting behind."""
    yield tenant
    lift_quotas(tenant)
    with dbconn.admin_connection(tenant.cluster) as conn:
        conn.execute(sql.SQL("ALTER DATABASE {} RESET ALL").format(sql.Identifier(DB)))
        conn.execute(sql.SQL("ALTER DATABASE {} CONNECTION LIMIT -1").format(sql.Identifier(DB)))
        conn.execute(sql.SQL("ALTER DATABASE {} IS_TEMPLATE false").format(sql.Identifier(DB)))
        conn.execute(sql.SQL("GRANT CONNECT ON DATABASE {} TO PUBLIC").format(sql.Identifier(DB)))


def role_quota(tenant: Tenant) -> Quota:
    return Quota.objects.get(cluster=tenant.cluster, kind=QuotaKind.ROLE, name="app")


def assert_app_stopped(tenant: Tenant, *, try_insert: bool = True) -> None:
    q = role_quota(tenant)
    assert q.state == QuotaState.ENFORCED, (q.state, q.space_used)
    assert q.space_used is not None and q.space_used > 2 * MB
    assert enforce.applied_lists(tenant.cluster)[1] == '"app"'
    if try_insert:
        with tenant.connect(as_app=True) as conn, pytest.raises(errors.DiskFull):
            conn.execute("INSERT INTO public.big VALUES (0, 'past the quota')")


def reset_database_settings(tenant: Tenant) -> None:
    with dbconn.admin_connection(tenant.cluster) as conn:
        conn.execute(sql.SQL("ALTER DATABASE {} RESET ALL").format(sql.Identifier(DB)))


def test_a_quota_is_still_measured_after_the_owner_revokes_connect_from_public(clean: Tenant) -> None:
    tenant = clean
    with tenant.connect() as conn:
        conn.execute(f"REVOKE CONNECT ON DATABASE {DB} FROM PUBLIC")
        conn.execute(f"GRANT CONNECT ON DATABASE {DB} TO app")
        # The monitor's own grant cannot be taken away (a reserved role).
        with pytest.raises(errors.InsufficientPrivilege):
            conn.execute(f"REVOKE CONNECT ON DATABASE {DB} FROM pgpanel_monitor")
    quotas.set_quota(tenant.cluster, QuotaKind.ROLE, "app", space_hard=MB)
    assert_app_stopped(tenant)

    # The relation count too: two relations (table, its TOAST not counted) past a hard limit of 1.
    quotas.set_quota(tenant.cluster, QuotaKind.ROLE, "app", files_hard=1)
    q = role_quota(tenant)
    assert q.state == QuotaState.ENFORCED and (q.files_used or 0) >= 1, (q.state, q.files_used)
    with tenant.connect(as_app=True) as conn, pytest.raises(errors.DiskFull):
        conn.execute("CREATE TABLE one_more (x int)")


BLINDING_SETTINGS = (
    "client_encoding = 'SQL_ASCII'",  # role names would come back as bytes
    "statement_timeout = 1",
    "lock_timeout = 1",
    "idle_session_timeout = 1",
    "idle_in_transaction_session_timeout = 1",
    "search_path = 'nowhere'",
    "default_transaction_isolation = 'serializable'",
    "exit_on_error = on",
    "role = 'doadmin'",  # the monitor role is no member: SET ROLE at the session's start fails
)


def test_database_and_role_settings_do_not_blind_the_measurement(clean: Tenant) -> None:
    """Each of these alone made the cycle read "ok, 0" (or fail) on the old code."""
    tenant = clean
    with tenant.connect() as conn:
        for setting in BLINDING_SETTINGS:  # the tenant may: its own database
            conn.execute(f"ALTER DATABASE {DB} SET {setting}")
    quotas.set_quota(tenant.cluster, QuotaKind.ROLE, "app", space_hard=MB)
    reset_database_settings(tenant)  # the tenant's own sessions would suffer from some of them
    assert_app_stopped(tenant)


def test_preload_library_settings_are_refused_and_do_not_blind_when_already_set(clean: Tenant) -> None:
    tenant = clean
    with tenant.connect() as conn:
        for statement in (
            f"ALTER DATABASE {DB} SET local_preload_libraries = 'missing'",
            "ALTER ROLE app SET local_preload_libraries = 'missing'",
            f"ALTER ROLE app IN DATABASE {DB} SET session_preload_libraries = 'missing'",
        ):
            with pytest.raises(errors.InsufficientPrivilege):
                conn.execute(statement)
        conn.execute(f"ALTER DATABASE {DB} SET work_mem = '8MB'")  # other settings: the tenant's
    # Set by somebody else before the guard refused it (every new session then fails):
    with dbconn.admin_connection(tenant.cluster) as conn:
        conn.execute(f"ALTER DATABASE {DB} SET local_preload_libraries = 'missing'")
    quotas.set_quota(tenant.cluster, QuotaKind.ROLE, "app", space_hard=MB)
    q = role_quota(tenant)
    assert q.state == QuotaState.ENFORCED and (q.space_used or 0) > 2 * MB, (q.state, q.space_used)


def test_is_template_and_allow_connections_are_the_panels(clean: Tenant) -> None:
    tenant = clean
    with tenant.connect("defaultdb") as conn:
        for statement in (
            f"ALTER DATABASE {DB} IS_TEMPLATE true",
            f"ALTER DATABASE {DB} ALLOW_CONNECTIONS false",
            "CREATE DATABASE hidden_t IS_TEMPLATE true",
            "CREATE DATABASE hidden_c ALLOW_CONNECTIONS false",
        ):
            with pytest.raises(errors.InsufficientPrivilege, match="control panel|IS_TEMPLATE|ALLOW_CONN"):
                conn.execute(statement)
        # Beside it, the tenant's own database options still work.
        conn.execute(f"ALTER DATABASE {DB} CONNECTION LIMIT 100")
        conn.execute("CREATE DATABASE plain_new")
        conn.execute("DROP DATABASE plain_new")
    # A database already a template (made so by a superuser before) is still measured.
    with dbconn.admin_connection(tenant.cluster) as conn:
        conn.execute(f"ALTER DATABASE {DB} IS_TEMPLATE true")
    quotas.set_quota(tenant.cluster, QuotaKind.DATABASE, DB, space_hard=MB)
    q = Quota.objects.get(cluster=tenant.cluster, kind=QuotaKind.DATABASE, name=DB)
    assert q.state == QuotaState.ENFORCED and (q.space_used or 0) > 3 * MB, (q.state, q.space_used)


def test_a_blind_measurement_keeps_the_enforced_state_and_says_why(clean: Tenant, client) -> None:
    """What is left to a tenant (a connection limit of 0 keeps the monitor role out) fails closed."""
    tenant = clean
    cluster = tenant.cluster
    quotas.set_quota(cluster, QuotaKind.ROLE, "app", space_hard=MB)
    assert_app_stopped(tenant)
    with tenant.connect() as conn:
        conn.execute(f"ALTER DATABASE {DB} CONNECTION LIMIT 0")
    quotas.run_cycle(cluster)
    assert_app_stopped(tenant, try_insert=False)  # not "ok, 0": the last enforced state holds
    storage = quotas.storage_of(cluster)
    assert blindness.loads(storage.blind) == [(DB, blindness.CONNECTION_LIMIT)], storage.blind
    event = cluster.events.filter(kind="quota-blind").latest("created_at")
    assert DB in str(event.message) and "accepts no more connections" in str(event.message)
    client.force_login(cluster.owner)
    page = client.get(f"/clusters/{cluster.pk}/quotas/")
    assert page.status_code == 200
    assert f"Storage could not be measured in {DB} (it accepts no more connections)" in page.content.decode()
    assert "too many connections" not in page.content.decode()

    with tenant.connect("defaultdb") as conn:
        conn.execute(f"ALTER DATABASE {DB} CONNECTION LIMIT -1")
    quotas.run_cycle(cluster)
    assert quotas.storage_of(cluster).blind == ""
    assert cluster.events.filter(kind="quota-seen").exists()
    assert_app_stopped(tenant)


DE_UNREACHABLE = "der Server hat nicht geantwortet"


def test_a_cycle_that_measures_nothing_keeps_every_state_and_says_so(
    clean: Tenant, monkeypatch: pytest.MonkeyPatch, client
) -> None:
    """Whatever keeps the whole measurement from running (here the cluster's socket, moved away)
    is not "ok, 0" either: the stop holds and the cluster says why; the next good cycle clears it."""
    tenant = clean
    cluster = tenant.cluster
    quotas.set_quota(cluster, QuotaKind.ROLE, "app", space_hard=MB)
    assert_app_stopped(tenant)
    real_socket_dir = Cluster.socket_dir
    monkeypatch.setattr(Cluster, "socket_dir", property(lambda self: real_socket_dir.fget(self) / "gone"))
    results = quotas.run_all()
    assert results[cluster.name][0].startswith("error:")
    assert str(real_socket_dir.fget(cluster)) in results[cluster.name][0]  # the driver named the path
    assert blindness.loads(quotas.storage_of(cluster).blind) == [("", blindness.UNREACHABLE)]
    assert cluster.events.filter(kind="quota-blind").exists()
    monkeypatch.undo()
    # Issue 38, item 2: the driver's text and the socket's path reach no page, in either
    # language; the banner and the event say what could not be measured in a coded sentence.
    client.force_login(cluster.owner)
    for language, sentence in (
        ("en", f"Storage could not be measured in {cluster.name} (the server did not answer)"),
        ("de", f"({DE_UNREACHABLE})"),
    ):
        for path in (f"/clusters/{cluster.pk}/quotas/", f"/clusters/{cluster.pk}/"):
            page = client.get(path, headers={"accept-language": language}).content.decode()
            assert sentence in page, (language, path)
            for raw in (str(real_socket_dir.fget(cluster)), "/tmp", "connection to server", "failed:"):
                assert raw not in page, (language, path, raw)
    quotas.run_cycle(cluster)
    assert quotas.storage_of(cluster).blind == ""
    assert_app_stopped(tenant)


def test_a_lock_on_a_new_databases_row_blinds_that_database_only(clean: Tenant) -> None:
    """The cycle's GRANT of CONNECT to the monitor role waits on no tenant's lock past
    lock_timeout: a database whose row the tenant keeps locked is blind, the others measured."""
    tenant = clean
    quotas.set_quota(tenant.cluster, QuotaKind.ROLE, "app", space_hard=MB)
    with tenant.connect("defaultdb") as conn:
        conn.execute("DROP DATABASE IF EXISTS locked_new")
        conn.execute("CREATE DATABASE locked_new")
        conn.execute("REVOKE CONNECT ON DATABASE locked_new FROM PUBLIC")
    holder = tenant.connect("defaultdb")
    try:
        holder.autocommit = False
        holder.execute("ALTER DATABASE locked_new CONNECTION LIMIT 50")  # its row, locked until the end
        quotas.run_cycle(tenant.cluster)
        assert "locked_new" in quotas.storage_of(tenant.cluster).blind
        assert_app_stopped(tenant)
    finally:
        holder.close()
    with tenant.connect("defaultdb") as conn:
        conn.execute("DROP DATABASE locked_new")
    quotas.run_cycle(tenant.cluster)
    assert quotas.storage_of(tenant.cluster).blind == ""
