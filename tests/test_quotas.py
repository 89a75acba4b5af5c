"""Issue 15 on a real cluster: a database and a role filled past their quotas, measured by the
cycle, their writes stopped by the guard in a way the tenant's doadmin cannot undo, deleting data
that brings them back, the grace period running out on a moved clock, and "allow writes"."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import psycopg
import pytest
from django.utils import timezone
from psycopg import errors

from panel.core.errors import ServiceError
from panel.insights.charts import charts_for
from panel.insights.forms import range_window
from panel.insights.models import MetricPoint
from panel.quotas import services as quotas
from panel.quotas.models import Quota, QuotaKind, QuotaState
from panel.quotas.services import enforce
from tests.fixtures.tenants import Tenant, lift_quotas, tenant_cluster

pytestmark = [pytest.mark.integration, pytest.mark.django_db]
MB = 1024**2
QUOTA_MESSAGE = "is over its storage quota"


@pytest.fixture(scope="module")
def tenant(django_db_setup: None, django_db_blocker: object) -> Iterator[Tenant]:
    with tenant_cluster(django_db_blocker, "quota-tenant", "db-quota", ["bigdb", "otherdb"]) as found:
        with found.connect("bigdb") as conn:
            conn.execute("CREATE TABLE filler (id serial PRIMARY KEY, pad text)")
        yield found


@pytest.fixture
def clean(tenant: Tenant) -> Iterator[Tenant]:
    """Each test leaves the server with no write stop, whatever it did."""
    yield tenant
    lift_quotas(tenant)


def fill(conn: psycopg.Connection, megabytes: int) -> None:
    conn.execute(
        "INSERT INTO filler (pad) SELECT repeat(md5(g::text), 32) FROM generate_series(1, %s) g",
        [megabytes * 1024 * 1024 // 1100],
    )


def database_size(tenant: Tenant, name: str) -> int:
    with tenant.connect() as conn:
        return conn.execute("SELECT pg_database_size(%s)", [name]).fetchone()[0]


def quota(tenant: Tenant, kind: str, name: str) -> Quota:
    return Quota.objects.get(cluster=tenant.cluster, kind=kind, name=name)


def test_a_database_over_its_quota_stops_writes_until_data_is_deleted(
    clean: Tenant, django_capture_on_commit_callbacks, mailoutbox
) -> None:
    tenant = clean
    cluster = tenant.cluster
    with tenant.connect("bigdb") as conn:
        fill(conn, 8)
    used = database_size(tenant, "bigdb")

    # Over the soft limit: grace running, shown as repquota shows it; writes still work.
    with django_capture_on_commit_callbacks(execute=True):
        quotas.set_quota(cluster, QuotaKind.DATABASE, "bigdb", space_soft=used - MB, space_hard=used + 6 * MB)
    # The alert channel: the owner gets an email saying which quota and what happens next.
    assert [m.to for m in mailoutbox] == [["quota-tenant@example.com"]]
    assert "Storage quota" in mailoutbox[0].subject and "bigdb" in mailoutbox[0].body
    over = quota(tenant, QuotaKind.DATABASE, "bigdb")
    assert over.state == QuotaState.OVER_SOFT and over.over_since is not None
    assert abs(over.space_used - database_size(tenant, "bigdb")) < MB  # the report matches
    report = quotas.report_text(cluster)
    assert "Block grace time: 7days; Inode grace time: 7days" in report
    line = next(row for row in report.splitlines() if row.startswith("bigdb"))
    assert line.split()[1] == "+-" and "7days" in line  # the whole grace period left
    assert cluster.events.filter(kind="quota-over-soft").exists()

    # A session in a write transaction when the stop comes is ended.
    writer = tenant.connect("bigdb")
    writer.autocommit = False
    writer.execute("INSERT INTO filler (pad) VALUES ('in a transaction')")

    # Past the hard limit: enforced at once.
    with tenant.connect("bigdb") as conn:
        fill(conn, 8)
    quotas.run_cycle(cluster)
    stopped = quota(tenant, QuotaKind.DATABASE, "bigdb")
    assert stopped.state == QuotaState.ENFORCED and stopped.reason == "space hard limit"
    assert enforce.applied_lists(cluster)[0] == '"bigdb"'
    with pytest.raises(psycopg.OperationalError):
        writer.execute("INSERT INTO filler (pad) VALUES ('after the stop')")
        writer.commit()
    writer.close()

    with tenant.connect("bigdb") as conn:
        rows_before = conn.execute("SELECT count(*) FROM filler").fetchone()[0]
        # The tenant's INSERT fails with the quota's message; SELECT works.
        with pytest.raises(errors.DiskFull, match=QUOTA_MESSAGE):
            conn.execute("INSERT INTO filler (pad) VALUES ('x')")
        # What doadmin may run does not undo it.
        conn.execute("SET default_transaction_read_only = off")
        with pytest.raises(errors.DiskFull, match=QUOTA_MESSAGE):
            conn.execute("INSERT INTO filler (pad) VALUES ('x')")
        with pytest.raises(psycopg.Error):
            conn.execute("SET pgpanel_guard.readonly_databases = ''")
        with pytest.raises(psycopg.Error):
            conn.execute("ALTER SYSTEM SET pgpanel_guard.readonly_databases = ''")
        with pytest.raises(errors.DiskFull, match=QUOTA_MESSAGE):
            conn.execute("CREATE TABLE escape AS SELECT * FROM filler")
        assert conn.execute("SELECT count(*) FROM filler").fetchone()[0] == rows_before
    # Another database of the same cluster is not stopped.
    with tenant.connect("otherdb") as conn:
        conn.execute("CREATE TABLE fine (x int)")
        conn.execute("INSERT INTO fine VALUES (1)")

    # Deleting data (DELETE of the tail, then VACUUM) brings it back under within one cycle.
    with tenant.connect("bigdb") as conn:
        conn.execute("DELETE FROM filler WHERE id > (SELECT min(id) + 100 FROM filler)")
        conn.execute("VACUUM filler")
    quotas.run_cycle(cluster)
    back = quota(tenant, QuotaKind.DATABASE, "bigdb")
    assert back.state == QuotaState.OK and back.over_since is None, back.space_used
    with tenant.connect("bigdb") as conn:
        conn.execute("INSERT INTO filler (pad) VALUES ('writable again')")
    assert enforce.applied_lists(cluster)[0] == ""
    kinds = list(cluster.events.filter(kind__startswith="quota-").values_list("kind", flat=True))
    assert {"quota-enforced", "quota-ok", "quota-sessions-ended"} <= set(kinds)
    # Insights charts the usage against the limits from the metrics each cycle wrote.
    used = MetricPoint.objects.filter(
        cluster=cluster, metric="quota_used_bytes", labels="quota=database:bigdb"
    )
    assert used.count() >= 3
    hard = MetricPoint.objects.filter(
        cluster=cluster, metric="quota_hard_bytes", labels="quota=database:bigdb"
    )
    assert {p.value for p in hard} == {float(back.space_hard)}
    keys = [chart.key for chart in charts_for(cluster, range_window("1h"))]
    assert "quota:database:bigdb" in keys


def test_the_grace_period_runs_out_and_writes_may_be_allowed_once(clean: Tenant) -> None:
    tenant = clean
    cluster = tenant.cluster
    used = database_size(tenant, "bigdb")
    quotas.set_grace(cluster, 3600, 3600)
    quotas.set_quota(cluster, QuotaKind.DATABASE, "bigdb", space_soft=used // 2)
    assert quota(tenant, QuotaKind.DATABASE, "bigdb").state == QuotaState.OVER_SOFT
    assert "01:00" in quotas.report_text(cluster) or "00:59" in quotas.report_text(cluster)

    later = timezone.now() + dt.timedelta(hours=2)
    quotas.run_cycle(cluster, now=later)  # the clock moved on
    expired = quota(tenant, QuotaKind.DATABASE, "bigdb")
    assert expired.state == QuotaState.ENFORCED and "grace period over" in expired.reason
    assert quotas.grace_columns(expired, quotas.storage_of(cluster), later.timestamp())[0] == "none"
    # From here on the real clock: the soft limit was passed two hours ago.
    Quota.objects.filter(pk=expired.pk).update(over_since=expired.over_since - dt.timedelta(hours=2))
    quotas.run_cycle(cluster)
    expired = quota(tenant, QuotaKind.DATABASE, "bigdb")
    assert expired.state == QuotaState.ENFORCED
    with tenant.connect("bigdb") as conn, pytest.raises(errors.DiskFull, match=QUOTA_MESSAGE):
        conn.execute("INSERT INTO filler (pad) VALUES ('x')")

    quotas.allow_writes(expired)
    with tenant.connect("bigdb") as conn:
        conn.execute("INSERT INTO filler (pad) VALUES ('allowed for a while')")
    with pytest.raises(ServiceError, match="already allowed once"):
        quotas.allow_writes(quota(tenant, QuotaKind.DATABASE, "bigdb"))
    quotas.set_grace(cluster, 604800, 604800)


def test_a_roles_quota_stops_writes_to_its_tables_only(clean: Tenant) -> None:
    tenant = clean
    cluster = tenant.cluster
    with tenant.connect(as_app=True) as conn:
        conn.execute("CREATE TABLE app_data (id serial, pad text)")
        conn.execute("INSERT INTO app_data (pad) SELECT repeat('a', 1000) FROM generate_series(1, 3000)")
        conn.execute("GRANT ALL ON app_data, app_data_id_seq TO doadmin")
    with tenant.connect() as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS admin_data (x int)")
    quotas.set_quota(cluster, QuotaKind.ROLE, "app", space_hard=MB, files_hard=100)
    app_quota = quota(tenant, QuotaKind.ROLE, "app")
    assert app_quota.state == QuotaState.ENFORCED and app_quota.files_used >= 2  # table, sequence
    with tenant.connect(as_app=True) as conn:
        with pytest.raises(errors.DiskFull, match='role "app"'):
            conn.execute("INSERT INTO app_data (pad) VALUES ('x')")
        assert conn.execute("SELECT count(*) FROM app_data").fetchone()[0] == 3000
        conn.execute("DELETE FROM app_data WHERE id > 10")  # deleting stays possible
    with tenant.connect() as conn:
        conn.execute("INSERT INTO admin_data VALUES (1)")  # doadmin's own tables are not stopped
        with pytest.raises(errors.DiskFull, match='role "app"'):
            conn.execute("INSERT INTO app_data (pad) VALUES ('via doadmin')")
    with tenant.connect(as_app=True) as conn:
        conn.execute("TRUNCATE app_data")
    quotas.run_cycle(cluster)
    assert quota(tenant, QuotaKind.ROLE, "app").state == QuotaState.OK
    with tenant.connect(as_app=True) as conn:
        conn.execute("INSERT INTO app_data (pad) VALUES ('back')")


def test_the_files_and_the_servers_size_functions_agree(
    clean: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The node agent reads sizes from the files; a process that cannot read the data directory
    asks the server: both give the same figures (within what autovacuum may change meanwhile)."""
    from panel.quotas.services import measure as measuring

    databases = ["defaultdb", "bigdb", "otherdb"]
    from_files = measuring.measure(clean.cluster, databases)
    monkeypatch.setattr(measuring, "_file_sizes", lambda directory: None)
    from_server = measuring.measure(clean.cluster, databases)
    for name in databases:
        assert abs(from_files.database_bytes[name] - from_server.database_bytes[name]) < 256 * 1024, name
        assert from_files.database_relations[name] == from_server.database_relations[name], name
    assert abs(from_files.role_bytes["doadmin"] - from_server.role_bytes["doadmin"]) < 256 * 1024
    assert from_files.role_relations == from_server.role_relations
    assert from_server.data_dir_bytes > 0 and from_files.data_dir_bytes >= from_server.data_dir_bytes


