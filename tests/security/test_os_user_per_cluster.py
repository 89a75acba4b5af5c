"""Issue 10, items 2 and 3 (exploit row 4): one OS user per cluster, no role password in pooler files.

Replayed for real, as root (how the panel runs): two clusters A and B from initdb, each with a
real PgBouncer serving a fixed-user and an inbound-user pool. Code running as A's OS user (a
shell as that user, or ``COPY … FROM PROGRAM`` inside A's server, which is how a tenant who
escaped the database would run) cannot read B's pooler files, keys or data, nor reach B's
socket; it can read A's own. No pooler file of any cluster holds a role's password. How a
cluster's OS user is made, follows its roles, moves a cluster from before and goes is
tests/security/test_os_user_lifecycle.py.
"""

from __future__ import annotations

import os
import pwd
import stat
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import psycopg
import pytest
from django.conf import settings
from django.contrib.auth.models import User

from panel.clusters import services as cluster_services
from panel.clusters.engine import dbconn, isolation, postgres
from panel.clusters.models import Cluster, credentials
from panel.clusters.services import roles
from panel.core.runas import OsUser
from panel.pools import services as pool_services
from panel.pools.engine import disk, supervisor
from panel.pools.models import ConnectionPool
from tests.fixtures.clusters import make_local_cluster
from tests.security.clusteruser import as_user, psql, query

pytestmark = [
    pytest.mark.integration,
    pytest.mark.django_db,
    pytest.mark.skipif(
        os.geteuid() != 0, reason="per-cluster OS users exist only when the panel runs as root"
    ),
]

PERMISSION_DENIED = "Permission denied"


@dataclass(frozen=True)
class Tenant:
    """A running cluster with a fixed-user pool (as ``app``) and an inbound-user pool."""

    cluster: Cluster
    fixed: ConnectionPool
    inbound: ConnectionPool

    @property
    def user(self) -> OsUser:
        return isolation.os_user(self.cluster)

    @property
    def bouncer(self) -> disk.BouncerFiles:
        return disk.bouncer_files(self.cluster)


def _tenant(owner: User, name: str) -> Tenant:
    cluster = make_local_cluster(owner, name=name)
    roles.add_user(cluster, "app")
    roles.add_database(cluster, "appdb")
    fixed = pool_services.create_pool(cluster, "app-pool", "appdb", "app", "transaction", 3)
    inbound = pool_services.create_pool(cluster, "inbound", "defaultdb", "", "session", 3)
    return Tenant(cluster, fixed, inbound)


@pytest.fixture(scope="module")
def tenants(django_db_setup: None, django_db_blocker) -> Iterator[tuple[Tenant, Tenant]]:  # type: ignore[no-untyped-def]
    """Clusters A and B of two accounts, each with its pools; the tests only read them."""
    with django_db_blocker.unblock():
        suffix = uuid.uuid4().hex[:6]
        owners = [
            User.objects.create_user(f"{who}-{suffix}", password="x-password-1") for who in ("ann", "ben")
        ]
        made: list[Tenant] = []
        try:
            made = [_tenant(owners[0], "db-tenant-a"), _tenant(owners[1], "db-tenant-b")]
            yield made[0], made[1]
        finally:
            for tenant in made:
                cluster_services.delete_cluster(tenant.cluster, confirm_name=tenant.cluster.name)
            for owner in owners:
                owner.delete()


def secret_files(tenant: Tenant) -> dict[str, Path]:
    cluster = tenant.cluster
    return {
        "pgbouncer.ini": tenant.bouncer.ini,
        "PgBouncer's auth file": tenant.bouncer.auth,
        "PgBouncer's TLS key": tenant.bouncer.tls_key,
        "server.key": cluster.pgdata / "server.key",
        "PG_VERSION": cluster.pgdata / "PG_VERSION",
        "pg_hba.conf": cluster.pgdata / "pg_hba.conf",
        "the server log": cluster.log_file,
    }


def copy_from_program(cluster: Cluster, command: str) -> list[str]:
    """``COPY … FROM PROGRAM`` inside ``cluster``: the command runs as the cluster's OS user."""
    with dbconn.admin_connection(cluster) as conn:
        conn.execute("CREATE TEMP TABLE out (line text)")
        conn.execute(f"COPY out FROM PROGRAM '{command}'")
        return [row[0] for row in conn.execute("SELECT line FROM out").fetchall()]


