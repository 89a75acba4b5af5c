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
import re
import shutil
import time
from pathlib import Path

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from panel import crypto
from panel.backups.engine import runner as engine
from panel.backups.lib import pgbackrest
from panel.backups.models import BackupJob, JobKind, RestoreOrigin
from panel.backups.services import archiving
from panel.backups.services.backups import active_job, page
from panel.clusters.engine import dbconn, isolation, postgres
from panel.clusters.lib.pgconf import QUOTA_FILE
from panel.clusters.lib.plans import PLANS_BY_SLUG, get_plan
from panel.clusters.models import Cluster, ClusterStatus, Database, DatabaseUser, EventLevel
from panel.clusters.services import create_cluster, lifecycle, provision
from panel.clusters.services.create import new_password
from panel.core import runas
from panel.core.errors import N_, Message, ServiceError
from panel.core.runas import EngineError
from panel.core.taskqueue import enqueue_task

log = logging.getLogger(__name__)

_START_WAL = re.compile(r"START WAL LOCATION: \S+ \(file ([0-9A-F]{24})\)")
# What pgBackRest writes into postgresql.auto.conf for the recovery; reset once promoted.
RECOVERY_SETTINGS = ("restore_command", "recovery_target_time", "recovery_target_action", "recovery_target")


def prepare_restore(
    source: Cluster,
    owner: AbstractBaseUser,
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
    source.require_serving()
    if active_job(source) is not None:
        raise ServiceError(
            N_("A backup or restore of this cluster is already running; try again when it ends."),
            code="backup.busy",
            params={},
        )
    overview = page(source)
    if overview.problem:
        raise ServiceError(
            N_("The backup repository cannot be read: %(reason)s"),
            code="backup.repository_unreadable",
            params={"reason": overview.problem},
        )
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
                    "start": f"{overview.window_start:%Y-%m-%d %H:%M:%S}",
                    "end": f"{end:%Y-%m-%d %H:%M:%S}",
                },
            )
    plan_slug = plan_slug or source.plan_slug
    try:
        plan = get_plan(plan_slug)
    except ValueError:
        raise ServiceError(
            N_("Unknown plan %(plan)s; choose one of %(plans)s"),
            field="plan",
            code="cluster.plan_unknown",
            params={"plan": repr(plan_slug), "plans": ", ".join(PLANS_BY_SLUG)},
        ) from None
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


def request_restore(
    source: Cluster,
    owner: AbstractBaseUser,
    *,
    name: str,
    target_time: dt.datetime | None,
    plan_slug: str | None = None,
) -> Cluster:
    """The web's and the API's way: checked and recorded here, restored by the node's worker."""
    job = prepare_restore(source, owner, name=name, target_time=target_time, plan_slug=plan_slug)
    new = Cluster.objects.get(owner=owner, name=name)
    try:
        enqueue_task(
            "panel.backups.tasks.restore",
            str(job.pk),
            queue=source.backups_queue,  # long work, apart from control work and tenants' benchmarks
            time_limit=settings.PANEL_BACKUP_TIMEOUT,
        )
    except ServiceError:
        new.delete()
        job.delete()
        raise
    return new


def restore_cluster(
    source: Cluster,
    owner: AbstractBaseUser,
    *,
    name: str,
    target_time: dt.datetime | None,
    plan_slug: str | None = None,
) -> Cluster:
    """In the foreground (the command line, the tests): the new cluster online, or a ServiceError
    and nothing of it left."""
    job = prepare_restore(source, owner, name=name, target_time=target_time, plan_slug=plan_slug)
    perform_restore(job.pk)
    job.refresh_from_db()
    if job.error_message:
        raise ServiceError(job.error_message)
    return Cluster.objects.get(owner=owner, name=name)


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
        job.fail(_("The new cluster “%(name)s” is gone.") % {"name": job.target_name})
        return job
    try:
        _pipeline(job, source, new)
    except Exception as exc:
        expected = isinstance(exc, EngineError | dbconn.DatabaseError | OSError | ServiceError)
        if not expected:
            log.exception("restoring %s into %s crashed", source.pk, new.pk)
        reason = getattr(exc, "message", None) or str(exc) or type(exc).__name__
        _remove(new)
        job.fail(reason)
        source.log_event(
            "restore-failed",
            Message(N_("Restore into “%(name)s” failed: %(reason)s"), name=job.target_name, reason=reason),
            EventLevel.ERROR,
        )
        return job
    job.succeed()
    return job


