"""Integration: `manage.py cluster …` and `manage.py ensureadmin` against real clusters."""

from __future__ import annotations

import re
from collections.abc import Iterator
from io import StringIO

import psycopg
import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command

from panel.clusters import services
from panel.clusters.engine import postgres
from panel.clusters.models import Cluster, ClusterKind, ClusterStatus
from panel.clusters.tests.test_flags_shell import SSL_QUERY, run_pasted
from tests.fixtures.clusters import make_local_cluster

pytestmark = pytest.mark.integration

PLAN = "db-s-1vcpu-1gb"


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out, stderr=StringIO())
    return out.getvalue()


def query(uri: str, sql: str) -> object:
    with psycopg.connect(uri, connect_timeout=5) as conn:
        row = conn.execute(sql).fetchone()
        assert row is not None
        return row[0]


def test_create_provisions_a_cluster_owned_by_the_first_superuser(
    owner: User, transactional_db: None
) -> None:
    owner.is_superuser = True
    owner.save()

    out = run("cluster", "create", "--name", "cli-db", "--plan", PLAN)

    cluster = Cluster.objects.get(name="cli-db")
    try:
        assert cluster.owner == owner
        assert cluster.status == ClusterStatus.ONLINE
        assert "Initialising the data directory" in out
        assert "cli-db is online" in out
        password = services.connection_details(cluster).password
        assert password not in out
        assert f"postgresql://doadmin:********@localhost:{cluster.port}/defaultdb?sslmode=require" in out

        uri = run("cluster", "connection", "cli-db").strip()
        assert password in uri
        assert query(uri, "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()") is True
    finally:
        services.delete_cluster(cluster, confirm_name=cluster.name)


def test_create_without_owner_needs_a_superuser(owner: User) -> None:
    with pytest.raises(CommandError, match="No superuser exists"):
        run("cluster", "create", "--name", "cli-db", "--plan", PLAN)


@pytest.mark.parametrize(
    ("name", "plan", "message"),
    [
        ("cli-db", "db-s-0vcpu-0gb", "Unknown plan"),
        ("Bad_Name", PLAN, "lowercase letters, digits and hyphens"),
        ("ab", PLAN, "3 to 63 characters"),
    ],
)
def test_create_refuses_invalid_input_with_the_service_message(
    owner: User, name: str, plan: str, message: str
) -> None:
    with pytest.raises(CommandError, match=message):
        run("cluster", "create", "--name", name, "--plan", plan, "--owner", owner.username)
    assert not Cluster.objects.exists()


def test_create_refuses_an_unknown_owner(db: None) -> None:
    with pytest.raises(CommandError, match="No user named 'nobody'"):
        run("cluster", "create", "--name", "cli-db", "--plan", PLAN, "--owner", "nobody")


@pytest.fixture
def local_cluster(shared_local_cluster: Cluster) -> Cluster:
    """One real cluster for the module: its tests leave it running (stopped ones are started
    again, a killed one is restarted); the delete test has one of its own."""
    return shared_local_cluster


@pytest.fixture
def deletable_cluster(owner: User, transactional_db: None) -> Iterator[Cluster]:
    cluster = make_local_cluster(owner)
    yield cluster
    if Cluster.objects.filter(pk=cluster.pk).exists():
        services.delete_cluster(Cluster.objects.get(pk=cluster.pk), confirm_name=cluster.name)


def test_list_and_show_describe_the_cluster(local_cluster: Cluster) -> None:
    listing = run("cluster", "list")
    header, row = listing.splitlines()
    assert header.split() == ["NAME", "OWNER", "STATUS", "PLAN", "VERSION", "NODE", "PORT", "CREATED"]
    assert row.split()[:7] == [
        "db-test",
        "alice",
        "online",
        PLAN,
        local_cluster.version,
        "local",
        str(local_cluster.port),
    ]
    assert run("cluster", "list", "--owner", "alice") == listing

    shown = run("cluster", "show", "db-test")
    assert re.search(r"Status:\s+Online", shown)
    assert "max_connections 25, 22 for pools" in shown
    assert "Recent events:" in shown
    assert "Cluster is online on port" in shown


def test_stop_then_start(local_cluster: Cluster) -> None:
    assert "db-test is stopped" in run("cluster", "stop", "db-test")
    local_cluster.refresh_from_db()
    assert local_cluster.status == ClusterStatus.STOPPED
    assert postgres.postmaster_pid(local_cluster.pgdata) is None

    assert "db-test is online" in run("cluster", "start", "db-test")
    local_cluster.refresh_from_db()
    assert local_cluster.status == ClusterStatus.ONLINE
    assert postgres.postmaster_pid(local_cluster.pgdata) is not None
    assert query(run("cluster", "connection", "db-test").strip(), "SELECT 1") == 1


def test_restart_keeps_the_cluster_online(local_cluster: Cluster) -> None:
    pid_before = postgres.postmaster_pid(local_cluster.pgdata)
    assert "db-test is online" in run("cluster", "restart", "db-test")
    local_cluster.refresh_from_db()
    assert local_cluster.status == ClusterStatus.ONLINE
    assert postgres.postmaster_pid(local_cluster.pgdata) not in (None, pid_before)


