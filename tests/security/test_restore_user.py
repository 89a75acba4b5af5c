"""Issue 29, item 6: ``pgbackrest restore`` ran as root over a repository the source cluster's OS
user can write, so whatever that user put there was read, and written out, with root's rights.

It now runs as the source cluster's own user. Replayed on a real cluster with a real backup: the
source's user edits its own ``pgbackrest.conf`` to name a repository host and an SSH program of
its own, which the restore runs (as root before: ``id -u`` said 0; now as that user), and a
symbolic link it planted in its archive is not followed by the copy root makes of it. The legitimate action,
a restore to a moment and a fork that come online with their data through the whole pipeline, is
``panel/backups/tests/test_restore.py::test_backup_restore_to_a_moment_and_fork``.
"""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
from pathlib import Path

import pytest
from django.conf import settings

from panel.backups.engine import runner as engine
from panel.backups.lib import pgbackrest
from panel.backups.models import JobStatus
from panel.backups.services import backups
from panel.clusters.engine import isolation
from panel.clusters.models import Cluster
from panel.clusters.tests.conftest import connect_as_client, module_cluster_fixture, refreshed_fixture
from panel.core.runas import EngineError

pytestmark = pytest.mark.integration


source = module_cluster_fixture("rs-owner", "rs-source")
fresh = refreshed_fixture("source")


def test_pgbackrest_restores_as_the_source_clusters_user_and_root_follows_no_planted_link(
    fresh: Cluster,
) -> None:
    with connect_as_client(fresh) as conn:
        conn.execute("CREATE TABLE kept AS SELECT generate_series(1, 50) AS i")
        conn.commit()
    assert backups.create_backup(fresh, "full").status == JobStatus.SUCCEEDED
    user = isolation.os_user(fresh)
    assert user.uid != 0  # a cluster of its own user: the panel runs as root here

    # The source's user may write its own pgbackrest.conf: it names a "repository host" and the
    # program to reach it with, which pgBackRest then runs.
    drop = Path(tempfile.mkdtemp(prefix="restore-probe-", dir="/tmp"))
    os.chmod(drop, 0o1777)
    program = drop / "ssh"
    program.write_text(f"#!/bin/sh\nid -u > {drop}/ran-as\nexit 1\n")
    os.chmod(program, 0o755)
    conf = engine.paths(fresh).config
    original = conf.read_text()
    planted = original.replace("[global]\n", f"[global]\nrepo1-host=localhost\ncmd-ssh={program}\n", 1)
    assert planted != original
    conf.write_text(planted)
    probe = Path(settings.PANEL_DATA_DIR) / "clusters" / f"restore-probe-{secrets.token_hex(3)}"
    probe.mkdir(mode=0o711)
    os.chmod(probe, 0o711)
    (probe / "data").mkdir(mode=0o700)
    try:
        with pytest.raises(EngineError):
            engine.restore(fresh, probe / "data", probe / "scratch", ["--type=immediate"], timeout=60)
        assert (drop / "ran-as").read_text().split() == [str(user.uid)]  # ["0"]: root ran it
    finally:
        conf.write_text(original)
        shutil.rmtree(probe)
        shutil.rmtree(drop)

    # The source's user plants a link in its archive to a file only root may read: the copy the
    # restore makes for the new cluster keeps it a link (the new cluster's user cannot follow it).
    archive = engine.paths(fresh).repo / "archive" / pgbackrest.STANZA
    timeline = next(path for path in archive.iterdir() if path.is_dir())
    planted = timeline / "FFFFFFFFFFFFFFFF.history"
    planted.symlink_to("/etc/shadow")
    copy = Path(settings.PANEL_DATA_DIR) / "clusters" / f"archive-probe-{secrets.token_hex(3)}"
    try:
        engine.copy_archive(fresh, copy, "000000010000000000000000")
        copied = copy / "archive" / pgbackrest.STANZA / timeline.name / planted.name
        assert copied.is_symlink()  # a regular file holding /etc/shadow before
    finally:
        planted.unlink()
        shutil.rmtree(copy, ignore_errors=True)