def test_through_a_pool_the_writer_is_ended_and_the_pooler_reconnects(clean: Tenant) -> None:
    from panel.pools import services as pools

    tenant = clean
    cluster = tenant.cluster
    pool = pools.create_pool(cluster, "bigpool", "bigdb", "", "transaction", 3)
    uri = pools.pool_connection_details(pool).uri()
    writer = psycopg.connect(uri, connect_timeout=10)
    writer.execute("INSERT INTO filler (pad) VALUES ('open transaction through the pool')")
    try:
        used = database_size(tenant, "bigdb")
        quotas.set_quota(cluster, QuotaKind.DATABASE, "bigdb", space_hard=used // 2)
        assert quota(tenant, QuotaKind.DATABASE, "bigdb").state == QuotaState.ENFORCED
        with pytest.raises(psycopg.Error):  # its server session was ended
            writer.execute("INSERT INTO filler (pad) VALUES ('more')")
            writer.commit()
    finally:
        writer.close()
    # A new client through the same pool: PgBouncer opened a new server connection.
    with psycopg.connect(uri, autocommit=True, connect_timeout=10) as conn:
        assert conn.execute("SELECT count(*) > 0 FROM filler").fetchone() == (True,)
        with pytest.raises(errors.DiskFull, match=QUOTA_MESSAGE):
            conn.execute("INSERT INTO filler (pad) VALUES ('x')")
    pools.delete_pool(pool)


def test_the_command_line_sets_reports_and_sets_grace_as_setquota_and_repquota(clean: Tenant) -> None:
    from io import StringIO

    from django.core.management import CommandError, call_command

    def quota_command(*args: str) -> str:
        out = StringIO()
        call_command("quota", *args, stdout=out)
        return out.getvalue()

    name = clean.cluster.name
    assert "set; state: OK" in quota_command(
        "set", name, "--database", "otherdb", "--soft", "100M", "--hard", "200M", "--files-hard", "10k"
    )
    report = quota_command("report", name, "-s")
    assert "Block grace time: 7days; Inode grace time: 7days" in report
    line = next(row for row in report.splitlines() if row.startswith("otherdb"))
    assert line.split()[1:2] == ["--"] and "100M" in line and "200M" in line and line.split()[-1] == "10000"
    assert "Grace periods: 864000 s (space), 864000 s (relations)." in quota_command(
        "grace", name, "864000", "864000"
    )
    assert "Block grace time: 10days; Inode grace time: 10days" in quota_command("report", name)
    with pytest.raises(CommandError, match=r"soft space limit is above the hard one.*\(--soft\)"):
        quota_command("set", name, "--database", "otherdb", "--soft", "3G", "--hard", "1G")
    with pytest.raises(CommandError, match="No user named"):
        quota_command("set", name, "--role", "nobody", "--hard", "1G")
    assert Quota.objects.get(name="otherdb").space_hard == 200 * MB
    quota_command("grace", name, "604800")


def test_a_database_made_with_sql_does_not_escape_a_full_disk_whatever_its_name(
    clean: Tenant, settings: object
) -> None:
    """The attack: doadmin (CREATEDB) makes a database outside the panel, with a name full of
    quotes, and writes there while the cluster is read-only for a full disk. Every database the
    server has is stopped, its name written into quota.conf so that the server reads it back."""
    tenant = clean
    odd = "we\"ird'db\\x"
    with tenant.connect() as conn:
        conn.execute(f'CREATE DATABASE "{odd.replace(chr(34), chr(34) * 2)}"')
    try:
        with tenant.connect(odd) as conn:
            conn.execute("CREATE TABLE escape (x int)")
        settings.PANEL_DISK_READONLY_PERCENT = 0  # the data fills "the whole disk"
        settings.PANEL_DISK_WRITABLE_PERCENT = 0
        quotas.run_cycle(tenant.cluster)
        assert quotas.storage_of(tenant.cluster).disk_full_since is not None
        stopped = enforce.applied_lists(tenant.cluster)[0]
        assert '"we""ird\'db\\x"' in stopped and '"bigdb"' in stopped and '"defaultdb"' in stopped
        with tenant.connect(odd) as conn, pytest.raises(errors.DiskFull, match=QUOTA_MESSAGE):
            conn.execute("INSERT INTO escape VALUES (1)")
        with tenant.connect("otherdb") as conn, pytest.raises(errors.DiskFull, match=QUOTA_MESSAGE):
            conn.execute("CREATE TABLE IF NOT EXISTS fine2 (x int)")
        # Room again: every database takes writes.
        settings.PANEL_DISK_READONLY_PERCENT = 101
        settings.PANEL_DISK_WRITABLE_PERCENT = 100
        quotas.run_cycle(tenant.cluster)
        assert quotas.storage_of(tenant.cluster).disk_full_since is None
        with tenant.connect(odd) as conn:
            conn.execute("INSERT INTO escape VALUES (1)")
    finally:
        with tenant.connect() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{odd.replace(chr(34), chr(34) * 2)}" WITH (FORCE)')


def test_a_roles_tables_in_a_database_made_with_sql_count_against_its_quota(clean: Tenant) -> None:
    """The attack: a role over its quota keeps its data in a database the panel did not make."""
    tenant = clean
    with tenant.connect() as conn:
        conn.execute("CREATE DATABASE sqlmade")
    try:
        with tenant.connect("sqlmade") as conn:
            conn.execute("GRANT CREATE ON SCHEMA public TO app")
        with tenant.connect("sqlmade", as_app=True) as conn:
            conn.execute("CREATE TABLE hidden (pad text)")
            conn.execute("INSERT INTO hidden SELECT repeat('h', 1000) FROM generate_series(1, 4000)")
        quotas.set_quota(tenant.cluster, QuotaKind.ROLE, "app", space_hard=2 * MB)
        app_quota = quota(tenant, QuotaKind.ROLE, "app")
        assert app_quota.space_used > 2 * MB and app_quota.state == QuotaState.ENFORCED
        with (
            tenant.connect("sqlmade", as_app=True) as conn,
            pytest.raises(errors.DiskFull, match='role "app"'),
        ):
            conn.execute("INSERT INTO hidden VALUES ('more')")
    finally:
        Quota.objects.filter(cluster=tenant.cluster).delete()
        enforce.write_and_reload(tenant.cluster, [], [])
        with tenant.connect() as conn:
            conn.execute("DROP DATABASE IF EXISTS sqlmade WITH (FORCE)")
