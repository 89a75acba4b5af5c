"""Restore a cluster's backups into a new cluster, at a moment of the recovery window or at the
latest point (a fork), leaving the source running untouched.

The new cluster is made the way a created one is (``create_cluster``: its own name, ports,
system user; then the provisioning's own steps for certificates, configuration and start), but
its data directory comes from ``pgbackrest restore`` instead of initdb:

    check (window, name, plan, repository) → row → [worker] seal the source's WAL → restore
    → WAL for replay → own the files → certificates → configure → start and replay → promote
    → own secrets → the panel's rows → own stanza and first backup → online

A failure anywhere removes everything the new cluster had (processes, files, system user, rows)
and is the restore job's reason on the source's Backups tab (and the ServiceError of the CLI).
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import NotRequired, TypedDict, Unpack

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from panel.backups.engine import runner as engine
from panel.backups.lib import pgbackrest
from panel.backups.models import BackupJob, JobKind, RestoreOrigin
from panel.backups.services.backups import active_job, enqueue_job, page
from panel.backups.services.restore_steps import run_steps
from panel.clusters.face import create_cluster, dbconn, failures, lifecycle, transitions
from panel.clusters.lib.plans import require_plan
from panel.clusters.models import Cluster, ClusterStatus, EventLevel
from panel.core.errors import N_, Message, ServiceError, When, message_to_text
from panel.core.runas import EngineError

log = logging.getLogger(__name__)


class Request(TypedDict):
    """What a restore is asked for: the new cluster's name, the moment (None: the latest point) and
    the plan (None: the source's)."""

    name: str
    target_time: dt.datetime | None
    plan_slug: NotRequired[str | None]


def prepare_restore(
    source: Cluster,
    owner: User,
    *,
    name: str,
    target_time: dt.datetime | None,
    plan_slug: str | None = None,
) -> BackupJob:
    """Check what can be checked before anything is made (each refusal names its field), then
    record the new cluster (``creating``), its origin and the restore job."""
    if not source.is_local:
        raise ServiceError(
            N_("Only clusters the panel runs have backups."), code="backup.unsupported", params={}
        )
    transitions.require_serving(source)
    if active_job(source) is not None:
        raise ServiceError(
            N_("A backup or restore of this cluster is already running; try again when it ends."),
            code="backup.busy",
            params={},
        )
    overview = page(source)
    if overview.problem:
        raise overview.problem_error()
    if overview.archive is None or not overview.archive.active:
        raise ServiceError(
            N_("WAL archiving is not active on this cluster; restart it to enable backups."),
            code="backup.archiving_inactive",
            params={},
        )
    if overview.window_start is None or not overview.backups:
        raise ServiceError(
            N_("The cluster has no backup yet; back it up first."),
            field="time",
            code="backup.none_yet",
            params={},
        )
    if target_time is not None:
        if target_time.tzinfo is None:
            target_time = target_time.replace(tzinfo=dt.UTC)
        end = overview.window_end or timezone.now()
        if not pgbackrest.in_window(target_time, overview.window_start, end):
            raise ServiceError(
                N_(
                    "Choose a time between %(start)s and %(end)s (UTC): the cluster can be restored to that window only."
                ),
                field="time",
                code="backup.time_outside_window",
                params={
                    "start": When.of(overview.window_start),
                    "end": When.of(end),
                },
            )
    plan_slug = plan_slug or source.plan_slug
    plan = require_plan(plan_slug)
    needed = max(b.size for b in overview.backups)
    if needed > plan.disk_bytes:
        raise ServiceError(
            N_(
                "The plan %(plan)s has %(disk)s GB of disk; the cluster's data needs %(size)s bytes. Choose a larger plan."
            ),
            field="plan",
            code="backup.plan_too_small",
            params={"plan": plan_slug, "disk": plan.disk_gb, "size": needed},
        )
    assert source.node is not None
    # On the source's node: its repository is there.
    new = create_cluster(
        owner, name=name, plan_slug=plan_slug, version=source.version, enqueue=False, node=source.node.name
    )
    with transaction.atomic():
        new.config = dict(source.config)
        new.progress_message = _("Queued (restore from %(name)s)") % {"name": source.name}
        new.save(update_fields=["config", "progress_message", "updated_at"])
        RestoreOrigin.objects.create(
            cluster=new, source=source, source_name=source.name, target_time=target_time
        )
        job = BackupJob.objects.create(
            cluster=source, kind=JobKind.RESTORE, target_name=name, target_time=target_time
        )
    return job


def request_restore(source: Cluster, owner: User, **request: Unpack[Request]) -> Cluster:
    """The web's and the API's way: checked and recorded here, restored by the node's worker."""
    job = prepare_restore(source, owner, **request)
    new = Cluster.objects.get(owner=owner, name=request["name"])
    enqueue_job("panel.backups.tasks.restore", job, source, made=[new, job])
    return new


def restore_cluster(source: Cluster, owner: User, **request: Unpack[Request]) -> Cluster:
    """In the foreground (the command line, the tests): the new cluster online, or a ServiceError
    and nothing of it left."""
    job = prepare_restore(source, owner, **request)
    perform_restore(job.pk)
    job.refresh_from_db()
    if job.error_message:
        raise ServiceError(job.error_message)
    return Cluster.objects.get(owner=owner, name=request["name"])


def perform_restore(job_id: int) -> BackupJob | None:
    """The worker's half: run the pipeline; on failure remove the new cluster entirely."""
    job = BackupJob.objects.select_related("cluster").filter(pk=job_id, kind=JobKind.RESTORE).first()
    if job is None or not job.claim():
        return job
    source = job.cluster
    new = Cluster.objects.filter(
        owner=source.owner, name=job.target_name, status=ClusterStatus.CREATING
    ).first()
    if new is None:
        job.fail(message_to_text(Message(N_("The new cluster “%(name)s” is gone."), name=job.target_name)))
        return job
    try:
        run_steps(job, source, new)
    except Exception as exc:
        expected = isinstance(exc, EngineError | dbconn.DatabaseError | OSError | ServiceError)
        if not expected:
            log.exception("restoring %s into %s crashed", source.pk, new.pk)
        log.warning("restoring %s into %s failed: %s", source.pk, new.pk, str(exc) or type(exc).__name__)
        reason = failures.reason(exc)  # pgBackRest's and the server's words: the log only
        _remove(new)
        failed = Message(
            N_("Restore into “%(name)s” failed: %(reason)s"), name=job.target_name, reason=reason
        )
        job.fail(message_to_text(failed))
        transitions.log_event(source, "restore-failed", failed, EventLevel.ERROR)
        return job
    job.succeed()
    return job


def _remove(new: Cluster) -> None:
    """Nothing half-made left: processes, data root, backup files, system user, rows."""
    lifecycle.remove_failed(new, "restore")
    engine.remove(new.id.hex)
    new.delete()
