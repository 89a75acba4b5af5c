"""No file the cluster's OS user can read holds the panel superuser's password (issue 37, item 1,
the file half), replayed for real on a one-member cluster with archiving and backups.

The attack (before the fix): pgBackRest logged in as the panel's superuser with a passfile in the
cluster's backup directory, owned by the cluster's OS user, its path readable through ``SHOW
archive_command``. Anything the server runs (a subscription's connection string naming it as
``passfile``) read it, and the superuser password went to a server the tenant listened on.

Now pgBackRest logs in as a role of its own by peer authentication over the socket: every file
the cluster's OS user may read under the cluster's directories, its backup directory and the
paths the server's settings name is scanned for the password and none holds it. Beside it: the
stanza checks (``pgbackrest check``: a WAL switch archived), a backup is taken, and a passfile an
earlier panel left is removed by the backups' periodic round.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import pytest
from django.conf import settings

from panel.backups.engine import runner as engine
from panel.backups.models import JobStatus
from panel.backups.services import archiving, backups
from panel.clusters.engine import dbconn, isolation
from panel.clusters.models import Cluster, credentials
from panel.clusters.tests.conftest import module_cluster_fixture
from panel.core import runas
from panel.core.runas import OsUser

pytestmark = [pytest.mark.integration, pytest.mark.django_db]


cluster = module_cluster_fixture("bks-owner", "db-bk-secrets")


def _readable_by(path: Path, user: OsUser, groups: set[int]) -> bool:
    info = path.lstat()
    if not stat.S_ISREG(info.st_mode):
        return False
    if info.st_uid == user.uid:
        return bool(info.st_mode & stat.S_IRUSR)
    if info.st_gid in groups:
        return bool(info.st_mode & stat.S_IRGRP)
    return bool(info.st_mode & stat.S_IROTH)


def _named_by_settings(cluster: Cluster) -> list[Path]:
    """The files and directories the server's settings name (what a tenant reads with SHOW)."""
    with dbconn.admin_connection(cluster) as conn:
        values = [
            conn.execute(f"SHOW {name}").fetchone()[0]  # type: ignore[index]
            for name in ("archive_command", "config_file", "hba_file", "ident_file", "data_directory")
        ]
    found = [Path(word) for value in values for word in re.split(r"[\s=']+", value) if word.startswith("/")]
    return [path.parent if path.is_file() else path for path in found if path.exists()]


def _files_holding(secret: str, roots: list[Path], user: OsUser) -> list[str]:
    groups = set(os.getgrouplist(user.name, user.gid))
    found = []
    for root in dict.fromkeys(roots):
        for directory, _dirs, names in os.walk(root):
            for name in names:
                path = Path(directory) / name
                try:
                    if _readable_by(path, user, groups) and secret.encode() in path.read_bytes():
                        found.append(str(path))
                except OSError:
                    continue
    return found


def test_no_file_the_cluster_user_reads_holds_the_superuser_password(cluster: Cluster) -> None:
    user = isolation.os_user(cluster)
    roots = [cluster.data_root, engine.paths(cluster).root, *_named_by_settings(cluster)]
    assert engine.paths(cluster).root in roots and cluster.pgdata.is_dir()
    assert _files_holding(credentials.superuser_password(cluster), roots, user) == []


def test_pgbackrest_checks_archives_and_backs_up_as_its_own_role(cluster: Cluster) -> None:
    result = engine.run(cluster, "check", timeout=settings.PANEL_COMMAND_TIMEOUT)
    engine.check(result, "pgbackrest check")
    assert archiving.archive_status(cluster).active
    job = backups.create_backup(cluster, "full")
    assert job.status == JobStatus.SUCCEEDED, job.error_message
    with dbconn.admin_connection(cluster) as conn:
        row = conn.execute(
            "SELECT rolsuper, rolreplication, rolpassword IS NULL FROM pg_catalog.pg_authid WHERE rolname = %s",
            [settings.PANEL_BACKUP_ROLE],
        ).fetchone()
    assert row == (False, False, True)


def test_an_earlier_panels_passfile_goes_on_the_next_round(cluster: Cluster) -> None:
    passfile = engine.paths(cluster).passfile
    line = f"{cluster.socket_dir}:*:*:{settings.PANEL_SUPERUSER}:{credentials.superuser_password(cluster)}\n"
    runas.write_private_file(passfile, line, owner=isolation.os_user(cluster))
    notes = backups.scheduled_round()
    assert f"{cluster.name}: pgBackRest's passfile removed" in notes
    assert not passfile.exists()
