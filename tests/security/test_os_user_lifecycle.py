"""Issue 10, item 2: the life of a cluster's own OS user, as root (how the panel runs).

Each test makes a cluster of its own from initdb: the peer map of its socket follows the roles
added and deleted; deleting the cluster removes its OS user and leaves no process of it; a cluster
from before (run by ``PANEL_RUN_AS_USER``, the old pg_hba.conf, a pool's password in
pgbouncer.ini) moves to a user of its own at the reconciler's next pass, running or stopped. What
one cluster's user can and cannot reach of another's is tests/security/test_os_user_per_cluster.py.
"""

from __future__ import annotations

import os
import pwd
import uuid
from pathlib import Path

import psutil
import pytest
from django.contrib.auth.models import User

from panel.clusters import services as cluster_services
from panel.clusters.engine import dbconn, isolation, postgres
from panel.clusters.models import Cluster, ClusterStatus
from panel.clusters.services import reconciler, roles
from panel.core import runas
from panel.pools import services as pool_services
from panel.pools.engine import disk, rendering, supervisor
from tests.fixtures.clusters import make_local_cluster
from tests.security.clusteruser import as_user, psql, query

pytestmark = [
    pytest.mark.integration,
    pytest.mark.django_db,
    pytest.mark.skipif(
        os.geteuid() != 0, reason="per-cluster OS users exist only when the panel runs as root"
    ),
]


@pytest.fixture
def account() -> User:
    return User.objects.create_user(f"dora-{uuid.uuid4().hex[:6]}", password="x-password-1")


def test_the_peer_map_follows_the_roles(account: User) -> None:
    cluster = make_local_cluster(account, name="db-map")
    try:
        ident = cluster.pgdata / "pg_ident.conf"
        assert '"doadmin"' in ident.read_text()
        pool = pool_services.create_pool(cluster, "inbound", "defaultdb", "", "session", 2)
        roles.add_user(cluster, "late")
        assert f'"{cluster.os_user_name}"  "late"' in ident.read_text()
        assert query(pool_services.pool_connection_details(pool, "late").uri())[0] == "late"
        # A role the map does not list is refused over the socket even as the cluster's user.
        roles.delete_user(cluster, "late")
        assert '"late"' not in ident.read_text()
        with dbconn.admin_connection(cluster) as conn:
            conn.execute('CREATE ROLE "late" LOGIN')
        refused = as_user(
            isolation.os_user(cluster), psql(), "-w", "-h", str(cluster.socket_dir), "-p", str(cluster.port),
            "-U", "late", "-d", "defaultdb", "-c", "SELECT 1",
        )  # fmt: skip
        assert refused.returncode != 0 and "Peer authentication failed" in refused.stderr
    finally:
        cluster_services.delete_cluster(cluster, confirm_name=cluster.name)


def test_deleting_a_cluster_removes_its_os_user(account: User) -> None:
    cluster = make_local_cluster(account, name="db-doomed")
    pool_services.create_pool(cluster, "app-pool", "defaultdb", "doadmin", "transaction", 2)
    name, data_root = cluster.os_user_name, cluster.data_root
    uid = pwd.getpwnam(name).pw_uid
    cluster_services.delete_cluster(cluster, confirm_name=cluster.name)
    with pytest.raises(KeyError):
        pwd.getpwnam(name)
    assert not data_root.exists()
    left = [
        p for p in psutil.process_iter(["uids", "status"]) if p.info["uids"] and p.info["uids"].real == uid
    ]
    assert not [p for p in left if p.info["status"] != psutil.STATUS_ZOMBIE]