def _remove(new: Cluster) -> None:
    """Nothing half-made left: processes, data root, backup files, system user, rows."""
    try:
        lifecycle.tear_down(new)
    except Exception:
        log.exception("removing the failed restore %s", new.pk)
        postgres.kill(new.pgdata)
        postgres.remove_data(new.data_root)
    engine.remove(new.id.hex)
    new.delete()


def _pipeline(job: BackupJob, source: Cluster, new: Cluster) -> None:
    timeout = settings.PANEL_COMMAND_TIMEOUT
    steps = provision.Provisioning(new)

    new.set_progress(5, _("Preparing"))
    # The restored server's roles have the source's passwords until ``own secrets`` below.
    new.superuser_password_encrypted = source.superuser_password_encrypted
    new.monitor_password_encrypted = source.monitor_password_encrypted
    new.save(update_fields=["superuser_password_encrypted", "monitor_password_encrypted", "updated_at"])
    postgres.kill(new.pgdata)
    postgres.remove_data(new.data_root)
    steps.user = isolation.ensure_cluster_user(new)

    new.set_progress(10, _("Archiving the source's latest WAL"))
    seal_source(source)

    new.set_progress(20, _("Restoring the backup (pgbackrest restore)"))
    postgres.make_data_root(new.data_root, steps.user)
    runas.make_private_dir(new.pgdata, steps.user)
    scratch = new.data_root / "restore"
    if job.target_time is not None:
        options = [
            "--type=time",
            f"--target={pgbackrest.target_time(job.target_time)}",
            "--target-action=promote",
        ]
    else:
        options = ["--type=default"]
    engine.restore(source, new.pgdata, scratch, options, timeout=settings.PANEL_BACKUP_TIMEOUT)

    new.set_progress(50, _("Copying the WAL to replay"))
    label = (new.pgdata / "backup_label").read_text()
    match = _START_WAL.search(label)
    if match is None:
        raise EngineError("The restored backup has no start WAL location in its backup_label.")
    if engine.s3_repository() is None:
        engine.copy_archive(source, scratch / "repo", match.group(1))
    (scratch / "pgbackrest.conf").write_text(
        engine.restore_config(scratch / "repo", scratch, new.pgdata, source)
    )
    _point_restore_command(new, scratch)
    # The source's storage-quota stops are not the new cluster's (it has no quotas yet).
    (new.pgdata / QUOTA_FILE).unlink(missing_ok=True)
    postgres.chown_tree(new.data_root, steps.user)

    new.set_progress(60, _("Generating TLS certificates"))
    provision.write_certificates(steps)
    new.set_progress(65, _("Writing the configuration"))
    provision.write_server_config(new)

    new.set_progress(70, _("Starting PostgreSQL and replaying the WAL"))
    runas.make_private_dir(new.socket_dir, steps.user)
    isolation.start_server(new, steps.user, timeout)
    wait_promoted(new, settings.PANEL_BACKUP_TIMEOUT)
    with dbconn.admin_connection(new) as conn:
        for name in RECOVERY_SETTINGS:
            conn.execute(f"ALTER SYSTEM RESET {name}")
        conn.execute("SELECT pg_catalog.pg_reload_conf()")
    shutil.rmtree(scratch, ignore_errors=True)

    new.set_progress(85, _("Setting the cluster's own secrets"))
    own_secrets(new)
    new.set_progress(90, _("Recording the users and databases"))
    copy_rows(source, new)
    isolation.refresh_server_auth(new)

    new.set_progress(95, _("Creating the cluster's own backup stanza"))
    archiving.after_provision(new)
    new.mark_online()
    origin = new.restore_origin
    when = f"{origin.target_time:%Y-%m-%d %H:%M:%S} UTC" if origin.target_time else _("the latest point")
    new.log_event(
        "restored",
        Message(
            N_("Restored from “%(source)s” at %(when)s; online on port %(port)s."),
            source=source.name,
            when=when,
            port=new.port,
        ),
    )
    source.log_event(
        "restored-into", Message(N_("Restored into “%(name)s” at %(when)s."), name=new.name, when=when)
    )


