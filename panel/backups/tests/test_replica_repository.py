"""What Patroni is told to restore new standbys from: the cluster's stanza once its repository
holds a full backup, nothing before (Patroni then copies them from the primary)."""

from __future__ import annotations

import shutil

import pytest

from panel.backups.engine import runner as engine
from panel.backups.services import cluster_hooks
from panel.clusters.tests.conftest import make_cluster_row

pytestmark = pytest.mark.django_db


def test_standbys_come_from_the_repository_only_once_it_has_a_full_backup(owner: object) -> None:
    cluster_row = make_cluster_row(owner)  # type: ignore[arg-type]
    where = engine.paths(cluster_row)
    try:
        assert cluster_hooks.replica_repository(cluster_row) == ()  # no configuration
        where.root.mkdir(parents=True)
        where.config.write_text("[global]\n")
        assert cluster_hooks.replica_repository(cluster_row) == ()  # no backup yet
        folder = where.repo / "backup" / "main"
        (folder / "20261127-194512F_20261127-195000I").mkdir(parents=True)  # not a full one
        (folder / "latest").symlink_to(folder / "20261127-194512F_20261127-195000I")
        assert cluster_hooks.replica_repository(cluster_row) == ()
        (folder / "20261127-194512F").mkdir()
        argv = cluster_hooks.replica_repository(cluster_row)
        assert argv == (engine.program(), f"--config={where.config}", "--stanza=main")
    finally:
        shutil.rmtree(where.root, ignore_errors=True)
