"""Issue 38, item 3: a restored (or forked) cluster takes its own first full backup once it is
online, by the real pieces: the restore queues it when it marks the cluster online, the node's
backups worker (a real Celery worker) takes it, and ``manage.py backup list`` of the restored
cluster shows it within three minutes. (The other tests keep PANEL_BACKUP_AFTER_CREATE off, so
that the suite takes no backup it does not check.)"""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from panel.backups.models import JobKind
from panel.backups.services import backups, restore
from panel.clusters import services
from panel.clusters.models import Cluster
from panel.clusters.tests.conftest import module_cluster_fixture

pytestmark = pytest.mark.integration

FIRST_BACKUP_WITHIN = 180


source = module_cluster_fixture("fb-owner", "fb-source")


def _listed(cluster: Cluster) -> str:
    out = io.StringIO()
    call_command("backup", "list", cluster.name, "--owner", cluster.owner.get_username(), stdout=out)
    return out.getvalue()


@pytest.mark.django_db(transaction=True)
def test_a_restored_cluster_takes_its_own_first_full_backup_once_online(
    source: Cluster, celery_worker: None, settings: object, wait_until
) -> None:
    settings.PANEL_BACKUP_AFTER_CREATE = True  # type: ignore[attr-defined]
    source.refresh_from_db()
    source_backup = backups.create_backup(source, "full")
    restored = restore.restore_cluster(source, source.owner, name="fb-restored", target_time=None)
    try:
        assert restored.status == "online"
        # Queued when the restore marked it online (it was refused as "creating" before).
        assert restored.backup_jobs.filter(kind=JobKind.BACKUP).exists()

        def own_full_backup() -> bool:
            listed = _listed(restored)
            return "No backup yet." not in listed and any(
                line.split()[1:2] == ["full"] for line in listed.splitlines() if line.strip()
            )

        wait_until(
            own_full_backup, timeout=FIRST_BACKUP_WITHIN, message="the restored cluster's first backup"
        )
        assert source_backup.label not in _listed(restored)  # its own, not the source's
    finally:
        wait_until(lambda: backups.active_job(restored) is None, timeout=FIRST_BACKUP_WITHIN)
        services.delete_cluster(Cluster.objects.get(pk=restored.pk), confirm_name=restored.name)