# --- who runs what ------------------------------------------------------------------------------


def test_each_cluster_runs_as_a_system_user_of_its_own(tenants: tuple[Tenant, Tenant]) -> None:
    uids = set()
    for tenant in tenants:
        cluster = tenant.cluster
        assert cluster.os_user_name == settings.PANEL_CLUSTER_USER_PREFIX + cluster.pk.hex[:8]
        user = pwd.getpwnam(cluster.os_user_name)
        assert user.pw_uid not in {0, pwd.getpwnam(settings.PANEL_RUN_AS_USER).pw_uid}
        assert user.pw_shell == "/usr/sbin/nologin"
        postmaster = psutil.Process(postgres.postmaster_pid(cluster.pgdata))
        bouncer_pid = supervisor.running_pid(tenant.bouncer)
        assert bouncer_pid is not None
        for proc in [postmaster, *postmaster.children(recursive=True), psutil.Process(bouncer_pid)]:
            assert proc.uids().real == proc.uids().effective == user.pw_uid, proc
        uids.add(user.pw_uid)
    assert len(uids) == 2


def test_a_cluster_owns_its_files_and_nobody_else_may_read_them(tenants: tuple[Tenant, Tenant]) -> None:
    clusters_dir = Path(settings.PANEL_DATA_DIR) / "clusters"
    assert stat.S_IMODE(clusters_dir.stat().st_mode) == 0o711  # traversable, not listable
    for tenant in tenants:
        root = tenant.cluster.data_root
        uid = tenant.user.uid
        for directory, dirs, files in os.walk(root):
            for path in [Path(directory), *(Path(directory) / name for name in [*dirs, *files])]:
                st = path.lstat()
                assert st.st_uid == uid, path
                if not stat.S_ISSOCK(st.st_mode):
                    assert stat.S_IMODE(st.st_mode) & 0o077 == 0, f"{path} is {oct(st.st_mode)}"


# --- row 4: from cluster A, the other cluster's files -------------------------------------------


def test_as_a_clusters_user_the_other_clusters_files_are_out_of_reach(tenants: tuple[Tenant, Tenant]) -> None:
    a, b = tenants
    for what, path in secret_files(b).items():
        refused = as_user(a.user, "cat", str(path))
        assert refused.returncode != 0 and PERMISSION_DENIED in refused.stderr, what
        assert refused.stdout == "", what
    listing = as_user(a.user, "ls", str(b.cluster.data_root))
    assert listing.returncode != 0 and PERMISSION_DENIED in listing.stderr
    # Nor can it find the others by listing the clusters' directory.
    listing = as_user(a.user, "ls", str(b.cluster.data_root.parent))
    assert listing.returncode != 0 and PERMISSION_DENIED in listing.stderr


def test_as_a_clusters_user_its_own_files_stay_readable(tenants: tuple[Tenant, Tenant]) -> None:
    a, _b = tenants
    for what, path in secret_files(a).items():
        allowed = as_user(a.user, "cat", str(path))
        assert allowed.returncode == 0, (what, allowed.stderr)
    assert as_user(a.user, "cat", str(a.cluster.pgdata / "PG_VERSION")).stdout.strip() == a.cluster.version
    assert as_user(a.user, "ls", str(a.cluster.data_root)).returncode == 0


def test_code_run_inside_a_cluster_cannot_read_the_other_clusters_pooler_file(
    tenants: tuple[Tenant, Tenant],
) -> None:
    """The row as a tenant met it: ``COPY … FROM PROGRAM 'cat …'`` in cluster A (here by the
    panel's superuser, the one role the guard still lets run programs)."""
    a, b = tenants
    with pytest.raises(dbconn.DatabaseError, match="program"):
        copy_from_program(a.cluster, f"cat {b.bouncer.ini}")
    with pytest.raises(dbconn.DatabaseError, match="program"):
        copy_from_program(a.cluster, f"cat {b.cluster.pgdata / 'server.key'}")
    # The same command on the cluster's own file works, as that cluster's user.
    assert copy_from_program(a.cluster, f"cat {a.bouncer.ini}")[:2] == [
        ";; Written by the control panel; edits here are overwritten.",
        "[databases]",
    ]
    assert copy_from_program(a.cluster, "id -un") == [a.cluster.os_user_name]