def _make_legacy(cluster: Cluster, password: str) -> None:
    """Turn ``cluster`` into one from before: run by PANEL_RUN_AS_USER, which owns its files, the
    old pg_hba.conf (SCRAM on the socket) and the fixed-user pool's password in pgbouncer.ini."""
    runner = runas.os_user()
    files = disk.bouncer_files(cluster)
    pool_services.stop_pgbouncer(cluster)
    postgres.stop(cluster.version, cluster.pgdata, user=isolation.os_user(cluster), timeout=60)
    own_user = cluster.os_user_name
    postgres.chown_tree(cluster.data_root, runner)
    cluster.os_user_name = ""
    cluster.save(update_fields=["os_user_name"])
    from panel.core import osusers

    osusers.remove_system_user(own_user)
    old_hba = (
        "local all pgpanel scram-sha-256\nlocal all all scram-sha-256\n"
        "host all pgpanel all reject\nhostssl all all all scram-sha-256\nhost all all all reject\n"
    )
    runas.write_private_file(cluster.pgdata / "pg_hba.conf", old_hba, owner=runner)
    ini = files.ini.read_text().replace(" user=app ", f" user=app password={password} ")
    assert password in ini
    runas.write_private_file(files.ini, ini, owner=runner)
    runas.write_private_file(files.previous(files.ini), ini, owner=runner)
    postgres.start(cluster.version, cluster.pgdata, cluster.log_file, user=runner, timeout=60)
    supervisor.start(disk.bouncer_files(cluster), fds_needed=rendering.fds_needed(cluster))


def test_a_cluster_from_before_moves_to_a_user_of_its_own(account: User) -> None:
    cluster = make_local_cluster(account, name="db-legacy")
    try:
        roles.add_user(cluster, "app")
        pool = pool_services.create_pool(cluster, "app-pool", "defaultdb", "app", "transaction", 2)
        app_password = cluster.users.get(name="app").password
        _make_legacy(cluster, app_password)
        runner_uid = runas.os_user().uid
        cluster.refresh_from_db()
        assert cluster.os_user_name == ""
        assert psutil.Process(postgres.postmaster_pid(cluster.pgdata)).uids().real == runner_uid
        assert query(pool_services.pool_connection_details(pool).uri())[0] == "app"  # the old way works

        notes = reconciler.reconcile()

        cluster.refresh_from_db()
        assert f"{cluster.name}: now runs as {cluster.own_os_user_name}" in notes
        assert cluster.os_user_name == cluster.own_os_user_name
        assert cluster.status == ClusterStatus.ONLINE
        assert cluster.events.filter(kind="os-user").exists()
        uid = pwd.getpwnam(cluster.os_user_name).pw_uid
        assert psutil.Process(postgres.postmaster_pid(cluster.pgdata)).uids().real == uid
        files = disk.bouncer_files(cluster)
        assert psutil.Process(supervisor.running_pid(files)).uids().real == uid
        for directory, dirs, names in os.walk(cluster.data_root):
            for path in [Path(directory), *(Path(directory) / n for n in [*dirs, *names])]:
                assert path.lstat().st_uid == uid, path
        for path in files.directory.iterdir():
            assert app_password not in path.read_text(errors="replace"), path
        assert query(pool_services.pool_connection_details(pool).uri()) == ("app", "defaultdb", True)
        assert query(cluster_services.connection_details(cluster).uri())[0] == "doadmin"
        assert reconciler.reconcile() == []  # once is enough
    finally:
        cluster.refresh_from_db()
        cluster_services.delete_cluster(cluster, confirm_name=cluster.name)


def test_a_stopped_cluster_from_before_moves_and_starts_later_as_its_user(account: User) -> None:
    cluster = make_local_cluster(account, name="db-legacy-stopped")
    try:
        roles.add_user(cluster, "app")
        pool = pool_services.create_pool(cluster, "app-pool", "defaultdb", "app", "transaction", 2)
        _make_legacy(cluster, cluster.users.get(name="app").password)
        cluster.refresh_from_db()
        cluster_services.perform_action(cluster, "stop")

        reconciler.reconcile()

        cluster.refresh_from_db()
        assert (cluster.os_user_name, cluster.status) == (cluster.own_os_user_name, ClusterStatus.STOPPED)
        assert postgres.postmaster_pid(cluster.pgdata) is None  # moved, not started
        uid = pwd.getpwnam(cluster.os_user_name).pw_uid
        assert cluster.data_root.stat().st_uid == (cluster.pgdata / "PG_VERSION").stat().st_uid == uid
        cluster_services.perform_action(cluster, "start")
        assert psutil.Process(postgres.postmaster_pid(cluster.pgdata)).uids().real == uid
        assert query(pool_services.pool_connection_details(pool).uri()) == ("app", "defaultdb", True)
    finally:
        cluster.refresh_from_db()
        cluster_services.delete_cluster(cluster, confirm_name=cluster.name)
