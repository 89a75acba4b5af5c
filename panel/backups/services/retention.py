"""What becomes of a deleted cluster's backups: kept for the retention period (the default), or
removed with it; kept repositories are removed by the periodic job once that period is over."""

from __future__ import annotations

import datetime as dt
import logging
import os
from typing import Any

from django.utils import timezone

from panel.backups.engine import runner as engine
from panel.backups.lib import pgbackrest
from panel.backups.models import BackupJob, DeleteChoice, JobKind, JobStatus, KeptRepository
from panel.clusters.models import Cluster
from panel.core.runas import current_user

log = logging.getLogger(__name__)


def choose_on_delete(cluster: Cluster, *, keep: bool) -> None:
    """Remember the owner's choice for the teardown, which runs later on the cluster's node."""
    DeleteChoice.objects.update_or_create(cluster=cluster, defaults={"keep_backups": keep})


def delete_choice(cluster: Cluster, data: Any) -> None:
    """The delete form's checkbox (a form without it: keep, the default)."""
    if data.get("backups_choice"):
        choose_on_delete(cluster, keep=bool(data.get("keep_backups")))


def before_teardown(cluster: Cluster) -> None:
    """Keep the repository of a cluster that has backups (unless told not to), owned by the
    panel (its system user is about to go); remove it otherwise."""
    where = engine.paths(cluster)
    if not where.root.is_dir():
        return
    has_backups = BackupJob.objects.filter(
        cluster=cluster, kind=JobKind.BACKUP, status=JobStatus.SUCCEEDED
    ).exists()
    choice = DeleteChoice.objects.filter(cluster=cluster).first()
    if not has_backups or (choice is not None and not choice.keep_backups):
        engine.remove(cluster.id.hex)
        return
    me = current_user()
    for directory, dirs, files in os.walk(where.root):
        for name in [*dirs, *files]:
            os.chown(os.path.join(directory, name), me.uid, me.gid, follow_symlinks=False)
    os.chown(where.root, me.uid, me.gid)
    KeptRepository.objects.update_or_create(
        cluster_hex=cluster.id.hex,
        defaults={
            "cluster_name": cluster.name,
            "owner": cluster.owner,
            "node_name": cluster.node.name if cluster.node else "",
            "expires_at": timezone.now() + dt.timedelta(days=pgbackrest.RETENTION_DAYS),
        },
    )


def expire_kept(now: dt.datetime | None = None) -> list[str]:
    """Remove the kept repositories of this node whose retention period is over."""
    from django.conf import settings

    now = now or timezone.now()
    notes = []
    for kept in KeptRepository.objects.filter(expires_at__lte=now, node_name=settings.PANEL_NODE_NAME):
        engine.remove(kept.cluster_hex)
        notes.append(f"removed the kept backups of {kept.cluster_name}")
        kept.delete()
    return notes