def seal_source(source: Cluster) -> None:
    """A commit on the source now, and its WAL segment archived (``pgbackrest check`` switches
    the segment and waits for it): the replay finds a record past any chosen moment, and a fork
    gets everything committed until now. Nothing of the source's data changes."""
    with dbconn.admin_connection(source) as conn:
        conn.execute("SELECT pg_catalog.txid_current()")
    result = engine.run(source, "check", timeout=settings.PANEL_COMMAND_TIMEOUT)
    engine.check(result, "pgbackrest check")


def _point_restore_command(new: Cluster, scratch: Path) -> None:
    """pgBackRest wrote a restore_command reading the source's repository, which the new
    cluster's user may not read: point it at the copy in ``scratch``."""
    auto = new.pgdata / "postgresql.auto.conf"
    program = engine.program()
    command = f'{program} --config={scratch}/pgbackrest.conf --stanza={pgbackrest.STANZA} archive-get %f "%p"'
    lines = []
    for line in auto.read_text().splitlines():
        if line.startswith("restore_command"):
            line = "restore_command = '" + command.replace("'", "''") + "'"
        lines.append(line)
    auto.write_text("\n".join(lines) + "\n")


def wait_promoted(new: Cluster, timeout: float) -> None:
    """Until the replay ended and the server was promoted (or it stopped: its log says why)."""
    deadline = time.monotonic() + timeout
    beat = 0.0
    while time.monotonic() < deadline:
        if time.monotonic() - beat > 30:
            # A long replay is work in progress, not a stuck job (the reconciler's rule).
            Cluster.objects.filter(pk=new.pk).update(updated_at=timezone.now())
            beat = time.monotonic()
        if postgres.postmaster_pid(new.pgdata) is None:
            raise EngineError(f"PostgreSQL stopped during the replay: {_log_tail(new)}")
        try:
            with dbconn.admin_connection(new) as conn:
                row = conn.execute("SELECT pg_catalog.pg_is_in_recovery()").fetchone()
            if row is not None and not row[0]:
                return
        except dbconn.DatabaseError:
            pass
        time.sleep(0.5)
    raise EngineError(f"The replay did not end within {timeout:.0f} s.")


def _log_tail(new: Cluster, lines: int = 3) -> str:
    """The server's last FATAL/PANIC lines (why the replay stopped: a target not reached, …)."""
    try:
        text = new.log_file.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    important = [line for line in text if "FATAL" in line or "PANIC" in line]
    return " ".join((important or text)[-lines:])


def own_secrets(new: Cluster) -> None:
    """New passwords for the panel's own roles (they came with the restore as the source's)."""
    superuser_password = new_password()
    monitor_password = new_password()
    with dbconn.admin_connection(new) as conn:
        dbconn.set_password(conn, settings.PANEL_SUPERUSER, superuser_password)
        dbconn.ensure_monitor_role(conn, settings.PANEL_MONITOR_ROLE, monitor_password)
    new.superuser_password_encrypted = crypto.encrypt(superuser_password)
    new.monitor_password_encrypted = crypto.encrypt(monitor_password)
    new.save(update_fields=["superuser_password_encrypted", "monitor_password_encrypted", "updated_at"])
    engine.write_files(new, new.os_user())  # the passfile pgBackRest logs in with


def copy_rows(source: Cluster, new: Cluster) -> None:
    """The panel's rows for the users and databases the restored server has: the source's rows
    of the same names (passwords as the panel shows them, set again so they hold)."""
    with dbconn.admin_connection(new) as conn:
        roles = {r for (r,) in conn.execute("SELECT rolname FROM pg_catalog.pg_roles").fetchall()}
        databases = {d for (d,) in conn.execute("SELECT datname FROM pg_catalog.pg_database").fetchall()}
        users = [u for u in source.users.all() if u.name in roles]
        for user in users:
            dbconn.set_password(conn, user.name, user.password)
    with transaction.atomic():
        for user in users:
            DatabaseUser.objects.create(
                cluster=new,
                name=user.name,
                password_encrypted=user.password_encrypted,
                is_protected=user.is_protected,
            )
        for database in source.databases.filter(name__in=databases):
            Database.objects.create(
                cluster=new,
                name=database.name,
                owner_name=database.owner_name,
                is_protected=database.is_protected,
            )