def test_connection_formats(local_cluster: Cluster) -> None:
    details = services.connection_details(local_cluster)
    port = local_cluster.port
    uri = run("cluster", "connection", "db-test", "--format", "uri").strip()
    assert uri == f"postgresql://doadmin:{details.password}@localhost:{port}/defaultdb?sslmode=require"
    flags = run("cluster", "connection", "db-test", "--format", "flags").strip()
    assert flags == (
        f"PGPASSWORD={details.password} PGSSLMODE=require psql -U doadmin -h localhost -p {port} -d defaultdb"
    )
    pasted = run_pasted(flags, SSL_QUERY)
    assert (pasted.returncode, pasted.stdout.strip()) == (0, "t"), pasted.stderr
    params = run("cluster", "connection", "db-test", "--format", "params")
    assert f"password = {details.password}\n" in params
    assert f"port = {port}\n" in params
    with pytest.raises(CommandError, match="No database named “nope”"):
        run("cluster", "connection", "db-test", "--database", "nope")


def test_delete_needs_yes_then_removes_row_and_data(deletable_cluster: Cluster) -> None:
    local_cluster = deletable_cluster
    with pytest.raises(CommandError, match="--yes"):
        run("cluster", "delete", "db-test")
    assert Cluster.objects.filter(pk=local_cluster.pk).exists()
    assert postgres.postmaster_pid(local_cluster.pgdata) is not None

    assert "db-test deleted" in run("cluster", "delete", "db-test", "--yes")
    assert not Cluster.objects.filter(pk=local_cluster.pk).exists()
    assert not local_cluster.data_root.exists()


def test_users_and_databases(local_cluster: Cluster) -> None:
    run("cluster", "db-add", "db-test", "benchmark")
    run("cluster", "user-add", "db-test", "app")
    uri = run("cluster", "connection", "db-test", "--user", "app", "--database", "benchmark").strip()
    assert query(uri, "SELECT current_user || '@' || current_database()") == "app@benchmark"

    run("cluster", "password-reset", "db-test", "app")
    new_uri = run("cluster", "connection", "db-test", "--user", "app", "--database", "benchmark").strip()
    assert new_uri != uri
    assert query(new_uri, "SELECT 1") == 1
    with pytest.raises(psycopg.OperationalError):
        query(uri, "SELECT 1")

    with pytest.raises(CommandError, match="--yes"):
        run("cluster", "user-delete", "db-test", "app")
    run("cluster", "user-delete", "db-test", "app", "--yes")
    with pytest.raises(CommandError, match="--yes"):
        run("cluster", "db-delete", "db-test", "benchmark")
    run("cluster", "db-delete", "db-test", "benchmark", "--yes")
    assert list(local_cluster.users.values_list("name", flat=True)) == ["doadmin"]
    assert list(local_cluster.databases.values_list("name", flat=True)) == ["defaultdb"]
    with pytest.raises(CommandError, match="cannot be deleted"):
        run("cluster", "db-delete", "db-test", "defaultdb", "--yes")


def test_attach_reads_the_password_from_pgpassword(
    local_cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    details = services.connection_details(local_cluster)
    args = [
        "--host",
        "localhost",
        "--port",
        str(local_cluster.port),
        "--user",
        "doadmin",
        "--database",
        "defaultdb",
    ]
    monkeypatch.setenv("PGPASSWORD", "wrong-password")
    with pytest.raises(CommandError, match="does not accept the user “doadmin” with this password"):
        run("cluster", "attach", "--name", "ext-db", "--owner", "alice", *args)

    monkeypatch.setenv("PGPASSWORD", details.password)
    assert "Attached ext-db" in run("cluster", "attach", "--name", "ext-db", "--owner", "alice", *args)
    attached = Cluster.objects.get(name="ext-db")
    assert attached.kind == ClusterKind.EXTERNAL
    assert run("cluster", "connection", "ext-db").strip() == details.uri()
    with pytest.raises(CommandError, match="does not run this attached server"):
        run("cluster", "stop", "ext-db")


def test_reconcile_restarts_a_dead_cluster(local_cluster: Cluster) -> None:
    postgres.kill(local_cluster.pgdata)
    assert "db-test: restarted" in run("cluster", "reconcile")
    assert postgres.postmaster_pid(local_cluster.pgdata) is not None
    assert "as it should be" in run("cluster", "reconcile")


def test_a_name_shared_by_two_owners_needs_owner(owner: User, other_user: User) -> None:
    for user, port in ((owner, 26990), (other_user, 26992)):
        Cluster.objects.create(
            owner=user, name="shared", version="15", plan_slug=PLAN, status=ClusterStatus.STOPPED, port=port
        )
    with pytest.raises(CommandError, match=r"Several users .*\(alice, bob\).*--owner"):
        run("cluster", "show", "shared")
    assert re.search(r"Owner:\s+bob", run("cluster", "show", "shared", "--owner", "bob"))
    with pytest.raises(CommandError, match="No cluster named 'missing'"):
        run("cluster", "show", "missing")


def test_ensureadmin_creates_the_admin_once(db: None) -> None:
    out = run("ensureadmin")
    match = re.search(r"Log in at http://127\.0\.0\.1:8000/ as admin with password (\S+)", out)
    assert match, out
    admin = User.objects.get(username="admin")
    assert admin.is_superuser
    assert admin.check_password(match.group(1))
    assert match.group(1) not in admin.password  # only the hash is stored

    again = run("ensureadmin")
    assert "Log in with your existing admin account" in again
    assert "with password" not in again
    assert User.objects.count() == 1


def test_ensureadmin_leaves_an_existing_superuser_alone(owner: User) -> None:
    User.objects.create_superuser("root-user", "", "a-long-password-1")
    assert "existing admin account" in run("ensureadmin")
    assert not User.objects.filter(username="admin").exists()
