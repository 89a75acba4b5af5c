"""Issue 10, item 1 for clusters that existed before the guard, and how the guard is built.

A cluster is turned into one from before the guard (its panel.conf without the guard, restarted),
the tenant exploits rows 1-3 for real, and the upgrade must load the guard and take back what was
granted. The build itself: rebuilt only when the source changes, safe under concurrent callers,
and a clear error when the build tools are missing.
"""

from __future__ import annotations

import os
import shutil
import threading

import psycopg
import pytest
from django.conf import settings
from django.urls import reverse
from psycopg import errors

from panel.clusters import services
from panel.clusters.engine import dbconn, guard, isolation, postgres
from panel.clusters.lib.pgconf import STATEMENTS_LIBRARY, guard_lines
from panel.clusters.models import Cluster, ClusterStatus
from panel.clusters.services import reconciler
from panel.core import runas

pytestmark = pytest.mark.integration


def _strip_guard(cluster: Cluster) -> None:
    """Make the cluster one from before the guard: panel.conf without it, and restarted so."""
    conf = cluster.pgdata / "panel.conf"
    library = str(guard.library_path(cluster.version))
    lines = guard_lines((library, STATEMENTS_LIBRARY), guard.reserved_roles())
    text = conf.read_text()
    assert all(line in text for line in lines)
    kept = [line for line in text.splitlines() if line not in lines]
    runas.write_private_file(conf, "\n".join(kept) + "\n")
    timeout = settings.PANEL_COMMAND_TIMEOUT
    postgres.stop(cluster.version, cluster.pgdata, user=isolation.os_user(cluster), timeout=timeout)
    postgres.start(
        cluster.version, cluster.pgdata, cluster.log_file, user=isolation.os_user(cluster), timeout=timeout
    )
    pid = postgres.postmaster_pid(cluster.pgdata)
    assert pid is not None and guard.is_loaded(pid) is False
    assert not services.guard_configured(cluster)


def _exploit(cluster: Cluster) -> None:
    """Rows 1-3 as the tenant ran them before the guard: they work."""
    with psycopg.connect(services.connection_details(cluster).uri(), autocommit=True) as conn:
        conn.execute("GRANT pg_execute_server_program TO doadmin")
        conn.execute("CREATE TABLE t (line text)")
        conn.execute("COPY t FROM PROGRAM 'id -un'")
        assert conn.execute("SELECT line FROM t").fetchone() == (isolation.os_user(cluster).name,)
        conn.execute("CREATE ROLE x LOGIN")
        conn.execute("GRANT pg_read_server_files, pg_write_server_files TO x")


def _memberships(cluster: Cluster) -> set[tuple[str, str]]:
    with dbconn.admin_connection(cluster) as conn:
        rows = conn.execute(
            "SELECT r.rolname, m.rolname FROM pg_auth_members a JOIN pg_roles r ON r.oid = a.roleid "
            "JOIN pg_roles m ON m.oid = a.member WHERE r.rolname = ANY(%s)",
            [list(guard.reserved_roles())],
        ).fetchall()
    return set(rows)


def _assert_guarded(cluster: Cluster) -> None:
    pid = postgres.postmaster_pid(cluster.pgdata)
    assert pid is not None and guard.is_loaded(pid)
    assert services.guard_configured(cluster)
    with psycopg.connect(services.connection_details(cluster).uri(), autocommit=True) as conn:
        assert conn.execute(
            "SELECT pg_has_role('doadmin', 'pg_execute_server_program', 'MEMBER')"
        ).fetchone() == (False,)
        with pytest.raises(errors.InsufficientPrivilege, match="external program"):
            conn.execute("COPY t FROM PROGRAM 'id -un'")
        with pytest.raises(errors.InsufficientPrivilege, match='grant role "pg_execute_server_program"'):
            conn.execute("GRANT pg_execute_server_program TO doadmin")


def test_the_reconciler_loads_the_guard_into_an_old_cluster_and_revokes_the_reserved_roles(local_cluster):
    _strip_guard(local_cluster)
    _exploit(local_cluster)
    with dbconn.admin_connection(local_cluster) as conn:
        conn.execute("CREATE ROLE rogue SUPERUSER")  # what row 9 made of doadmin
    assert _memberships(local_cluster) == {
        ("pg_execute_server_program", "doadmin"),
        ("pg_read_server_files", "x"),
        ("pg_write_server_files", "x"),
    }

    notes = reconciler.reconcile()

    assert notes == [f"{local_cluster.name}: privilege guard loaded"]
    local_cluster.refresh_from_db()
    assert local_cluster.status == ClusterStatus.ONLINE
    _assert_guarded(local_cluster)
    assert _memberships(local_cluster) == set()
    with dbconn.admin_connection(local_cluster) as conn:
        assert conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = 'rogue'").fetchone() == (False,)
    events = list(local_cluster.events.order_by("created_at", "id").values_list("kind", "message"))
    kinds = [kind for kind, _message in events]
    assert kinds[-7:] == [
        "guard-upgrade",
        "guard-demoted",
        "guard-revoked",
        "guard-revoked",
        "guard-revoked",
        "guard-installed",
        "restarted",
    ]
    revoked = [message for kind, message in events if kind == "guard-revoked"]
    assert any("“doadmin”" in m and "“pg_execute_server_program”" in m for m in revoked)

    # Once done, the reconciler leaves the cluster alone.
    pid = postgres.postmaster_pid(local_cluster.pgdata)
    assert reconciler.reconcile() == []
    assert postgres.postmaster_pid(local_cluster.pgdata) == pid