def test_the_other_clusters_socket_is_out_of_reach(tenants: tuple[Tenant, Tenant]) -> None:
    a, b = tenants
    for port in (b.cluster.port, b.cluster.pooler_port):
        refused = as_user(
            a.user, psql(), "-w", "-h", str(b.cluster.socket_dir), "-p", str(port), "-U", "doadmin",
            "-d", "defaultdb", "-c", "SELECT 1",
        )  # fmt: skip
        assert refused.returncode != 0 and PERMISSION_DENIED in refused.stderr, refused.stderr
    # Its own cluster's socket lets it in as the cluster's roles (that is how PgBouncer logs in).
    allowed = as_user(
        a.user, psql(), "-w", "-h", str(a.cluster.socket_dir), "-p", str(a.cluster.port), "-U", "app",
        "-d", "appdb", "-Atc", "SELECT current_user",
    )  # fmt: skip
    assert (allowed.returncode, allowed.stdout.strip()) == (0, "app"), allowed.stderr


def test_on_the_socket_only_the_clusters_user_logs_in_without_a_password(
    tenants: tuple[Tenant, Tenant],
) -> None:
    """Root (the panel) reaches every socket, but peer authentication maps only the cluster's
    own user to its roles, and the panel's own roles still need their passwords."""
    a, _b = tenants
    params = {"host": str(a.cluster.socket_dir), "port": a.cluster.port, "dbname": "defaultdb"}
    with pytest.raises(psycopg.OperationalError, match="Peer authentication failed"):
        psycopg.connect(**params, user="doadmin", connect_timeout=5)
    with pytest.raises(psycopg.OperationalError, match="password"):
        psycopg.connect(**params, user=settings.PANEL_SUPERUSER, password="wrong", connect_timeout=5)
    nobody = as_user(
        a.user, psql(), "-w", "-h", str(a.cluster.socket_dir), "-p", str(a.cluster.port),
        "-U", settings.PANEL_SUPERUSER, "-d", "postgres", "-c", "SELECT 1",
    )  # fmt: skip
    assert nobody.returncode != 0 and "password" in nobody.stderr


# --- item 3: no password in pooler files ----------------------------------------------------------


def test_no_pooler_file_of_any_cluster_holds_a_role_password(tenants: tuple[Tenant, Tenant]) -> None:
    passwords = {(t.cluster.name, u.name): u.password for t in tenants for u in t.cluster.users.all()} | {
        (t.cluster.name, settings.PANEL_SUPERUSER): credentials.superuser_password(t.cluster) for t in tenants
    }
    assert len(passwords) == 6
    for tenant in tenants:
        ini = tenant.bouncer.ini.read_text()
        assert "user=app " in ini  # the fixed-user pool is there
        assert "password" not in ini
        for path in tenant.bouncer.directory.iterdir():
            if path.is_file():
                text = path.read_text(errors="replace")
                for who, password in passwords.items():
                    assert password not in text, f"{path} holds the password of {who}"


def test_pools_of_both_kinds_serve_clients_with_tls_and_scram(tenants: tuple[Tenant, Tenant]) -> None:
    for tenant in tenants:
        fixed = pool_services.pool_connection_details(tenant.fixed)
        assert query(fixed.uri()) == ("app", "appdb", True)
        assert query(pool_services.pool_connection_details(tenant.inbound).uri()) == (
            "doadmin",
            "defaultdb",
            True,
        )
        assert query(pool_services.pool_connection_details(tenant.inbound, "app").uri()) == (
            "app",
            "defaultdb",
            True,
        )
        with pytest.raises(psycopg.OperationalError, match="SSL required"):
            psycopg.connect(fixed.uri().replace("sslmode=require", "sslmode=disable"), connect_timeout=5)
        with pytest.raises(
            psycopg.OperationalError, match="SASL authentication failed|password authentication"
        ):
            psycopg.connect(fixed.uri().replace(fixed.password, "wrong-password"), connect_timeout=5)
