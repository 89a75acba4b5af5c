"""What the backups app does when clusters (the app it builds on) change: registered in
``AppConfig.ready()`` through ``panel.clusters.hooks``. Apart from archiving and backups, which it
calls, so that neither has to reach the other for the hook's sake."""

from __future__ import annotations

import logging

from django.conf import settings

from panel.backups.engine import runner as engine
from panel.backups.services import archiving, backups, retention
from panel.clusters import hooks
from panel.clusters.face import isolation, transitions
from panel.clusters.models import Cluster
from panel.core.errors import N_, Message, ServiceError
from panel.core.runas import EngineError

log = logging.getLogger(__name__)


def register() -> None:
    hooks.register_server_config(server_config)
    hooks.register_after_provision(after_provision)
    hooks.register_disk_usage(engine.repository_bytes)  # WAL archived and backups: the plan's disk
    hooks.register_before_teardown(retention.before_teardown)
    hooks.register_delete_choice(retention.delete_choice)
    hooks.register_replica_repository(replica_repository)


def server_config(cluster: Cluster) -> list[str]:
    """The hook run whenever a local cluster's configuration is written: its pgBackRest files and
    ``backup.conf`` (archive_mode, archive_command, archive_timeout). A machine without pgBackRest
    runs its clusters without archiving (said in the log), rather than not at all."""
    if not cluster.is_local:
        return []
    try:
        engine.program()
    except EngineError as exc:
        log.warning("cluster %s runs without WAL archiving: %s", cluster.pk, exc)
        return []
    engine.write_files(cluster, isolation.os_user(cluster))
    return [engine.SERVER_FILE]


def replica_repository(cluster: Cluster) -> tuple[str, ...]:
    """pgBackRest on the cluster's stanza, for Patroni to restore new standbys from; nothing when
    the cluster has no configuration of its own (no pgBackRest, or not written yet) or no backup
    yet (a new cluster's standbys: Patroni would only try and fall back)."""
    if not cluster.is_local or not engine.paths(cluster).config.is_file() or not engine.has_backup(cluster):
        return ()
    try:
        return tuple(engine.stanza_command(cluster))
    except EngineError:
        return ()


def after_provision(cluster: Cluster) -> None:
    """A new cluster's stanza, and its first full backup queued (the cluster is online)."""
    if prepare_repository(cluster):
        queue_first_backup(cluster)


def prepare_repository(cluster: Cluster) -> bool:
    """The cluster's own stanza (WAL archiving on); False when the cluster archives nothing (no
    pgBackRest here). Raises EngineError when the stanza cannot be made."""
    if not (cluster.pgdata / engine.SERVER_FILE).is_file():
        return False
    archiving.ensure_stanza(cluster)
    transitions.log_event(
        cluster, "archiving", Message(N_("WAL archiving to the cluster's backup repository is on."))
    )
    return True


def queue_first_backup(cluster: Cluster) -> None:
    """The first full backup of a cluster that is online now (a new, restored, forked or promoted
    one), so that it can be restored to a moment before the nightly round."""
    if not settings.PANEL_BACKUP_AFTER_CREATE:
        return
    try:
        backups.request_backup(cluster, "full", scheduled=True)
    except ServiceError as exc:
        log.warning("first backup of %s not queued: %s", cluster.pk, exc.message)