def test_an_old_cluster_stopped_during_the_upgrade_gets_the_guard_when_started(local_cluster):
    _strip_guard(local_cluster)
    _exploit(local_cluster)
    services.perform_action(local_cluster, "stop")
    assert reconciler.reconcile() == []  # stopped clusters are not started by the upgrade

    services.perform_action(local_cluster, "start")

    _assert_guarded(local_cluster)
    assert _memberships(local_cluster) == set()
    assert local_cluster.events.filter(kind="guard-revoked").count() == 3


def test_a_restart_loads_a_guard_that_is_configured_but_not_loaded(local_cluster):
    # panel.conf was written, but the server kept running without the guard (a crash in between).
    _strip_guard(local_cluster)
    services.write_server_config(local_cluster)
    _exploit(local_cluster)

    assert reconciler.reconcile() == [f"{local_cluster.name}: privilege guard loaded"]

    _assert_guarded(local_cluster)
    assert _memberships(local_cluster) == set()


# --- the build ----------------------------------------------------------------------------------------


def test_the_guard_is_rebuilt_only_when_its_source_changes(fresh_lib, monkeypatch, tmp_path):
    library = guard.ensure_built("15")
    assert library == fresh_lib / "pg15" / "pgpanel_guard.so"
    assert library.stat().st_mode & 0o777 == 0o644
    assert fresh_lib.stat().st_mode & 0o777 == 0o755 and library.parent.stat().st_mode & 0o777 == 0o755
    inode = library.stat().st_ino

    assert guard.ensure_built("15").stat().st_ino == inode  # unchanged source: not rebuilt

    source = tmp_path / "guard"
    shutil.copytree(guard.SOURCE_DIR, source)
    with (source / "pgpanel_guard.c").open("a") as fh:
        fh.write("\n/* a change */\n")
    monkeypatch.setattr(guard, "SOURCE_DIR", source)
    assert guard.ensure_built("15").stat().st_ino != inode
    assert [p.name for p in fresh_lib.iterdir() if p.name.startswith(".build-")] == []


def test_concurrent_callers_build_once(fresh_lib):
    inodes: list[int | BaseException] = []

    def build() -> None:
        try:
            # Taken at once: a caller that built again after another would replace the file.
            inodes.append(guard.ensure_built("15").stat().st_ino)
        except BaseException as exc:
            inodes.append(exc)

    threads = [threading.Thread(target=build) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert len(inodes) == 4 and all(isinstance(i, int) for i in inodes), inodes
    assert len(set(inodes)) == 1
    assert (fresh_lib / "pg15" / "pgpanel_guard.so").stat().st_ino == inodes[0]


def test_a_failed_build_shows_the_compiler_output(fresh_lib, monkeypatch, tmp_path):
    source = tmp_path / "guard"
    shutil.copytree(guard.SOURCE_DIR, source)
    with (source / "pgpanel_guard.c").open("a") as fh:
        fh.write("\nthis is not C;\n")
    monkeypatch.setattr(guard, "SOURCE_DIR", source)

    with pytest.raises(guard.GuardBuildError) as failed:
        guard.ensure_built("15")

    message = str(failed.value)
    assert "Building the privilege guard for PostgreSQL 15 failed" in message
    assert "pgpanel_guard.c" in message and "error" in message
    assert not (fresh_lib / "pg15" / "pgpanel_guard.so").exists()


def test_provisioning_without_build_tools_fails_saying_what_to_install(
    fresh_lib, monkeypatch, tmp_path, owner, owner_client, transactional_db, caplog
):
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setattr(guard, "BUILD_PATH", str(empty))  # no make, no gcc
    cluster = services.create_cluster(owner, name="db-nobuild", plan_slug="db-s-1vcpu-1gb", enqueue=False)

    cluster = services.provision_cluster(cluster.pk)

    assert cluster.status == ClusterStatus.ERROR
    # The page says what failed and who acts, in the reader's words; no command, no path.
    page = owner_client.get(reverse("clusters:detail", args=[cluster.pk])).content.decode()
    assert (
        "The privilege guard for PostgreSQL 15 cannot be built on this node: its build tools are missing."
        in page
    )
    assert "apt-get" not in page and "gcc" not in page and str(fresh_lib) not in page
    owner_client.cookies[settings.LANGUAGE_COOKIE_NAME] = "de"
    page = owner_client.get(reverse("clusters:detail", args=[cluster.pk])).content.decode()
    assert "Der Rechteschutz für PostgreSQL 15 kann auf diesem Knoten nicht gebaut werden" in page
    assert "apt-get" not in page
    # What to install is the administrator's, in the server log.
    assert "privilege guard for PostgreSQL 15 cannot be built" in caplog.text
    assert "apt-get install postgresql-server-dev-15 make gcc" in caplog.text
    assert postgres.postmaster_pid(cluster.pgdata) is None
    services.delete_cluster(cluster, confirm_name="db-nobuild")


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can hand a directory to another user")
def test_a_library_directory_taken_over_by_another_user_is_taken_back(fresh_lib):
    runner = runas.os_user()
    (fresh_lib / "pg15").mkdir(parents=True)
    for path in (fresh_lib, fresh_lib / "pg15"):
        os.chown(path, runner.uid, runner.gid)
        path.chmod(0o777)

    library = guard.ensure_built("15")

    for path in (fresh_lib, library.parent, library):
        st = path.stat()
        assert (st.st_uid, st.st_mode & 0o022) == (0, 0), path


def test_a_build_that_hangs_is_stopped_with_its_compilers(fresh_lib, monkeypatch):
    monkeypatch.setattr(guard, "BUILD_TIMEOUT", 0.01)

    with pytest.raises(guard.GuardBuildError, match="did not finish within"):
        guard.ensure_built("15")

    assert not (fresh_lib / "pg15" / "pgpanel_guard.so").exists()
    assert [p.name for p in fresh_lib.iterdir() if p.name.startswith(".build-")] == []
