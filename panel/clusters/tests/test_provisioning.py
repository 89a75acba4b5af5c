"""Integration: a real cluster provisioned by the service, reached as a client would."""

from __future__ import annotations

import logging
import time

import psycopg
import pytest

from panel.clusters import services
from panel.clusters.engine import dbconn, postgres
from panel.clusters.models import ClusterStatus, credentials
from panel.clusters.services import roles

from .conftest import connect_as_client

pytestmark = pytest.mark.integration

RESERVED_SLOTS_ERROR = "remaining connection slots are reserved for non-replication superuser connections"


def test_it_provisions_a_cluster_reachable_with_verify_full(local_cluster, tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text(local_cluster.ca_certificate)
    uri = services.connection_details(local_cluster).uri()
    with psycopg.connect(uri.replace("sslmode=require", f"sslmode=verify-full&sslrootcert={ca}")) as conn:
        user, ssl = conn.execute(
            "SELECT current_user, ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()"
        ).fetchone()
        assert (user, ssl) == ("doadmin", True)
        super_, createdb = conn.execute(
            "SELECT rolsuper, rolcreatedb FROM pg_roles WHERE rolname = current_user"
        ).fetchone()
        assert (super_, createdb) == (False, True)
        assert conn.execute("SHOW max_connections").fetchone()[0] == "25"
    assert postgres.postmaster_pid(local_cluster.pgdata) is not None


def test_the_reserved_slots_refuse_doadmin_but_not_the_panels_superuser(local_cluster):
    # 1 GB plan: max_connections 25, 3 reserved for superusers, so doadmin gets 22.
    uri = services.connection_details(local_cluster).uri()
    opened: list[psycopg.Connection] = []
    try:
        for _ in range(22):
            opened.append(psycopg.connect(uri, connect_timeout=5))
        with pytest.raises(psycopg.OperationalError) as refused:
            opened.append(psycopg.connect(uri, connect_timeout=5))
        assert RESERVED_SLOTS_ERROR in str(refused.value)
        with dbconn.admin_connection(local_cluster) as conn:
            count = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE usename = 'doadmin'"
            ).fetchone()[0]
            assert count == 22
    finally:
        for conn in opened:
            conn.close()
    with connect_as_client(local_cluster) as conn:  # the slots come back once closed
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_it_records_the_provisioning_and_enforces_the_access_rules(local_cluster):
    cluster = local_cluster
    assert cluster.status == ClusterStatus.ONLINE
    assert cluster.progress == 100
    assert cluster.error_message == ""
    assert cluster.online_since is not None
    assert set(cluster.users.values_list("name", "is_protected")) == {("doadmin", True)}
    assert set(cluster.databases.values_list("name", "is_protected")) == {("defaultdb", True)}
    assert {"created", "online"} <= set(cluster.events.values_list("kind", flat=True))
    # Generated files holding secrets are private to the PostgreSQL user.
    for name in ("server.key", "panel.conf", "pg_hba.conf"):
        assert (cluster.pgdata / name).stat().st_mode & 0o077 == 0
    assert not (cluster.data_root / ".initdb-pw").exists()

    # TCP without TLS is refused by pg_hba.conf.
    with pytest.raises(psycopg.OperationalError) as refused:
        connect_as_client(cluster, sslmode="disable")
    assert "pg_hba.conf rejects connection" in str(refused.value)
    assert "no encryption" in str(refused.value)

    # The panel's superuser is refused over TCP, with or without TLS...
    for sslmode in ("require", "disable"):
        with pytest.raises(psycopg.OperationalError) as refused:
            connect_as_client(
                cluster,
                user="pgpanel",
                password=credentials.superuser_password(cluster),
                dbname="postgres",
                sslmode=sslmode,
            )
        assert 'pg_hba.conf rejects connection for host "127.0.0.1", user "pgpanel"' in str(refused.value)
    # ...and reaches the server over the Unix socket.
    with dbconn.admin_connection(cluster) as conn:
        assert conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").fetchone() == (
            True,
        )

    # Only the panel's superuser maintains the system database.
    with pytest.raises(psycopg.OperationalError, match="permission denied for database"):
        connect_as_client(cluster, dbname="postgres")


def test_passwords_never_reach_the_logs(owner, transactional_db, caplog):
    caplog.set_level(logging.DEBUG)
    cluster = services.create_cluster(owner, name="db-logs", plan_slug="db-s-1vcpu-1gb", enqueue=False)
    cluster = services.provision_cluster(cluster.pk)
    try:
        assert cluster.status == ClusterStatus.ONLINE, cluster.error_message
        # Log every statement, so the test shows what the server would see of a password.
        with dbconn.admin_connection(cluster) as conn:
            conn.execute("ALTER SYSTEM SET log_statement = 'all'")
            conn.execute("SELECT pg_reload_conf()")
        user = roles.add_user(cluster, "app")
        first_password = user.password
        user = roles.reset_password(cluster, "app")
        secrets = {
            "superuser": credentials.superuser_password(cluster),
            "doadmin": cluster.users.get(name="doadmin").password,
            "app": first_password,
            "app (reset)": user.password,
        }
        with connect_as_client(cluster) as conn:
            conn.execute("SELECT 'a tenant statement'")
        panel_log = caplog.text + "\n".join(str(event) for event in cluster.events.all())
        deadline = time.monotonic() + 10
        while "a tenant statement" not in (server_log := cluster.log_file.read_text(errors="replace")):
            assert time.monotonic() < deadline, "statement logging did not take effect"
            time.sleep(0.1)
        # What reaches the server is the verifier, and the panel's sessions log no statement
        # (dbconn.QUIET_LOG_OPTIONS): not even the verifier is in the log the tenant reads.
        assert 'CREATE ROLE "app"' not in server_log and "SCRAM-SHA-256$" not in server_log
        for who, secret in secrets.items():
            assert len(secret) >= 16
            assert secret not in panel_log, f"{who}'s password is in the panel's log"
            assert secret not in server_log, f"{who}'s password is in the PostgreSQL log"
    finally:
        services.delete_cluster(cluster, confirm_name=cluster.name)


def test_it_provisions_through_a_real_celery_worker(owner, transactional_db, celery_worker, wait_until):
    cluster = services.create_cluster(owner, name="db-worker", plan_slug="db-s-1vcpu-2gb", enqueue=True)
    try:
        assert cluster.status == ClusterStatus.CREATING

        def settled() -> bool:
            cluster.refresh_from_db()
            return cluster.status != ClusterStatus.CREATING

        wait_until(settled, timeout=60, message="provisioning by the worker")
        assert cluster.status == ClusterStatus.ONLINE, cluster.error_message
        assert cluster.progress == 100
        with connect_as_client(cluster) as conn:
            assert conn.execute("SHOW max_connections").fetchone() == ("50",)
    finally:
        cluster.refresh_from_db()
        services.delete_cluster(cluster, confirm_name=cluster.name)
